"""The append-only log and the evidence area: THE SERIAL WRITE PATH.

Everything here runs on the one writer, in one LMDB write transaction per batch (group commit: a
crash leaves the ledger exactly as before or after a batch). It is serial because it must be: the
log's sequence numbers, the dedup of a copy against what the ledger (and the batch) already hold, and
the evidence caps are decided in order, one copy after the other. A Batch hands each bundle's copies
to the workers for their signature checks as it is added (workers.py) and only orders, dedups and
commits what comes back; deriving the views of the touched records (views.py, through pending.py's
``_finish_some``) follows in the same transaction, or is left pending for ``finish``. What the log
and the evidence hold: entries.py. Rules: spec/storage.md ("The serial path": what the writer does
per event and per batch; everything it writes was computed by the workers: entries.prepare and
workers._verify_offers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

import lmdb

import pithledger.store.tlog_tables as tlog_tables
from pithledger.errors import LedgerError, LogDiverged
from pithledger.fanout import Fanout
from pithledger.files import disk_full
from pithledger.records.bundle import Bundle
from pithledger.records.canonical import check_value
from pithledger.records.events import Verdict
from pithledger.store.entries import (
    BatchResult,
    EvidenceLimits,
    Prepared,
    Rejection,
    Usage,
    _Checked,
    _checked_decoder,
    _entry_encoder,
    _evidence_decoder,
    _log_value,
    _usage_decoder,
    prepare,
)
from pithledger.store.env import _RELEASE_EVERY, _Environment, _release_mapped_pages, _u64
from pithledger.store.pending import _PendingWork
from pithledger.store.translog import _Translog
from pithledger.store.tuning import StoreTuning
from pithledger.store.workers import _verify_offers

#: Caps on the unknown top-level bundle fields kept for export (local policy, never consensus).
MAX_EXTRA_BYTES = 64 * 1024
MAX_EXTRA_PER_RECORD = 8


#: Candidates that came verified from the worker that prepared them, and those a batch handed over to be
#: verified (this process's batches: what tests read, spec/storage.md §3.2).
_precheck_stats = {"came_verified": 0, "handed_over": 0}


class BatchWithdrawn(Exception):
    """A batch's ``admit`` callback declined it once the write lock was held: nothing was written."""


def _rejection(copy: str, verdict: Verdict, kept: bool) -> Rejection:
    return Rejection(
        copy_sha256=copy,
        subject=verdict.subject,
        event_type=verdict.event_type,
        declared_event_id=verdict.event_id,
        status=verdict.status,
        reason=verdict.reason,
        message=verdict.message,
        kept=kept,
    )


def _answer_offers(
    result: BatchResult, offers: list[bytes], outcome: dict[bytes, Rejection | bool], held: dict[bytes, Verdict]
) -> None:
    """The batch's answer to each of its offers (every offer is answered, not only the first), from the
    outcome of each copy written and the stored verdicts of the ``held`` evidence offered again."""
    for copy, verdict in held.items():
        outcome[copy] = _rejection(copy.hex(), verdict, True)
    counted: set[bytes] = set()
    for copy in offers:
        done = outcome[copy]
        if isinstance(done, Rejection):
            result.rejected.append(done)
            if done.status == "invalid":
                result.invalid += 1
            else:
                result.unverified += 1
        elif done and copy not in counted:
            result.new += 1
            counted.add(copy)
        else:
            result.duplicate += 1


