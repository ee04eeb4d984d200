"""A fixed pool of really signed events exercising every merge rule, for property tests.

Built once per test session (Ed25519 signing is the slow part); Hypothesis then draws subsets,
orders, duplications and bundle splits of it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from helpers.common import PITH_RECORDS
from pithledger.merge import Entry
from pithledger.records import ots as _ots
from pithledger.records.bundle import Bundle
from pithledger.records.events import compute_event_id, make_event, verify_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids


def key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"pool key {name}".encode()).digest())


ALICE, BOB, EVE, MALLORY = key("alice"), key("bob"), key("eve"), key("mallory")
RECS = [r["canonical_record"] for r in PITH_RECORDS[:3]]
IDS = [record_ids(r) for r in RECS]
P = [i.pith_number for i in IDS]
# A subject whose record never arrives: its events wait as pending.
ORPHAN = "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"
# A fabricated record: record 0's arXiv id with version 9999, self-signed by mallory (a squatting attempt).
FAKE_REC = {**RECS[0], "source": {**RECS[0]["source"], "version": 9999}}
FAKE = record_ids(FAKE_REC).pith_number


def t(day: int, hour: int = 0) -> str:
    return f"2026-06-{day:02d}T{hour:02d}:00:00Z"


Sign = Callable[[str, str, dict[str, Any], LocalKey, str], dict[str, Any]]


def collecting(ev: list[dict[str, Any]]) -> Sign:
    """sign(kind, subject, payload, key, created_at): an event made and appended to ``ev`` (the pools' signer)."""

    def sign(kind: str, subject: str, payload: dict[str, Any], k: LocalKey, when: str) -> dict[str, Any]:
        e = make_event(kind, subject, payload, k, created_at=when)
        ev.append(e)
        return e

    return sign


@lru_cache(maxsize=1)
def pool() -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    sign = collecting(ev)
    for i, rec in enumerate(RECS):
        sign(
            "record_created",
            P[i],
            {"canonical_record": rec, "canonical_sha256": IDS[i].canonical_sha256},
            ALICE,
            t(1, i),
        )
    # a second witness of record 0, later: the alias time is the earliest
    sign("record_created", P[0], {"canonical_record": RECS[0], "canonical_sha256": IDS[0].canonical_sha256}, BOB, t(2))
    # citations 0 -> 1 by bob, superseded by a later relation; 2 -> 0 by alice; a revoked one 1 -> 0
    sign("citation_signature", P[0], {"cited_pith_number": P[1], "relation": "cites"}, BOB, t(3))
    sign("citation_signature", P[0], {"cited_pith_number": P[1], "relation": "extends"}, BOB, t(4))
    sign("citation_signature", P[2], {"cited_pith_number": P[0], "relation": "supports"}, ALICE, t(3))
    wrong = sign("citation_signature", P[1], {"cited_pith_number": P[0], "relation": "refutes"}, EVE, t(3))
    sign("revocation", P[1], {"revoked_event_id": wrong["event_id"]}, EVE, t(5))
    # a revocation by someone else: no effect
    author = sign("author_attestation", P[0], {"author_name": "J. Carberry", "orcid": "0000-0002-1825-0097"}, BOB, t(3))
    sign("revocation", P[0], {"revoked_event_id": author["event_id"]}, MALLORY, t(6))
    # a revocation of an event that is not in the pool (yet): pending, no effect
    sign("revocation", P[0], {"revoked_event_id": "sha256:" + "ee" * 32}, BOB, t(6))
    # equivocation: mallory signs two different snapshots for the same slot and time
    sign("graph_snapshot", P[0], {"graph_snapshot": {"claims": {"count": 1}}}, MALLORY, t(7))
    sign("graph_snapshot", P[0], {"graph_snapshot": {"claims": {"count": 2}}}, MALLORY, t(7))
    sign("graph_snapshot", P[0], {"graph_snapshot": {"claims": {"count": 0}}}, ALICE, t(6))
    sign("graph_snapshot", P[0], {"graph_snapshot": {"claims": {"count": 5}}}, ALICE, t(8))
    # multi-valued slots
    proof = _ots.build(bytes.fromhex(IDS[0].canonical_sha256), ["https://a.example"], [900000])
    sign("timestamp_anchor", P[0], {"ots_proof_b64": base64.b64encode(proof).decode()}, EVE, t(9))
    sign(
        "storage_attestation",
        P[1],
        {
            "capture_url": "https://web.archive.org/web/20260601000000/https://arxiv.org/abs/x",
            "captured_at": "2026-06-01T00:00:00Z",
        },
        EVE,
        t(9),
    )
    sign(
        "replication_record",
        P[1],
        {"replication_type": "formal_bridge", "outcome": "succeeded", "artifact_url": "https://example.org/lean"},
        ALICE,
        t(10),
    )
    sign("author_attestation", P[2], {"author_name": "Same Time"}, ALICE, t(10))
    sign("author_attestation", P[2], {"author_name": "Same Time 2"}, BOB, t(10))
    # a fabricated record claiming record 0's arXiv id (resolution must not pick it silently)
    sign(
        "record_created",
        FAKE,
        {"canonical_record": FAKE_REC, "canonical_sha256": record_ids(FAKE_REC).canonical_sha256},
        MALLORY,
        t(10, 5),
    )
    # pending: events about a record that never arrives
    sign("author_attestation", ORPHAN, {"author_name": "Nobody"}, EVE, t(11))
    # an unknown kind, signed
    unknown = {k: v for k, v in ev[-1].items() if k not in ("event_id", "signature_b64")}
    unknown.update(event_type="peer_review_v9", payload={"score": "high"}, subject_pith_number=P[1])
    from pithledger.records import keys as keys_
    from pithledger.records.events import signing_message

    unknown["signature_b64"] = keys_.b64encode(EVE.sign(signing_message(unknown)))
    unknown["event_id"] = compute_event_id(unknown)
    ev.append(unknown)
    # invalid: a tampered copy of a citation (old id kept), and a forged registry record_created
    tampered = copy.deepcopy(ev[5])
    tampered["payload"]["relation"] = "refutes"
    ev.append(tampered)
    forged = copy.deepcopy(ev[0])
    forged["signer"]["signer_type"] = "pith_registry"
    ev.append(forged)
    # unverified: a Pith-envelope snapshot nobody can check
    ev.append(
        {
            "event_type": "graph_snapshot",
            "subject_pith_number": P[2],
            "target": "graph",
            "created_at": t(12),
            "signer": {
                "key_id": "pith-v1-2026-05",
                "public_key_fingerprint": "8d4b5ee74e4693bcd1df2446408b0d54",
                "signer_id": "pith.science",
                "signer_type": "pith_registry",
            },
            "payload": {"graph_snapshot": {"claims": {"count": 9}}},
            "event_id": "sha256:" + "74" * 32,
        }
    )
    return ev


@lru_cache(maxsize=1)
def verdicts() -> dict[str, Any]:
    return {json.dumps(e, sort_keys=True): verify_event(e) for e in pool()}


def entries(events: list[dict[str, Any]]) -> list[Entry]:
    v = verdicts()
    out = []
    for e in events:
        key = json.dumps(e, sort_keys=True)
        out.append(Entry(e, v[key] if key in v else verify_event(e)))  # junk made by a test: verified here
    return out


def bundles_of(events: list[dict[str, Any]]) -> list[Bundle]:
    """One bundle per run of consecutive same-subject events (the split comes from the order)."""
    out: list[Bundle] = []
    for e in events:
        if out and out[-1].pith_number == e["subject_pith_number"]:
            out[-1].events.append(e)
        else:
            out.append(Bundle(pith_number=e["subject_pith_number"], events=[e]))
    return out
