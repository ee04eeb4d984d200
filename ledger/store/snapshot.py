"""Finishing's inputs read on the workers, from the ledger's last committed snapshot (spec/storage.md §3.4).

A step of ``finish`` (pending.py) derives records from inputs that earlier transactions committed: the
log entries of a batch were committed with it, a citations step commits before the states it marks
are derived, and a step writes no input of another record's derivation. So a worker process can read
those inputs itself, in a read-only transaction of its own, instead of the writer reading them and
handing them over: the writer's serial path then carries record names out and derived states back,
not every log entry (ADR 0013). What a worker reads is exactly what the writer would have read:

* the task names the ledger's files (device and inode of ``data.mdb``) and the writer's transaction
  id; the worker's read transaction must be the snapshot that transaction started from (id − 1), and
  the worker's handle must hold the optional ``fold`` database exactly when the writer's does;
* otherwise, or where the worker cannot open the ledger, the part comes back as None and the writer
  reads and derives it itself, as it does for the in-place and Dask executors.

py-lmdb refuses to open an environment a process already holds, and a process forked from one that
holds it inherits that: a worker forked after the writer opened the ledger gets None every time and
the writer does the part, so results never depend on when the workers were forked (apply forks them
during its first reading, before it opens the ledger).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar

import lmdb

from pithledger.errors import NoLedger, PithledgerError
from pithledger.store.env import _RELEASE_EVERY, DEFAULT_MAP_SIZE, _Environment, _file_id, _release_mapped_pages
from pithledger.store.views import _derive_part, _Derived, _Inputs, _Views

_T = TypeVar("_T")


class Snapshot(NamedTuple):
    """Which committed snapshot a finishing step's parts are to be read from."""

    path: str  # the ledger directory
    files: tuple[int, int]  # (st_dev, st_ino) of its data.mdb: the same files, not only the same path
    txn_id: int  # the writer's write transaction: the parts read the snapshot it began from
    fold: bool  # whether the writer's handle holds the optional ``fold`` database


def snapshot_of(ledger: _Environment, txn: lmdb.Transaction) -> Snapshot | None:
    """The snapshot the writer's ``txn`` began from, for workers to read; None if its files cannot be named."""
    opened = ledger._opened_file
    # the file the writer has open must still be the one at its path (another process's rebuild may have
    # swapped a ledger in): else the workers would read another ledger
    if opened is None or _file_id(ledger.path / "data.mdb") != opened:
        return None
    return Snapshot(str(ledger.path), opened, txn.id(), b"fold" in ledger.db)


def _views_handle(path: Path) -> _Views:
    """A read-only handle on a ledger's views, what a worker reads finishing's inputs with: the views part
    over a read-only core, opened and checked as a read-only Ledger's is (the same databases, the same
    errors), without the rest of a Ledger (no writer, no fan-out of its own). Closed by its core."""
    core = _Environment(path, readonly=True, map_size=DEFAULT_MAP_SIZE)
    try:
        core.layout = core._open_dbs(readonly=True)
    except lmdb.NotFoundError:  # the creating apply has not committed yet
        core.env.close()
        raise NoLedger(f"no complete ledger at {core.path} (yet)") from None
    except PithledgerError:
        core.env.close()
        raise
    return _Views(core)


# One read-only handle per worker process and ledger, opened on the first part (the process's life).
_handles: dict[str, tuple[tuple[int, int], _Views]] = {}


def _reader(snap: Snapshot) -> _Views | None:
    held = _handles.get(snap.path)
    if held is not None and held[0] == snap.files:
        return held[1]
    if _file_id(Path(snap.path) / "data.mdb") != snap.files:
        return None
    if held is not None:  # another ledger at that path since (rebuild swapped it in)
        del _handles[snap.path]
        held[1]._core.close()
    try:
        handle = _views_handle(Path(snap.path))
    except (PithledgerError, OSError, lmdb.Error):  # e.g. py-lmdb's "already open in this process": the writer reads it
        return None
    if handle._core._opened_file != snap.files:  # replaced while it opened: not the writer's file
        handle._core.close()
        return None
    _handles[snap.path] = (snap.files, handle)
    # the budget counts from what the process maps before its first part (its libraries): counted from
    # after one, a worker kept what that part had touched on top of the budget (181 MiB at 1 M events)
    _release_mapped_pages(handle._core)
    return handle


def _read(task: tuple[Snapshot, list[str]], read: Callable[[_Views, lmdb.Transaction, str], _T]) -> list[_T] | None:
    """``read(handle, txn, subject)`` of each record of a part, in a read transaction on exactly the
    writer's snapshot; None where this process cannot read it (the writer then does)."""
    snap, subjects = task
    handle = _reader(snap)
    if handle is None:
        return None
    try:
        txn = handle._core._begin()
    except (PithledgerError, lmdb.Error):  # e.g. no reader slot free, or a map that kept growing: the writer reads it
        return None
    try:
        if txn.id() != snap.txn_id - 1 or (b"fold" in handle.db) != snap.fold:
            return None
        out = []
        for n, subject in enumerate(subjects, 1):
            out.append(read(handle, txn, subject))
            if n % _RELEASE_EVERY == 0:  # a part's records read random pages (their inbound citations)
                _release_mapped_pages(handle._core)
        return out
    finally:
        txn.abort()
        _release_mapped_pages(handle._core)  # as the writer's: what a part touched of the file is not kept mapped


def derive_states(
    task: tuple[Snapshot, list[str], list[bool]],
    *,
    derive: Callable[[list[_Inputs]], list[tuple[str, _Derived | None, bytes]]] = _derive_part,
) -> list[tuple[str, _Derived | None, bytes]] | None:
    """A states step's part, on a worker: each record's inputs read from the snapshot (incrementally,
    as the writer gathers them), derived and compressed by ``derive`` (the handle's StoreTuning.derive:
    views._derive_part); None: not read here. The flags: which records are marked for their inbound
    citations alone (spec/storage.md §3.5), as the writer took them from ``pendstate``."""
    snap, subjects, flags = task
    only = {s for s, flag in zip(subjects, flags, strict=True) if flag}

    def one(handle: _Views, txn: lmdb.Transaction, subject: str) -> tuple[str, _Derived | None, bytes]:
        # one record at a time: a worker holds one record's inputs, whatever the part holds (a hot record)
        return derive([handle._gather(txn, subject, incremental=True, inbound_only=subject in only)])[0]

    return _read((snap, subjects), one)


def outbound_citations(task: tuple[Snapshot, list[str]]) -> list[list[tuple[str, str]]] | None:
    """A citations step's part, on a worker: each record's standing outbound citations (views._outbound)
    from the snapshot; None: not read here."""
    return _read(task, lambda handle, txn, subject: handle._outbound(txn, subject, incremental=True))
