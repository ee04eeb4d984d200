"""The attacks of issue #10, each as a test: nothing but a valid event can move the consensus.

Consensus = the state bytes, the digest roots and identifier resolution (spec/merge.md §0,
spec/identifiers.md §7). Junk goes to evidence (spec/storage.md §2.1) and is reported every time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.adversary import GARBLINGS, garble, replay_under, unsigned_pith_event
from helpers.common import TESTS
from helpers.consensus import FAKE, FAKE_RECORD, NUMBER, ODD_SPELLINGS, OTHER, REC, citation, created, mirror, signed
from helpers.eventpool import ALICE, BOB, MALLORY, bundles_of
from pithledger.errors import AmbiguousId, NotFound
from pithledger.records import keys
from pithledger.records.bundle import Bundle
from pithledger.records.events import compute_event_id, make_event, signing_message, verify_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids
from pithledger.store import Ledger


def consensus(ledger: Ledger) -> tuple[Any, ...]:
    return ({s: ledger.state_bytes(s) for s in ledger.subjects()}, ledger.root())


@pytest.mark.parametrize("how", sorted(GARBLINGS))
def test_a_garbled_copy_arriving_first_cannot_censor_the_valid_event(tmp_path: Path, how: str) -> None:
    record, valid = created(ALICE), citation()
    bad = garble(valid, how)
    assert verify_event(bad).status != "valid"
    with (
        mirror(tmp_path / "first", [record, bad], [valid]) as first,
        mirror(tmp_path / "together", [bad, record, valid]) as together,
        mirror(tmp_path / "clean", [record, valid]) as clean,
    ):
        want = consensus(clean)
        assert consensus(first) == want and consensus(together) == want
        state = json.loads(first.state_bytes(NUMBER))
        assert [c["event_id"] for c in state["current"]["citations"]] == [valid["event_id"]]
        assert len(first.evidence(NUMBER)) == 1 and first.fsck() == [] and clean.fsck() == []


def test_a_replay_under_another_subject_is_evidence_there_and_changes_nothing(tmp_path: Path) -> None:
    record, valid = created(ALICE), citation()
    replay = replay_under(valid, OTHER)
    with mirror(tmp_path / "a", [replay], [record, valid]) as a, mirror(tmp_path / "b", [record, valid]) as b:
        assert consensus(a) == consensus(b)
        assert [h.verdict.reason for _, h in a.evidence(OTHER)] == ["bad-signature"]


JUNK = {
    "unsigned-pith-snapshot": lambda: unsigned_pith_event(NUMBER),
    "pith-record-created-without-receipt": lambda: {
        **unsigned_pith_event(NUMBER, "record_created"),
        "target": "record",
        "payload": {"canonical_record": REC["canonical_record"], "canonical_sha256": REC["canonical_sha256"]},
    },
    "null-signature": lambda: garble(citation("2026-06-03T00:00:00Z"), "null-signature"),
    "missing-event-version": lambda: garble(citation("2026-06-04T00:00:00Z"), "missing-event-version"),
    "unknown-signer-type": lambda: {
        **unsigned_pith_event(NUMBER),
        "signer": {**unsigned_pith_event(NUMBER)["signer"], "signer_type": "oracle"},
    },
}


def test_junk_never_changes_state_bytes_or_digests_and_is_reported_every_time(tmp_path: Path) -> None:
    record, valid = created(ALICE), citation()
    junk = [make() for make in JUNK.values()]
    with mirror(tmp_path / "clean", [record, valid]) as clean, Ledger(tmp_path / "junk", create=True) as dirty:
        first = dirty.apply_batch(bundles_of(junk + [record]))
        second = dirty.apply_batch(bundles_of([valid] + junk))
        assert consensus(dirty) == consensus(clean)
        assert len(first.rejected) == len(second.rejected) == len(junk)  # every offer is answered
        assert sorted(r.reason for r in first.rejected) == sorted(r.reason for r in second.rejected)
        assert dirty.evidence_usage().entries == len(junk) and dirty.fsck() == []


def test_an_event_of_unknown_kind_is_part_of_the_set_but_never_folded(tmp_path: Path) -> None:
    record = created(ALICE)
    body = {k: v for k, v in citation().items() if k not in ("event_id", "signature_b64")}
    body.update(event_type="peer_review_v9", payload={"score": "high"})
    body["signature_b64"] = keys.b64encode(BOB.sign(signing_message(body)))
    body["event_id"] = compute_event_id(body)
    with mirror(tmp_path / "a", [record, body]) as a, mirror(tmp_path / "b", [record]) as b:
        sa, sb = json.loads(a.state_bytes(NUMBER)), json.loads(b.state_bytes(NUMBER))
        assert sa["current"] == sb["current"] and sa["unknown_kinds"] == [
            {"event_id": body["event_id"], "event_type": "peer_review_v9"}
        ]
        assert a.root() != b.root()  # a valid event: it is in the set, and audits see it


# --- records and identifiers ------------------------------------------------------------------------

STAND_IN = LocalKey(name="stand-in registry", seed=b"\x07" * 32)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> LocalKey:
    """We hold no Pith private key: a stand-in registry key shows the receipt rules end to end."""
    monkeypatch.setitem(
        keys.PITH_REGISTRY_KEYS,
        "pith-v1-2026-05",
        keys.RegistryKey(key_id="pith-v1-2026-05", public_key=STAND_IN.public_key),
    )
    return STAND_IN


def pith_record_created(record: dict[str, Any] = REC["canonical_record"], **changes: Any) -> dict[str, Any]:
    rid = record_ids(record)
    event = {
        "event_type": "record_created",
        "subject_pith_number": rid.pith_number,
        "target": "record",
        "created_at": "2026-05-18T01:47:41Z",
        "event_id": "sha256:" + "74" * 32,
        "signer": {
            "key_id": "pith-v1-2026-05",
            "public_key_fingerprint": keys.fingerprint_hex(STAND_IN.public_key),
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "payload": {
            "canonical_record": record,
            "canonical_sha256": rid.canonical_sha256,
            "receipt": {
                "kind": "pith_receipt",
                "key_id": "pith-v1-2026-05",
                "algorithm": "ed25519",
                "signed_at": "2026-05-18T01:47:41.701845Z",
                "signature_b64": keys.b64encode(STAND_IN.sign(bytes.fromhex(rid.canonical_sha256))),
            },
        },
    }
    event.update(changes)
    return event


def outcome(ledger: Ledger, query: str) -> str:
    try:
        return ledger.resolve(query)
    except (NotFound, AmbiguousId) as exc:
        return f"{exc.code}: {exc.message}"


QUERIES = [
    "2605.00424",
    "2605.00424v2",
    "2605.00424v9999",
    "10.48550/arxiv.2605.00424",
    "https://arxiv.org/abs/2605.00424",
    "FZ7AO632",
    NUMBER,
    FAKE,
]


def test_a_fabricated_record_cannot_take_over_an_arxiv_id(tmp_path: Path, registry: LocalKey) -> None:
    real, fake = pith_record_created(), created(MALLORY, FAKE_RECORD)
    with mirror(tmp_path / "m", [real, fake]) as m:
        for query in (
            "2605.00424",
            "10.48550/arxiv.2605.00424",
            "https://arxiv.org/abs/2605.00424",
            "arXiv:2605.00424",
        ):
            assert m.resolve(query) == NUMBER, query
        assert m.resolve("2605.00424v9999") == FAKE  # asked for by version, it is the only record of it
        assert json.loads(m.state_bytes(NUMBER))["current"]["record_receipts"] == ["pith-v1-2026-05"]


def test_a_revoked_fabricated_record_leaves_every_index_whatever_the_batching(tmp_path: Path) -> None:
    real, fake = created(ALICE), created(MALLORY, FAKE_RECORD)
    revoke = make_event(
        "revocation", FAKE, {"revoked_event_id": fake["event_id"]}, MALLORY, created_at="2026-06-09T00:00:00Z"
    )
    with (
        mirror(tmp_path / "later", [real, fake], [revoke]) as later,
        mirror(tmp_path / "once", [real, fake, revoke]) as once,
    ):
        answers = {q: outcome(later, q) for q in QUERIES}
        assert answers == {q: outcome(once, q) for q in QUERIES}
        assert answers["2605.00424"] == NUMBER and answers["2605.00424v9999"].startswith("not-found")
        assert later.export(FAKE)["pith_number"] == FAKE  # its events remain, nothing crashes
        assert later.fsck() == [] and once.fsck() == []


def test_one_self_signer_publishing_two_versions_resolves_to_the_latest(tmp_path: Path) -> None:
    v1 = {**REC["canonical_record"], "source": {**REC["canonical_record"]["source"], "version": 1}}
    with mirror(tmp_path / "m", [created(ALICE), created(ALICE, v1)]) as m:
        assert m.resolve("2605.00424") == NUMBER


def test_copies_of_a_pith_record_differing_in_unsigned_fields_are_one_event(tmp_path: Path, registry: LocalKey) -> None:
    first = pith_record_created()
    redated = pith_record_created(
        created_at="1970-01-01T00:00:00Z",
        event_id="sha256:" + "00" * 32,
        signer={**first["signer"], "signer_id": "mallory"},
    )
    assert verify_event(first).event_id == verify_event(redated).event_id
    with mirror(tmp_path / "a", [first], [redated]) as a, mirror(tmp_path / "b", [redated], [first]) as b:
        assert consensus(a) == consensus(b)
        assert a.counts()["events"] == 1
        aliases = json.loads(a.state_bytes(NUMBER))["current"]["source_aliases"]
        assert {x["created_at"] for x in aliases} == {REC["canonical_record"]["metadata"]["submitted_at"]}


# --- grammar and integers -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ODD_SPELLINGS))
def test_other_scripts_trailing_newlines_and_huge_integers_are_invalid_with_a_named_reason(name: str) -> None:
    fields, reason = ODD_SPELLINGS[name]
    verdict = verify_event(signed(fields))
    assert (verdict.status, verdict.reason) == ("invalid", reason), verdict.message


def test_odd_spellings_cannot_win_latest_wins_or_dodge_equivocation(tmp_path: Path) -> None:
    # A 2026 in Arabic-Indic digits sorts after "2099" as a string; it must not count as a time at all.
    late = make_event("graph_snapshot", NUMBER, {"graph_snapshot": {"v": 1}}, BOB, created_at="2099-01-01T00:00:00Z")
    odd = signed(
        {
            "event_type": "graph_snapshot",
            "target": "graph",
            "payload": {"graph_snapshot": {"v": 2}},
            "created_at": "٢٠٢٦-01-01T00:00:00Z",
        },
        BOB,
    )
    with mirror(tmp_path / "a", [created(ALICE), late, odd]) as a, mirror(tmp_path / "b", [created(ALICE), late]) as b:
        assert consensus(a) == consensus(b)


def test_bundles_of_helper_keeps_one_record_per_bundle() -> None:
    assert all(
        isinstance(b, Bundle) and all(e["subject_pith_number"] == b.pith_number for e in b.events)
        for b in bundles_of([created(ALICE), citation(), replay_under(citation(), OTHER)])
    )


def test_a_pith_bundle_round_trips_through_export_with_its_unverified_events(tmp_path: Path) -> None:
    from pithledger.records.bundle import read_bundle

    head = json.loads((TESTS / "vectors" / "pith-bundle-FZ7AO632-head.json").read_text())
    snapshot = unsigned_pith_event(NUMBER)  # Pith's envelope, as on its state pages: unverifiable here
    snapshot["payload"] = {
        "graph_snapshot": {"builder_version": "pith-number-builder-2026-05-17-v1", "claims": {"count": 0, "items": []}}
    }
    bundle = {**head, "events": [created(ALICE), snapshot]}
    with Ledger(tmp_path / "a", create=True) as a:
        result = a.apply_batch([read_bundle(bundle)])
        assert (result.new, result.unverified) == (1, 1)
        exported = a.export(NUMBER)
        assert snapshot in exported["events"]  # kept as received, outside the state
        with Ledger(tmp_path / "b", create=True) as b:
            b.apply_batch([read_bundle(json.loads(json.dumps(exported)))])
            assert consensus(b) == consensus(a)
            assert [e for _, e in b.evidence(NUMBER)] == [e for _, e in a.evidence(NUMBER)]


def test_fsck_is_clean_whatever_key_order_junk_arrived_in(tmp_path: Path) -> None:
    # An unsigned Pith-envelope record_created with two faults in its record: which one the message
    # names depends on key order; the class and code do not, and fsck must not call that damage.
    from pithledger.records.bundle import read_bundle
    from pithledger.records.canonical import strict_decode

    event_text = (
        '{"event_type":"record_created","subject_pith_number":"%s","target":"record","created_at":"2026-05-18T01:47:41Z",'
        '"signer":{"key_id":"pith-v1-2026-05","public_key_fingerprint":"8d4b5ee74e4693bcd1df2446408b0d54",'
        '"signer_id":"x","signer_type":"pith_registry"},"payload":{"canonical_record":{"source":5,"schema_version":"2.0",'
        '"metadata":{}},"canonical_sha256":"%s","receipt":{"kind":"pith_receipt","key_id":"pith-v1-2026-05",'
        '"algorithm":"ed25519","signed_at":"x","signature_b64":"AAAA"}}}'
    ) % (NUMBER, "0" * 64)
    bundle = '{"bundle_type":"pith_open_graph_bundle","bundle_version":"1.0","pith_number":"%s","events":[%s]}' % (
        NUMBER,
        event_text,
    )
    as_received = verify_event(json.loads(event_text))
    sorted_keys = verify_event(json.loads(json.dumps(json.loads(event_text), sort_keys=True)))
    assert (
        (as_received.status, as_received.reason)
        == (sorted_keys.status, sorted_keys.reason)
        == ("invalid", "bad-record")
    )
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch([read_bundle(strict_decode(bundle.encode()))])
        assert ledger.evidence_usage().entries == 1 and ledger.fsck() == []


def test_an_optional_field_may_be_null_as_the_spec_says() -> None:
    record, cite = created(ALICE), citation()
    revoke = signed(
        {
            "event_type": "revocation",
            "target": "event",
            "payload": {"revoked_event_id": cite["event_id"], "reason": None},
        },
        BOB,
    )
    assert verify_event(revoke).status == "valid"
    assert record["event_type"] == "record_created"
