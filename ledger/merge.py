"""The pure reducer: the events of one record -> its state document. No IO, no clock, no globals.

State is a function of the SET of *valid* events (and the valid citation events of other records
that cite this one): anything else handed in is dropped first, and the rest is sorted by event_id
before anything is looked at, so arrival order, bundle boundaries, duplicates and junk cannot matter.
Every rule is written in spec/merge.md.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from . import ids
from .canonical import canonical_bytes
from .events import Verdict

MERGE_VERSION = "pithledger-merge-v2"
STATE_TYPE = "pith_open_graph_state"
STATE_VERSION = "1.0"

#: multi-valued slots: event_type -> key under ``current``
SLOTS = {
    "timestamp_anchor": "timestamp_anchors",
    "storage_attestation": "storage_attestations",
    "author_attestation": "author_attestations",
    "replication_record": "replication_records",
    "integrity_finding": "integrity_findings",
    "challenge": "challenges",
}

#: What this mirror checked for each kind of claim, beyond the signature every folded event carries: the
#: words `state --view` and the record page put beside each claim (spec/merge.md §5 says why badges say "claimed").
CHECKED = {
    "record_created": "record hash recomputed; signature checked",
    "timestamp_anchor": "proof parsed and bound to the record's digest; the Bitcoin attestation is NOT checked against the chain",
    "storage_attestation": "capture URL and time well-formed; the capture is NOT fetched",
    "author_attestation": "signature checked; the ORCID's check digit checked, not who holds it",
    "citation_signature": "signature checked",
    "replication_record": "signature checked; the artifact is NOT fetched",
    "integrity_finding": "signature checked",
    "challenge": "signature checked",
    "graph_snapshot": "signature checked; contents not interpreted",
}


class Entry(msgspec.Struct, frozen=True):
    """One event as the reducer sees it: its value as received and its (pure) verdict."""

    event: dict[str, Any]
    verdict: Verdict

    @property
    def event_id(self) -> str:
        return self.verdict.event_id


def _sort_key(e: Entry) -> tuple[str, str]:
    return (str(e.event.get("created_at", "")), e.event_id)


def _view(e: Entry) -> dict[str, Any]:
    """How a folded event appears in the state (Pith's shape, plus the trust level)."""
    return {
        "created_at": e.event["created_at"],
        "event_id": e.event_id,
        "event_type": e.event["event_type"],
        "payload": e.event["payload"],
        "signer": e.event["signer"],
        "target": e.event["target"],
        "trust": e.verdict.trust,
    }


def dedup(entries: Iterable[Entry]) -> list[Entry]:
    """The set of VALID entries, in event_id order: the only input the reducer ever sees.

    Two valid entries with one event_id are the same event (spec/events.md §2.3), so which copy is
    kept cannot matter: the reducer reads only what the id or the receipt authenticates."""
    by_id: dict[str, Entry] = {}
    for e in entries:
        if e.verdict.status == "valid":
            by_id.setdefault(e.event_id, e)
    return [by_id[k] for k in sorted(by_id)]


class Effective(msgspec.Struct):
    """Which valid events of one subject stand after revocations."""

    standing: list[Entry]
    revoked: dict[str, str]  # revoked event_id -> the revocation's event_id (lowest one that applies)
    ineffective: list[dict[str, str]]  # revocations that apply to nothing they may revoke


def effective(entries: Sequence[Entry]) -> Effective:
    """Apply revocations to deduplicated valid entries (:func:`dedup`). A revocation takes effect when the event it names is in the set, valid,
    about the same subject, signed by the same key, and is not itself a revocation. Order-free."""
    valid = {e.event_id: e for e in entries}
    revoked: dict[str, str] = {}
    ineffective: list[dict[str, str]] = []
    for e in entries:  # event_id order: the lowest applicable revocation is recorded
        if e.verdict.event_type != "revocation":
            continue
        target_id = e.verdict.facts["revokes"]
        target = valid.get(target_id)
        if target is None:
            reason = "target-not-held"  # may arrive later; the revocation then applies
        elif target.verdict.event_type == "revocation":
            reason = "revocations-are-final"
        elif target.verdict.signer_key != e.verdict.signer_key:
            reason = "not-the-signer"
        else:
            revoked.setdefault(target_id, e.event_id)
            continue
        ineffective.append({"event_id": e.event_id, "reason": reason, "revoked_event_id": target_id})
    standing = [e for e in valid.values() if e.event_id not in revoked]
    standing.sort(key=lambda e: e.event_id)
    return Effective(standing=standing, revoked=revoked, ineffective=ineffective)


def outbound_citations(entries: Sequence[Entry]) -> list[Entry]:
    """The citations a record's own events make that stand (what other records see as inbound)."""
    return _latest_citations(effective(dedup(entries)).standing)[0]


def _latest_citations(standing: Sequence[Entry]) -> tuple[list[Entry], list[dict[str, Any]]]:
    """One relation per (signer, cited record): the latest created_at wins; ties are equivocations."""
    groups: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    for e in standing:
        if e.verdict.event_type == "citation_signature":
            groups[(e.verdict.signer_key, e.verdict.facts["cited"])].append(e)
    chosen: list[Entry] = []
    equivocations: list[dict[str, Any]] = []
    for (signer, cited), group in sorted(groups.items()):
        if len(group) == 1:  # the common case: nothing to pick, no tie
            chosen.append(group[0])
            continue
        chosen.append(_pick_latest(group))
        equivocations += _ties("citation", signer, group, cited)
    return chosen, equivocations


def _pick_latest(group: Sequence[Entry]) -> Entry:
    """Latest created_at; among equal times, the lowest event_id."""
    latest = max(e.event["created_at"] for e in group)
    return min((e for e in group if e.event["created_at"] == latest), key=lambda e: e.event_id)


def _ties(slot: str, signer: str, group: Sequence[Entry], detail: str = "") -> list[dict[str, Any]]:
    by_time: dict[str, list[str]] = defaultdict(list)
    for e in group:
        by_time[e.event["created_at"]].append(e.event_id)
    out = []
    for created_at, event_ids in sorted(by_time.items()):
        if len(event_ids) > 1:
            item = {"created_at": created_at, "event_ids": sorted(event_ids), "signer": signer, "slot": slot}
            if detail:
                item["cited_pith_number"] = detail
            out.append(item)
    return out


def reduce(pith_number: str, entries: Iterable[Entry], inbound: Iterable[Entry] = ()) -> dict[str, Any]:
    """The state document of ``pith_number`` from its events and the standing citations of it."""
    events = dedup(entries)
    eff = effective(events)

    records = [e for e in eff.standing if e.verdict.event_type == "record_created"]
    record = records[0].event["payload"]["canonical_record"] if records else None
    current: dict[str, Any] = {}
    pending: list[str] = []

    snapshots: dict[str, list[Entry]] = defaultdict(list)
    for e in eff.standing:
        if e.verdict.event_type == "graph_snapshot":
            snapshots[e.verdict.signer_key].append(e)
    cites, equivocations = _latest_citations(eff.standing)
    for signer, group in sorted(snapshots.items()):
        equivocations += _ties("graph_snapshot", signer, group)
    equivocations.sort(key=lambda q: (q["slot"], q["signer"], q.get("cited_pith_number", ""), q["created_at"]))

    if record is None:
        pending = [e.event_id for e in eff.standing]
    else:
        digest = records[0].verdict.facts["canonical_sha256"]
        rec = record["source"]
        suffix = ids.suffix_of_pith_number(pith_number)
        current["canonical_record"] = record
        current["canonical_sha256"] = digest
        # The alias time is the record's own submitted_at: authenticated by its hash, the same on every
        # mirror, and not movable by anyone re-signing the record with another created_at.
        when = record["metadata"]["submitted_at"]
        current["source_aliases"] = [
            {"alias_kind": k, "alias_value": v, "created_at": when}
            for k, v in ids.aliases(rec["id"], rec["version"], suffix).items()
        ]
        current["record_receipts"] = sorted({e.verdict.facts["receipt_key"] for e in records if e.verdict.facts["receipt_key"]})
        current["record_signers"] = sorted({e.verdict.signer_key for e in records})
        current["graph_snapshots"] = sorted(
            (_view(_pick_latest(group)) for group in snapshots.values()), key=lambda v: (v["created_at"], v["event_id"])
        )
        for kind, slot in SLOTS.items():
            chosen = [e for e in eff.standing if e.verdict.event_type == kind]
            if kind == "timestamp_anchor":  # the full digest must be the record's, not only its suffix
                chosen = [e for e in chosen if e.verdict.facts["digest"] == digest]
            current[slot] = [_view(e) | _extra(e) for e in sorted(chosen, key=_sort_key)]
        current["citations"] = [_view(e) for e in sorted(cites, key=_sort_key)]
        inbound_views = [_view(e) | {"citing_pith_number": e.verdict.subject} for e in dedup(inbound)]
        current["inbound_citations"] = sorted(inbound_views, key=lambda v: (v["created_at"], v["event_id"]))
        current["revocations"] = [
            {"event_id": rid, "revoked_event_id": target} for target, rid in sorted(eff.revoked.items(), key=lambda kv: kv[1])
        ]
        current["verification_status"], current["badges"] = _status(current)

    state: dict[str, Any] = {
        "state_type": STATE_TYPE,
        "state_version": STATE_VERSION,
        "pith_number": pith_number,
        "merge_version": MERGE_VERSION,
        "record_status": "present" if record is not None else "pending",
        "event_count": len(events),
        "valid_event_count": len(events),
        "equivocation_count": len(equivocations),
        "current": current,
        "pending_event_ids": pending,
        "revoked_event_ids": sorted(eff.revoked),
        "ineffective_revocations": eff.ineffective,
        "equivocations": equivocations,
        "unknown_kinds": [
            {"event_id": e.event_id, "event_type": e.verdict.event_type} for e in events if e.verdict.facts.get("unknown_kind")
        ],
    }
    state["state_sha256"] = hashlib.sha256(canonical_bytes(state)).hexdigest()
    return state


def _extra(e: Entry) -> dict[str, Any]:
    f = e.verdict.facts
    if e.verdict.event_type == "timestamp_anchor":
        return {"anchor_state": "bitcoin" if f["bitcoin_heights"] else "pending",
                "bitcoin_heights": f["bitcoin_heights"], "pending_calendars": f["pending_calendars"]}
    if e.verdict.event_type == "author_attestation":
        return {"strength": f["strength"]}
    return {}


def _status(current: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    authors = current["author_attestations"]
    anchors = current["timestamp_anchors"]
    strong = sum(a["strength"] == "strong" for a in authors)
    status = {
        "attestation_state": "computed",
        "author_attested": bool(authors),
        "citation_signatures": len(current["citations"]),
        "content_addressed": True,
        "externally_anchored": bool(anchors),
        "formal_links_present": any(
            r["payload"]["replication_type"] == "formal_bridge" and r["payload"]["outcome"] == "succeeded"
            for r in current["replication_records"]
        ),
        "graph_snapshot": bool(current["graph_snapshots"]),
        "pith_receipt": bool(current["record_receipts"]),
        "references_resolved": bool(current["citations"]),
        "replication_records": len(current["replication_records"]),
        "storage_verified": bool(current["storage_attestations"]),
        "strong_author_claims": strong,
        "weak_author_claims": len(authors) - strong,
    }
    # Badge words say "claimed" where nothing was checked here: an OpenTimestamps proof's Bitcoin
    # attestation is not checked against the chain, a Wayback capture is not fetched, and a weak author
    # attestation is only its signer's word (spec/merge.md §5).
    if any(a["anchor_state"] == "bitcoin" for a in anchors):
        anchor = "bitcoin anchor claimed"
    else:
        anchor = "anchor pending" if anchors else "not anchored"
    badges = {
        "author": "attested (strong)" if strong else ("claimed" if authors else "not attested"),
        "references": "refs signed" if current["citations"] else "refs pending",
        "storage": "capture claimed" if current["storage_attestations"] else "not stored",
        "timestamp": anchor,
    }
    return status, badges


def reduce_all(entries: Iterable[Entry]) -> dict[str, dict[str, Any]]:
    """Every record's state from a whole set of events (the reference the ledger must agree with)."""
    by_subject: dict[str, list[Entry]] = defaultdict(list)
    for e in dedup(entries):  # valid events only: a subject with none has no state
        by_subject[e.verdict.subject].append(e)
    inbound: dict[str, list[Entry]] = defaultdict(list)
    for own in by_subject.values():
        for e in outbound_citations(own):
            inbound[e.verdict.facts["cited"]].append(e)
    return {s: reduce(s, own, inbound.get(s, [])) for s, own in sorted(by_subject.items())}
