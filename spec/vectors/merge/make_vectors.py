"""Regenerate the merge conformance vectors (deterministic: same bytes every run).

    python spec/vectors/merge/make_vectors.py

Each vector is one JSON file: events in, expected verdicts and state bytes out (README.md here).
The events are signed by keys whose seeds are published below: they prove nothing, they test rules.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from pithledger.merge import MERGE_VERSION, Entry, reduce_all
from pithledger.records import bitcoin, keys
from pithledger.records import ots as _ots
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import compute_event_id, make_event, signing_message, verify_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent.parent / "tests"))  # the test kits: headers mined at regtest difficulty
from helpers import bitcoinkit as bk  # noqa: E402

RECORDS = [
    json.loads(line)
    for line in (HERE.parent.parent.parent / "tests" / "vectors" / "pith-records.jsonl").read_text().splitlines()
]
REC_A, REC_B = RECORDS[0]["canonical_record"], RECORDS[1]["canonical_record"]
A, B = record_ids(REC_A), record_ids(REC_B)
STAND_IN = LocalKey(
    name="stand-in-registry", seed=hashlib.sha256(b"pithledger vectors: stand-in registry key").digest()
)


def key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"pithledger vectors: {name}".encode()).digest())


ALICE, BOB, MALLORY = key("alice"), key("bob"), key("mallory")


def t(day: int, hour: int = 0) -> str:
    return f"2026-06-{day:02d}T{hour:02d}:00:00Z"


def ev(kind: str, subject: str, payload: dict[str, Any], k: LocalKey, when: str) -> dict[str, Any]:
    return make_event(kind, subject, payload, k, created_at=when)


def created(k: LocalKey, rec: dict[str, Any] = REC_A, when: str = t(1)) -> dict[str, Any]:
    rid = record_ids(rec)
    return ev(
        "record_created", rid.pith_number, {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256}, k, when
    )


def signed_raw(fields: dict[str, Any], k: LocalKey = ALICE) -> dict[str, Any]:
    """Sign anything (an adversary does not need make_event's consent)."""
    event = {
        k2: v
        for k2, v in ev(
            "citation_signature", A.pith_number, {"cited_pith_number": B.pith_number, "relation": "cites"}, k, t(2)
        ).items()
        if k2 not in ("event_id", "signature_b64")
    }
    event.update(fields)
    event["signature_b64"] = keys.b64encode(k.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


def pith_created(rec: dict[str, Any] = REC_A, **changes: Any) -> dict[str, Any]:
    rid = record_ids(rec)
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
            "canonical_record": rec,
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


def garbled(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(event)
    for k2, v in changes.items():
        if v is _DROP:
            out.pop(k2, None)
        else:
            out[k2] = v
    return out


_DROP = object()


def ots_proof(body: bytes) -> str:
    """A sha256 proof of REC_A's digest whose timestamp is ``body`` (spec/events.md §3.1), in base64."""
    return base64.b64encode(_ots.MAGIC + b"\x01" + b"\x08" + bytes.fromhex(A.canonical_sha256) + body).decode()


_ATT_PENDING = bytes.fromhex("83dfe30d2ef90c8e")
# height 900000, its payload exactly the varuint: the strict reading refuses a byte left in a payload (spec/events.md
# §3.1.1), which made ots-255-operations-deep and ots-10000-nodes bad-proof for that byte, not for their bound (found
# by the independent oracle, issue #42)
BITCOIN_ATTESTATION = b"\x00" + bytes.fromhex("0588960d73d71901") + b"\x03" + b"\xa0\xf7\x36"
FAKE_REC = {**REC_A, "source": {**REC_A["source"], "version": 9999}}


def anchored(proof: bytes, run: bytes | None, k: LocalKey = ALICE, when: str = t(6)) -> dict[str, Any]:
    payload = {"ots_proof_b64": base64.b64encode(proof).decode()}
    if run is not None:
        payload["bitcoin_headers_b64"] = base64.b64encode(run).decode()
    return signed_raw({"event_type": "timestamp_anchor", "payload": payload, "created_at": when}, k)


def anchor_cases() -> dict[str, dict[str, Any]]:
    """Merge v3's anchors (spec/events.md §3.1.3): checked, claimed or invalid by the headers they carry. The
    checked cases run on regtest's rules (``bitcoin_chain``), which no mainnet ledger uses."""
    rec_a = created(ALICE)
    digest = bytes.fromhex(A.canonical_sha256)
    proof = _ots.build(digest, ["https://a.example"], [900000])  # branch 1: the Bitcoin attestation
    root = hashlib.sha256(digest + (1).to_bytes(4, "big")).digest()
    tag = bytes.fromhex("0588960d73d71901")  # a Bitcoin attestation: heights 100 (varuint 64), 200 (c8 01)
    # a repeated operation at one fork (append "x" twice): the reference keeps the later branch (§3.1.1)
    repeated = _ots.MAGIC + b"\x01\x08" + digest + b"\xff\xf0\x01x\x00" + tag + b"\x01\x64"
    repeated += b"\xf0\x01x\x00" + tag + b"\x02\xc8\x01"
    return {
        "anchor-checked-on-regtest": {
            "events": [rec_a, anchored(proof, bk.run(root, 8, bits=bk.CHECKED_BITS)), anchored(proof, None, BOB)],
            "bitcoin_chain": "regtest",
        },
        "anchor-headers-below-the-minimum-work": {
            "events": [rec_a, anchored(proof, bk.run(root, 64))],
            "bitcoin_chain": "regtest",
        },
        "anchor-headers-unlinked": {
            "events": [rec_a, anchored(proof, bk.run(root, 8, bits=bk.CHECKED_BITS, unlink_at=3))],
            "bitcoin_chain": "regtest",
        },
        "anchor-headers-of-another-block": {
            "events": [
                rec_a,
                anchored(proof, bk.run(hashlib.sha256(b"another block").digest(), 8, bits=bk.CHECKED_BITS)),
            ],
            "bitcoin_chain": "regtest",
        },
        "anchor-regtest-headers-on-mainnet": {
            "events": [rec_a, anchored(proof, bk.run(root, 8, bits=bk.CHECKED_BITS))]
        },
        "anchor-claimed-without-headers": {"events": [rec_a, anchored(proof, None)]},
        "ots-repeated-operation-at-a-fork": {"events": [rec_a, anchored(repeated, None)]},
    }


WORK_64_BITS = 0x2003FFFF  # regtest-legal, work 2^256 // (target + 1) = 64: above 16, under regtest's minimum 2^7
WORK_128_BITS = 0x2001FFFF  # work exactly 128 = 2^7: the minimum is "at least"
ETHEREUM = bytes.fromhex("30fe8087b5c7ead7")  # the reference's Ethereum attestation: a height, reported as unknown
LITECOIN = bytes.fromhex("06869a0d73d71b45")
BITCOIN = bytes.fromhex("0588960d73d71901")


def attestation(tag: bytes, payload: bytes) -> bytes:
    return b"\x00" + tag + _ots._varbytes(payload)


def spec_gap_cases() -> dict[str, dict[str, Any]]:
    """What an implementation built from spec/ alone had to guess (issue #41 item 9), each pinned by a vector."""
    rec_a = created(ALICE)
    digest = bytes.fromhex(A.canonical_sha256)
    proof = _ots.build(digest, ["https://a.example"], [900000])  # branch 1: the Bitcoin attestation
    root = bk.message_of(digest, 1)
    anchor_payload = lambda body: {"event_type": "timestamp_anchor", "payload": {"ots_proof_b64": ots_proof(body)}}  # noqa: E731
    height = lambda tag, h: signed_raw(anchor_payload(attestation(tag, _ots._varuint_bytes(h))))  # noqa: E731
    # append 4 bytes, sha256, then a Litecoin attestation: the message is a 32-byte result, as a Bitcoin one's
    litecoin_only = _ots.MAGIC + b"\x01\x08" + digest + b"\xf0\x04" + bytes(4) + b"\x08"
    litecoin_only += attestation(LITECOIN, _ots._varuint_bytes(900000))
    # a repeated operation at one fork, each branch ending in sha256 (a 32-byte message): the later branch is kept
    twice = b"\xf0\x01x\x08"
    repeated = _ots.MAGIC + b"\x01\x08" + digest + b"\xff" + twice + attestation(BITCOIN, _ots._varuint_bytes(100))
    repeated += twice + attestation(BITCOIN, _ots._varuint_bytes(200))
    repeated_root = hashlib.sha256(digest + b"x").digest()

    # operations reading 131072 bytes in all (the limit, inclusive): 31 branches of append 4064 to the 32-byte
    # digest (each reads 32 + 4064), then a branch of append 1 (reads 33) and append 4030 to that 33-byte
    # message (reads 33 + 4030): 31 * 4096 + 33 + 4063 = 131072; append 4031 reads one byte more
    def ops_reading(last: int) -> bytes:
        body = b""
        for i in range(31):
            body += b"\xff\xf0" + _ots._varbytes(bytes([i]) * 4064) + attestation(BITCOIN, b"\x01")
        return (
            body
            + b"\xf0"
            + _ots._varbytes(b"a")
            + b"\xf0"
            + _ots._varbytes(b"b" * last)
            + attestation(BITCOIN, b"\x01")
        )

    reg = {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)}
    receipt = {
        "kind": "pith_receipt",
        "key_id": "pith-v1-2026-05",
        "algorithm": "ed25519",
        "signed_at": "2026-05-18T01:47:41.701845Z",
        "signature_b64": keys.b64encode(STAND_IN.sign(digest)),
    }
    created_with = lambda r: signed_raw(  # noqa: E731
        {
            "event_type": "record_created",
            "payload": {"canonical_record": REC_A, "canonical_sha256": A.canonical_sha256, "receipt": r},
        }
    )
    raw = lambda kind, target, payload: signed_raw({"event_type": kind, "target": target, "payload": payload})  # noqa: E731
    return {
        # spec/events.md §3.1: an Ethereum attestation's height is bounded as Bitcoin's and Litecoin's are
        "ethereum-height-2^32": {"events": [rec_a, height(ETHEREUM, 2**32)]},
        "ethereum-height-2^32-1": {"events": [rec_a, height(ETHEREUM, 2**32 - 1)]},
        "bitcoin-height-2^32": {"events": [rec_a, height(BITCOIN, 2**32)]},
        "bitcoin-height-2^32-1": {"events": [rec_a, height(BITCOIN, 2**32 - 1)]},
        "litecoin-height-2^32": {"events": [rec_a, height(LITECOIN, 2**32)]},
        # a varuint of 8 bytes (height 0 written non-minimally) is read; of 9 bytes it is bad-proof
        "ots-varuint-of-8-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(BITCOIN, b"\x80" * 7 + b"\x00")))]
        },
        "ots-varuint-of-9-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(BITCOIN, b"\x80" * 8 + b"\x00")))]
        },
        "ots-calendar-uri-of-1000-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(_ATT_PENDING, _ots._varbytes(b"a" * 1000))))]
        },
        "ots-calendar-uri-of-1001-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(_ATT_PENDING, _ots._varbytes(b"a" * 1001))))]
        },
        "ots-attestation-payload-of-8192-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(b"\x01" * 8, bytes(8192))))]
        },
        "ots-attestation-payload-of-8193-bytes": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(b"\x01" * 8, bytes(8193))))]
        },
        "ots-result-of-4096-bytes": {
            "events": [
                rec_a,
                signed_raw(anchor_payload(b"\xf0" + _ots._varbytes(b"x" * 4064) + attestation(BITCOIN, b"\x01"))),
            ]
        },
        "ots-result-of-4097-bytes": {
            "events": [
                rec_a,
                signed_raw(anchor_payload(b"\xf0" + _ots._varbytes(b"x" * 4065) + attestation(BITCOIN, b"\x01"))),
            ]
        },
        "ots-hexlify-of-2048-bytes": {
            "events": [
                rec_a,
                signed_raw(
                    anchor_payload(b"\xf0" + _ots._varbytes(b"x" * 2016) + b"\xf3\x08" + attestation(BITCOIN, b"\x01"))
                ),
            ]
        },
        "ots-hexlify-of-2049-bytes": {
            "events": [
                rec_a,
                signed_raw(
                    anchor_payload(b"\xf0" + _ots._varbytes(b"x" * 2017) + b"\xf3\x08" + attestation(BITCOIN, b"\x01"))
                ),
            ]
        },
        "ots-operations-reading-131072-bytes": {"events": [rec_a, signed_raw(anchor_payload(ops_reading(4030)))]},
        "ots-operations-reading-131073-bytes": {"events": [rec_a, signed_raw(anchor_payload(ops_reading(4031)))]},
        # spec/events.md §3.1.3: regtest's minimum is 2^7, inclusive (README.md said 16)
        "regtest-work-between-16-and-127": {
            "events": [rec_a, anchored(proof, bk.run(root, 2, bits=WORK_64_BITS))],
            "bitcoin_chain": "regtest",
        },
        "regtest-work-exactly-128": {
            "events": [rec_a, anchored(proof, bk.run(root, 2, bits=WORK_128_BITS))],
            "bitcoin_chain": "regtest",
        },
        # the header's time field is an unsigned 32-bit number: 0xffffffff is 2106, not 1969
        "anchor-header-time-2^32-1": {
            "events": [rec_a, anchored(proof, bk.run(root, 1, bits=bk.CHECKED_BITS, time=2**32 - 1))],
            "bitcoin_chain": "regtest",
        },
        # headers match only a Bitcoin attestation the strict reading keeps
        "anchor-headers-match-only-a-litecoin-attestation": {
            "events": [rec_a, anchored(litecoin_only, bk.run(bk.message_of(digest, 0), 2, bits=bk.CHECKED_BITS))],
            "bitcoin_chain": "regtest",
        },
        "anchor-headers-at-a-repeated-operation-take-the-kept-height": {
            "events": [rec_a, anchored(repeated, bk.run(repeated_root, 2, bits=bk.CHECKED_BITS))],
            "bitcoin_chain": "regtest",
        },
        # spec/merge.md §5: anchors whose proofs name no calendar and no Bitcoin block are "anchor pending"
        "anchor-only-an-empty-calendar-uri": {
            "events": [rec_a, signed_raw(anchor_payload(attestation(_ATT_PENDING, _ots._varbytes(b""))))]
        },
        # spec/events.md §3: the codes of the payload rules without one of their own
        "junk-severity-capitalised": {
            "events": [
                rec_a,
                raw("integrity_finding", "record", {"finding_type": "x", "severity": "Critical", "description": ""}),
            ]
        },
        "junk-challenged-event-id-upper-case-hex": {
            "events": [rec_a, raw("challenge", "record", {"challenged_event_id": "sha256:" + "AB" * 32, "reason": ""})]
        },
        "junk-revoked-event-id-of-63-hex": {
            "events": [rec_a, raw("revocation", "event", {"revoked_event_id": "sha256:" + "a" * 63})]
        },
        # the JSON types of record_created's payload
        "junk-record-created-canonical-record-an-array": {
            "events": [
                raw("record_created", "record", {"canonical_record": [REC_A], "canonical_sha256": A.canonical_sha256})
            ]
        },
        "junk-record-created-canonical-sha256-upper-case": {
            "events": [
                raw(
                    "record_created",
                    "record",
                    {"canonical_record": REC_A, "canonical_sha256": A.canonical_sha256.upper()},
                )
            ]
        },
        "junk-record-created-receipt-a-string": {
            "events": [
                raw(
                    "record_created",
                    "record",
                    {"canonical_record": REC_A, "canonical_sha256": A.canonical_sha256, "receipt": "pith"},
                )
            ]
        },
        "junk-record-created-receipt-signed-at-a-number": {
            "events": [created_with({**receipt, "signed_at": 1779068861})],
            "registry_keys": reg,
        },
        # spec/merge.md §4: record_receipts counts a receipt our envelope carries, as Pith's; signed_at is
        # not signed, so any string passes, and a receipt's further fields are kept
        "record-created-in-our-envelope-with-a-receipt": {
            "events": [created_with(receipt)],
            "registry_keys": reg,
        },
        "receipt-signed-at-not-a-time-with-an-extra-field": {
            "events": [created_with({**receipt, "signed_at": "yesterday", "note": "relayed"})],
            "registry_keys": reg,
        },
    }


