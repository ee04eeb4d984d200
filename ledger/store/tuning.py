"""The store's knobs: how its work is cut into parts and transactions, one frozen object per ledger handle.

None of them changes what a ledger holds or what a query returns (spec/storage.md §3.4): they bound
memory and transactions, and choose between the writer's thread and the worker processes. Tests lower
them so that small inputs take the paths big runs take; everyone else keeps the defaults. A handle
takes them when it opens (``Ledger(path, tuning=...)``, ``rebuild(..., tuning=...)``), else the ones
:func:`tuned` set for the handles opened within it (a test running the CLI), else ``StoreTuning()``.
They are fields, not module globals, so that compiled modules (mypyc) read them as they are given.

Only the writer's side reads them: a worker gets whatever it needs in its task (ADR 0009).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pithledger.store.views import _derive_part, _Derived, _Inputs

#: Derives a part of a finishing step's records: (subject, what was derived or None, compressed state) each.
DerivePart = Callable[[list[_Inputs]], list[tuple[str, _Derived | None, bytes]]]


@dataclass(frozen=True)
class StoreTuning:
    """Every knob of a ledger handle, with the value a ledger runs with by default."""

    verify_chunk: int = 512
    """Copies per verification task (Batch): each hand-over costs the reading thread a GIL round trip
    with the executor's threads, so fewer, larger ones."""

    process_after_chunks: int = 4
    """The run's chunk that starts the worker processes (Fanout.stream's threads_first + 1): the first
    ones are verified on threads, so a small apply does not pay for starting processes."""

    parallel_states: int = 256
    """A finishing step of at least this many records derives its states on the workers (fewer: on the
    writer's thread, where handing them over would cost more than it saves); fsck checks states on the
    workers from this many stored states, rebuild re-prepares on them from 8 x as many log entries."""

    derive_part_records: int = 256
    """Records per task when the writer gathers a step's inputs and hands them over (and per fsck
    state task): at most twice the workers' number of tasks wait in memory (Fanout.map)."""

    derive_part_entries: int = 2048
    """A part also closes at this many log entries gathered; a part of a small step this big (a hot
    record) is derived on a worker all the same, if the workers run."""

    snapshot_part: int = 64
    """Records per task where the workers read a step's inputs themselves (snapshot.py): the writer
    hands over names only, and a worker holds one part's inputs at a time."""

    big_state: int = 256 * 1024
    """A part of a small step holding this many bytes of stored (compressed) states is derived on a
    worker all the same (a hot record's fold), if the workers run."""

    fsck_part: int = 512
    """Log entries per fsck task; fsck checks the log on the workers from twice as many."""

    finish_chunk: int = 2048
    """Records derived per write transaction when pending work is finished (bounds one transaction)."""

    part_bytes: int = 4 * 1024 * 1024
    """Canonical bytes of events per exported part (``export_parts(part_bytes=0)``, what publish
    writes): a record flooded with events still travels in documents every reader accepts."""

    upgrade_chunk: int = 16_384
    """Log entries per transaction of the in-place upgrade that builds the transparency log (bounds one
    transaction; a killed upgrade resumes from the last one committed)."""

    rebuild_part: int = 512
    """Log entries per task rebuild hands the workers (decode, re-verify, encode)."""

    start_workers_from: int = 8 * 1024 * 1024
    """rebuild starts the run's workers before it opens a handle when the old ledger's data.mdb is at
    least this big, so that they may read the new ledger's snapshots (smaller: not worth it)."""

    derive: DerivePart = _derive_part
    """The pure function finishing derives a part with, here or on the workers (views._derive_part):
    a hook for tests to count derivations or make a worker fail. It is sent to the workers by
    reference, so one that runs there must be a module-level function."""


_default = StoreTuning()


def default_tuning() -> StoreTuning:
    """What a handle opened without ``tuning`` runs with: :func:`tuned`'s, else the defaults."""
    return _default


@contextmanager
def tuned(tuning: StoreTuning) -> Iterator[StoreTuning]:
    """Within it, handles opened without ``tuning`` (the CLI's, open_settled's, rebuild's) run with
    ``tuning``: for tests that run commands, as :func:`pithledger.fanout.using` does for the fan-out."""
    global _default
    saved, _default = _default, tuning
    try:
        yield tuning
    finally:
        _default = saved
