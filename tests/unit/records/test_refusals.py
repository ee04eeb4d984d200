"""One case per refusal of event validity (issue #42 item 1): every ``raise EventInvalid`` (and every unverified
outcome) of ledger/records/events.py is reached here through ``verify_event``, the check ``apply``, ``verify``,
``fsck`` and ``rebuild`` run on every event, on events built and signed with real Ed25519 keys. Each case is
named after the mutation of a valid event it carries, and asserts the exact code; each rule's valid side is
checked too (a rule that refused everything would fail). tests/README.md lists which planted bug each catches."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from helpers.eventkit import (
    ALICE,
    DIGEST,
    DROP,
    NUMBER,
    OTHER,
    REC,
    REGISTRY_KEY_ID,
    STAND_IN,
    anchor,
    citation,
    created,
    event,
    non_canonical_b64,
    pith_created,
    receipt,
    registry_signer,
    replication,
    self_signer,
    sha1_proof,
    sized,
    storage,
)
from pithledger import verify_bundle
from pithledger.records import keys, ots
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import MAX_EVENT_BYTES, compute_event_id, signing_message, verify_event
from pithledger.records.keys import LocalKey

# name -> (what builds the event, (status, reason)). Our envelope unless the name says "pith-".
REFUSALS: dict[str, tuple[Callable[[], dict[str, Any]], tuple[str, str]]] = {
    # step 1: size
    "event-one-byte-over-1-mib": (lambda: sized(MAX_EVENT_BYTES + 1), ("invalid", "event-too-large")),
    # step 2: shape
    "event-type-missing": (lambda: citation(event_type=DROP), ("invalid", "bad-envelope")),
    "subject-not-a-long-pith-number": (
        lambda: citation(subject_pith_number="pith:FHIBFT2F"),
        ("invalid", "bad-envelope"),
    ),
    "subject-with-trailing-newline": (lambda: citation(subject_pith_number=NUMBER + "\n"), ("invalid", "bad-envelope")),
    "signer-not-an-object": (lambda: citation(signer="alice"), ("invalid", "bad-envelope")),
    "signer-key-id-a-number": (lambda: citation(signer=self_signer(key_id=7)), ("invalid", "bad-envelope")),
    "signer-public-key-null": (lambda: citation(signer=self_signer(public_key_b64=None)), ("invalid", "bad-envelope")),
    "payload-an-array": (lambda: citation(payload=[]), ("invalid", "bad-envelope")),
    "signature-missing": (
        lambda: {k: v for k, v in citation().items() if k != "signature_b64"},
        ("invalid", "bad-envelope"),
    ),
    "event-id-missing": (lambda: {k: v for k, v in citation().items() if k != "event_id"}, ("invalid", "bad-envelope")),
    # step 3: created_at
    "created-at-with-offset": (lambda: citation(created_at="2026-06-01T00:00:00+00:00"), ("invalid", "bad-time")),
    "created-at-february-30": (lambda: citation(created_at="2026-02-30T00:00:00Z"), ("invalid", "bad-time")),
    "created-at-leap-second": (lambda: citation(created_at="2016-12-31T23:59:60Z"), ("invalid", "bad-time")),
    # steps 4-5
    "event-version-of-a-newer-writer": (
        lambda: citation(event_version="pithledger-event-v2"),
        ("unverified", "unsupported-event-version"),
    ),
    "event-id-of-another-event": (lambda: citation() | {"event_id": "sha256:" + "ab" * 32}, ("invalid", "id-mismatch")),
    # step 6: self-signed signer
    "self-signer-without-public-key": (
        lambda: citation(signer=self_signer(public_key_b64=DROP)),
        ("invalid", "bad-key"),
    ),
    "self-signer-public-key-of-31-bytes": (
        lambda: citation(signer=self_signer(public_key_b64=keys.b64encode(b"\x01" * 31))),
        ("invalid", "bad-key"),
    ),
    "self-signer-fingerprint-of-another-key": (
        lambda: citation(signer=self_signer(public_key_fingerprint=keys.fingerprint_hex(STAND_IN.public_key))),
        ("invalid", "fingerprint-mismatch"),
    ),
    "self-signer-key-id-blank": (lambda: citation(signer=self_signer(key_id=" \t")), ("invalid", "bad-envelope")),
    "self-signer-signer-id-empty": (lambda: citation(signer=self_signer(signer_id="")), ("invalid", "bad-envelope")),
    "signer-type-unknown": (lambda: citation(signer=self_signer(signer_type="orcid")), ("invalid", "bad-envelope")),
    # step 6: registry signer (our envelope)
    "registry-signer-with-unknown-key-id": (
        lambda: citation(key=STAND_IN, signer=registry_signer(key_id="pith-v0")),
        ("invalid", "unknown-registry-key"),
    ),
    "registry-signer-with-another-fingerprint": (
        lambda: citation(key=STAND_IN, signer=registry_signer(public_key_fingerprint="0" * 32)),
        ("invalid", "fingerprint-mismatch"),
    ),
    "registry-signer-with-another-public-key": (
        lambda: citation(key=STAND_IN, signer=registry_signer(public_key_b64=keys.b64encode(ALICE.public_key))),
        ("invalid", "fingerprint-mismatch"),
    ),
    "registry-signer-with-its-key-in-another-base64-spelling": (
        lambda: citation(
            key=STAND_IN, signer=registry_signer(public_key_b64=keys.b64encode(STAND_IN.public_key).rstrip("="))
        ),
        ("invalid", "fingerprint-mismatch"),
    ),
    # step 7: signature
    "signature-not-base64": (lambda: resealed_signature("!!!!"), ("invalid", "bad-signature")),
    "signature-of-63-bytes": (lambda: resealed_signature(keys.b64encode(b"\x00" * 63)), ("invalid", "bad-signature")),
    "signature-in-non-canonical-base64": (
        lambda: resealed_signature(non_canonical_b64(keys.b64decode_strict(citation()["signature_b64"]))),
        ("invalid", "bad-signature"),
    ),
    "self-signer-public-key-in-non-canonical-base64": (
        lambda: citation(signer=self_signer(public_key_b64=non_canonical_b64(ALICE.public_key))),
        ("invalid", "bad-key"),
    ),
    "signature-by-another-key": (
        lambda: resealed_signature(keys.b64encode(STAND_IN.sign(signing_message(citation())))),
        ("invalid", "bad-signature"),
    ),
    # step 8: an unknown kind is valid
    # step 9: target
    "citation-with-target-graph": (lambda: citation(target="graph"), ("invalid", "wrong-target")),
    "revocation-with-target-record": (
        lambda: event("revocation", {"revoked_event_id": "sha256:" + "ab" * 32}, target="record"),
        ("invalid", "wrong-target"),
    ),
    # step 10: payloads
    "payload-field-of-another-type": (
        lambda: event("citation_signature", {"cited_pith_number": OTHER, "relation": 1}),
        ("invalid", "bad-payload"),
    ),
    "record-created-of-an-invalid-record": (
        lambda: created(canonical_record={**REC["canonical_record"], "source": {}}),
        ("invalid", "bad-record"),
    ),
    "record-created-hash-of-another-record": (
        lambda: created(canonical_sha256="ab" * 32),
        ("invalid", "hash-mismatch"),
    ),
    "record-created-for-another-subject": (
        lambda: event(
            "record_created",
            {"canonical_record": REC["canonical_record"], "canonical_sha256": REC["canonical_sha256"]},
            subject=OTHER,
        ),
        ("invalid", "record-subject-mismatch"),
    ),
    "receipt-by-an-unknown-key": (
        lambda: created(receipt=receipt(keys.b64encode(b"\x00" * 64), key_id="pith-v0")),
        ("invalid", "unknown-receipt-key"),
    ),
    "receipt-signature-not-base64": (lambda: created(receipt=receipt("not base64!")), ("invalid", "bad-receipt")),
    "receipt-signature-of-63-bytes": (
        lambda: created(receipt=receipt(keys.b64encode(b"\x00" * 63))),
        ("invalid", "bad-receipt"),
    ),
    "receipt-signature-that-does-not-verify": (
        lambda: created(receipt=receipt(keys.b64encode(ALICE.sign(DIGEST)))),
        ("invalid", "bad-receipt"),
    ),
    "receipt-of-another-kind": (
        lambda: created(receipt=receipt(keys.b64encode(ALICE.sign(DIGEST))) | {"kind": "x"}),
        ("invalid", "bad-payload"),
    ),
    "proof-not-base64": (
        lambda: event("timestamp_anchor", {"ots_proof_b64": "AAAA="}),
        ("invalid", "bad-proof"),
    ),
    "proof-truncated": (lambda: anchor(ots.build(DIGEST, ["https://a.example"])[:-1]), ("invalid", "bad-proof")),
    "proof-of-a-sha1-digest": (lambda: anchor(sha1_proof()), ("invalid", "bad-proof")),
    "proof-of-another-digest": (
        lambda: anchor(ots.build(bytes(32), ["https://a.example"])),
        ("invalid", "proof-digest-mismatch"),
    ),
    "headers-not-base64": (
        lambda: anchor(ots.build(DIGEST, [], [900_000]), bitcoin_headers_b64="!!!!"),
        ("invalid", "bad-headers"),
    ),
    "capture-url-not-wayback": (
        lambda: storage(capture_url="https://archive.today/20260601000000/https://arxiv.org/abs/2605.00424"),
        ("invalid", "bad-payload"),
    ),
    "captured-at-february-30": (
        lambda: storage(
            capture_url="https://web.archive.org/web/20260230000000/https://arxiv.org/abs/2605.00424",
            captured_at="2026-02-30T00:00:00Z",
        ),
        ("invalid", "bad-payload"),
    ),
    "captured-at-another-second-than-the-url": (
        lambda: storage(captured_at="2026-06-01T00:00:01Z"),
        ("invalid", "bad-payload"),
    ),
    "content-sha256-in-upper-case": (lambda: storage(content_sha256="AB" * 32), ("invalid", "bad-payload")),
    "content-sha256-of-63-digits": (lambda: storage(content_sha256="a" * 63), ("invalid", "bad-payload")),
    "author-name-empty": (lambda: event("author_attestation", {"author_name": ""}), ("invalid", "bad-payload")),
    "orcid-check-digit-wrong": (
        lambda: event("author_attestation", {"author_name": "J", "orcid": "0000-0002-1825-0098"}),
        ("invalid", "bad-orcid"),
    ),
    "orcid-with-lower-case-x": (
        lambda: event("author_attestation", {"author_name": "J", "orcid": "0000-0002-1694-233x"}),
        ("invalid", "bad-orcid"),
    ),
    "cited-a-short-pith-number": (
        lambda: event("citation_signature", {"cited_pith_number": OTHER[-8:], "relation": "cites"}),
        ("invalid", "bad-payload"),
    ),
    "citation-of-its-own-subject": (
        lambda: event("citation_signature", {"cited_pith_number": NUMBER, "relation": "cites"}),
        ("invalid", "bad-payload"),
    ),
    "relation-unknown": (
        lambda: event("citation_signature", {"cited_pith_number": OTHER, "relation": "likes"}),
        ("invalid", "bad-relation"),
    ),
    "replication-type-unknown": (lambda: replication(replication_type="reproduction"), ("invalid", "bad-payload")),
    "replication-outcome-unknown": (lambda: replication(outcome="success"), ("invalid", "bad-payload")),
    "artifact-url-of-ftp": (lambda: replication(artifact_url="ftp://example.org/a"), ("invalid", "bad-payload")),
    "artifact-url-without-a-host": (lambda: replication(artifact_url="https:///a"), ("invalid", "bad-payload")),
    "artifact-url-with-a-space": (
        lambda: replication(artifact_url="https://example.org/a b"),
        ("invalid", "bad-payload"),
    ),
    "severity-unknown": (
        lambda: event("integrity_finding", {"finding_type": "x", "severity": "high", "description": ""}),
        ("invalid", "bad-payload"),
    ),
    "challenged-event-id-without-prefix": (
        lambda: event("challenge", {"challenged_event_id": "ab" * 32, "reason": ""}),
        ("invalid", "bad-payload"),
    ),
    "challenged-event-id-in-upper-case": (
        lambda: event("challenge", {"challenged_event_id": "sha256:" + "AB" * 32, "reason": ""}),
        ("invalid", "bad-payload"),
    ),
    "revoked-event-id-of-63-digits": (
        lambda: event("revocation", {"revoked_event_id": "sha256:" + "a" * 63}),
        ("invalid", "bad-payload"),
    ),
    # Pith's envelope (spec/events.md §2.4)
    "pith-graph-snapshot": (
        lambda: pith_created(event_type="graph_snapshot", target="graph", payload={"graph_snapshot": {}}),
        ("unverified", "unverifiable-signature"),
    ),
    "pith-record-created-by-a-self-signer": (
        lambda: pith_created(signer=self_signer()),
        ("unverified", "unverifiable-signature"),
    ),
    "pith-registry-signer-with-unknown-key-id": (
        lambda: pith_created(signer=registry_signer(key_id="pith-v0")),
        ("invalid", "unknown-registry-key"),
    ),
    "pith-registry-signer-with-another-public-key": (
        lambda: pith_created(signer=registry_signer(public_key_b64=keys.b64encode(ALICE.public_key))),
        ("invalid", "fingerprint-mismatch"),
    ),
    "pith-record-created-with-target-graph": (lambda: pith_created(target="graph"), ("invalid", "wrong-target")),
    "pith-record-created-without-receipt": (
        lambda: pith_created(payload={"canonical_record": REC["canonical_record"], "canonical_sha256": DIGEST.hex()}),
        ("unverified", "no-receipt"),
    ),
    "pith-receipt-a-string": (
        lambda: pith_created(
            payload={"canonical_record": REC["canonical_record"], "canonical_sha256": DIGEST.hex(), "receipt": "r"}
        ),
        ("unverified", "unreadable-receipt"),
    ),
    "pith-receipt-signature-by-another-key": (
        lambda: pith_created(
            payload={
                "canonical_record": REC["canonical_record"],
                "canonical_sha256": DIGEST.hex(),
                "receipt": receipt(keys.b64encode(ALICE.sign(DIGEST))),
            }
        ),
        ("invalid", "bad-receipt"),
    ),
    "pith-created-at-with-fraction": (
        lambda: pith_created(created_at="2026-05-18T01:47:41.7Z"),
        ("invalid", "bad-time"),
    ),
    "pith-event-id-a-number": (lambda: pith_created(event_id=7), ("invalid", "bad-envelope")),
}


def resealed_signature(signature_b64: str) -> dict[str, Any]:
    """A citation whose signature is replaced and whose id is recomputed over it (so step 5 passes)."""
    e = citation()
    e["signature_b64"] = signature_b64
    e["event_id"] = compute_event_id(e)
    return e


# The valid events each refusal above is a mutation of: what shows the rules refuse only what they name.
VALID: dict[str, Callable[[], dict[str, Any]]] = {
    "event-of-exactly-1-mib": lambda: sized(MAX_EVENT_BYTES),
    "citation": citation,
    "registry-signer-without-public-key": lambda: citation(key=STAND_IN, signer=registry_signer()),
    "registry-signer-with-its-own-public-key": lambda: citation(
        key=STAND_IN, signer=registry_signer(public_key_b64=keys.b64encode(STAND_IN.public_key))
    ),
    "unknown-kind": lambda: event("peer_review_v9", {"score": "high"}),
    "record-created-with-a-receipt": lambda: created(receipt=receipt(keys.b64encode(STAND_IN.sign(DIGEST)))),
    "record-created-with-a-null-receipt": lambda: created(receipt=None),
    "proof": lambda: anchor(ots.build(DIGEST, ["https://a.example"], [900_000])),
    "storage": storage,
    "storage-with-content-sha256": lambda: storage(content_sha256="ab" * 32),
    "author-with-orcid-x": lambda: event("author_attestation", {"author_name": "J", "orcid": "0000-0002-1694-233X"}),
    "replication": replication,
    "finding": lambda: event("integrity_finding", {"finding_type": "x", "severity": "critical", "description": ""}),
    "challenge": lambda: event("challenge", {"challenged_event_id": "sha256:" + "ab" * 32, "reason": ""}),
    "revocation": lambda: event("revocation", {"revoked_event_id": "sha256:" + "ab" * 32}),
    "pith-record-created": pith_created,
    "pith-registry-signer-with-its-own-public-key": lambda: pith_created(
        signer=registry_signer(public_key_b64=keys.b64encode(STAND_IN.public_key))
    ),
}


# What the message says, where the code alone cannot tell two faults apart (a short signature would fail to
# verify anyway: the message is what shows its length was checked).
WORDS = {
    "receipt-signature-of-63-bytes": "63 bytes; expected 64",
    "signature-of-63-bytes": "63 bytes; expected 64",
    "self-signer-public-key-of-31-bytes": "31 bytes; expected 32",
    "proof-of-a-sha1-digest": "stamps a sha1 digest",
    "registry-signer-with-another-public-key": "public_key_b64 is not the registry key",
    "pith-registry-signer-with-another-public-key": "public_key_b64 is not the registry key",
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_each_refusal_gives_its_code(registry: LocalKey, name: str) -> None:
    build, expected = REFUSALS[name]
    v = verify_event(build())
    assert (v.status, v.reason) == expected, (name, v.message)
    assert WORDS.get(name, "") in v.message


@pytest.mark.parametrize("name", sorted(VALID))
def test_the_event_each_refusal_mutates_is_valid(registry: LocalKey, name: str) -> None:
    v = verify_event(VALID[name]())
    assert (v.status, v.reason) == ("valid", ""), (name, v.message)


def test_registry_signed_events_have_registry_trust(registry: LocalKey) -> None:
    v = verify_event(citation(key=STAND_IN, signer=registry_signer()))
    assert (v.trust, v.signer_key) == ("registry", f"registry:{REGISTRY_KEY_ID}")
    assert verify_event(citation()).trust == "self_signed"


def test_a_refusal_is_the_same_through_a_bundle(registry: LocalKey) -> None:
    """``pithledger.verify_bundle`` (``pithledger verify``) gives each event the verdict verify_event gives it."""
    names = [n for n in sorted(REFUSALS) if "subject" not in n and "1-mib" not in n]
    for name in names:
        e = REFUSALS[name][0]()
        bundle = write_bundle(NUMBER, [e])
        (v,) = verify_bundle(canonical_bytes(bundle))
        assert (v.status, v.reason) == REFUSALS[name][1], name


def test_an_event_that_is_not_an_object_or_has_a_bad_subject_refuses_its_bundle() -> None:
    from pithledger.errors import BundleError

    for events in ([7], [citation(subject_pith_number="pith:FHIBFT2F")]):
        with pytest.raises(BundleError, match=r"events\[0\]"):
            verify_bundle(canonical_bytes(write_bundle(NUMBER, copy.deepcopy(events))))
