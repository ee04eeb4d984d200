"""Pending derivation (spec/storage.md §3.1): the records a deferred batch left for ``finish``, which
derives each one once however many batches touched it, in write transactions of ``finish_chunk`` records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from functools import partial
from itertools import count

import lmdb

from pithledger.audit import bucket_of
from pithledger.errors import LedgerError
from pithledger.fanout import Fanout
from pithledger.files import disk_full
from pithledger.store.env import _RELEASE_EVERY, _Environment, _release_mapped_pages
from pithledger.store.lookup import _Lookup
from pithledger.store.snapshot import Snapshot, derive_states, outbound_citations, snapshot_of
from pithledger.store.tuning import StoreTuning
from pithledger.store.views import _Derived, _Inputs, _Views

#: Parts of finishing steps read on the workers from the snapshot, and parts they handed back (tests look).
_snapshot_stats = {"read": 0, "fallback": 0}
#: Records a finishing step updated for their inbound citations alone (spec/storage.md §3.5), found unchanged
#: (a pending record), or derived in full because the update fell back (tests look: the update path is taken).
_inbound_stats = {"updated": 0, "unchanged": 0, "fell_back": 0}
#: pendstate's mark of a record whose inbound citations alone changed (§3.1); b"": derive it in full
_INBOUND_ONLY = b"i"


def _worth_handing_over(part: list[_Inputs], tuning: StoreTuning) -> bool:
    """A part of a small step that is big work all the same (a hot record: thousands of events, a state
    of megabytes): it is derived on a worker, not in the writer's thread."""
    return (
        sum(len(i.own) + len(i.inbound) for i in part) >= tuning.derive_part_entries
        or sum(len(i.old_state or b"") for i in part) >= tuning.big_state
    )