def cases() -> dict[str, dict[str, Any]]:
    rec_a, rec_b = created(ALICE), created(ALICE, REC_B)
    cite = ev(
        "citation_signature", A.pith_number, {"cited_pith_number": B.pith_number, "relation": "supports"}, BOB, t(3)
    )
    author = ev(
        "author_attestation",
        A.pith_number,
        {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
        BOB,
        t(4),
    )
    snap1 = ev("graph_snapshot", A.pith_number, {"graph_snapshot": {"v": 1}}, MALLORY, t(5))
    snap2 = ev("graph_snapshot", A.pith_number, {"graph_snapshot": {"v": 2}}, MALLORY, t(5))
    proof = _ots.build(bytes.fromhex(A.canonical_sha256), ["https://a.example"], [900000])
    anchor = ev("timestamp_anchor", A.pith_number, {"ots_proof_b64": base64.b64encode(proof).decode()}, ALICE, t(6))
    store = ev(
        "storage_attestation",
        A.pith_number,
        {
            "capture_url": "https://web.archive.org/web/20260601000000/https://arxiv.org/abs/2605.00424",
            "captured_at": "2026-06-01T00:00:00Z",
        },
        ALICE,
        t(6, 1),
    )
    repl = ev(
        "replication_record",
        A.pith_number,
        {"replication_type": "formal_bridge", "outcome": "succeeded", "artifact_url": "https://example.org/lean"},
        ALICE,
        t(7),
    )
    revoke_cite = ev("revocation", A.pith_number, {"revoked_event_id": cite["event_id"]}, BOB, t(8))
    foreign_revoke = ev("revocation", A.pith_number, {"revoked_event_id": author["event_id"]}, MALLORY, t(8, 1))
    orphan = "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"
    pend1 = ev("graph_snapshot", orphan, {"graph_snapshot": {"v": 1}}, MALLORY, t(9))
    pend2 = ev("graph_snapshot", orphan, {"graph_snapshot": {"v": 2}}, MALLORY, t(9))
    fake = created(MALLORY, FAKE_REC, t(10))
    unknown = signed_raw({"event_type": "peer_review_v9", "payload": {"score": "high"}}, BOB)
    big = 2**64
    reg = {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)}
    registry_signer = {
        "key_id": "pith-v1-2026-05",
        "public_key_fingerprint": keys.fingerprint_hex(STAND_IN.public_key),
        "signer_id": "pith.science",
        "signer_type": "pith_registry",
    }
    cite_b1 = ev(
        "citation_signature", A.pith_number, {"cited_pith_number": B.pith_number, "relation": "cites"}, BOB, t(12)
    )
    cite_b2 = ev(
        "citation_signature", A.pith_number, {"cited_pith_number": B.pith_number, "relation": "refutes"}, BOB, t(12)
    )
    good_proof = _ots.build(bytes.fromhex(A.canonical_sha256), ["https://a.example"], [900000])
    revoke_unknown = ev("revocation", A.pith_number, {"revoked_event_id": unknown["event_id"]}, BOB, t(13))
    anchor_payload = lambda raw: {"event_type": "timestamp_anchor", "payload": {"ots_proof_b64": raw}}  # noqa: E731
    digest_a = bytes.fromhex(A.canonical_sha256)
    empty_uri = ev(
        "timestamp_anchor",
        A.pith_number,
        {"ots_proof_b64": base64.b64encode(_ots.build(digest_a, ["", "https://b.example"])).decode()},
        ALICE,
        t(6),
    )
    only_empty_uri = ev(
        "timestamp_anchor",
        A.pith_number,
        {"ots_proof_b64": base64.b64encode(_ots.build(digest_a, [""])).decode()},
        BOB,
        t(6),
    )
    bob_revokes_author = ev("revocation", A.pith_number, {"revoked_event_id": author["event_id"]}, BOB, t(8))
    return (
        {
            "ots-empty-calendar-uri": {"events": [rec_a, empty_uri, only_empty_uri]},
            # 255 unary operations on one path: 256 nested timestamps, the limit; one more is bad-proof
            "ots-255-operations-deep": {
                "events": [rec_a, signed_raw(anchor_payload(ots_proof(b"\x08" * 255 + BITCOIN_ATTESTATION)))]
            },
            "ots-256-operations-deep": {
                "events": [rec_a, signed_raw(anchor_payload(ots_proof(b"\x08" * 256 + BITCOIN_ATTESTATION)))]
            },
            # forks do not count, every node does (attestations too): 10,000 nodes is the limit
            "ots-10000-nodes": {
                "events": [
                    rec_a,
                    signed_raw(anchor_payload(ots_proof((b"\xff" + BITCOIN_ATTESTATION) * 9999 + BITCOIN_ATTESTATION))),
                ]
            },
            "ots-10001-nodes": {
                "events": [
                    rec_a,
                    signed_raw(
                        anchor_payload(ots_proof((b"\xff" + BITCOIN_ATTESTATION) * 10000 + BITCOIN_ATTESTATION))
                    ),
                ]
            },
            "revocation-of-another-signers-revocation-is-final": {
                "events": [
                    rec_a,
                    author,
                    bob_revokes_author,
                    ev(
                        "revocation", A.pith_number, {"revoked_event_id": bob_revokes_author["event_id"]}, MALLORY, t(9)
                    ),
                ]
            },
            "citation-and-snapshot-equivocations-in-spec-order": {
                "events": [rec_a, rec_b, cite_b1, cite_b2, snap1, snap2]
            },
            "registry-signed-author-with-orcid-is-strong": {
                "events": [
                    rec_a,
                    signed_raw(
                        {
                            "event_type": "author_attestation",
                            "payload": {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
                            "signer": registry_signer,
                        },
                        STAND_IN,
                    ),
                ],
                "registry_keys": reg,
            },
            "unknown-kind-revoked-is-still-listed": {"events": [rec_a, unknown, revoke_unknown]},
            "revocation-with-a-null-reason-takes-effect": {
                "events": [
                    rec_a,
                    cite,
                    signed_raw(
                        {
                            "event_type": "revocation",
                            "target": "event",
                            "payload": {"revoked_event_id": cite["event_id"], "reason": None},
                        },
                        BOB,
                    ),
                ]
            },
            "inbound-citation-from-a-pending-record": {"events": [rec_b, cite]},
            "odd-spelling-lower-case-cited-number": {
                "events": [
                    rec_a,
                    signed_raw({"payload": {"cited_pith_number": B.pith_number.lower(), "relation": "cites"}}),
                ]
            },
            "odd-spelling-leap-second": {"events": [rec_a, signed_raw({"created_at": "2026-06-30T23:59:60Z"})]},
            "odd-spelling-year-zero": {"events": [rec_a, signed_raw({"created_at": "0000-01-01T00:00:00Z"})]},
            "junk-public-key-null": {
                "events": [rec_a, signed_raw({"signer": {**cite["signer"], "public_key_b64": None}})]
            },
            "junk-artifact-url-without-host": {
                "events": [
                    rec_a,
                    signed_raw(
                        {
                            "event_type": "replication_record",
                            "payload": {
                                "replication_type": "replication",
                                "outcome": "failed",
                                "artifact_url": "https:///x",
                            },
                        }
                    ),
                ]
            },
            "junk-blank-author-name": {
                "events": [rec_a, signed_raw({"event_type": "author_attestation", "payload": {"author_name": " \t"}})]
            },
            "ots-unknown-op": {
                "events": [
                    rec_a,
                    signed_raw(
                        anchor_payload(  # magic, version, sha256 op, digest, then op 0x42
                            base64.b64encode(good_proof[: len(_ots.MAGIC) + 1 + 1 + 32] + b"\x42").decode()
                        )
                    ),
                ]
            },
            "ots-trailing-byte": {
                "events": [rec_a, signed_raw(anchor_payload(base64.b64encode(good_proof + b"\x00").decode()))]
            },
            "ots-non-canonical-base64": {
                "events": [rec_a, signed_raw(anchor_payload(base64.b64encode(good_proof).decode().rstrip("=")))]
            },
            "pith-record-receipt-key-id-a-number": {
                "events": [
                    garbled(
                        pith_created(),
                        payload={
                            **pith_created()["payload"],
                            "receipt": {**pith_created()["payload"]["receipt"], "key_id": 5},
                        },
                    )
                ],
                "registry_keys": reg,
            },
            "every-kind-folded": {"events": [rec_a, rec_b, cite, author, anchor, store, repl, snap1]},
            "revocation-by-the-signer-takes-effect": {"events": [rec_a, rec_b, cite, revoke_cite]},
            "revocation-arriving-before-its-target": {"events": [revoke_cite, rec_a, cite]},
            "revocation-by-another-signer-is-ineffective": {"events": [rec_a, author, foreign_revoke]},
            "equivocating-snapshots": {"events": [rec_a, snap1, snap2]},
            "equivocation-on-a-pending-record": {"events": [pend1, pend2]},
            "pending-events-wait-for-their-record": {"events": [cite, author]},
            "unknown-kind-listed-not-folded": {"events": [rec_a, unknown]},
            "garbled-copy-wrong-event-id-then-valid": {
                "events": [rec_a, garbled(cite, event_id="sha256:" + "ab" * 32), cite]
            },
            "garbled-copy-missing-event-id": {"events": [rec_a, garbled(cite, event_id=_DROP), cite]},
            "garbled-copy-null-signature": {"events": [rec_a, garbled(cite, signature_b64=None)]},
            "garbled-copy-extra-field": {"events": [rec_a, garbled(cite, relayed_by="mallory"), cite]},
            "junk-missing-event-version": {"events": [rec_a, garbled(cite, event_version=_DROP)]},
            "junk-newer-event-version": {"events": [rec_a, garbled(cite, event_version="pithledger-event-v9")]},
            "junk-unsigned-pith-snapshot": {
                "events": [
                    rec_a,
                    {
                        **garbled(pith_created(), event_type="graph_snapshot", target="graph"),
                        "payload": {"graph_snapshot": {"v": 9}},
                    },
                ]
            },
            "junk-self-signed-without-public-key": {
                "events": [
                    rec_a,
                    signed_raw({"signer": {k2: v for k2, v in cite["signer"].items() if k2 != "public_key_b64"}}),
                ]
            },
            "junk-blank-signer-id": {"events": [rec_a, signed_raw({"signer": {**cite["signer"], "signer_id": " \t"}})]},
            "odd-spelling-arabic-indic-year": {"events": [rec_a, signed_raw({"created_at": "٢٠٢٦-06-01T00:00:00Z"})]},
            "odd-spelling-fullwidth-time": {
                "events": [rec_a, signed_raw({"created_at": "２０２６-０６-０１T００:００:００Z"})]
            },
            "odd-spelling-trailing-newline": {"events": [rec_a, signed_raw({"created_at": t(2) + "\n"})]},
            "odd-spelling-orcid-digits": {
                "events": [
                    rec_a,
                    signed_raw(
                        {
                            "event_type": "author_attestation",
                            "payload": {"author_name": "J", "orcid": "٠٠٠٠-0002-1825-0097"},
                        }
                    ),
                ]
            },
            "anchor-height-overflow": {
                "events": [
                    rec_a,
                    signed_raw(
                        {
                            "event_type": "timestamp_anchor",
                            "payload": {
                                "ots_proof_b64": base64.b64encode(
                                    _ots.build(bytes.fromhex(A.canonical_sha256), [], [big])
                                ).decode()
                            },
                        }
                    ),
                ]
            },
            "fabricated-record-beside-the-real-one": {"events": [rec_a, fake]},
            "fabricated-record-revoked": {
                "events": [
                    rec_a,
                    fake,
                    ev(
                        "revocation",
                        fake["subject_pith_number"],
                        {"revoked_event_id": fake["event_id"]},
                        MALLORY,
                        t(11),
                    ),
                ]
            },
            "pith-record-with-receipt": {
                "events": [pith_created()],
                "registry_keys": {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)},
            },
            "pith-record-copies-differing-in-unsigned-fields": {
                "events": [
                    pith_created(),
                    pith_created(created_at="1970-01-01T00:00:00Z", event_id="sha256:" + "00" * 32),
                ],
                "registry_keys": {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)},
            },
            "pith-record-without-receipt": {
                "events": [
                    garbled(pith_created(), payload={"canonical_record": REC_A, "canonical_sha256": A.canonical_sha256})
                ],
                "registry_keys": {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)},
            },
            "pith-record-with-unreadable-receipt": {
                "events": [
                    garbled(
                        pith_created(),
                        payload={
                            "canonical_record": REC_A,
                            "canonical_sha256": A.canonical_sha256,
                            "receipt": {"kind": "pith_receipt"},
                        },
                    )
                ],
                "registry_keys": {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)},
            },
            "pith-record-wrong-fingerprint": {
                "events": [
                    garbled(pith_created(), signer={**pith_created()["signer"], "public_key_fingerprint": "00" * 16})
                ],
                "registry_keys": {"pith-v1-2026-05": keys.b64encode(STAND_IN.public_key)},
            },
        }
        | anchor_cases()
        | spec_gap_cases()
    )


