"""Pending derivation (spec/storage.md §3.1): the records a deferred batch left for ``finish``, which
derives each one once however many batches touched it, in write transactions of FINISH_CHUNK records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import count
from typing import Any

import lmdb

from ..audit import bucket_of
from ..errors import LedgerError
from .env import _PENDING, _release_mapped_pages
from .views import _Views, _derive_part, _outbound_part
from .workers import _PARALLEL_STATES, _Workers


#: Records derived per write transaction when pending work is finished (bounds one transaction).
FINISH_CHUNK = 2048


class _PendingWork(_Views, _Workers):
    """The pending sets, and finishing them."""

    def _pending_dbs(self) -> list[Any]:
        """The pending sets; on a handle opened on a layout-3 ledger, opened once a writer has
        upgraded it (until then there are none, and nothing is pending)."""
        if b"pendstate" not in self.db:
            try:
                for name in _PENDING:
                    self.db[name] = self.env.open_db(name, create=False)
            except lmdb.NotFoundError:
                for name in _PENDING:
                    self.db.pop(name, None)
                return []
        return [self.db[name] for name in _PENDING]

    def pending(self) -> int:
        """How many records have derivation pending (0 once every apply and sync has finished)."""
        dbs = self._pending_dbs()
        with self._begin() as txn:
            return sum(txn.stat(db)["entries"] for db in dbs)

    def pending_among(self, subjects: Iterable[str]) -> list[str]:
        """Those of ``subjects`` whose derivation is pending, in order."""
        self._pending_dbs()
        with self._begin() as txn:
            return [s for s in subjects if self.is_pending(txn, s)]

    def is_pending(self, txn: lmdb.Transaction, subject: str) -> bool:
        key = subject.encode()
        # the sets of a handle opened on layout 3 are opened by the readers before their transaction
        return any(txn.get(key, db=self.db[name]) is not None for name in _PENDING if name in self.db)

    def finish(self, progress: Callable[[int], None] | None = None, *, steps: int | None = None) -> int:
        """Derive everything pending (spec/storage.md §3.1), in transactions of FINISH_CHUNK records:
        first every pending record's standing outbound citations (which marks the records whose inbound
        citations changed), then each pending record's state, lookup indexes and digest leaf, once, and
        the digest tree above them. Killed half-way, it resumes where it stopped. Returns the records
        whose state was derived. ``progress`` is called with that running count. ``steps``: stop after
        that many transactions (the rest stays pending: :meth:`pending` tells)."""
        done = 0
        for _ in count() if steps is None else range(steps):
            try:
                with self._begin(write=True) as txn:
                    n = self._finish_some(txn, FINISH_CHUNK)
            except lmdb.MapFullError:
                self._grow()
                continue
            except lmdb.Error as exc:
                raise LedgerError(f"deriving pending states failed: {exc}",
                                  hint="nothing is lost: the events are in the log; free space if the disk is full, then run "
                                       "`pithledger apply` again (with no new input it only finishes the pending work)") from None
            _release_mapped_pages(self)
            if n is None:
                return done
            done += n
            if progress is not None:
                progress(done)
        return done

    def _finish_some(self, txn: lmdb.Transaction, limit: int | None) -> int | None:
        """One step of :meth:`finish` in ``txn``: up to ``limit`` records (None: all) of the first
        non-empty pending set. Returns the states derived in this step, or None when nothing is pending.
        A step of _PARALLEL_STATES records or more derives its states on the worker processes."""
        cites = self._take(txn, b"pendcite", limit)
        if cites:
            # Only a new citation or revocation can change which of a record's citations stand. What a
            # record cites is a function of its own log entries (computed on the workers for a big step);
            # no record's update changes another's, so reading ahead of storing changes nothing.
            flagged = [subject for subject, flag in cites if flag]
            owns = self._own_parts(txn, flagged)
            for cited_now in self._on_workers(_outbound_part, owns, parallel=len(flagged) >= _PARALLEL_STATES):
                for subject, new, encoded in cited_now:
                    for cited in self._update_citations(txn, subject, new, encoded):
                        txn.put(cited.encode(), b"", db=self.db[b"pendstate"])
            for subject, _ in cites:
                txn.put(subject.encode(), b"", db=self.db[b"pendstate"])
            return 0
        states = [subject for subject, _ in self._take(txn, b"pendstate", limit)]
        if not states:
            return None
        parts = self._input_parts(txn, states)
        for results in self._on_workers(_derive_part, parts, parallel=len(states) >= _PARALLEL_STATES):
            for derived, packed in results:
                self._store_derived(txn, derived, packed)
        self._update_tree(txn, {bucket_of(s) for s in states})
        return len(states)

    def _take(self, txn: lmdb.Transaction, name: bytes, limit: int | None) -> list[tuple[str, bytes]]:
        """Remove and return up to ``limit`` (key, value) of a pending set (key order)."""
        out: list[tuple[str, bytes]] = []
        cursor = txn.cursor(db=self.db[name])
        if cursor.first():
            while limit is None or len(out) < limit:
                out.append((bytes(cursor.key()).decode(), bytes(cursor.value())))
                if not cursor.delete():  # deletes and moves to the next key; False at the end
                    break
                if not cursor.key():
                    break
        return out
