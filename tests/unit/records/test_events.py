"""Signed events: golden vectors, one fixture per way an event can be wrong, tamper sweeps."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers.common import FIXTURES, PITH_RECORDS, SPEC_VECTORS, VECTORS
from helpers.eventpool import ALICE, P, t
from pithledger.errors import OtsError, PithledgerError
from pithledger.records import keys
from pithledger.records import ots as _ots
from pithledger.records.bundle import read_bundle, write_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import (
    EVENT_VERSION,
    SIGNING_DOMAIN,
    compute_event_id,
    is_pithledger_envelope,
    make_event,
    orcid_checksum_ok,
    signing_message,
    verify_event,
)
from pithledger.records.keys import LocalKey
from pithledger.store import Ledger

BUNDLES = FIXTURES / "bundles"
EXPECTED = json.loads((BUNDLES / "expected.json").read_text())


# What each fixture must produce, written by hand from its name (expected.json adds the exact message).
REASONS = {
    "valid-citation": "valid",
    "valid-record-created": "valid",
    "valid-unknown-kind": "valid",
    "valid-extra-top-level-field": "valid",
    "valid-re-signed-by-another-key": "valid",
    "altered-payload-under-old-event-id": "id-mismatch",
    "altered-payload-with-recomputed-id": "bad-signature",
    "altered-created-at": "bad-signature",
    "signer-swapped-signature-kept": "bad-signature",
    "fingerprint-of-another-key": "fingerprint-mismatch",
    "malleated-signature-s-plus-l": "bad-signature",
    "small-order-public-key": "bad-signature",
    "signature-wrong-length": "bad-signature",
    "signature-not-base64": "bad-signature",
    "public-key-wrong-length": "bad-key",
    "forged-pith-registry-signature": "bad-signature",
    "unknown-registry-key": "unknown-registry-key",
    "created-at-with-fraction": "bad-time",
    "created-at-impossible-date": "bad-time",
    "missing-signer": "bad-envelope",
    "unknown-signer-type": "bad-envelope",
    "wrong-target": "wrong-target",
    "wrong-payload-type": "bad-payload",
    "unknown-relation": "bad-relation",
    "citation-of-itself": "bad-payload",
    "orcid-bad-checksum": "bad-orcid",
    "record-for-another-subject": "record-subject-mismatch",
    "record-hash-mismatch": "hash-mismatch",
    "receipt-by-unknown-key": "unknown-receipt-key",
    "receipt-signature-wrong": "bad-receipt",
    "proof-for-another-digest": "proof-digest-mismatch",
    "proof-truncated": "bad-proof",
    "wayback-time-mismatch": "bad-payload",
    "revocation-of-malformed-id": "bad-payload",
    "pith-graph-snapshot-unsigned": "unverified:unverifiable-signature",
    "pith-record-created-without-receipt": "unverified:no-receipt",
    "pith-record-created-receipt-unreadable": "unverified:unreadable-receipt",
    "pith-record-created-receipt-forged": "bad-receipt",
    # bundle-level: the whole bundle is refused
    "event-for-another-subject": "bundle:subject-mismatch",
    "event-not-an-object": "bundle:bad-bundle",
    "event-subject-short-form": "bundle:bad-bundle",
    "top-level-record-of-another-paper": "bundle:bundle-inconsistent",
    "top-level-hash-wrong": "bundle:bundle-inconsistent",
    "top-level-alias-wrong": "bundle:bundle-inconsistent",
    "bundle-version-2": "bundle:bad-bundle",
    "not-a-bundle": "bundle:bad-bundle",
    "truncated-json": "bundle:malformed-json",
    "duplicate-keys": "bundle:duplicate-key",
    "float-in-payload": "bundle:float-not-allowed",
    # Pith's record document (spec/bundle.md §5): the real one, and mutations of it
    "valid-record-document": "valid",
    "record-document-tampered-receipt": "bad-receipt",
    "record-document-receipt-by-unknown-key": "unknown-registry-key",
    "record-document-no-receipt": "unverified:no-receipt",
    "record-document-wrong-canonical-sha256": "bundle:bundle-inconsistent",
    "record-document-record-of-another-paper": "bundle:bundle-inconsistent",
    "record-document-aliases-mismatch": "bundle:bundle-inconsistent",
    "record-document-short-number-wrong": "bundle:bundle-inconsistent",
    "record-document-unknown-schema-version": "bundle:bad-bundle",
    "record-document-unknown-record-type": "bundle:bad-bundle",
    "record-document-title-not-a-string": "bundle:bad-bundle",
    "record-document-event-for-another-subject": "bundle:subject-mismatch",
}


def outcome(data: bytes) -> tuple[str, str]:
    try:
        bundle = read_bundle(strict_decode(data))
    except PithledgerError as exc:
        return f"bundle:{exc.code}", exc.message
    (verdict,) = [verify_event(e) for e in bundle.events[-1:]]
    if verdict.status == "valid":
        return "valid", ""
    prefix = "unverified:" if verdict.status == "unverified" else ""
    return prefix + verdict.reason, verdict.message


def test_every_fixture_is_named_here() -> None:
    assert sorted(p.stem for p in BUNDLES.glob("*.json") if p.name != "expected.json") == sorted(REASONS)


@pytest.mark.parametrize("name", sorted(REASONS))
def test_fixture_gives_the_reason_its_name_says(name: str) -> None:
    got, message = outcome((BUNDLES / f"{name}.json").read_bytes())
    assert got == REASONS[name]
    want = EXPECTED[f"{name}.json"]
    want_message = want.get("message", want.get("events", [{}])[-1].get("message"))
    assert message == want_message


def test_fixtures_are_reproducible() -> None:
    from fixtures.make_fixtures import build

    built = build()
    on_disk = {p.name: p.read_bytes() for p in BUNDLES.glob("*.json")}
    assert built == on_disk, "run: python tests/fixtures/make_fixtures.py"


# --- golden vector ---------------------------------------------------------------------------------

GOLDEN = json.loads((SPEC_VECTORS / "event-v1-golden.json").read_text())


def test_golden_event_id_and_signature() -> None:
    key = LocalKey(name=GOLDEN["key_name"], seed=bytes.fromhex(GOLDEN["seed_hex"]))
    event = make_event(
        GOLDEN["kind"],
        GOLDEN["subject"],
        GOLDEN["payload"],
        key,
        created_at=GOLDEN["created_at"],
        signer_id=GOLDEN["signer_id"],
    )
    assert signing_message(event).hex() == GOLDEN["signing_message_hex"]
    assert event["signature_b64"] == GOLDEN["signature_b64"]
    assert event["event_id"] == GOLDEN["event_id"]
    assert canonical_bytes(event).decode() == GOLDEN["event_canonical"]


def test_signing_message_is_domain_separated_and_excludes_id_and_signature() -> None:
    event = json.loads(GOLDEN["event_canonical"])
    message = signing_message(event)
    assert message.startswith(SIGNING_DOMAIN)
    body = json.loads(message[len(SIGNING_DOMAIN) :])
    assert set(event) - set(body) == {"event_id", "signature_b64"}
    # event_id hashes everything but itself, the signature included
    assert (
        compute_event_id(event)
        == "sha256:" + hashlib.sha256(canonical_bytes({k: v for k, v in event.items() if k != "event_id"})).hexdigest()
    )


# --- tamper sweep: every leaf of every valid fixture event ------------------------------------------


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path


def tampered(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("A" if value[-1:] != "A" else "B") if value else "x"
    return "x"


VALID_EVENTS = [  # ours: Pith's envelope authenticates only its record and receipt (tests/unit/records/test_pith_document.py)
    e
    for name in sorted(REASONS)
    if REASONS[name] == "valid"
    for e in read_bundle(strict_decode((BUNDLES / f"{name}.json").read_bytes())).events
    if is_pithledger_envelope(e)
]


@pytest.mark.parametrize("event", VALID_EVENTS, ids=[e["event_type"] for e in VALID_EVENTS])
def test_changing_any_signed_value_makes_the_event_invalid(event: dict[str, Any]) -> None:
    assert verify_event(event).status == "valid"
    paths = [p for p in leaves(event) if p[0] != "subject_pith_number"]  # a new subject is a bundle-level fault
    assert len(paths) > 8
    for path in paths:
        bad = copy.deepcopy(event)
        node = bad
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = tampered(node[path[-1]])
        verdict = verify_event(bad)
        # A changed event_version reads as a newer envelope this version cannot check: unverified, never valid.
        want = "unverified" if path == ("event_version",) else "invalid"
        assert verdict.status == want, f"changing {'.'.join(map(str, path))} went unnoticed"


def test_identity_of_an_event_ignores_key_order_and_whitespace() -> None:
    event = VALID_EVENTS[0]
    pretty = json.dumps(event, indent=3)
    again = strict_decode(pretty.encode())
    assert verify_event(again).event_id == verify_event(event).event_id == event["event_id"]


# --- payload rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize("orcid", ["0000-0002-1825-0097", "0000-0001-5109-3700", "0000-0002-1694-233X"])
def test_real_orcid_ids_pass_the_checksum(orcid: str) -> None:
    assert orcid_checksum_ok(orcid)


@pytest.mark.parametrize("orcid", ["0000-0002-1825-0098", "0000-0002-1694-2330"])
def test_orcid_with_wrong_check_digit_fails(orcid: str) -> None:
    assert not orcid_checksum_ok(orcid)


def test_real_opentimestamps_proof() -> None:
    proof = _ots.parse(base64.b64decode((VECTORS / "ots" / "contributing.ots.b64").read_text()))
    assert proof.digest == hashlib.sha256(b"Email patches to William Casarin <jb55@jb55.com>\n").digest()
    assert sorted(a.calendar for a in proof.attestations if a.calendar) == [
        "https://alice.btc.calendar.opentimestamps.org",
        "https://bob.btc.calendar.opentimestamps.org",
        "https://btc.calendar.catallaxy.com",
        "https://finney.calendar.eternitywall.com",
    ]


@pytest.mark.parametrize("cut", [1, 10, 40, 200])
def test_truncated_real_proof_is_named(cut: int) -> None:
    raw = base64.b64decode((VECTORS / "ots" / "contributing.ots.b64").read_text())
    with pytest.raises(OtsError):
        _ots.parse(raw[:-cut])


def test_anchor_reports_pending_calendars_and_bitcoin_heights() -> None:
    key = LocalKey(name="k", seed=bytes(32))
    record = PITH_RECORDS[0]
    proof = _ots.build(bytes.fromhex(record["canonical_sha256"]), ["https://b.example", "https://a.example"], [900001])
    event = make_event(
        "timestamp_anchor",
        record["pith_number"],
        {"ots_proof_b64": keys.b64encode(proof)},
        key,
        created_at="2026-06-01T00:00:00Z",
    )
    facts = verify_event(event).facts
    assert facts["pending_calendars"] == ["https://a.example", "https://b.example"]
    assert facts["bitcoin_heights"] == [900001]
    assert facts["digest"] == record["canonical_sha256"]


def test_author_attestation_is_strong_only_when_registry_signed() -> None:
    key = LocalKey(name="k", seed=bytes(32))
    event = make_event(
        "author_attestation",
        PITH_RECORDS[0]["pith_number"],
        {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
        key,
        created_at="2026-06-01T00:00:00Z",
    )
    verdict = verify_event(event)
    assert verdict.trust == "self_signed" and verdict.facts["strength"] == "weak"


def test_receipt_path_accepts_a_registry_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    # We hold no Pith private key, so a stand-in registry key shows the receipt rule end to end.
    stand_in = LocalKey(name="stand-in", seed=b"\x07" * 32)
    monkeypatch.setitem(
        keys.PITH_REGISTRY_KEYS,
        "pith-v1-2026-05",
        keys.RegistryKey(key_id="pith-v1-2026-05", public_key=stand_in.public_key),
    )
    record = PITH_RECORDS[0]
    receipt = {
        "kind": "pith_receipt",
        "key_id": "pith-v1-2026-05",
        "algorithm": "ed25519",
        "signed_at": "2026-05-18T01:47:41.701845Z",
        "builder": "pith-number-builder-2026-05-17-v1",
        "signature_b64": keys.b64encode(stand_in.sign(bytes.fromhex(record["canonical_sha256"]))),
    }
    event = {
        "event_type": "record_created",
        "subject_pith_number": record["pith_number"],
        "target": "record",
        "created_at": "2026-05-18T01:47:41Z",
        "signer": {
            "key_id": "pith-v1-2026-05",
            "public_key_fingerprint": keys.fingerprint_hex(stand_in.public_key),
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "payload": {
            "canonical_record": record["canonical_record"],
            "canonical_sha256": record["canonical_sha256"],
            "receipt": receipt,
        },
    }
    verdict = verify_event(event)
    assert (verdict.status, verdict.trust, verdict.facts["receipt_key"]) == ("valid", "registry", "pith-v1-2026-05")
    receipt["signature_b64"] = keys.b64encode(stand_in.sign(bytes.fromhex(PITH_RECEIPTS_OTHER)))
    assert verify_event(event).reason == "bad-receipt"


PITH_RECEIPTS_OTHER = "074dd3013f1b0591bea0634a0c601473d25b810e2951eb7819593f6a25e28d05"


def test_make_event_refuses_what_would_not_verify() -> None:
    key = LocalKey(name="k", seed=bytes(32))
    with pytest.raises(PithledgerError) as info:
        make_event(
            "citation_signature",
            PITH_RECORDS[0]["pith_number"],
            {"cited_pith_number": "x", "relation": "cites"},
            key,
            created_at="2026-06-01T00:00:00Z",
        )
    assert info.value.code == "bad-payload"


def _event_with_two_mistyped_payload_fields() -> dict:  # type: ignore[type-arg]
    """Signed and intact (the id and signature cover canonical, sorted bytes), its payload's keys in
    reverse order, both mistyped: step 10 fails on whichever msgspec.convert meets first."""
    pk = ALICE.public_key
    event = {
        "created_at": t(5),
        "event_type": "citation_signature",
        "event_version": EVENT_VERSION,
        "payload": {"relation": 1, "cited_pith_number": 2},
        "signer": {
            "key_id": ALICE.name,
            "public_key_b64": keys.b64encode(pk),
            "public_key_fingerprint": keys.fingerprint_hex(pk),
            "signer_id": f"ed25519:{keys.fingerprint_hex(pk)}",
            "signer_type": "self_signed",
        },
        "subject_pith_number": P[0],
        "target": "record",
    }
    event["signature_b64"] = keys.b64encode(ALICE.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


# A finding of the adversarial review of session 4 (apply's two readings, finishing/fsck/verification
# on worker processes); failed at 6581123, before the fix it guards.
def test_verify_and_apply_give_one_verdict_message_whatever_the_key_order(tmp_path: Path) -> None:
    """716d8b6 verifies apply's copies from their canonical (key-sorted) bytes, so apply's evidence
    says '... at `$.cited_pith_number`', while `pithledger verify` (app.py _check_document ->
    verify_event on the input's own key order) says '... at `$.relation`' for the same event: what a
    user checks with verify is not what the ledger records. Root: events.py _payload,
    msgspec.convert reports the first bad field in dict order."""
    event = _event_with_two_mistyped_payload_fields()
    said_by_verify = verify_event(event)
    with Ledger(tmp_path, create=True) as ledger:
        result = ledger.apply_batch([read_bundle(json.loads(json.dumps(write_bundle(P[0], [event]))))])
    (rejected,) = result.rejected
    assert (rejected.reason, rejected.message) == (said_by_verify.reason, said_by_verify.message)