def build(name: str, case: dict[str, Any]) -> dict[str, Any]:
    registry = case.get("registry_keys")
    chain = case.get("bitcoin_chain")
    saved = dict(keys.PITH_REGISTRY_KEYS)
    try:
        if chain:
            bitcoin.CONSENSUS_CHAIN = {"regtest": bitcoin.REGTEST}[chain]
        if registry:
            for kid, b64 in registry.items():
                keys.PITH_REGISTRY_KEYS[kid] = keys.RegistryKey(key_id=kid, public_key=keys.b64decode_strict(b64))
        verdicts = [verify_event(e) for e in case["events"]]
        states = reduce_all(Entry(e, v) for e, v in zip(case["events"], verdicts, strict=True))
    finally:
        bitcoin.CONSENSUS_CHAIN = bitcoin.MAINNET
        keys.PITH_REGISTRY_KEYS.clear()
        keys.PITH_REGISTRY_KEYS.update(saved)
    out: dict[str, Any] = {"vector": name, "merge_version": MERGE_VERSION}
    if registry:
        out["registry_keys"] = registry
    if chain:
        out["bitcoin_chain"] = chain
    out["events"] = case["events"]
    out["expected"] = {
        "verdicts": [
            {"status": v.status, "reason": v.reason, "event_id": v.event_id if v.status == "valid" else None}
            for v in verdicts
        ],
        "states": {s: canonical_bytes(d).decode() for s, d in states.items()},
    }
    return out


def main() -> None:
    for old in HERE.glob("*.json"):
        old.unlink()
    for name, case in cases().items():
        (HERE / f"{name}.json").write_bytes(
            json.dumps(build(name, case), indent=1, ensure_ascii=False).encode() + b"\n"
        )
    print(f"wrote {len(cases())} vectors to {HERE}")


if __name__ == "__main__":
    main()
