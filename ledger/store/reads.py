"""The read side: queries of the log, states, evidence and the digest tree (the audit Source
interface), identifier resolution, and exports. Reads never write; inside ``snapshot`` they read
one LMDB snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import lmdb

from pithledger.audit import Pair, inner_pair
from pithledger.errors import LedgerError, NotFound
from pithledger.merge import Entry
from pithledger.records.bundle import served_pith_record_event, write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import is_pithledger_envelope
from pithledger.store.entries import EvidenceEntry, LogEntry, Usage, _entry_decoder, _evidence_decoder, _usage_decoder
from pithledger.store.env import _Environment, _event_key, _json_decoder, _release_mapped_pages, _u64
from pithledger.store.lookup import _Lookup
from pithledger.store.tuning import StoreTuning
from pithledger.store.views import _pair_decoder, _Views

#: export_parts: at most this many bytes of events in one exported bundle (documents stay far below
#: the 64 MiB a reader accepts, whatever a record holds).


class _Reads:
    """Answering queries from one ledger handle: a part over its core, lookup and views parts."""

    def __init__(self, core: _Environment, lookup: _Lookup, views: _Views, tuning: StoreTuning) -> None:
        self._core = core
        self.db = core.db
        self.path = core.path
        self._lookup = lookup
        self._views = views
        self.tuning = tuning

    # --- the audit Source interface -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.path)

    def root(self) -> Pair:
        with self._core._begin() as txn:
            raw = txn.get(b"/", db=self.db[b"node"])
        return _pair_decoder.decode(raw) if raw is not None else inner_pair("", {})

    def children(self, prefix: str) -> dict[str, Pair]:
        with self._core._begin() as txn:
            return self._views._children(txn, prefix)

    def bucket(self, prefix: str) -> dict[str, Pair]:
        with self._core._begin() as txn:
            return self._views._bucket(txn, prefix)

    def holds(self, txn: lmdb.Transaction, event_id: str) -> bool:
        """Whether a valid event with this ledger id is held, read in ``txn``."""
        return txn.get(_event_key(event_id), db=self.db[b"ids"]) is not None

    def record_events(self, pith_number: str) -> list[str]:
        with self._core._begin() as txn:
            return sorted(e.event_id for e in self._views._entries(txn, pith_number))

    def subjects(self) -> Iterator[str]:
        with self._core._begin() as txn:
            for key in txn.cursor(db=self.db[b"state"]).iternext(values=False):
                yield bytes(key).decode()

    def log(self, since: int = 0) -> Iterator[LogEntry]:
        with self._core._begin() as txn:
            cursor = txn.cursor(db=self.db[b"log"])
            if cursor.set_range(_u64(since)):
                for _, raw in cursor.iternext():
                    yield _entry_decoder.decode(raw)

    def export(self, subject: str) -> dict[str, Any]:
        """A bundle of the record, its valid events (event_id order; Pith-envelope ones in their served
        form, :func:`~pithledger.records.bundle.served_pith_record_event`), then the unverified
        copies held as evidence about it (copy digest order: a Pith bundle keeps its Pith-signed events).
        Invalid copies are not exported: they are this mirror's evidence, not anybody's data."""
        return self.export_parts(subject, part_bytes=None)[0]

    def export_parts(self, subject: str, part_bytes: int | None = 0) -> list[dict[str, Any]]:
        """:meth:`export` cut into bundles of at most ``part_bytes`` of events each (at least one event
        a part): the first carries the record and the unknown fields, the others events only. A record
        flooded with events then still travels in documents every reader accepts (spec/storage.md §5).
        ``part_bytes``: 0 for the handle's ``tuning.part_bytes``, None for one bundle whatever its size."""
        self._lookup._pending_dbs()
        _release_mapped_pages(
            self._core
        )  # export --all and publish read every record: the file's pages past the budget
        part_bytes = self.tuning.part_bytes if part_bytes == 0 else part_bytes
        with self._core._begin() as txn:
            entries = sorted(self._views._entries(txn, subject), key=lambda e: e.verdict.event_id)
            if not entries:
                raise NotFound(f"no events for {subject} in this ledger" + self._lookup._evidence_note(txn, subject))
            unverified = [
                _json_decoder.decode(held.event)
                for _, held in self._evidence(txn, subject)
                if held.verdict.status == "unverified"
            ]
            state = self._lookup._stored_state(txn, subject)
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
            served.setdefault(
                e.event_id, e.event if is_pithledger_envelope(e.event) else served_pith_record_event(e.event)
            )
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

    def export_all(self) -> Iterator[dict[str, Any]]:
        """Every record's bundles, as :meth:`export_parts` cuts them (its valid events, then its unverified
        copies), in Pith Number order, then a bundle of the unverified copies of each record this ledger
        holds no valid event of; all read in one snapshot, one record at a time (memory does not grow with
        the ledger). A record's citations are its own events, so each event is written once, and the
        lines applied to an empty ledger give the same digest (spec/storage.md §5). Consume it in the
        thread that began it: the snapshot is that thread's."""
        self._lookup._pending_dbs()  # (opened before the snapshot's transaction begins)
        with self._core.snapshot():
            with self._core._begin() as txn:
                for key in txn.cursor(db=self.db[b"subject"]).iternext_nodup(keys=True, values=False):
                    yield from self.export_parts(bytes(key).decode())
                for key in txn.cursor(db=self.db[b"evsubj"]).iternext_nodup(keys=True, values=False):
                    subject = bytes(key).decode()
                    if txn.get(key, db=self.db[b"subject"]) is not None:
                        continue
                    copies = [
                        _json_decoder.decode(held.event)
                        for _, held in self._evidence(txn, subject)
                        if held.verdict.status == "unverified"
                    ]
                    if copies:
                        yield write_bundle(subject, copies)

    def lacking(self, event_ids: Iterable[str]) -> list[str]:
        """The ids among ``event_ids`` that this ledger holds no valid event under."""
        with self._core._begin() as txn:
            return sorted(i for i in event_ids if txn.get(_event_key(i), db=self.db[b"ids"]) is None)

    def inbound_bundles(self, subject: str) -> list[dict[str, Any]]:
        """One event bundle per record citing ``subject``, holding exactly its standing citations of it
        (citing Pith Number order): with :meth:`export`, what reproduces ``subject``'s state anywhere."""
        by_citing: dict[str, list[Entry]] = {}
        with self._core._begin() as txn:
            for e in self._views._inbound(txn, subject):
                by_citing.setdefault(e.verdict.subject, []).append(e)
        return [
            write_bundle(citing, [e.event for e in sorted(group, key=lambda e: e.event_id)])
            for citing, group in sorted(by_citing.items())
        ]

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
        with self._core._begin() as txn:
            return self._evidence(txn, subject)

    def evidence_subjects(self) -> Iterator[tuple[str, Usage]]:
        with self._core._begin() as txn:
            for key, raw in txn.cursor(db=self.db[b"evsize"]).iternext():
                yield bytes(key).decode(), _usage_decoder.decode(raw)

    def evidence_usage(self) -> Usage:
        with self._core._begin() as txn:
            raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        return _usage_decoder.decode(raw) if raw is not None else Usage()

    def counts(self) -> dict[str, int]:
        """Events in the log, records with a derived state, records whose derivation is pending."""
        dbs = self._lookup._pending_dbs()
        with self._core._begin() as txn:
            return {
                "events": txn.stat(self.db[b"log"])["entries"],
                "records": txn.stat(self.db[b"state"])["entries"],
                "pending": sum(txn.stat(db)["entries"] for db in dbs),
            }
