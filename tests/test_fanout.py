"""ledger/fanout.py alone: order kept under random delays, the look-ahead bound, a lost worker's part
redone, the function's own exception raised again; on every executor kind (spec/storage.md §7)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator

import pytest

from pithledger.fanout import Fanout


def _slow_square(part: tuple[int, float]) -> int:
    n, delay = part
    time.sleep(delay)
    return n * n


def _fails_on_seven(n: int) -> int:
    if n == 7:
        raise ValueError(f"a bug at {n}")
    return n + 1


def _kills_its_worker_once(part: tuple[int, str]) -> int:
    """Kills the process running it the first time it runs part 5 (a marker file says it ran)."""
    n, marker = part
    if n == 5 and not os.path.exists(marker):
        with open(marker, "w"):
            pass
        os.kill(os.getpid(), signal.SIGKILL)
    return n * 10


def _parts(n: int, seed: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(i, rng.random() * 0.02) for i in range(n)]


@pytest.fixture(params=["in-place", "processes-1", "processes-2"])
def local(request: pytest.FixtureRequest) -> Iterator[Fanout]:
    kind = str(request.param)
    fan = Fanout.in_place() if kind == "in-place" else Fanout.processes(int(kind.rsplit("-", 1)[1]))
    with fan:
        yield fan


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
    assert list(local.map(lambda _: os.getpid(), iter([1, 2]), parallel=False))  # a lambda: never pickled == [pid, pid]


def test_the_functions_own_exception_is_raised_not_masked(local: Fanout) -> None:
    got: list[int] = []
    with pytest.raises(ValueError, match="a bug at 7"):
        for r in local.map(_fails_on_seven, iter(range(20))):
            got.append(r)
    assert got == [n + 1 for n in range(7)]  # everything before it, in order
    assert not local.lost  # a bug is not a lost worker


def test_a_worker_killed_mid_part_is_redone_in_place(tmp_path: os.PathLike[str]) -> None:
    marker = os.path.join(tmp_path, "killed")
    with Fanout.processes(2) as fan:
        got = list(fan.map(_kills_its_worker_once, iter([(n, marker) for n in range(20)])))
        assert os.path.exists(marker)  # part 5 did kill its worker
        assert fan.lost
    assert got == [n * 10 for n in range(20)]


def test_a_worker_killed_from_outside_changes_nothing() -> None:
    parts = _parts(60, seed=8)
    with Fanout.processes(2) as fan:
        out: list[int] = []
        for r in fan.map(_slow_square, iter(parts)):
            out.append(r)
            if len(out) == 5:
                pids = fan.worker_pids()
                assert pids
                os.kill(pids[0], signal.SIGKILL)
    assert out == [n * n for n, _ in parts]


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


# --- Dask --------------------------------------------------------------------------------------------

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A LocalCluster of 2 worker processes for this module's tests, closed after them."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      worker_dashboard_address=None) as local:
        yield str(local.scheduler_address)


def test_dask_keeps_order_and_bound(cluster: str) -> None:
    parts = _parts(30, seed=11)
    with Fanout.dask(cluster) as fan:
        assert fan.kind == "dask" and fan.workers == 2
        assert list(fan.map(_slow_square, iter(parts), ahead=3)) == [n * n for n, _ in parts]


def test_dask_raises_the_functions_own_exception(cluster: str) -> None:
    with Fanout.dask(cluster) as fan, pytest.raises(ValueError, match="a bug at 7"):
        list(fan.map(_fails_on_seven, iter(range(10))))


def test_dask_a_killed_worker_changes_nothing(cluster: str, tmp_path: os.PathLike[str]) -> None:
    """The worker running part 5 kills itself: Dask reruns the part elsewhere, or it is redone here."""
    marker = os.path.join(tmp_path, "killed")
    with Fanout.dask(cluster) as fan:
        got = list(fan.map(_kills_its_worker_once, iter([(n, marker) for n in range(12)])))
    assert os.path.exists(marker)
    assert got == [n * 10 for n in range(12)]


def test_an_unreachable_scheduler_is_a_named_error_in_bounded_time() -> None:
    from pithledger.errors import SchedulerUnreachable

    started = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match="tcp://127.0.0.1:9"):
        Fanout.dask("tcp://127.0.0.1:9", connect_timeout=2)
    assert time.monotonic() - started < 30
