"""The read side: queries of the log, states, evidence and the digest tree (the audit Source
interface), identifier resolution, and exports. Reads never write; inside ``snapshot`` they read
one LMDB snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import lmdb
import msgspec

from .. import ids
from ..audit import Pair, inner_pair
from ..bundle import served_pith_record_event, write_bundle
from ..canonical import canonical_bytes
from ..errors import AmbiguousId, LedgerError, NotFound
from ..events import is_pithledger_envelope
from ..ids import parse_id
from ..merge import Entry, reduce
from .entries import EvidenceEntry, LogEntry, Usage, _entry_decoder, _evidence_decoder, _usage_decoder
from .env import _event_key, _json_decoder, _u64
from .pending import _PendingWork
from .views import _pair_decoder, _unpack_state


#: export_parts: at most this many bytes of events in one exported bundle (documents stay far below
#: the 64 MiB a reader accepts, whatever a record holds).
PART_BYTES = 4 * 1024 * 1024


class _Candidate(msgspec.Struct, frozen=True):
    pith_number: str
    version: int
    registry: bool  # a standing record_created carries a verifying Pith receipt
    signers: tuple[str, ...]

    def describe(self) -> str:
        trust = "Pith receipt" if self.registry else "self-signed by " + ", ".join(s[:24] + "…" for s in self.signers)
        return f"{self.pith_number} (v{self.version}, {trust})"


def _choose(text: str, cands: list[_Candidate], *, by_version: bool) -> str:
    """Pick the record an identifier names, or raise ``ambiguous-id`` listing the candidates with their trust.

    Records with a Pith receipt win over self-signed ones. Among the winners, ``by_version`` (an arXiv
    id or DOI without a version) takes the highest version, as arXiv does, provided no two records
    share it and, for self-signed records, one single key signed them all."""
    cands = sorted(set(cands), key=lambda c: c.pith_number)
    pool = [c for c in cands if c.registry] or cands
    if len(pool) == 1:
        return pool[0].pith_number
    if by_version:
        top = max(c.version for c in pool)
        at_top = [c for c in pool if c.version == top]
        one_signer = len({k for c in pool for k in c.signers}) == 1
        if len(at_top) == 1 and (pool[0].registry or one_signer):
            return at_top[0].pith_number
    listed = "; ".join(c.describe() for c in pool[:20])
    raise AmbiguousId(f"{text!r} matches {len(pool)} records: {listed}",
                      hint="name one of them by its long Pith Number; records without a Pith receipt are only claims of their signers")


class _Reads(_PendingWork):
    """Answering queries from one ledger handle."""

    # --- the audit Source interface -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.path)

    def root(self) -> Pair:
        with self._begin() as txn:
            raw = txn.get(b"/", db=self.db[b"node"])
        return _pair_decoder.decode(raw) if raw is not None else inner_pair("", {})

    def children(self, prefix: str) -> dict[str, Pair]:
        with self._begin() as txn:
            return self._children(txn, prefix)

    def bucket(self, prefix: str) -> dict[str, Pair]:
        with self._begin() as txn:
            return self._bucket(txn, prefix)

    def holds(self, txn: lmdb.Transaction, event_id: str) -> bool:
        """Whether a valid event with this ledger id is held, read in ``txn``."""
        return txn.get(_event_key(event_id), db=self.db[b"ids"]) is not None

    def record_events(self, pith_number: str) -> list[str]:
        with self._begin() as txn:
            return sorted(e.event_id for e in self._entries(txn, pith_number))

    def compute_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        """The state of ``subject`` from the log: its own entries and its indexed inbound citations."""
        return reduce(subject, self._entries(txn, subject), self._inbound(txn, subject))

    def state_bytes(self, subject: str) -> bytes:
        """The record's canonical state bytes. For a record whose derivation is pending (an apply or
        sync is running or was killed), the state is computed here from its events as held: citations
        made by other records still pending are counted once the run is finished (spec/storage.md §3.1)."""
        self._pending_dbs()
        with self._begin() as txn:
            if self.is_pending(txn, subject):
                return canonical_bytes(self.compute_state(txn, subject))
            data = txn.get(subject.encode(), db=self.db[b"state"])
            if data is None:
                raise NotFound(f"no events for {subject} in this ledger")
            return _unpack_state(data)

    def subjects(self) -> Iterator[str]:
        with self._begin() as txn:
            for key in txn.cursor(db=self.db[b"state"]).iternext(values=False):
                yield bytes(key).decode()

    def resolve(self, text: str) -> str:
        """The long Pith Number that an identifier of any form names in this ledger (spec/identifiers.md §7).

        A function of the stored states alone, so of the valid event set: a record with a verifying Pith
        receipt is always preferred to self-signed ones, and self-signed claims that disagree are listed
        (``ambiguous-id``) rather than picked from."""
        self._pending_dbs()
        q = parse_id(text)
        with self._begin() as txn:
            if q.kind == "pith_number":
                if txn.get(q.value.encode(), db=self.db[b"state"]) is None and not self.is_pending(txn, q.value):
                    raise NotFound(f"no record {q.value} in this ledger" + self._evidence_note(txn, q.value))
                return q.value
            if q.kind == "suffix":
                cands = [c for p in self._by_suffix(txn, q.suffix) if (c := self._candidate(txn, p)) is not None]
                if not cands:
                    raise NotFound(f"no record whose suffix starts with {q.suffix} in this ledger",
                                   hint="a record whose record_created event has not arrived is found by its long Pith Number only")
                return _choose(text, cands, by_version=False)
            if q.version is not None:
                cands = self._candidates(txn, f"arxiv_version:{q.value}v{q.version}".lower())
                if not cands:
                    known = self._candidates(txn, f"arxiv:{q.value}".lower())
                    versions = ", ".join(f"v{c.version} ({c.pith_number})" for c in known[:20])
                    raise NotFound(f"no record of arXiv {q.value}v{q.version} in this ledger" + (f"; it holds {versions}" if known else ""))
                return _choose(text, cands, by_version=False)
            key = f"doi:{ids.arxiv_doi(q.value)}" if q.kind == "doi" else f"arxiv:{q.value}"
            cands = self._candidates(txn, key.lower())
            if not cands:
                raise NotFound(f"no record of arXiv {q.value} in this ledger")
            return _choose(text, cands, by_version=True)

    def _candidates(self, txn: lmdb.Transaction, key: str) -> list[_Candidate]:
        cursor = txn.cursor(db=self.db[b"alias"])
        if not cursor.set_key(key.encode()):
            return []
        return [c for v in cursor.iternext_dup() if (c := self._candidate(txn, bytes(v).decode())) is not None]

    def _candidate(self, txn: lmdb.Transaction, subject: str) -> _Candidate | None:
        """The record as a lookup candidate; None when it is not present (possible only while its
        derivation is pending: the indexes are those of the last finished run, its state is current)."""
        state = self._stored_state(txn, subject)
        if state.get("record_status") != "present":
            return None
        current = state["current"]
        return _Candidate(subject, int(current["canonical_record"]["source"]["version"]), bool(current["record_receipts"]),
                          tuple(current["record_signers"]))

    def _by_suffix(self, txn: lmdb.Transaction, prefix: str) -> list[str]:
        """Present records whose suffix starts with ``prefix``. Not capped: each entry is a present record,
        which costs a record hash with that prefix, and capping would let such records hide the real one."""
        cursor = txn.cursor(db=self.db[b"suffix"])
        found: set[str] = set()
        if cursor.set_range(prefix.encode()):
            for key, value in cursor.iternext():
                if not bytes(key).startswith(prefix.encode()):
                    break
                found.add(bytes(value).decode())
        return sorted(found)

    def _evidence_note(self, txn: lmdb.Transaction, subject: str) -> str:
        raw = txn.get(subject.encode(), db=self.db[b"evsize"])
        if raw is None:
            return ""
        n = _usage_decoder.decode(raw).entries
        return f"; {n} rejected input{'s' if n != 1 else ''} about it {'are' if n != 1 else 'is'} held as evidence (`pithledger evidence {subject}`)"

    def _stored_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        if self.is_pending(txn, subject):
            return self.compute_state(txn, subject)
        raw = txn.get(subject.encode(), db=self.db[b"state"])
        if raw is None:
            raise NotFound(f"no events for {subject} in this ledger")
        state: dict[str, Any] = _json_decoder.decode(_unpack_state(raw))
        return state

    def log(self, since: int = 0) -> Iterator[LogEntry]:
        with self._begin() as txn:
            cursor = txn.cursor(db=self.db[b"log"])
            if cursor.set_range(_u64(since)):
                for _, raw in cursor.iternext():
                    yield _entry_decoder.decode(raw)

    def export(self, subject: str) -> dict[str, Any]:
        """A bundle of the record, its valid events (event_id order; Pith-envelope ones in their served
        form, :func:`~pithledger.bundle.served_pith_record_event`), then the unverified
        copies held as evidence about it (copy digest order: a Pith bundle keeps its Pith-signed events).
        Invalid copies are not exported: they are this mirror's evidence, not anybody's data."""
        return self.export_parts(subject, part_bytes=None)[0]

    def export_parts(self, subject: str, part_bytes: int | None = 0) -> list[dict[str, Any]]:
        """:meth:`export` cut into bundles of at most ``part_bytes`` of events each (at least one event
        a part): the first carries the record and the unknown fields, the others events only. A record
        flooded with events then still travels in documents every reader accepts (spec/storage.md §5).
        ``part_bytes``: 0 for :data:`PART_BYTES`, None for one bundle whatever its size."""
        self._pending_dbs()
        part_bytes = PART_BYTES if part_bytes == 0 else part_bytes
        with self._begin() as txn:
            entries = sorted(self._entries(txn, subject), key=lambda e: e.verdict.event_id)
            if not entries:
                raise NotFound(f"no events for {subject} in this ledger" + self._evidence_note(txn, subject))
            unverified = [_json_decoder.decode(held.event) for _, held in self._evidence(txn, subject)
                          if held.verdict.status == "unverified"]
            state = self._stored_state(txn, subject)
            extra: dict[str, Any] = {}
            cursor = txn.cursor(db=self.db[b"extra"])
            prefix = subject.encode() + b"\0"
            if cursor.set_range(prefix):
                for key, blob in cursor.iternext():
                    if not bytes(key).startswith(prefix):
                        break
                    for k, v in _json_decoder.decode(blob).items():
                        extra.setdefault(k, v)  # lowest-hash bundle first: deterministic
        current = state["current"]
        # A valid Pith-envelope event is served in the form its receipt authenticates, not as the first
        # copy received (the log keeps that): every mirror holding the event serves these bytes.
        served: dict[str, dict[str, Any]] = {}
        for e in entries:
            served.setdefault(e.event_id, e.event if is_pithledger_envelope(e.event) else served_pith_record_event(e.event))
        events = list(served.values()) + unverified
        chunks: list[list[dict[str, Any]]] = [[]]
        size = 0
        for event in events:
            n = len(canonical_bytes(event))
            if part_bytes is not None and chunks[-1] and size + n > part_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append(event)
            size += n
        first = write_bundle(
            subject,
            chunks[0],
            canonical_record=current.get("canonical_record"),
            aliases_created_at=current["source_aliases"][0]["created_at"] if current.get("source_aliases") else None,
            extra=extra,
        )
        return [first] + [write_bundle(subject, chunk) for chunk in chunks[1:]]

    def lacking(self, event_ids: Iterable[str]) -> list[str]:
        """The ids among ``event_ids`` that this ledger holds no valid event under."""
        with self._begin() as txn:
            return sorted(i for i in event_ids if txn.get(_event_key(i), db=self.db[b"ids"]) is None)

    def inbound_bundles(self, subject: str) -> list[dict[str, Any]]:
        """One event bundle per record citing ``subject``, holding exactly its standing citations of it
        (citing Pith Number order): with :meth:`export`, what reproduces ``subject``'s state anywhere."""
        by_citing: dict[str, list[Entry]] = {}
        with self._begin() as txn:
            for e in self._inbound(txn, subject):
                by_citing.setdefault(e.verdict.subject, []).append(e)
        return [write_bundle(citing, [e.event for e in sorted(group, key=lambda e: e.event_id)])
                for citing, group in sorted(by_citing.items())]

    # --- evidence ------------------------------------------------------------------------------------

    def _evidence(self, txn: lmdb.Transaction, subject: str) -> list[tuple[str, EvidenceEntry]]:
        out = []
        cursor = txn.cursor(db=self.db[b"evsubj"])
        if cursor.set_key(subject.encode()):
            for key in cursor.iternext_dup():
                raw = txn.get(bytes(key), db=self.db[b"evidence"])
                if raw is None:
                    raise LedgerError(f"evidence entry {bytes(key).hex()} of {subject} is missing (damaged ledger)")
                out.append((bytes(key).hex(), _evidence_decoder.decode(raw)))
        return out

    def evidence(self, subject: str) -> list[tuple[str, EvidenceEntry]]:
        """(copy sha256, entry) of every rejected input held about ``subject``, in copy digest order."""
        with self._begin() as txn:
            return self._evidence(txn, subject)

    def evidence_subjects(self) -> Iterator[tuple[str, Usage]]:
        with self._begin() as txn:
            for key, raw in txn.cursor(db=self.db[b"evsize"]).iternext():
                yield bytes(key).decode(), _usage_decoder.decode(raw)

    def evidence_usage(self) -> Usage:
        with self._begin() as txn:
            raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        return _usage_decoder.decode(raw) if raw is not None else Usage()

    def counts(self) -> dict[str, int]:
        """Events in the log, records with a derived state, records whose derivation is pending."""
        dbs = self._pending_dbs()
        with self._begin() as txn:
            return {"events": txn.stat(self.db[b"log"])["entries"], "records": txn.stat(self.db[b"state"])["entries"],
                    "pending": sum(txn.stat(db)["entries"] for db in dbs)}