class _Log:
    """Appending batches: the log, its event index, the evidence area and the pending marks. A part of a
    handle over its core, appending to the transparency log (``tlog``) and finishing (``pending``) in the
    batch's transaction; its batches verify on its fan-out."""

    def __init__(
        self,
        core: _Environment,
        pending: _PendingWork,
        tlog: _Translog,
        fanout: Fanout,
        tuning: StoreTuning,
        evidence_limits: EvidenceLimits,
    ) -> None:
        self._core = core
        self.db = core.db
        self.path = core.path
        self._pending = pending
        self._tlog = tlog
        self._fanout = fanout
        self.tuning = tuning
        self.evidence_limits = evidence_limits

    # --- writing -----------------------------------------------------------------------------------

    def apply_batch(self, bundles: Iterable[Bundle], *, defer: bool = False) -> BatchResult:
        """Append the new valid events of ``bundles``, keep the rest as evidence, and recompute touched
        states, in ONE transaction.

        ``defer``: leave the derived views (citation indexes, states, lookup indexes, digest tree) of
        the touched records pending, in the same transaction, for :meth:`finish` to derive once per
        record however many batches touched it (spec/storage.md §3.1). Without it the batch also
        finishes every pending record, so the ledger is fully derived when it returns.

        Each bundle's events and record are held to the admitted value space first (what strict decoding
        refuses raises its ``DecodeError`` here, and nothing of the batch is written).
        """
        batch = self.batch()
        try:
            for bundle in bundles:
                # A Bundle built in Python never met strict decoding: hold it to the same value space (integers,
                # depth, lone surrogates), so no event is valid here that bytes could not carry to another mirror.
                for event in bundle.events:  # each event is a document of its own (64 levels deep at most)
                    check_value(event)
                if bundle.canonical_record is not None:
                    check_value(bundle.canonical_record)
                batch.add(bundle)
        except BaseException:
            batch.abandon()
            raise
        return batch.commit(defer=defer)

    def batch(self) -> Batch:
        """A batch to fill bundle by bundle and commit as one transaction (what :meth:`apply_batch`
        does at once): each bundle's events are looked up and handed to the verifying threads as it
        is added, so signature checks run while the caller reads and decodes the next bundles."""
        return Batch(self)

    def _write(
        self,
        extras: list[tuple[str, bytes]],
        candidates: dict[bytes, tuple[str, bytes]],
        checked: list[_Checked],
        offers: list[bytes],
        held: dict[bytes, Verdict],
        duplicate: int,
        defer: bool,
        admit: Callable[[lmdb.Transaction], bool] | None = None,
        expect: tuple[int, list[bytes]] | None = None,
    ) -> BatchResult:
        """THE serial path (spec/storage.md "The serial path"). ``checked`` is what the workers made of
        each candidate, in candidate order: per copy, the writer only dedups it against the ledger (a
        put with overwrite=False), gives a valid one the next sequence number and writes what was
        computed for it; per batch, the offers' tally, the unknown fields, the pending marks. ``expect``:
        (tlog size, entries) this batch must append exactly, else nothing is written (``restore-log``)."""
        result = BatchResult(duplicate=duplicate)
        touched: set[str] = set()
        citing: set[str] = set()
        outcome: dict[bytes, Rejection | bool] = {}  # copy -> True (new) | False (a duplicate) | Rejection
        log: list[tuple[bytes, bytes]] = []
        subjects: list[tuple[bytes, bytes]] = []
        tlog_entries: list[bytes] = []
        ids_db = self.db[b"ids"]
        try:
            with self._core._begin(write=True) as txn:
                if admit is not None and not admit(txn):  # the writer lock is held: last chance to withdraw
                    raise BatchWithdrawn()
                seq = int(txn.get(b"next_seq", b"0", db=self.db[b"meta"]))
                # the tlog's index is the log's seq: both count the events appended, in this transaction
                tlog = tlog_tables.Appender(txn, self._tlog._tlog_dbs(), expected_size=seq)
                put = txn.put
                for n, ((copy, (subject, data)), c) in enumerate(zip(candidates.items(), checked, strict=True), 1):
                    if n % (32 * _RELEASE_EVERY) == 0:
                        _release_mapped_pages(self._core)
                    if c.key is None:
                        assert c.verdict is not None
                        outcome[copy] = _rejection(
                            copy.hex(), c.verdict, self._keep_evidence(txn, copy, subject, len(data), c.value)
                        )
                        continue
                    key = _u64(seq)
                    if not put(c.key, key, db=ids_db, overwrite=False):
                        outcome[copy] = False  # held already: another copy of a Pith record, or another writer
                        continue
                    log.append((key, _log_value(seq, c.value)))
                    subjects.append((subject.encode(), key))
                    tlog_entries.append(c.tlog)
                    seq += 1
                    outcome[copy] = True
                    touched.add(subject)
                    if c.citing:
                        citing.add(subject)
                self._append(txn, log, subjects, tlog, tlog_entries, expect)
                _answer_offers(result, offers, outcome, held)
                for subject, blob in extras:
                    self._keep_extra(txn, subject, blob)
                txn.put(b"next_seq", str(seq).encode(), db=self.db[b"meta"])
                self._mark_pending(txn, touched, citing)
                if not defer:
                    while self._pending._finish_some(txn, None) is not None:
                        pass
                result.touched = sorted(touched)
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            # what the batch writes is about twice its log entries (its indexes, states, tlog: spec/storage.md §7.4)
            need = 2 * sum(len(value) for _, value in log) or None
            raise disk_full(exc, self.path, "the batch was not written", need=need) or LedgerError(
                f"the batch was not written: {exc}",
                hint="the ledger is as it was before this batch; if the disk is full, free space, then run the same command again",
            ) from None
        return result

    def _append(
        self,
        txn: lmdb.Transaction,
        log: list[tuple[bytes, bytes]],
        subjects: list[tuple[bytes, bytes]],
        tlog: tlog_tables.Appender,
        tlog_entries: list[bytes],
        expect: tuple[int, list[bytes]] | None,
    ) -> None:
        """:meth:`_write`'s new log entries appended: the log, the subject index, the transparency log
        (unless they are not the ``expect``-ed ones: then it raises in the transaction, which aborts)."""
        # in sequence order: appended at the end of the log's B-tree, in one call each
        txn.cursor(db=self.db[b"log"]).putmulti(log, append=True)
        cursor = txn.cursor(db=self.db[b"subject"])
        step = 32 * _RELEASE_EVERY  # the same puts in the same order; a batch's records land on random leaves
        for at in range(0, len(subjects), step):
            cursor.putmulti(subjects[at : at + step], dupdata=True)
            _release_mapped_pages(self._core)
        if expect is not None and (tlog.size != expect[0] or tlog_entries != expect[1]):
            raise LogDiverged(
                f"the batch would append {len(tlog_entries):,} entries at index {tlog.size:,}, not the "
                f"{len(expect[1]):,} given at index {expect[0]:,}: nothing was written"
            )  # raised in the transaction: it aborts
        tlog.extend(tlog_entries)

    def _mark_pending(self, txn: lmdb.Transaction, touched: set[str], citing: set[str]) -> None:
        """The records a batch touched, marked for derivation (spec/storage.md §3.1), in key order (the same
        pages in every process): b"c": it received a citation or a revocation, which may change what it cites."""
        for subject in sorted(touched):
            if subject in citing:
                txn.put(subject.encode(), b"c", db=self.db[b"pendcite"])
            else:
                txn.put(subject.encode(), b"", db=self.db[b"pendcite"], overwrite=False)

    def _keep_extra(self, txn: lmdb.Transaction, subject: str, blob: bytes) -> None:
        """Keep a bundle's unknown top-level fields for export, within caps (spec/storage.md §2): only
        for a record that holds valid events, at most MAX_EXTRA_BYTES a blob and MAX_EXTRA_PER_RECORD
        blobs a record, so bundles without events cannot fill the disk."""
        if len(blob) > MAX_EXTRA_BYTES or txn.get(subject.encode(), db=self.db[b"subject"]) is None:
            return
        prefix = subject.encode() + b"\0"
        key = prefix + hashlib.sha256(blob).hexdigest().encode()
        if txn.get(key, db=self.db[b"extra"]) is not None:
            return
        cursor, held = txn.cursor(db=self.db[b"extra"]), 0
        if cursor.set_range(prefix):
            for k in cursor.iternext(values=False):
                if not bytes(k).startswith(prefix) or held >= MAX_EXTRA_PER_RECORD:
                    break
                held += 1
        if held < MAX_EXTRA_PER_RECORD:
            txn.put(key, blob, db=self.db[b"extra"])

    def _keep_evidence(self, txn: lmdb.Transaction, copy: bytes, subject: str, size: int, entry: bytes) -> bool:
        """Hold one rejected copy as evidence (``entry``: its evidence entry, made on a worker; ``size``:
        its canonical bytes), within the caps; False when a cap is reached.

        Everything is read in the write transaction: another writer may have kept the same copy since
        this batch looked it up, and a copy already held is not counted again (spec/storage.md §2.1)."""
        if txn.get(copy, db=self.db[b"evidence"]) is not None:
            return True
        lim = self.evidence_limits
        raw = txn.get(subject.encode(), db=self.db[b"evsize"])
        mine = _usage_decoder.decode(raw) if raw is not None else Usage()
        raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        total = _usage_decoder.decode(raw) if raw is not None else Usage()
        if (
            mine.entries + 1 > lim.per_record_entries
            or mine.bytes + size > lim.per_record_bytes
            or total.entries + 1 > lim.total_entries
            or total.bytes + size > lim.total_bytes
        ):
            return False
        txn.put(copy, entry, db=self.db[b"evidence"])
        txn.put(subject.encode(), copy, db=self.db[b"evsubj"])
        txn.put(
            subject.encode(), _entry_encoder.encode(Usage(mine.entries + 1, mine.bytes + size)), db=self.db[b"evsize"]
        )
        txn.put(
            b"evidence_usage", _entry_encoder.encode(Usage(total.entries + 1, total.bytes + size)), db=self.db[b"meta"]
        )
        return True


