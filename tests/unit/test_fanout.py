"""ledger/fanout.py alone: order kept under random delays, the look-ahead bound, a lost worker's part
redone, the function's own exception raised again; on every executor kind (spec/storage.md §7).

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/test_fanout.py."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path  # noqa: E402

import pytest

from helpers.fanout import _fails_on_seven, _parts, _slow_square
from pithledger.fanout import Fanout


def test_order_is_kept_under_random_delays(local: Fanout) -> None:
    parts = _parts(40, seed=3)
    assert list(local.map(_slow_square, iter(parts))) == [n * n for n, _ in parts]


def test_look_ahead_is_bounded(local: Fanout) -> None:
    """At most `ahead` parts are taken from the iterator and not yet yielded, whatever the delays."""
    taken = 0
    worst = 0

    def parts() -> Iterator[tuple[int, float]]:
        nonlocal taken
        for part in _parts(30, seed=5):
            taken += 1
            yield part

    for yielded, _ in enumerate(local.map(_slow_square, parts(), ahead=3), 1):
        worst = max(worst, taken - (yielded - 1))
        time.sleep(0.005)
    assert taken == 30
    assert worst <= 3
    if local.kind == "processes":
        assert worst == 3  # the bound is used: the workers do run ahead


def test_in_place_runs_in_the_writer_when_asked(local: Fanout) -> None:
    pid = os.getpid()
    assert list(local.map(lambda _: os.getpid(), iter([1, 2]), parallel=False)) == [pid, pid]  # a lambda: never pickled


def test_the_functions_own_exception_is_raised_not_masked(local: Fanout) -> None:
    got: list[int] = []
    with pytest.raises(ValueError, match="a bug at 7"):
        for r in local.map(_fails_on_seven, iter(range(20))):
            got.append(r)
    assert got == [n + 1 for n in range(7)]  # everything before it, in order
    assert not local.lost  # a bug is not a lost worker


def test_a_stream_on_threads_first_then_processes_keeps_order() -> None:
    with Fanout.processes(2) as fan:
        stream = fan.stream(_slow_square, threads_first=3)
        parts = _parts(12, seed=1)
        for part in parts:
            stream.add(part)
        assert list(stream.results()) == [n * n for n, _ in parts]
        assert fan.worker_pids()  # from the 4th part on, processes


def test_zero_workers_is_in_place() -> None:
    assert Fanout.processes(0).kind == "in-place"
    assert Fanout.choose(None, None).workers == ((os.cpu_count() or 1) if (os.cpu_count() or 1) > 1 else 0)


def test_an_unreachable_scheduler_is_a_named_error_in_bounded_time() -> None:
    from pithledger.errors import SchedulerUnreachable

    started = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match="tcp://127.0.0.1:9"):
        Fanout.dask("tcp://127.0.0.1:9", connect_timeout=2)
    assert time.monotonic() - started < 30


def test_a_ledger_swapped_in_under_the_writer_is_not_handed_to_the_workers(tmp_path: Path) -> None:
    """Another process's rebuild swaps a ledger in at the writer's path between two of its steps: the
    snapshot names the file the writer has open, so it no longer matches the path, and no part goes to
    workers that would open the other ledger."""
    import shutil

    from pithledger.store import Ledger
    from pithledger.store.snapshot import snapshot_of

    path = tmp_path / "l"
    with Ledger(path, create=True, fanout=Fanout.in_place()) as ledger:
        with ledger._core._begin() as txn:
            snap = snapshot_of(ledger._core, txn)
        assert snap is not None and snap.files == (os.stat(path / "data.mdb").st_dev, os.stat(path / "data.mdb").st_ino)
        shutil.copyfile(path / "data.mdb", tmp_path / "other.mdb")
        os.replace(tmp_path / "other.mdb", path / "data.mdb")  # another file at the path now
        with ledger._core._begin() as txn:
            assert snapshot_of(ledger._core, txn) is None
