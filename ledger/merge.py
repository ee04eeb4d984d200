"""The pure reducer: the events of one record -> its state document. No IO, no clock, no globals.

State is a function of the SET of *valid* events (and the valid citation events of other records
that cite this one): anything else handed in is dropped first, and the rest is sorted by event_id
before anything is looked at, so arrival order, bundle boundaries, duplicates and junk cannot matter.
Every rule is written in spec/merge.md.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any, NamedTuple

import msgspec

from pithledger.audit import Pair, event_leaf, leaves_pair
from pithledger.layout import MERGE_VERSION as MERGE_VERSION  # re-exported: where it is defined, ledger/layout.py
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import Verdict

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
    "timestamp_anchor": "proof read as the OpenTimestamps reference reads it and bound to the record's digest; "
    'its Bitcoin block is checked only against headers the event carries (anchor_state "bitcoin"), '
    'else NOT checked against the chain ("claimed")',
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
        current["record_receipts"] = sorted(
            {e.verdict.facts["receipt_key"] for e in records if e.verdict.facts["receipt_key"]}
        )
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
            {"event_id": rid, "revoked_event_id": target}
            for target, rid in sorted(eff.revoked.items(), key=lambda kv: kv[1])
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
            {"event_id": e.event_id, "event_type": e.verdict.event_type}
            for e in events
            if e.verdict.facts.get("unknown_kind")
        ],
    }
    state["state_sha256"] = hashlib.sha256(canonical_bytes(state)).hexdigest()
    return state


def _extra(e: Entry) -> dict[str, Any]:
    f = e.verdict.facts
    if e.verdict.event_type == "timestamp_anchor":
        return {
            "anchor_state": _anchor_state(f),
            "bitcoin_block": f["bitcoin_block"],
            "bitcoin_heights": f["bitcoin_heights"],
            "pending_calendars": f["pending_calendars"],
        }
    if e.verdict.event_type == "author_attestation":
        return {"strength": f["strength"]}
    return {}


def _anchor_state(f: dict[str, Any]) -> str:
    """ "bitcoin" only when the carried headers checked (spec/events.md §3.1.3); "claimed" for a Bitcoin attestation
    nothing here checked; "pending" for the rest."""
    return "bitcoin" if f["bitcoin_block"] is not None else "claimed" if f["bitcoin_heights"] else "pending"


def _status(current: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    return _status_of(
        _Counts(
            authors=len(current["author_attestations"]),
            strong=sum(a["strength"] == "strong" for a in current["author_attestations"]),
            anchors=len(current["timestamp_anchors"]),
            bitcoin=sum(a["anchor_state"] == "bitcoin" for a in current["timestamp_anchors"]),
            claimed=sum(a["anchor_state"] == "claimed" for a in current["timestamp_anchors"]),
            citations=len(current["citations"]),
            formal=sum(
                r["payload"]["replication_type"] == "formal_bridge" and r["payload"]["outcome"] == "succeeded"
                for r in current["replication_records"]
            ),
            snapshots=len(current["graph_snapshots"]),
            receipts=len(current["record_receipts"]),
            replications=len(current["replication_records"]),
            storage=len(current["storage_attestations"]),
        )
    )


class _Counts(NamedTuple):
    """What verification_status and badges read of ``current`` (so a fold can give them without views)."""

    authors: int
    strong: int
    anchors: int
    bitcoin: int  # anchors whose Bitcoin attestation checked against the headers they carry
    claimed: int  # anchors claiming a Bitcoin height nothing here checked
    citations: int
    formal: int
    snapshots: int
    receipts: int
    replications: int
    storage: int


def _status_of(c: _Counts) -> tuple[dict[str, Any], dict[str, str]]:
    status = {
        "attestation_state": "computed",
        "author_attested": bool(c.authors),
        "citation_signatures": c.citations,
        "content_addressed": True,
        "externally_anchored": bool(c.bitcoin),
        "formal_links_present": bool(c.formal),
        "graph_snapshot": bool(c.snapshots),
        "pith_receipt": bool(c.receipts),
        "references_resolved": bool(c.citations),
        "replication_records": c.replications,
        "storage_verified": bool(c.storage),
        "strong_author_claims": c.strong,
        "weak_author_claims": c.authors - c.strong,
    }
    # Badge words say "claimed" where nothing was checked here: a Bitcoin attestation without the headers
    # that show its block's work, a Wayback capture (not fetched), a weak author attestation (only its
    # signer's word) (spec/merge.md §5).
    if c.bitcoin:
        anchor = "anchored in bitcoin"
    elif c.claimed:
        anchor = "bitcoin anchor claimed"
    else:
        anchor = "anchor pending" if c.anchors else "not anchored"
    badges = {
        "author": "attested (strong)" if c.strong else ("claimed" if c.authors else "not attested"),
        "references": "refs signed" if c.citations else "refs pending",
        "storage": "capture claimed" if c.storage else "not stored",
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


# --- incremental derivation (spec/merge.md §10) ---------------------------------------------------------
#
# A present record's state is a few lists of views sorted by (created_at, event_id), a few values only a
# record_created or an effective revocation can change, and what is computed from the lists. A fold keeps,
# beside the stored state bytes, a compact description of them (:class:`Fold`: not consensus, never read
# by anything but the next fold) and splices the new events' views into the lists. Whatever could reorder
# or undo what is already folded makes it say "fall back" (None), and the caller derives in full.

FOLD_VERSION = 2  # 2: an anchor's flag tells checked (2) from claimed (1)
#: the keys of ``current`` that are lists of views, kept item by item
FOLD_LISTS = (
    "author_attestations",
    "challenges",
    "citations",
    "graph_snapshots",
    "inbound_citations",
    "integrity_findings",
    "replication_records",
    "storage_attestations",
    "timestamp_anchors",
)
#: the keys of ``current`` that only a fallback changes (a record_created or an effective revocation)
_STATIC = ("canonical_record", "canonical_sha256", "record_receipts", "record_signers", "revocations", "source_aliases")
#: single-valued slots: event_type -> (slot name in equivocations, list key)
_SINGLE = {"citation_signature": ("citation", "citations"), "graph_snapshot": ("graph_snapshot", "graph_snapshots")}
_CURRENT_AT = len(b'{"current":')  # "current" sorts first among the state's keys


class Fold(msgspec.Struct):
    """What folding new events into a present record's stored state needs beside the state bytes.

    Outside consensus: it only locates and classifies what the state already holds. ``lists``: per key of
    FOLD_LISTS, (created_at, event_id, flag, length of the view's canonical bytes) of each view in order
    (flag: a strong author attestation, a succeeded formal_bridge replication; an anchor's: 2 checked, 1 claimed);
    ``starts``: where each list's ``[`` is in the state bytes; ``members``: every standing event of each
    single-valued slot ("slot\\0signer\\0cited"), as (created_at, event_id). Encoded as a map, so a
    reader may decode only the fields it needs (:class:`FoldCitations`)."""

    version: int
    pith_number: str  # the record it describes
    size: int  # length of the state bytes described
    sha_at: int  # where their state_sha256 (hex) is
    sha: str
    digest: str  # the record's canonical_sha256 (anchors are bound to it)
    receipts: int
    ids: list[str]  # every own valid event id, sorted
    leaves: bytes  # audit.event_leaf of each, in that order: the digest leaf's input (spec/audit.md)
    starts: dict[str, int]
    lists: dict[str, list[tuple[str, str, int, int]]]
    members: dict[str, list[tuple[str, str]]]
    static: dict[str, bytes]  # canonical bytes of the _STATIC keys of current
    revoked: bytes  # canonical bytes of revoked_event_ids
    ineffective: list[tuple[str, str, str]]  # (event_id, reason, revoked_event_id), event_id order
    unknown: list[tuple[str, str]]  # (event_id, event_type), event_id order

    def pair(self) -> Pair:
        """The record's digest leaf (audit.record_pair of its ids and state), from the kept leaf hashes."""
        return leaves_pair(self.leaves, self.sha)


_Meta = tuple[str, str, int, int]  # (created_at, event_id, flag, length of the canonical view bytes)
_Item = tuple[str, str, int, bytes]  # (created_at, event_id, flag, canonical view bytes)
_List = tuple[bytes, list[_Meta]]  # a list's canonical bytes and what Fold keeps of its views


class _Work(msgspec.Struct):
    digest: str
    receipts: int
    ids: list[str]
    leaves: bytes
    lists: dict[str, _List]
    members: dict[str, list[tuple[str, str]]]
    static: dict[str, bytes]
    revoked: bytes
    ineffective: list[tuple[str, str, str]]
    unknown: list[tuple[str, str]]


def _flag(e: Entry) -> int:
    f, kind = e.verdict.facts, e.verdict.event_type
    if kind == "author_attestation":
        return int(f["strength"] == "strong")
    if kind == "timestamp_anchor":  # 2: checked against carried headers, 1: a Bitcoin height claimed, 0: pending
        return 2 if f["bitcoin_block"] is not None else int(bool(f["bitcoin_heights"]))
    if kind == "replication_record":
        p = e.event["payload"]
        return int(p["replication_type"] == "formal_bridge" and p["outcome"] == "succeeded")
    return 0


def _item(e: Entry, view: dict[str, Any]) -> _Item:
    return (e.event["created_at"], e.event_id, _flag(e), canonical_bytes(view))


def _inbound_item(e: Entry) -> _Item:
    return _item(e, _view(e) | {"citing_pith_number": e.verdict.subject})


def _slot_key(e: Entry) -> str | None:
    single = _SINGLE.get(e.verdict.event_type)
    if single is None:
        return None
    cited = e.verdict.facts["cited"] if e.verdict.event_type == "citation_signature" else ""
    return f"{single[0]}\0{e.verdict.signer_key}\0{cited}"


def _chosen(members: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """:func:`_pick_latest` on (created_at, event_id) pairs."""
    latest = max(m[0] for m in members)
    return min(m for m in members if m[0] == latest)


def _as_list(items: list[_Item]) -> _List:
    items.sort()  # (created_at, event_id) is unique: the order of §4, compared in C
    return b"[" + b",".join(item[3] for item in items) + b"]", [(a, b, c, len(v)) for a, b, c, v in items]


def fold_all(pith_number: str, entries: Iterable[Entry], inbound: Iterable[Entry] = ()) -> tuple[bytes, Fold] | None:
    """The canonical bytes of ``reduce(pith_number, entries, inbound)`` and their :class:`Fold`; None for a
    pending record (it is derived in full until its record_created arrives)."""
    events = dedup(entries)
    eff = effective(events)
    records = [e for e in eff.standing if e.verdict.event_type == "record_created"]
    if not records:
        return None
    record = records[0].event["payload"]["canonical_record"]
    digest = records[0].verdict.facts["canonical_sha256"]
    rec = record["source"]
    when = record["metadata"]["submitted_at"]
    receipts = sorted({e.verdict.facts["receipt_key"] for e in records if e.verdict.facts["receipt_key"]})
    static = {
        "canonical_record": canonical_bytes(record),
        "canonical_sha256": canonical_bytes(digest),
        "record_receipts": canonical_bytes(receipts),
        "record_signers": canonical_bytes(sorted({e.verdict.signer_key for e in records})),
        "revocations": canonical_bytes(
            [
                {"event_id": rid, "revoked_event_id": target}
                for target, rid in sorted(eff.revoked.items(), key=lambda kv: kv[1])
            ]
        ),
        "source_aliases": canonical_bytes(
            [
                {"alias_kind": k, "alias_value": v, "created_at": when}
                for k, v in ids.aliases(rec["id"], rec["version"], ids.suffix_of_pith_number(pith_number)).items()
            ]
        ),
    }
    items: dict[str, list[_Item]] = {key: [] for key in FOLD_LISTS}
    members: dict[str, list[tuple[str, str]]] = defaultdict(list)
    best: dict[str, Entry] = {}
    for e in eff.standing:
        kind = e.verdict.event_type
        key = _slot_key(e)
        if key is not None:
            members[key].append((e.event["created_at"], e.event_id))
            b = best.get(key)
            if b is None or _pick_latest([b, e]) is e:
                best[key] = e
        elif kind in SLOTS and (kind != "timestamp_anchor" or e.verdict.facts["digest"] == digest):
            items[SLOTS[kind]].append(_item(e, _view(e) | _extra(e)))
    for key, e in best.items():
        items[_SINGLE[e.verdict.event_type][1]].append(_item(e, _view(e)))
    items["inbound_citations"] = [_inbound_item(e) for e in dedup(inbound)]
    event_ids = [e.event_id for e in events]
    work = _Work(
        digest=digest,
        receipts=len(receipts),
        ids=event_ids,
        leaves=b"".join(map(event_leaf, event_ids)),
        lists={key: _as_list(v) for key, v in items.items()},
        members=dict(members),
        static=static,
        revoked=canonical_bytes(sorted(eff.revoked)),
        ineffective=[(r["event_id"], r["reason"], r["revoked_event_id"]) for r in eff.ineffective],
        unknown=[(e.event_id, e.verdict.event_type) for e in events if e.verdict.facts.get("unknown_kind")],
    )
    return _render(pith_number, work)


def _splice(data: bytes, start: int, metas: list[_Meta], added: list[_Item], drop: set[str]) -> _List | None:
    """A stored list (its views at ``start`` in ``data``, described by ``metas``) with ``added`` views
    inserted in order and the views of ``drop`` removed. Runs of kept views are copied as they are, so the
    cost is in the views added and dropped, not in the list's length. None if ``data`` does not hold it."""
    ends = list(accumulate((m[3] + 1 for m in metas), initial=start + 1))  # where each view starts, and the end
    close = ends[-1] - 1 if metas else ends[-1]
    if data[start : start + 1] != b"[" or data[close : close + 1] != b"]":
        return None
    ops: list[tuple[int, int, _Item | None]] = [(bisect_left(metas, item[:2]), 1, item) for item in sorted(added)]
    if drop:
        ops += [(i, 0, None) for i, m in enumerate(metas) if m[1] in drop]
    ops.sort(key=lambda op: (op[0], op[1]))
    chunks: list[bytes] = []
    out: list[_Meta] = []
    at = 0

    def keep(upto: int) -> None:
        if upto > at:
            chunks.append(data[ends[at] : ends[upto] - 1])
            out.extend(metas[at:upto])

    for index, kind, item in ops:
        keep(index)
        at = max(at, index)
        if item is None:
            at = index + 1
        else:
            chunks.append(item[3])
            out.append((item[0], item[1], item[2], len(item[3])))
    keep(len(metas))
    return b"[" + b",".join(chunks) + b"]", out


def describes(stored: Fold, pith_number: str, state: bytes) -> bool:
    """Whether ``stored`` is the Fold of this record's ``state`` (else a fold falls back): its version,
    its record, the state's length and its state_sha256 where the Fold says it is."""
    return (
        stored.version == FOLD_VERSION
        and stored.pith_number == pith_number
        and len(state) == stored.size
        and state[stored.sha_at : stored.sha_at + len(stored.sha)] == stored.sha.encode()
    )


def fold(
    pith_number: str,
    state: bytes,
    stored: Fold,
    new: Iterable[Entry],
    inbound_added: Iterable[Entry] = (),
    inbound_removed: Iterable[str] = (),
) -> tuple[bytes, Fold] | None:
    """Fold a present record's new own events, and the changes of its inbound citations, into its stored
    state: the canonical bytes of the state over all its valid events and the new inbound set (exactly what
    :func:`reduce` gives), and their :class:`Fold`. None ("fall back": derive in full) where an arrival can
    undo or reorder what is folded (spec/merge.md §10), or where ``state`` is not the state ``stored``
    describes. ``new`` may hold junk and events already folded: only valid new ids count."""
    if not describes(stored, pith_number, state):
        return None
    held = set(stored.ids)
    waiting = {target for _, reason, target in stored.ineffective if reason == "target-not-held"}
    fresh = [e for e in dedup(new) if e.event_id not in held]
    fresh_ids = {e.event_id for e in fresh}
    added: dict[str, list[_Item]] = defaultdict(list)
    members = dict(stored.members)
    touched: dict[str, Entry] = {}  # fresh events of single-valued slots, by id
    ineffective = list(stored.ineffective)
    unknown = list(stored.unknown)
    for e in fresh:
        kind = e.verdict.event_type
        if e.event_id in waiting or kind == "record_created":
            return None  # a held revocation now applies / who vouches for the record changes
        if kind == "revocation":
            target = e.verdict.facts["revokes"]
            if target in held or target in fresh_ids:
                return None  # it may undo a folded event (or be final, or not the signer's: the full rules say)
            ineffective.append((e.event_id, "target-not-held", target))
        elif e.verdict.facts.get("unknown_kind"):
            unknown.append((e.event_id, kind))
        elif (key := _slot_key(e)) is not None:
            members[key] = [*members.get(key, []), (e.event["created_at"], e.event_id)]
            touched[e.event_id] = e
        elif kind in SLOTS and (kind != "timestamp_anchor" or e.verdict.facts["digest"] == stored.digest):
            added[SLOTS[kind]].append(_item(e, _view(e) | _extra(e)))
    dropped: dict[str, set[str]] = defaultdict(set)
    _repick(stored, members, touched, added, dropped)
    gone = set(inbound_removed)
    have_in = {m[1] for m in stored.lists["inbound_citations"]} - gone
    for e in dedup(inbound_added):
        if e.event_id not in have_in:
            added["inbound_citations"].append(_inbound_item(e))
            have_in.add(e.event_id)
    if gone:
        dropped["inbound_citations"] |= gone
    lists = _spliced_lists(state, stored, added, dropped)
    if lists is None:
        return None
    event_ids, leaves = _merged_ids(stored, fresh_ids)
    ineffective.sort()
    unknown.sort()
    work = _Work(
        digest=stored.digest,
        receipts=stored.receipts,
        ids=event_ids,
        leaves=leaves,
        lists=lists,
        members=members,
        static=stored.static,
        revoked=stored.revoked,
        ineffective=ineffective,
        unknown=unknown,
    )
    return _render(pith_number, work)


def _repick(
    stored: Fold,
    members: dict[str, list[tuple[str, str]]],
    touched: dict[str, Entry],
    added: dict[str, list[_Item]],
    dropped: dict[str, set[str]],
) -> None:
    """:func:`fold`'s single-valued slots that fresh events joined: where the slot's pick changed, the new pick's
    view is added to its list and the old pick's dropped (into ``added`` and ``dropped``)."""
    for key in {_slot_key(e) for e in touched.values()}:
        assert key is not None
        old = stored.members.get(key)
        now = _chosen(members[key])
        if old and _chosen(old) == now:
            continue
        e = touched[now[1]]  # a changed pick is a fresh event: nothing folded can overtake the old one
        lst = _SINGLE[e.verdict.event_type][1]
        if old:
            dropped[lst].add(_chosen(old)[1])
        added[lst].append(_item(e, _view(e)))


def _spliced_lists(
    state: bytes, stored: Fold, added: dict[str, list[_Item]], dropped: dict[str, set[str]]
) -> dict[str, _List] | None:
    """:func:`fold`'s lists: each changed one spliced, each other one cut out of ``state`` as it is; None where a
    splice falls back."""
    lists: dict[str, _List] = {}
    for key in FOLD_LISTS:
        metas, start = stored.lists[key], stored.starts[key]
        if key in added or dropped.get(key):
            spliced = _splice(state, start, metas, added.get(key, []), dropped.get(key, set()))
            if spliced is None:
                return None
            lists[key] = spliced
        else:
            lists[key] = (state[start : start + sum(m[3] for m in metas) + max(len(metas) - 1, 0) + 2], metas)
    return lists


def _merged_ids(stored: Fold, fresh_ids: set[str]) -> tuple[list[str], bytes]:
    """:func:`fold`'s id list and its leaf hashes, with the fresh ones inserted in id order."""
    at, event_ids, leaves = 0, [], []
    for eid in sorted(fresh_ids):
        i = bisect_left(stored.ids, eid)
        event_ids += stored.ids[at:i]
        leaves.append(stored.leaves[32 * at : 32 * i])
        event_ids.append(eid)
        leaves.append(event_leaf(eid))
        at = i
    event_ids += stored.ids[at:]
    leaves.append(stored.leaves[32 * at :])
    return event_ids, b"".join(leaves)


# --- inbound citations only (spec/storage.md §3.5) ---------------------------------------------------------
#
# A record's standing inbound citations are read by :func:`reduce` into one place: ``current.inbound_citations``
# of a present record, the views of those citations sorted by (created_at, event_id). Nothing else in the state
# reads them (verification_status and badges read the record's own lists; a pending record ignores them), so
# when only they changed, the state is the stored one with that list re-made and state_sha256 recomputed.


class _ViewKey(msgspec.Struct):
    """What orders a view in a list (§4): the rest of it is copied as stored, not decoded."""

    created_at: str
    event_id: str


_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_list = msgspec.json.Decoder(list[msgspec.Raw])
_view_key = msgspec.json.Decoder(_ViewKey)


def _joined(pieces: dict[str, Any]) -> bytes:
    """:func:`_obj`'s bytes (values: bytes or msgspec.Raw, joined without copying them first), for keys
    that need no escaping (any other key gives other bytes than the canonical ones: the state is then
    refused by the checks of :func:`with_inbound` and derived in full)."""
    parts: list[Any] = []
    for key in sorted(pieces):
        parts += (b',"', key.encode(), b'":', pieces[key])
    parts[0] = b'{"'
    parts.append(b"}")
    return b"".join(parts)


def with_inbound(
    pith_number: str, state: bytes, standing: set[str], new: Callable[[set[str]], Iterable[Entry]]
) -> tuple[bytes, str, str] | None:
    """``reduce(pith_number, entries, inbound)`` from the record's stored state ``state`` (what ``reduce`` gave
    for the same ``entries`` and other inbound citations) when only its standing inbound citations changed,
    to the set of event ids ``standing``; ``new(ids)``: the entries of those ids (the citations the stored
    state lacks). Returns (the state's canonical bytes, its state_sha256, the stored state's state_sha256);
    the stored bytes themselves for a pending record (reduce ignores inbound citations there). None where
    ``state`` is not a canonical state document of this record and merge version whose state_sha256 is its
    own (derive in full then)."""
    try:
        top: dict[str, Any] = _raw_object.decode(state)
        if set(top) != _TOP_KEYS or bytes(top["pith_number"]) != canonical_bytes(pith_number):
            return None
        if bytes(top["merge_version"]) != canonical_bytes(MERGE_VERSION):  # derived by other rules: in full
            return None
        old_sha = _json.decode(top.pop("state_sha256"))
        body = _joined(top)
        # the stored bytes are the canonical ones (sorted keys, no space, no key twice) and hash as they say
        if not isinstance(old_sha, str) or hashlib.sha256(body).hexdigest() != old_sha:
            return None
        if _joined(top | {"state_sha256": canonical_bytes(old_sha)}) != state:
            return None
        status = bytes(top["record_status"])
        if status == b'"pending"':
            return state, old_sha, old_sha
        if status != b'"present"':
            return None
        current: dict[str, Any] = _raw_object.decode(top["current"])
        if "inbound_citations" not in current or _joined(current) != bytes(top["current"]):
            return None
        views = _raw_list.decode(current["inbound_citations"])
        if b"[" + b",".join(views) + b"]" != bytes(current["inbound_citations"]):
            return None
        items: list[tuple[str, str, Any]] = []  # (created_at, event_id, view bytes: msgspec.Raw or bytes)
        for raw in views:
            key = _view_key.decode(raw)
            if key.event_id in standing:  # still standing: the view is the same bytes (a function of the event)
                items.append((key.created_at, key.event_id, raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    have = {item[1] for item in items}
    items += [
        (e.event["created_at"], e.event_id, canonical_bytes(_view(e) | {"citing_pith_number": e.verdict.subject}))
        for e in dedup(new(standing - have))
        if e.event_id in standing and e.event_id not in have
    ]
    if len(items) != len(standing) or len({item[1] for item in items}) != len(items):
        return None  # a standing citation whose entry was not given: the list would not be reduce's
    items.sort(key=lambda item: (item[0], item[1]))  # reduce's order; (created_at, event_id) is unique
    current["inbound_citations"] = b"[" + b",".join(item[2] for item in items) + b"]"
    top["current"] = _joined(current)
    sha = hashlib.sha256(_joined(top)).hexdigest()
    top["state_sha256"] = b'"' + sha.encode() + b'"'
    return _joined(top), sha, old_sha


_json = msgspec.json.Decoder()
#: the keys of every state document (:func:`reduce`)
_TOP_KEYS = {
    "current",
    "equivocation_count",
    "equivocations",
    "event_count",
    "ineffective_revocations",
    "merge_version",
    "pending_event_ids",
    "pith_number",
    "record_status",
    "revoked_event_ids",
    "state_sha256",
    "state_type",
    "state_version",
    "unknown_kinds",
    "valid_event_count",
}


class FoldCitations(msgspec.Struct):
    """The fields of a :class:`Fold` that :func:`fold_outbound` reads (decoding the views' part is skipped)."""

    pith_number: str
    ids: list[str]
    members: dict[str, list[tuple[str, str]]]
    ineffective: list[tuple[str, str, str]]


def fold_outbound(pith_number: str, stored: Fold | FoldCitations, new: Iterable[Entry]) -> list[tuple[str, str]] | None:
    """(cited, event_id) of the record's standing outbound citations once ``new`` is folded, sorted (what
    :func:`outbound_citations` gives over all its events), from its Fold; None where a revocation could
    apply (a new one, or a new event a held one waits for), or where ``stored`` is another record's."""
    if stored.pith_number != pith_number:
        return None
    held = set(stored.ids)
    waiting = {target for _, reason, target in stored.ineffective if reason == "target-not-held"}
    members = dict(stored.members)
    for e in dedup(new):
        if e.event_id in held:
            continue
        if e.event_id in waiting or e.verdict.event_type == "revocation":
            return None
        if e.verdict.event_type == "citation_signature" and (key := _slot_key(e)) is not None:
            members[key] = [*members.get(key, []), (e.event["created_at"], e.event_id)]
    return sorted((key.rsplit("\0", 1)[1], _chosen(m)[1]) for key, m in members.items() if key.startswith("citation\0"))


def _obj(pieces: dict[str, bytes]) -> tuple[list[bytes], dict[str, int]]:
    """The canonical bytes of an object whose values are already canonical bytes (as parts to join), and
    where each value starts. Keys are ASCII, so code-point order is the encoder's order."""
    parts, at, pos = [b"{"], {}, 1
    for i, key in enumerate(sorted(pieces)):
        head = (b"," if i else b"") + canonical_bytes(key) + b":"
        parts.append(head)
        pos += len(head)
        at[key] = pos
        parts.append(pieces[key])
        pos += len(pieces[key])
    parts.append(b"}")
    return parts, at


def _render(pith_number: str, w: _Work) -> tuple[bytes, Fold]:
    equivocations: list[dict[str, Any]] = []
    for key, members in w.members.items():
        if len(members) < 2:
            continue
        slot, signer, cited = key.split("\0")
        by_time: dict[str, list[str]] = defaultdict(list)
        for created_at, event_id in members:
            by_time[created_at].append(event_id)
        for created_at, event_ids in by_time.items():
            if len(event_ids) > 1:
                q = {"created_at": created_at, "event_ids": sorted(event_ids), "signer": signer, "slot": slot}
                if cited:
                    q["cited_pith_number"] = cited
                equivocations.append(q)
    equivocations.sort(key=lambda q: (q["slot"], q["signer"], q.get("cited_pith_number", ""), q["created_at"]))
    metas = {k: m for k, (_, m) in w.lists.items()}

    def marked(k: str) -> int:
        return sum(m[2] for m in metas[k])

    status, badges = _status_of(
        _Counts(
            authors=len(metas["author_attestations"]),
            strong=marked("author_attestations"),
            anchors=len(metas["timestamp_anchors"]),
            bitcoin=sum(m[2] == 2 for m in metas["timestamp_anchors"]),
            claimed=sum(m[2] == 1 for m in metas["timestamp_anchors"]),
            citations=len(metas["citations"]),
            formal=marked("replication_records"),
            snapshots=len(metas["graph_snapshots"]),
            receipts=w.receipts,
            replications=len(metas["replication_records"]),
            storage=len(metas["storage_attestations"]),
        )
    )
    pieces = dict(w.static) | {k: data for k, (data, _) in w.lists.items()}
    pieces["verification_status"] = canonical_bytes(status)
    pieces["badges"] = canonical_bytes(badges)
    current_parts, current_at = _obj(pieces)
    n = canonical_bytes(len(w.ids))
    top = {
        "current": b"".join(current_parts),
        "equivocation_count": canonical_bytes(len(equivocations)),
        "equivocations": canonical_bytes(equivocations),
        "event_count": n,
        "ineffective_revocations": canonical_bytes(
            [{"event_id": a, "reason": b, "revoked_event_id": c} for a, b, c in w.ineffective]
        ),
        "merge_version": canonical_bytes(MERGE_VERSION),
        "pending_event_ids": b"[]",
        "pith_number": canonical_bytes(pith_number),
        "record_status": b'"present"',
        "revoked_event_ids": w.revoked,
        "state_type": canonical_bytes(STATE_TYPE),
        "state_version": canonical_bytes(STATE_VERSION),
        "unknown_kinds": canonical_bytes([{"event_id": a, "event_type": b} for a, b in w.unknown]),
        "valid_event_count": n,
    }
    h = hashlib.sha256()
    for part in _obj(top)[0]:  # the document without state_sha256, hashed without joining it
        h.update(part)
    sha = h.hexdigest()
    top["state_sha256"] = canonical_bytes(sha)
    parts, at = _obj(top)
    data = b"".join(parts)
    return data, Fold(
        version=FOLD_VERSION,
        pith_number=pith_number,
        size=len(data),
        sha_at=at["state_sha256"] + 1,
        sha=sha,
        digest=w.digest,
        receipts=w.receipts,
        ids=w.ids,
        leaves=w.leaves,
        starts={k: _CURRENT_AT + current_at[k] for k in FOLD_LISTS},
        lists=metas,
        members=w.members,
        static=w.static,
        revoked=w.revoked,
        ineffective=w.ineffective,
        unknown=w.unknown,
    )