class _PendingWork:
    """The pending sets, and finishing them: a part of a handle, over its core, lookup and views parts,
    finishing on its fan-out (ledger/fanout.py) as its tuning cuts the work."""

    def __init__(self, core: _Environment, lookup: _Lookup, views: _Views, fanout: Fanout, tuning: StoreTuning) -> None:
        self._core = core
        self.db = core.db
        self.env = core.env
        self.path = core.path
        self._lookup = lookup
        self._views = views
        self._fanout = fanout
        self.tuning = tuning
        self._snapshot_refused = (
            False  # a worker could not read this ledger's snapshot: hand the inputs over (snapshot.py)
        )

    def pending(self) -> int:
        """How many records have derivation pending (0 once every apply and sync has finished)."""
        dbs = self._lookup._pending_dbs()
        with self._core._begin() as txn:
            return sum(txn.stat(db)["entries"] for db in dbs)

    def pending_among(self, subjects: Iterable[str]) -> list[str]:
        """Those of ``subjects`` whose derivation is pending, in order."""
        self._lookup._pending_dbs()
        with self._core._begin() as txn:
            return [s for s in subjects if self._lookup.is_pending(txn, s)]

    def finish(self, progress: Callable[[int], None] | None = None, *, steps: int | None = None) -> int:
        """Derive everything pending (spec/storage.md §3.1), in transactions of ``finish_chunk`` records:
        first every pending record's standing outbound citations (which marks the records whose inbound
        citations changed), then each pending record's state, lookup indexes and digest leaf, once, and
        the digest tree above them. Killed half-way, it resumes where it stopped. Returns the records
        whose state was derived. ``progress`` is called with that running count. ``steps``: stop after
        that many transactions (the rest stays pending: :meth:`pending` tells)."""
        done = 0
        for _ in count() if steps is None else range(steps):
            try:
                with self._core._begin(write=True) as txn:
                    n = self._finish_some(txn, self.tuning.finish_chunk, committed=True)
            except lmdb.MapFullError:
                self._core._grow()
                continue
            except lmdb.Error as exc:
                raise disk_full(exc, self.path, "deriving pending states failed") or LedgerError(
                    f"deriving pending states failed: {exc}",
                    hint="nothing is lost: the events are in the log; free space if the disk is full, then run "
                    "`pithledger apply` again (with no new input it only finishes the pending work)",
                ) from None
            _release_mapped_pages(self._core)
            if n is None:
                return done
            done += n
            if progress is not None:
                progress(done)
        return done

    def _finish_some(self, txn: lmdb.Transaction, limit: int | None, *, committed: bool = False) -> int | None:
        """One step of :meth:`finish` in ``txn``: up to ``limit`` records (None: all) of the first
        non-empty pending set. Returns the states derived in this step, or None when nothing is pending.
        A step of ``parallel_states`` records or more derives its states on the worker processes.
        ``committed``: ``txn`` has written nothing yet, so every input of the step is in the snapshot it
        began from, and local workers may read their parts' inputs from it themselves (snapshot.py)."""
        cites = self._take(txn, b"pendcite", limit)
        if cites:
            flagged = [subject for subject, flag in cites if flag]
            outbound = self._outbound_on_workers(txn, flagged) if committed else {}
            for n, (subject, flag) in enumerate(cites, 1):
                if n % _RELEASE_EVERY == 0:
                    _release_mapped_pages(self._core)
                # Only a new citation or revocation can change which of a record's citations stand. A cited
                # record is marked "inbound only" unless it is (or was, in an earlier step) marked for its
                # own events, which always wins: b"" overwrites the mark, the mark never overwrites b"".
                for cited in sorted(self._views._update_citations(txn, subject, outbound.get(subject))) if flag else ():
                    txn.put(cited.encode(), _INBOUND_ONLY, db=self.db[b"pendstate"], overwrite=False)
                txn.put(subject.encode(), b"", db=self.db[b"pendstate"])
            return 0
        taken = self._take(txn, b"pendstate", limit)
        if not taken:
            return None
        states = [subject for subject, _ in taken]
        only = {subject for subject, mark in taken if mark == _INBOUND_ONLY}
        for results in self._derived_parts(txn, states, committed, only):
            # each state stored puts to random leaves of several tables (state, fold, rec, indexes): a
            # step of 2,048 records would otherwise map hundreds of MiB of the file (spec/storage.md §10)
            _release_mapped_pages(self._core)
            for subject, derived, packed in results:
                if derived is None:  # the fold or the update fell back (spec/merge.md §10): from the whole inputs
                    if subject in only:
                        _inbound_stats["fell_back"] += 1
                    derived, packed = self._derive_whole(txn, subject)
                elif derived.how == "unchanged":
                    _inbound_stats["unchanged"] += 1
                    continue
                elif derived.how == "inbound":
                    _inbound_stats["updated"] += 1
                self._views._store_derived(txn, derived, packed)
        self._views._update_tree(txn, {bucket_of(s) for s in states})
        return len(states)

    def _derive_whole(self, txn: lmdb.Transaction, subject: str) -> tuple[_Derived, bytes]:
        """A record derived from its whole inputs (no fold), on a worker: a record whose fold fell back
        is a big one."""
        part = [self._views._gather(txn, subject)]
        [(_, derived, packed)] = next(self._fanout.map(self.tuning.derive, iter([part]), parallel=self._hand_over_big))
        assert derived is not None  # without a Fold, a full derivation
        return derived, packed

    def _snapshot_parts(self, txn: lmdb.Transaction, subjects: list[str]) -> list[tuple[Snapshot, list[str]]] | None:
        """The parts of a step whose inputs local workers are to read themselves (snapshot.py), or None
        where they cannot: another executor, a step too small to hand over, files that cannot be named."""
        if (
            self._fanout.kind != "processes"
            or self._fanout.lost
            or len(subjects) < self.tuning.parallel_states
            or self._snapshot_refused
        ):
            return None
        snap = snapshot_of(self._core, txn)
        if snap is None:
            return None
        step = self.tuning.snapshot_part
        return [(snap, subjects[i : i + step]) for i in range(0, len(subjects), step)]

    def _outbound_on_workers(self, txn: lmdb.Transaction, subjects: list[str]) -> dict[str, list[tuple[str, str]]]:
        """The standing outbound citations of ``subjects``, as far as the workers read them from the
        snapshot (the others: the writer computes them in :meth:`_update_citations`)."""
        tasks = self._snapshot_parts(txn, subjects)
        out: dict[str, list[tuple[str, str]]] = {}
        with closing(self._fanout.map(outbound_citations, iter(tasks or ()))) as results:
            for (_, part), got in zip(tasks or (), results, strict=False):
                if got is None:  # the workers cannot read this ledger: the writer computes the rest
                    self._refuse_snapshots()
                    break
                _snapshot_stats["read"] += 1
                out.update(zip(part, got, strict=True))
        return out

    def _refuse_snapshots(self) -> None:
        """A part came back unread (snapshot.py: the workers cannot open this ledger, or read another
        snapshot): this handle hands its parts' inputs over from now on, and cleans the reader table of
        any worker that died holding a slot (a dead reader would keep LMDB from reusing pages)."""
        _snapshot_stats["fallback"] += 1
        self._snapshot_refused = True
        self.env.reader_check()

    def _derived_parts(
        self, txn: lmdb.Transaction, states: list[str], committed: bool, only: set[str]
    ) -> Iterator[list[tuple[str, _Derived | None, bytes]]]:
        """What ``tuning.derive`` (views._derive_part) makes of each part of a states step, in order: read
        and derived on the workers from the snapshot where they can, else gathered here and derived here or
        on the workers. ``only``: the records marked for their inbound citations alone (the mark travels
        with the record in the task: a worker does not read ``pendstate``, which this step has emptied)."""
        parts = self._snapshot_parts(txn, states) if committed else None
        tasks = [(snap, part, [s in only for s in part]) for snap, part in parts or ()]
        done = 0
        # the workers derive with this handle's function (a test's hook, else views._derive_part)
        with closing(self._fanout.map(partial(derive_states, derive=self.tuning.derive), iter(tasks))) as results:
            for (_, part, _), got in zip(tasks, results, strict=False):
                if got is None:  # not read there: this part and the rest go the usual way
                    self._refuse_snapshots()
                    break
                _snapshot_stats["read"] += 1
                done += len(part)
                yield got
        rest = states[done:]
        if rest:
            tuning = self.tuning
            gathered = self._views._input_parts(
                txn, rest, tuning.derive_part_records, tuning.derive_part_entries, incremental=True, inbound_only=only
            )
            yield from self._fanout.map(
                tuning.derive, gathered, parallel=len(rest) >= tuning.parallel_states or self._hand_over_big
            )

    def _hand_over_big(self, part: list[_Inputs]) -> bool:
        """Whether a part of a small step goes to the workers: only if it is big work (a hot record's fold)
        and the workers run already (a run that started none would pay more to start them than it saves)."""
        return self._fanout.started and _worth_handing_over(part, self.tuning)

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
