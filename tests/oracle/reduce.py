"""The deterministic merge `pithledger-merge-v3` (spec/merge.md §1–§7), over a whole set at once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from . import ids
from .canon import canon
from .verify import KINDS, Verdict

MERGE_VERSION = "pithledger-merge-v3"


@dataclass
class Held:
    event: dict[str, Any]
    verdict: Verdict

    @property
    def id(self) -> str:
        assert self.verdict.event_id is not None
        return self.verdict.event_id

    @property
    def kind(self) -> str:
        return str(self.event["event_type"])

    @property
    def at(self) -> str:
        return str(self.event["created_at"])

    @property
    def signer(self) -> str:
        return self.verdict.signer_key


def view(h: Held) -> dict[str, Any]:
    """§4: the event's own fields (signer and payload whole) plus its trust; our envelope only."""
    e = h.event
    return {
        "created_at": e["created_at"],
        "event_id": h.id,
        "event_type": e["event_type"],
        "payload": e["payload"],
        "signer": e["signer"],
        "target": e["target"],
        "trust": h.verdict.trust,
    }


def by_time(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(views, key=lambda v: (v["created_at"], v["event_id"]))


def latest(members: list[Held]) -> Held:
    """A single-valued slot's pick: the greatest created_at, among equal times the lowest event_id."""
    best = members[0]
    for m in sorted(members, key=lambda m: m.id):
        if m.at > best.at or (m.at == best.at and m.id < best.id):
            best = m
    return best


@dataclass
class Revoked:
    standing: list[Held]  # event_id order
    revoked: list[str]
    effective: list[dict[str, str]]
    ineffective: list[dict[str, str]]


def revoke(own: list[Held]) -> Revoked:
    """§2: before anything else; reasons tested in the spec's order; one effective entry per target."""
    held = {h.id: h for h in own}
    revoked: dict[str, str] = {}  # target -> the lowest-id revocation taking effect
    ineffective = []
    for r in own:  # event_id order, so the first effective revocation of a target is the lowest id
        if r.kind != "revocation":
            continue
        target = r.event["payload"]["revoked_event_id"]
        if target not in held:
            reason = "target-not-held"
        elif held[target].kind == "revocation":
            reason = "revocations-are-final"
        elif held[target].signer != r.signer:
            reason = "not-the-signer"
        else:
            revoked.setdefault(target, r.id)
            continue
        ineffective.append({"event_id": r.id, "reason": reason, "revoked_event_id": target})
    effective = sorted(
        ({"event_id": r, "revoked_event_id": t} for t, r in revoked.items()), key=lambda x: x["event_id"]
    )
    standing = [h for h in own if h.id not in revoked]
    return Revoked(standing, sorted(revoked), effective, ineffective)


def slots(standing: list[Held]) -> dict[tuple[str, str, str], list[Held]]:
    """§6's single-valued slots: (slot, signer key, cited record or "")."""
    out: dict[tuple[str, str, str], list[Held]] = {}
    for h in standing:
        if h.kind == "graph_snapshot":
            out.setdefault(("graph_snapshot", h.signer, ""), []).append(h)
        elif h.kind == "citation_signature":
            out.setdefault(("citation", h.signer, h.event["payload"]["cited_pith_number"]), []).append(h)
    return out


def equivocations(standing: list[Held]) -> list[dict[str, Any]]:
    found = []
    for (slot, signer, cited), members in slots(standing).items():
        times: dict[str, list[str]] = {}
        for m in members:
            times.setdefault(m.at, []).append(m.id)
        for at, group in times.items():
            if len(group) >= 2:
                entry: dict[str, Any] = {"created_at": at, "event_ids": sorted(group), "signer": signer, "slot": slot}
                if slot == "citation":
                    entry["cited_pith_number"] = cited
                found.append(entry)
    return sorted(found, key=lambda q: (q["slot"], q["signer"], q.get("cited_pith_number", ""), q["created_at"]))


def citations(standing: list[Held]) -> list[Held]:
    return [latest(m) for (slot, _, _), m in slots(standing).items() if slot == "citation"]


def current(
    p: str, standing: list[Held], inbound: list[dict[str, Any]], effective: list[dict[str, str]]
) -> dict[str, Any]:
    made = [h for h in standing if h.kind == "record_created"]
    record = made[0].event["payload"]["canonical_record"]
    sha = ids.digest(record).hex()
    of = {k: [h for h in standing if h.kind == k] for k in KINDS}
    ours = {k: [h for h in v if h.verdict.ours] for k, v in of.items()}
    anchors = []
    for h in ours["timestamp_anchor"]:
        f = h.verdict.facts
        if f["digest"] != sha:
            continue  # only its suffix is the record's: valid, held, shown nowhere
        state = "bitcoin" if f["bitcoin_block"] is not None else "claimed" if f["bitcoin_heights"] else "pending"
        anchors.append(
            view(h)
            | {
                "anchor_state": state,
                "bitcoin_block": f["bitcoin_block"],
                "bitcoin_heights": f["bitcoin_heights"],
                "pending_calendars": f["pending_calendars"],
            }
        )
    authors = [view(h) | {"strength": h.verdict.facts["strength"]} for h in ours["author_attestation"]]
    snapshots = [view(latest(m)) for (slot, _, _), m in slots(standing).items() if slot == "graph_snapshot"]
    cites = [view(h) for h in citations(standing)]
    replications = [view(h) for h in ours["replication_record"]]
    storage = [view(h) for h in ours["storage_attestation"]]
    receipts = sorted({h.verdict.facts["receipt_key"] for h in made if h.verdict.facts["receipt_key"] is not None})
    strong = sum(1 for a in authors if a["strength"] == "strong")
    states = {a["anchor_state"] for a in anchors}
    status = {
        "attestation_state": "computed",
        "author_attested": bool(authors),
        "citation_signatures": len(cites),
        "content_addressed": True,
        "externally_anchored": "bitcoin" in states,
        "formal_links_present": any(
            v["payload"]["replication_type"] == "formal_bridge" and v["payload"]["outcome"] == "succeeded"
            for v in replications
        ),
        "graph_snapshot": bool(snapshots),
        "pith_receipt": bool(receipts),
        "references_resolved": bool(cites),
        "replication_records": len(replications),
        "storage_verified": bool(storage),
        "strong_author_claims": strong,
        "weak_author_claims": len(authors) - strong,
    }
    badges = {
        "author": "attested (strong)" if strong else "claimed" if authors else "not attested",
        "references": "refs signed" if cites else "refs pending",
        "storage": "capture claimed" if storage else "not stored",
        "timestamp": "anchored in bitcoin"
        if "bitcoin" in states
        else "bitcoin anchor claimed"
        if "claimed" in states
        else "anchor pending"
        if anchors
        else "not anchored",
    }
    return {
        "author_attestations": by_time(authors),
        "badges": badges,
        "canonical_record": record,
        "canonical_sha256": sha,
        "challenges": by_time([view(h) for h in ours["challenge"]]),
        "citations": by_time(cites),
        "graph_snapshots": by_time(snapshots),
        "inbound_citations": by_time(inbound),
        "integrity_findings": by_time([view(h) for h in ours["integrity_finding"]]),
        "record_receipts": receipts,
        "record_signers": sorted({h.signer for h in made}),
        "replication_records": by_time(replications),
        "revocations": effective,
        "source_aliases": ids.aliases(record),
        "storage_attestations": by_time(storage),
        "timestamp_anchors": by_time(anchors),
        "verification_status": status,
    }


def reduce_all(pairs: list[tuple[Any, Verdict]]) -> dict[str, bytes]:
    """§1: the valid set (one copy per id, the first received), then one state per subject with an own event."""
    valid: dict[str, Held] = {}
    for event, verdict in pairs:
        if verdict.status == "valid" and verdict.event_id not in valid:
            h = Held(event, verdict)
            valid[h.id] = h
    subjects: dict[str, list[Held]] = {}
    for h in sorted(valid.values(), key=lambda h: h.id):
        subjects.setdefault(h.event["subject_pith_number"], []).append(h)
    revs = {p: revoke(own) for p, own in subjects.items()}
    inbound: dict[str, list[dict[str, Any]]] = {}
    for q, r in revs.items():
        for c in citations(r.standing):
            inbound.setdefault(c.event["payload"]["cited_pith_number"], []).append(view(c) | {"citing_pith_number": q})
    out = {}
    for p, own in subjects.items():
        r = revs[p]
        present = any(h.kind == "record_created" for h in r.standing)
        equivs = equivocations(r.standing)
        doc: dict[str, Any] = {
            "current": current(p, r.standing, inbound.get(p, []), r.effective) if present else {},
            "equivocation_count": len(equivs),
            "equivocations": equivs,
            "event_count": len(own),
            "ineffective_revocations": r.ineffective,
            "merge_version": MERGE_VERSION,
            "pending_event_ids": [] if present else [h.id for h in r.standing],
            "pith_number": p,
            "record_status": "present" if present else "pending",
            "revoked_event_ids": r.revoked,
            "state_type": "pith_open_graph_state",
            "state_version": "1.0",
            "unknown_kinds": [{"event_id": h.id, "event_type": h.kind} for h in own if h.kind not in KINDS],
            "valid_event_count": len(own),
        }
        doc["state_sha256"] = hashlib.sha256(canon(doc)).hexdigest()
        out[p] = canon(doc)
    return out
