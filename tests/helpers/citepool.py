"""Signed events about citations, for the inbound update's differential properties (spec/storage.md §3.5).

Records A (big: 230-odd own events, so that its inbound citations carry it across the fold threshold of
256 and back), B and C (small, present: C's record_created is revoked by its signer, so C goes pending
while its citations stand), FAKE (a citer whose record_created arrives in the stream) and ORPHAN (a
pending record, cited and citing). Citations of A from four records by four signers (16 relations, each
possibly standing), a later relation superseding one, an equivocating pair (one signer, one cited record,
one created_at), revocations that withdraw citations (one of the superseding relation, so the superseded
one stands again), one by the wrong signer, and garbled copies of citations (junk). With every event held,
A has 10 standing inbound citations and falls just short of the threshold; in between it may cross it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from helpers.adversary import garble
from helpers.eventpool import ALICE, BOB, EVE, FAKE, FAKE_REC, IDS, MALLORY, ORPHAN, RECS, P, collecting, t
from pithledger.records.model import record_ids
from pithledger.store import Ledger
from pithledger.store.views import _FOLD_FROM

A, B, C = P
KEYS = [ALICE, BOB, EVE, MALLORY]
#: A's own events: with its largest possible inbound set it crosses the threshold, with the final one it does not
A_OWN = _FOLD_FROM - 14


@lru_cache(maxsize=1)
def cite_pool() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(A's record_created and filler events, every other valid event, junk)."""
    ev: list[dict[str, Any]] = []
    sign = collecting(ev)

    for i, rec in enumerate(RECS):
        sign(
            "record_created", P[i], {"canonical_record": rec, "canonical_sha256": IDS[i].canonical_sha256}, ALICE, t(1)
        )
    own_cites = [
        sign("citation_signature", A, {"cited_pith_number": B, "relation": "cites"}, ALICE, t(2)),
        sign("citation_signature", A, {"cited_pith_number": ORPHAN, "relation": "cites"}, BOB, t(2)),
        sign("citation_signature", A, {"cited_pith_number": C, "relation": "extends"}, EVE, t(2)),
    ]
    for n in range(A_OWN - 1 - len(own_cites)):
        sign(
            "integrity_finding",
            A,
            {"finding_type": "reference_check", "severity": "info", "description": f"filler {n}"},
            KEYS[n % 4],
            t(3, n % 24),
        )
    big = ev[:1] + ev[3:]  # A's own: record_created, its citations, the fillers
    ev[:] = ev[1:3]  # B's and C's record_created
    sign(
        "record_created",
        FAKE,
        {"canonical_record": FAKE_REC, "canonical_sha256": record_ids(FAKE_REC).canonical_sha256},
        MALLORY,
        t(1),
    )
    of_a: dict[tuple[str, int], dict[str, Any]] = {}
    for citer in (B, C, ORPHAN, FAKE):
        for k, key in enumerate(KEYS):
            # created_at spread so that views sort by time, not only by id
            of_a[(citer, k)] = sign(
                "citation_signature",
                citer,
                {"cited_pith_number": A, "relation": "cites"},
                key,
                t(4, (5 * k + len(citer)) % 24),
            )
    later = sign("citation_signature", B, {"cited_pith_number": A, "relation": "extends"}, BOB, t(5))
    sign("revocation", B, {"revoked_event_id": later["event_id"]}, BOB, t(6))  # the superseded relation stands again
    tie = of_a[(C, 2)]
    sign(
        "citation_signature", C, {"cited_pith_number": A, "relation": "refutes"}, EVE, tie["created_at"]
    )  # equivocation
    for citer, k in ((B, 0), (C, 0), (ORPHAN, 0), (FAKE, 0), (C, 1), (ORPHAN, 1)):
        sign("revocation", citer, {"revoked_event_id": of_a[(citer, k)]["event_id"]}, KEYS[k], t(7, k))
    sign("revocation", C, {"revoked_event_id": of_a[(C, 3)]["event_id"]}, EVE, t(7, 5))  # not the signer: no effect
    # citations of the others, pending ORPHAN among them
    sign("citation_signature", B, {"cited_pith_number": C, "relation": "cites"}, EVE, t(8))
    sign("citation_signature", C, {"cited_pith_number": ORPHAN, "relation": "cites"}, EVE, t(8))
    sign("citation_signature", FAKE, {"cited_pith_number": B, "relation": "supports"}, MALLORY, t(8))
    sign("author_attestation", ORPHAN, {"author_name": "Nobody"}, EVE, t(8))
    # C goes pending: its signer revokes its record_created (its citations still stand)
    c_created = next(e for e in ev if e["event_type"] == "record_created" and e["subject_pith_number"] == C)
    sign("revocation", C, {"revoked_event_id": c_created["event_id"]}, ALICE, t(9))
    junk = [
        garble(of_a[(B, 1)], "malleated-signature-s-plus-l"),
        garble(later, "re-dated"),
        garble(tie, "null-signature"),
    ]
    return big, ev, junk


def dump(ledger: Ledger) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every database of ``ledger``: its (key, value) pairs in key order (dupsort values in theirs)."""
    out: dict[bytes, list[tuple[bytes, bytes]]] = {}
    with ledger.env.begin() as txn:
        for name, db in sorted(ledger.db.items()):
            cursor = txn.cursor(db=db)
            out[name] = [(bytes(k), bytes(v)) for k, v in cursor.iternext()]
    return out