class Batch:
    """A batch being filled bundle by bundle (:meth:`Ledger.batch`), then committed as one transaction.

    Identity (spec/storage.md §3): a copy whose declared event_id equals its recomputed id and is
    already held is byte-identical to a held valid event, so it is a duplicate without verifying.
    Anything else is looked up by the hash of the copy itself in the evidence area (an input offered
    again is reported again, from its stored verdict), and only then verified, outside the write lock,
    on the ledger's threads while the caller goes on. Nothing an input declares decides where it is
    filed: only verification does."""

    def __init__(self, ledger: _Log) -> None:
        self._ledger = ledger
        self._txn = ledger._core._begin()  # lookups; ended before the write transaction begins
        self._extras: list[
            tuple[str, bytes]
        ] = []  # (pith number, canonical unknown top-level fields) of the bundles with some
        self._offers: list[bytes] = []  # copy digest of each offered input that is not a plain duplicate
        self._candidates: dict[bytes, tuple[str, bytes]] = {}  # copy -> (subject, canonical bytes), in verify order
        self._held: dict[bytes, Verdict] = {}  # copy -> verdict of evidence offered again
        self._duplicate = 0
        self._chunk: list[tuple[bytes, str, bool]] = []  # candidates not yet handed to the workers
        self._prechecked: dict[bytes, _Checked] = {}  # copy -> what the worker that prepared it found (Copy.checked)
        # the verdicts of the candidates, a chunk each, in order (ledger/fanout.py): on threads for a
        # run's first chunks (a small apply does not pay for processes), then on the workers
        self._verdicts = ledger._fanout.stream(_verify_offers, threads_first=ledger.tuning.process_after_chunks - 1)
        self.events = 0  # events added
        self._released = 0  # self.events at the last _release_mapped_pages
        self.fill = 0  # what a batch closes on: events, a bundle without events counting one
        self.bytes = 0  # canonical bytes of the bundles added

    def add(self, bundle: Bundle | Prepared, *, signatures_verified: bool = False) -> None:
        """Add a bundle's events: a :class:`Bundle` (prepared here) or what :func:`prepare` made of one
        elsewhere (apply's reading workers). ``signatures_verified``: the caller vouches that every
        Ed25519 signature of these exact bytes verified before (``rebuild`` re-applying its own log,
        which holds only events that verified): step 7 is taken as passed, every other step runs again."""
        p = bundle if isinstance(bundle, Prepared) else prepare(bundle)
        if p.extra:
            self._extras.append((p.pith_number, p.extra))
        self.events += len(p.events)
        self.fill += max(1, len(p.events))
        self.bytes += p.size
        txn, ids_db, evidence_db = self._txn, self._ledger.db[b"ids"], self._ledger.db[b"evidence"]
        if self.events - self._released >= 32 * _RELEASE_EVERY:  # lookups fault in index pages (and their neighbours)
            _release_mapped_pages(self._ledger._core)
            self._released = self.events
        candidates, held = self._candidates, self._held
        for c in p.events:
            if c.held_key is not None and txn.get(c.held_key, db=ids_db) is not None:
                self._duplicate += 1
                continue
            copy = c.copy
            self._offers.append(copy)
            if copy in candidates or copy in held:
                continue
            raw = txn.get(copy, db=evidence_db)
            if raw is not None:
                held[copy] = _evidence_decoder.decode(raw).verdict
                continue
            candidates[copy] = (p.pith_number, c.data)
            if c.checked is not None:  # verified in full where it was prepared: nothing to hand over
                self._prechecked[copy] = c.checked
                continue
            self._chunk.append((c.data, c.claimed_id, signatures_verified))
            if len(self._chunk) >= self._ledger.tuning.verify_chunk:
                self._submit()

    @property
    def candidates(self) -> int:
        """Copies added that are neither held nor a duplicate: the ones verified."""
        return len(self._candidates)

    def _submit(self) -> None:
        if not self._chunk:
            return
        self._verdicts.add(self._chunk)
        self._chunk = []

    def commit(
        self,
        *,
        defer: bool = False,
        admit: Callable[[lmdb.Transaction], bool] | None = None,
        expect: tuple[int, list[bytes]] | None = None,
    ) -> BatchResult:
        """Wait for the workers' results, then append, keep evidence and (unless ``defer``) derive, in
        one durable transaction (see :meth:`Ledger.apply_batch`).

        ``admit``: called in the write transaction as soon as it holds the writer lock, before anything
        is written; when it returns False the transaction is aborted and :class:`BatchWithdrawn` raised
        (``serve --accept-events``: a request whose bounded wait for the lock ran out is not written).
        ``expect``: (tlog size, entries): the batch must append exactly these entries from that index, in that
        order, else :class:`LogDiverged` and nothing is written (``restore-log``)."""
        self._submit()
        self._txn.abort()
        checked = [c for part in self._verdicts.results() for c in _checked_decoder.decode(part)]
        _precheck_stats["came_verified"] += len(self._prechecked)
        _precheck_stats["handed_over"] += len(checked)
        if self._prechecked:  # in candidate order: the workers' results fill the gaps between those that came verified
            pre, streamed = self._prechecked, iter(checked)
            checked = [pre[copy] if copy in pre else next(streamed) for copy in self._candidates]
        while True:
            try:
                result = self._ledger._write(
                    self._extras,
                    self._candidates,
                    checked,
                    self._offers,
                    self._held,
                    self._duplicate,
                    defer,
                    admit,
                    expect,
                )
                _release_mapped_pages(self._ledger._core)
                return result
            except lmdb.MapFullError:
                self._ledger._core._grow()

    def abandon(self) -> None:
        """Drop the batch unwritten (the caller was interrupted)."""
        self._txn.abort()
        self._verdicts.cancel()
