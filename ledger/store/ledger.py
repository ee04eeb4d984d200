"""The Ledger: one class holding its parts, each in its own module (see ledger/store/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Self

import lmdb

from pithledger.audit import Pair
from pithledger.errors import LedgerDamaged, NoLedger, PithledgerError
from pithledger.fanout import Fanout
from pithledger.records.bundle import Bundle
from pithledger.store.entries import BatchResult, EvidenceEntry, EvidenceLimits, LogEntry, Usage
from pithledger.store.env import DAMAGE_ERRORS, DEFAULT_MAP_SIZE, LAYOUT_VERSION, _Environment, lost_layout
from pithledger.store.fsck import _Fsck
from pithledger.store.log import Batch, _Log
from pithledger.store.lookup import _Lookup
from pithledger.store.pending import _PendingWork
from pithledger.store.reads import _Reads
from pithledger.store.translog import _Translog
from pithledger.store.tuning import StoreTuning, default_tuning
from pithledger.store.views import _Views
from pithledger.store.workers import _Workers


class Ledger:
    """A ledger directory. Open one per process; any number of processes may read while one writes.

    It holds its parts, one module each (ledger/store/__init__.py): the core (``env``: the LMDB
    environment, its tables, transactions, map growth), and over it lookup, views, workers (the fan-out),
    pending, reads, log, tlog (translog) and fsck, each given the core and the parts it calls. Its
    methods are what an embedder uses (the API, the CLI, the mirror, the server, the benches, the tests);
    each hands over to its part. Everything else is the store's own.

    Writing: ``apply_batch`` (append bundles in one transaction), ``batch`` (the same, filled bundle by
    bundle), ``finish`` (derive what deferred batches left pending), ``pending`` / ``pending_among``
    (how much, and which records, are pending).
    Records: ``state_bytes`` (a record's canonical state), ``resolve`` (an identifier of any form to its
    Pith Number), ``suffix_candidates``, ``arxiv_ids``, ``arxiv_resolutions`` (what resolving chooses
    from: publish's indexes), ``stored_state_sha256``, ``record_events``, ``subjects``, ``counts``.
    The log and exports: ``log`` (entries from a sequence number), ``holds`` / ``lacking`` (events held),
    ``export`` / ``export_parts`` / ``export_all`` (bundles of a record), ``inbound_bundles``.
    Evidence: ``evidence``, ``evidence_subjects``, ``evidence_usage``, ``repair_evidence_usage``.
    The digest tree (the audit Source interface): ``name``, ``root``, ``children``, ``bucket``.
    The transparency log: ``tlog_size``, ``tlog_root``, ``tlog_entries``, ``tlog_hashes`` (and
    ``read_hashes``, its tlog.HashReader name), ``tlog_index``.
    Checking: ``fsck``. Reading one snapshot across calls: ``snapshot``. Closing: ``close`` (or ``with``).
    Attributes: ``path``, ``layout`` (the layout it reads), ``evidence_limits``; ``env`` and ``db``, the
    LMDB environment and its tables, for the tests and tools that look at (or damage) the raw tables."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = False,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        evidence_limits: EvidenceLimits = EvidenceLimits(),  # noqa: B008 - frozen
        fanout: Fanout | None = None,
        tuning: StoreTuning | None = None,
        grow_gate: AbstractContextManager[object] | None = None,
    ) -> None:
        """``readonly``: for queries. A read-only handle never takes the writer lock, so it never waits
        for an apply in another process (LMDB gives it the last committed snapshot). ``fanout``: where
        its pure parallel work runs (ledger/fanout.py; the caller closes it); default: the running
        command's (``fanout.current()``: --workers, --scheduler), else the handle's own local workers on
        all cores, started when first needed and closed with the handle. ``tuning``: how its work is cut
        (ledger/store/tuning.py); default: :func:`~pithledger.store.tuning.tuned`'s, else StoreTuning().
        ``grow_gate``: held while the map grows (a server's reads hold it: web/actions.py)."""
        self.evidence_limits = evidence_limits
        tuning = tuning or default_tuning()
        core = self._core = _Environment(path, readonly=readonly, map_size=map_size, create=create)
        if grow_gate is not None:
            core.grow_gate = grow_gate
        self.path = core.path
        self.env = core.env
        self._workers = _Workers(fanout)
        try:
            layout = core._open_dbs(readonly=readonly)
            core.layout = layout
            self.db = core.db
            self._assemble(core, tuning)
            if not readonly:
                # the reader slots of processes that died holding one (a killed worker or reader) would keep
                # LMDB from reusing the pages of their snapshots: a writer clears them when it opens
                self.env.reader_check()
            if layout != LAYOUT_VERSION and not readonly:
                self._tlog._upgrade()
            # a reader's view of an older layout stays as it is
            core.layout = LAYOUT_VERSION if not readonly else layout
        except lmdb.NotFoundError:  # read-only, and the creating apply has not committed yet (or damage lost it)
            lost = lost_layout(self.env, self.path)
            self.env.close()
            raise lost or NoLedger(f"no complete ledger at {self.path} (yet)") from None
        except DAMAGE_ERRORS as exc:
            self.env.close()  # a table's root page damaged: opening it is where LMDB first reads it
            raise LedgerDamaged(f"the ledger at {self.path} is damaged: LMDB cannot read it ({exc})") from None
        except PithledgerError:
            self.env.close()
            raise

    def _assemble(self, core: _Environment, tuning: StoreTuning) -> None:
        """The parts, each over the core and the parts it calls (no part inherits another)."""
        fanout = self._workers.fanout
        self._views = _Views(core)
        self._lookup = _Lookup(core, self._views.compute_state)
        self._tlog = _Translog(core, tuning)
        self._pending = _PendingWork(core, self._lookup, self._views, fanout, tuning)
        self._reads = _Reads(core, self._lookup, self._views, tuning)
        self._log = _Log(core, self._pending, self._tlog, fanout, tuning, self.evidence_limits)
        self._fsck = _Fsck(core, self._lookup, self._views, self._tlog, fanout, tuning)

    @property
    def layout(self) -> int:
        """The layout this handle reads: LAYOUT_VERSION, or an older one a reader reads as it is."""
        return self._core.layout

    @property
    def opened_file(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the data.mdb this handle opened, if nothing replaced it while it opened, else
        None: whether the file at its path is still the one it reads (a server's check, web/ops.py)."""
        return self._core._opened_file

    def close(self) -> None:
        self._workers.close()
        self._core.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read this thread makes inside the block reads one LMDB snapshot (see _Environment.snapshot)."""
        with self._core.snapshot():
            yield

    # --- writing (log.py, pending.py) ----------------------------------------------------------------

    def apply_batch(self, bundles: Iterable[Bundle], *, defer: bool = False) -> BatchResult:
        """Append the new valid events of ``bundles`` and keep the rest as evidence, in one transaction (log.py)."""
        return self._log.apply_batch(bundles, defer=defer)

    def batch(self) -> Batch:
        """A batch to fill bundle by bundle and commit as one transaction (log.py)."""
        return self._log.batch()

    def finish(self, progress: Callable[[int], None] | None = None, *, steps: int | None = None) -> int:
        """Derive everything pending, in steps; returns the records derived (pending.py)."""
        return self._pending.finish(progress, steps=steps)

    def pending(self) -> int:
        """How many records have derivation pending (0 once every apply and sync has finished)."""
        return self._pending.pending()

    def pending_among(self, subjects: Iterable[str]) -> list[str]:
        """Those of ``subjects`` whose derivation is pending, in order."""
        return self._pending.pending_among(subjects)

    # --- records (lookup.py, reads.py) -----------------------------------------------------------------
    def state_bytes(self, subject: str) -> bytes:
        """The record's canonical state bytes (computed from its events while its derivation is pending)."""
        return self._lookup.state_bytes(subject)

    def resolve(self, text: str) -> str:
        """The long Pith Number an identifier of any form names in this ledger (spec/identifiers.md §7)."""
        return self._lookup.resolve(text)

    def suffix_candidates(self, prefix: str) -> list[tuple[str, bool]]:
        """(pith_number, verifying Pith receipt) of each present record whose suffix starts with ``prefix``."""
        return self._lookup.suffix_candidates(prefix)

    def arxiv_ids(self, prefix: str = "") -> list[str]:
        """The arXiv ids of present records starting with ``prefix``, sorted."""
        return self._lookup.arxiv_ids(prefix)

    def arxiv_resolutions(self, arxiv_id: str) -> dict[str, str | None]:
        """What each version of an arXiv id resolves to (publish's resolve index)."""
        return self._lookup.arxiv_resolutions(arxiv_id)

    def stored_state_sha256(self, subject: str) -> bytes | None:
        """The sha256 of the record's stored state (its digest leaf), or None."""
        return self._lookup.stored_state_sha256(subject)

    def record_events(self, pith_number: str) -> list[str]:
        """The event ids of a record's valid events, sorted."""
        return self._reads.record_events(pith_number)

    def subjects(self) -> Iterator[str]:
        """Every record with a stored state, in key order."""
        return self._reads.subjects()

    def counts(self) -> dict[str, int]:
        """How many events, records and evidence entries the ledger holds."""
        return self._reads.counts()

    # --- the log, exports, evidence (reads.py, fsck.py) ----------------------------------------------
    def log(self, since: int = 0) -> Iterator[LogEntry]:
        """The log's entries from sequence number ``since`` on."""
        return self._reads.log(since)

    def holds(self, txn: lmdb.Transaction, event_id: str) -> bool:
        """Whether a valid event with this ledger id is held, read in ``txn``."""
        return self._reads.holds(txn, event_id)

    def lacking(self, event_ids: Iterable[str]) -> list[str]:
        """Those of ``event_ids`` the ledger does not hold."""
        return self._reads.lacking(event_ids)

    def export(self, subject: str) -> dict[str, Any]:
        """A bundle of the record: its valid events, then the copies held as evidence about it."""
        return self._reads.export(subject)

    def export_parts(self, subject: str, part_bytes: int | None = 0) -> list[dict[str, Any]]:
        """The record's export, cut into bundles of at most ``part_bytes`` of events."""
        return self._reads.export_parts(subject, part_bytes)

    def export_all(self) -> Iterator[dict[str, Any]]:
        """Every record's export."""
        return self._reads.export_all()

    def inbound_bundles(self, subject: str) -> list[dict[str, Any]]:
        """The bundles of the standing citations naming ``subject``."""
        return self._reads.inbound_bundles(subject)

    def evidence(self, subject: str) -> list[tuple[str, EvidenceEntry]]:
        """The evidence held about ``subject``: (copy digest, entry) each."""
        return self._reads.evidence(subject)

    def evidence_subjects(self) -> Iterator[tuple[str, Usage]]:
        """Each record with evidence held about it, and its usage."""
        return self._reads.evidence_subjects()

    def evidence_usage(self) -> Usage:
        """The evidence area's usage (entries, bytes)."""
        return self._reads.evidence_usage()

    def repair_evidence_usage(self) -> list[str]:
        """Recount the evidence accounting from the entries held; returns what it corrected."""
        return self._fsck.repair_evidence_usage()

    # --- the digest tree: the audit Source interface (reads.py) ----------------------------------------
    @property
    def name(self) -> str:
        """The ledger's path, as the audit Source interface names a source."""
        return self._reads.name

    def root(self) -> Pair:
        """The digest tree's root (the audit Source interface)."""
        return self._reads.root()

    def children(self, prefix: str) -> dict[str, Pair]:
        """The digest tree's children of ``prefix``."""
        return self._reads.children(prefix)

    def bucket(self, prefix: str) -> dict[str, Pair]:
        """The records of the bucket ``prefix``: their digest leaves."""
        return self._reads.bucket(prefix)

    # --- the transparency log (translog.py) ------------------------------------------------------------
    def tlog_size(self) -> int:
        """Entries in the transparency log (the log's size)."""
        return self._tlog.tlog_size()

    def tlog_root(self, size: int | None = None) -> bytes:
        """The root of the transparency log at ``size`` (default: its current size)."""
        return self._tlog.tlog_root(size)

    def tlog_entries(self, start: int, end: int) -> list[bytes]:
        """The transparency log's entry bytes of indices [start, end)."""
        return self._tlog.tlog_entries(start, end)

    def tlog_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        """The complete-subtree hashes at ``level`` for indices [start, end) (tlog.HashReader)."""
        return self._tlog.tlog_hashes(level, start, end)

    read_hashes = tlog_hashes

    def tlog_index(self, event_id: str) -> int | None:
        """The tlog index of the event held under ``event_id``, or None."""
        return self._tlog.tlog_index(event_id)

    # --- checking (fsck.py) ---------------------------------------------------------------------------
    def fsck(self, *, reverify: bool = False) -> list[str]:
        """Re-verify every logged event and recompute every state; every mismatch found (fsck.py)."""
        return self._fsck.fsck(reverify=reverify)


def open_settled(path: Path, *, tuning: StoreTuning | None = None) -> Ledger:
    """Open a ledger read-only for a reader that needs its derived views whole (digest tree, fsck,
    publish, audit): if derivation is pending (an apply or sync was killed, or is running), finish it
    first, as a writer, which waits for a running one (spec/storage.md §3.1); a ledger of an older layout
    is upgraded first the same way (spec/storage.md §2.2). ``tuning``: the handles' (Ledger)."""
    ledger = Ledger(path, readonly=True, tuning=tuning)
    if not ledger.pending() and ledger.layout == LAYOUT_VERSION:
        return ledger
    ledger.close()
    with Ledger(path, tuning=tuning) as writer:
        writer.finish()
    return Ledger(path, readonly=True, tuning=tuning)
