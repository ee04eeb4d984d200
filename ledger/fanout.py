"""One fan-out for every parallel pass: an ordered map of a pure function over parts, with bounded
look-ahead, on one of three executors, falling back to the writer's own thread when a worker is lost.

The ledger has one writer (spec/storage.md §7): it alone reads the ledger, orders and commits. What
it can hand over is pure work over bytes — apply's checking of input regions, the verdicts of offered
copies, the derived states of a finishing step, fsck's log and state checks — and the writer keeps the
order: the i-th result it stores is ``func(part i)``, wherever that ran. So a result never depends on
the executor, the number of workers or their failures:

* a part whose worker is lost (killed, out of memory, a Dask ``KilledWorker``, a closed connection, a
  cancelled future, a scheduler gone, no answer within ``task_timeout``) is computed again in place,
  and that executor is not used again by this fan-out (its later parts run in place, or on threads
  where the function allows it);
* an exception raised *by the function* (a bug) is caught where it ran, carried back as a value
  (:class:`_Raised`) and raised again in the writer: it is never mistaken for a lost worker.

Only module-level functions (or ``functools.partial`` of one) over bytes and plain values cross, so
everything is picklable for a process pool and for Dask alike (spec/adr/0009, 0012).

The three executors (:data:`Kind`):

* ``"in-place"`` (``--workers 0``): every part in the writer's thread, when the writer asks for it;
* ``"processes"`` (``--workers N``, default: ``os.cpu_count()``): N forked worker processes, started
  on the first part that needs them; a function that releases the GIL (signature checks) runs its
  first ``threads_first`` parts on N threads, so a small run never pays for a fork, and on threads
  again if the processes are lost or cannot be started. Workers ignore Ctrl-C and die with their
  parent (:func:`ignore_interrupts`); a Ctrl-C while a pool starts waits until it has started
  (:func:`_held_interrupts`), and closing kills the workers of a stopped run at once, and waits a
  bounded time for those of a finished one before it kills them (:func:`_stop_processes`), so an
  interrupted run never hangs on its pool (spec/storage.md §7.1);
* ``"dask"`` (``--scheduler ADDRESS``): the parts go to a Dask distributed cluster through
  ``Client.submit``; the cluster's workers must have pithledger installed. The writer stays here.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from pithledger.errors import DaskMissing, SchedulerUnreachable

if TYPE_CHECKING:  # imported where used: `state` starts without them
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

#: The three executors: in the writer's thread, local worker processes, a Dask distributed cluster.
Kind = Literal["in-place", "processes", "dask"]

_A = TypeVar("_A")
_R = TypeVar("_R")
_T = TypeVar("_T", covariant=True)

#: Seconds to reach a Dask scheduler before --scheduler is an error (never a hang).
CONNECT_TIMEOUT = 10.0
#: Seconds a part may take on a Dask cluster before it is taken back and done in place.
TASK_TIMEOUT = 300.0
#: Seconds closing a fan-out waits for its worker processes to finish their current part and exit,
#: before it kills them (they hold nothing that needs cleaning up: spec/storage.md §7.1).
CLOSE_TIMEOUT = 10.0
#: The most parts a map keeps in flight by default (twice the workers, up to this): what waits in the
#: writer's memory must not grow with the size of a cluster.
MAX_AHEAD = 32


def default_workers() -> int:
    """All cores; none on a single core (a worker there would only take turns with the writer)."""
    n = os.cpu_count() or 1
    return n if n > 1 else 0


class _Pending(Protocol[_T]):
    """A result computed elsewhere: a concurrent.futures.Future or a Dask Future."""

    def result(self, timeout: float | None = None) -> _T: ...
    def done(self) -> bool: ...
    def cancel(self) -> Any: ...


class _Raised:
    """An exception raised by the function where it ran, carried back as a value, so the writer
    raises it again instead of taking it for a lost worker."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc = exc
        self.where = where


def _call(func: Callable[[_A], _R], part: _A) -> _R | _Raised:
    """What runs on a worker: ``func(part)``, or the exception it raised (as a value)."""
    import traceback

    try:
        return func(part)
    except Exception as exc:  # noqa: BLE001 - carried back and raised in the writer
        return _Raised(exc, traceback.format_exc())


class Fanout:
    """Where the pure work of one run goes (one per run or ledger handle; not thread-safe: the
    writer's thread alone uses it). Build one with :meth:`in_place`, :meth:`processes` or
    :meth:`dask`; close it when the run ends."""

    def __init__(
        self,
        kind: Kind,
        *,
        workers: int = 0,
        scheduler: str = "",
        client: Any = None,
        task_timeout: float = TASK_TIMEOUT,
    ) -> None:
        self.kind: Kind = kind
        self.workers = workers  # processes: how many; dask: the cluster's threads when connected
        self.scheduler = scheduler
        self.task_timeout = task_timeout
        self.lost = False  # a worker was lost: the parallel executor is not used again
        self._client = client
        self._procs: ProcessPoolExecutor | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._no_procs = False
        self._light = 0  # parts run on threads so far (threads_first)

    # --- the three kinds ---------------------------------------------------------------------------

    @classmethod
    def in_place(cls) -> Fanout:
        return cls("in-place")

    @classmethod
    def processes(cls, workers: int | None = None) -> Fanout:
        """``workers`` local processes (None: :func:`default_workers`; 0: in place)."""
        n = default_workers() if workers is None else workers
        return cls("processes", workers=n) if n > 0 else cls.in_place()

    @classmethod
    def dask(
        cls, address: str, *, connect_timeout: float = CONNECT_TIMEOUT, task_timeout: float = TASK_TIMEOUT
    ) -> Fanout:
        """Connect to the Dask scheduler at ``address`` (bounded by ``connect_timeout``)."""
        try:
            import distributed
        except ImportError:
            raise DaskMissing(
                "--scheduler needs Dask distributed, which is not installed",
                hint="install the extra: pip install 'pithledger[dask]' (and pithledger on the cluster's workers)",
            ) from None
        try:
            connect: Any = distributed.Client  # untyped
            client = connect(address, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise SchedulerUnreachable(
                f"cannot reach the Dask scheduler at {address} within {connect_timeout:g} s "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no answer'})"
            ) from None
        threads = sum(client.nthreads().values())
        if threads == 0:  # every part would wait out the task timeout, then run here: say so now instead
            client.close()
            raise SchedulerUnreachable(
                f"the Dask scheduler at {address} has no workers",
                hint="start workers (dask worker " + address + ") with pithledger installed, "
                "or leave --scheduler out to work on this machine's cores (--workers N)",
            )
        return cls("dask", workers=threads, scheduler=address, client=client, task_timeout=task_timeout)

    @classmethod
    def choose(cls, workers: int | None, scheduler: str | None) -> Fanout:
        """What --workers and --scheduler ask for (--scheduler wins: the cluster does the work)."""
        if scheduler:
            return cls.dask(scheduler)
        return cls.processes(workers)

    # --- the ordered map ---------------------------------------------------------------------------

    def map(
        self,
        func: Callable[[_A], _R],
        parts: Iterator[_A],
        *,
        parallel: bool | Callable[[_A], bool] = True,
        ahead: int | None = None,
    ) -> Generator[_R, None, None]:
        """``func(part)`` of each part, in order. ``parallel``: the work is big enough to pay for the
        executor (else everything runs here), or which parts are. At most ``ahead`` parts (default:
        twice the workers) are taken from ``parts`` and not yet yielded, which bounds what waits in
        memory; a finished head is yielded before more parts are read."""
        stream = self.stream(func, parallel=parallel)
        bound = max(1, ahead if ahead is not None else min(2 * self.workers, MAX_AHEAD))
        try:
            while True:
                if len(stream) and stream.head_done():
                    yield stream.take()
                elif len(stream) < bound and (part := next(parts, _END)) is not _END:
                    stream.add(part)
                elif len(stream):
                    yield stream.take()
                else:
                    return
        finally:
            stream.cancel()

    def stream(
        self, func: Callable[[_A], _R], *, parallel: bool | Callable[[_A], bool] = True, threads_first: int = 0
    ) -> Stream[_A, _R]:
        """Parts added one by one (started at once), results taken in order: a map whose caller
        bounds the look-ahead itself (a batch's verification: a batch is bounded)."""
        return Stream(self, func, parallel=parallel, threads_first=threads_first)

    # --- starting a part, and taking its result back ------------------------------------------------

    def _start(self, func: Callable[[_A], _R], part: _A, *, threads_first: int) -> _Pending[_R | _Raised] | None:
        """Start ``func(part)`` on the executor; None: it is to run in place (when taken).
        ``threads_first``: the function releases the GIL, and this fan-out's first that many such
        parts run on threads (then on processes; on threads again once they are lost)."""
        from concurrent.futures import BrokenExecutor

        if self.kind == "dask" and not self.lost:
            try:
                return self._client.submit(_call, func, part, pure=False)  # type: ignore[no-any-return]
            except Exception:  # noqa: BLE001 - a client that cannot submit (closed, scheduler gone): in place
                self._lose()
                return None
        if self.kind != "processes":
            return None
        # threads for the first parts of a run (a fork costs more than they do), unless processes are up
        use_threads = threads_first > 0 and (
            (self._procs is None and self._light < threads_first) or self._processes() is None
        )
        pool: Any = self._thread_pool() if use_threads else self._processes()
        if pool is None:
            return None
        try:
            with _held_interrupts() if _may_start(pool) else nullcontext():  # never leave a pool half-started
                future = pool.submit(_call, func, part)
        except (BrokenExecutor, RuntimeError):  # a worker process died since: none from now on
            self._lose()
            return self._start(func, part, threads_first=threads_first)
        if use_threads:
            self._light += 1
        return future  # type: ignore[no-any-return]

    def _result(self, func: Callable[[_A], _R], part: _A, pending: _Pending[_R | _Raised] | None) -> _R:
        if pending is None or (self.lost and not pending.done()):  # once a worker is lost, nothing more is awaited
            if pending is not None:
                pending.cancel()
            return func(part)
        try:
            got = pending.result(timeout=self.task_timeout if self.kind == "dask" else None)
        except Exception:  # noqa: BLE001 - the worker was lost (the function's own errors come as _Raised)
            pending.cancel()
            self._lose()
            return func(part)
        if isinstance(got, _Raised):
            got.exc.add_note(f"raised where it ran:\n{got.where}")
            raise got.exc
        return got

    def _lose(self) -> None:
        """A worker was lost: no processes (or cluster) for this fan-out from now on."""
        self.lost = True
        if self._procs is not None:
            procs, self._procs = self._procs, None
            _stop_processes(procs, wait=False)
        self._no_procs = True

    def _processes(self) -> ProcessPoolExecutor | None:
        """The worker processes, started on first use; None once lost or where none can start."""
        if self._procs is None and not self._no_procs:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                # Forked: a fork server or spawn would re-import the caller's main module in every
                # worker (ADR 0009). The workers never touch the ledger: they get bytes, return bytes.
                context = multiprocessing.get_context(
                    "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
                )
                on_main = threading.current_thread() is threading.main_thread()
                self._procs = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=context, initializer=ignore_interrupts, initargs=(on_main,)
                )
            except (OSError, ValueError):  # pragma: no cover - no processes here: threads where allowed
                self._no_procs = True
        return self._procs

    @property
    def started(self) -> bool:
        """Whether parts go to workers already running (local processes started, or a cluster)."""
        return not self.lost and (self.kind == "dask" or self._procs is not None)

    def start(self) -> None:
        """Fork the local worker processes now, if not yet (other executors: nothing). A command that is
        about to open a ledger and finish big steps calls it first, so that its workers, which hold no
        handle of that ledger, may open one of their own and read its snapshot (store/snapshot.py)."""
        if self.kind == "processes" and self._procs is None and not self.lost:
            procs = self._processes()
            if procs is not None:
                try:  # with fork, the first task starts every worker process, before it returns
                    with _held_interrupts():
                        procs.submit(int)
                except (RuntimeError, OSError):  # pragma: no cover - cannot start them now: they start when needed
                    pass

    def _thread_pool(self) -> ThreadPoolExecutor:
        if self._threads is None:
            from concurrent.futures import ThreadPoolExecutor

            self._threads = ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="pithledger-work")
        return self._threads

    def worker_pids(self) -> list[int]:
        """The local worker processes' ids (tests kill one mid-run)."""
        procs = self._procs
        return sorted(getattr(procs, "_processes", None) or ()) if procs is not None else []

    def close(self, *, abandon: bool = False) -> None:
        """End the executors. ``abandon``: the run stopped (Ctrl-C, an error), so the parts its
        workers are on are not wanted: they are killed at once rather than waited for."""
        if self._threads is not None:
            self._threads.shutdown(cancel_futures=abandon)
            self._threads = None
        if self._procs is not None:
            procs, self._procs = self._procs, None
            _stop_processes(procs, abandon=abandon)
        if self._client is not None:
            try:
                self._client.close(timeout=CONNECT_TIMEOUT)
            except Exception:  # noqa: BLE001 - a scheduler gone: nothing left to close
                pass
            self._client = None

    def __enter__(self) -> Fanout:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(abandon=kind is not None)


_END: Any = object()


class Stream(Generic[_A, _R]):
    """Parts started as they are added, results taken back in the order they were added."""

    def __init__(
        self, fanout: Fanout, func: Callable[[_A], _R], *, parallel: bool | Callable[[_A], bool], threads_first: int
    ) -> None:
        self._fanout = fanout
        self._func = func
        self._parallel = parallel
        self._threads_first = threads_first
        self._tasks: deque[tuple[_A, _Pending[_R | _Raised] | None]] = deque()

    def __len__(self) -> int:
        return len(self._tasks)

    def add(self, part: _A) -> None:
        pending = None
        if self._parallel is True or (callable(self._parallel) and self._parallel(part)):
            pending = self._fanout._start(self._func, part, threads_first=self._threads_first)
        self._tasks.append((part, pending))

    def head_done(self) -> bool:
        pending = self._tasks[0][1]
        return pending is None or pending.done()

    def take(self) -> _R:
        """The oldest part's result (computed here if it was to run here, or its worker was lost)."""
        part, pending = self._tasks.popleft()
        return self._fanout._result(self._func, part, pending)

    def results(self) -> Iterator[_R]:
        while self._tasks:
            yield self.take()

    def cancel(self) -> None:
        """Drop what was not taken (the caller stopped)."""
        for _, pending in self._tasks:
            if pending is not None:
                pending.cancel()
        self._tasks.clear()


# --- the run's fan-out ------------------------------------------------------------------------------

_current: Fanout | None = None


def current() -> Fanout | None:
    """The fan-out the running command chose (--workers, --scheduler), if any: ledger handles opened
    meanwhile use it instead of starting their own."""
    return _current


@contextmanager
def using(fanout: Fanout) -> Iterator[Fanout]:
    """Within it, :func:`current` is ``fanout``; it is closed at the end."""
    global _current
    saved, _current = _current, fanout
    try:
        yield fanout
    except BaseException:
        _current = saved
        fanout.close(abandon=True)
        raise
    _current = saved
    fanout.close()


# --- worker processes --------------------------------------------------------------------------------


@contextmanager
def _held_interrupts() -> Iterator[None]:
    """Within it, a Ctrl-C (SIGINT) is held, and raised as KeyboardInterrupt once it ends: around the
    start of a pool, whose workers are forked one by one and then given a manager thread.

    Interrupted halfway (issue #31), ProcessPoolExecutor is left with workers but no manager thread:
    nothing ever sends them their stop, and multiprocessing's exit handler waits for them for ever.
    And a KeyboardInterrupt raised in an at-fork hook of the parent (logging's) is printed and dropped,
    so the run went on as if never interrupted. So the parent's handler only notes the signal here;
    and the signal is blocked in this thread, so every child is born with it blocked (fork and spawn
    both keep the mask) until its initializer ignores it (:func:`ignore_interrupts`) — a worker never
    sees a Ctrl-C meant for its parent, whenever it came. Off the main thread (no handler can be set
    there, and no KeyboardInterrupt is raised there) only the mask applies."""
    import signal

    # None: a handler set outside Python, which could not be put back: only the mask then
    on_main = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not None
    held: list[int] = []
    previous: Any = None
    if on_main:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    masks = hasattr(signal, "pthread_sigmask")  # not on Windows (spawn only: the handler alone)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masks else set()
    try:
        yield
    finally:
        if masks:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C pending on this thread is noted now
        if on_main:
            signal.signal(signal.SIGINT, previous)
            if held:  # now, to whatever handled it before (KeyboardInterrupt, by default)
                signal.raise_signal(signal.SIGINT)


def _may_start(pool: Any) -> bool:
    """Whether a submit to ``pool`` (of processes or threads) may start workers: not all of them run
    yet, or a process pool has no manager thread yet. Only those submits hold Ctrl-C (it costs tens
    of microseconds, and a run submits a part per bundle). A pool of another shape: yes."""
    running = getattr(pool, "_processes", None)
    if running is None:
        running = getattr(pool, "_threads", None)
    limit = getattr(pool, "_max_workers", None)
    if running is None or not isinstance(limit, int) or len(running) < limit:
        return True
    return getattr(pool, "_executor_manager_thread", False) is None


def _stop_processes(
    pool: ProcessPoolExecutor, *, wait: bool = True, abandon: bool = False, timeout: float = CLOSE_TIMEOUT
) -> None:
    """Shut ``pool`` down: its queued parts dropped, its workers told to stop after their current
    part; ``wait``: wait at most ``timeout`` seconds for that, then kill what is left and reap it;
    ``abandon``: kill them at once (the parts they are on, and those already queued to them, which
    no cancel recalls, would only delay a stopped run's exit by seconds).

    A bound, not a wait for ever: a worker is never joined unboundedly by this process (or by
    multiprocessing's exit handler, which joins every child it started), whatever state the pool
    was left in. Killing one loses nothing: its part is not needed any more."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)
    if not wait:
        return

    def kill() -> None:
        for proc in workers:
            proc.kill()  # a worker the manager has reaped already is skipped
        # A worker killed while it wrote a result leaves half a message in the result pipe, and the
        # manager thread would wait for the rest for ever (concurrent.futures' exit handler joins
        # it: found by bench_interrupt.py), since this process holds a write end of that pipe too.
        # Closed, the pipe ends: the manager reads EOF, counts the pool broken, reaps and returns.
        writer = getattr(results, "_writer", None)
        if writer is not None:
            writer.close()

    if manager is not None:  # it sends each worker its stop, then joins (reaps) them: the one waiter
        if abandon:
            _dropped_cancelled(manager)
            kill()
        manager.join(timeout)
        if manager.is_alive():
            kill()
            manager.join(timeout)  # SIGKILL cannot be refused (bounded all the same)
    else:  # never told to stop (no manager to tell them): nothing to wait for
        kill()
        for proc in workers:
            proc.join(timeout)


def _dropped_cancelled(manager: threading.Thread, bound: float = 1.0) -> None:
    """Wait (at most ``bound`` s) until the pool's manager thread, woken by shutdown(), has dropped
    the parts cancelled meanwhile: a worker killed before that has it mark every part it still holds
    broken, a cancelled one too, which raises InvalidStateError in that thread and prints its
    traceback (Python 3.11; seen by bench/bench_interrupt.py)."""
    import time

    deadline = time.monotonic() + bound
    while manager.is_alive() and time.monotonic() < deadline:
        items = getattr(manager, "pending_work_items", None)
        if not isinstance(items, dict) or not any(item.future.cancelled() for item in list(items.values())):
            return
        time.sleep(0.002)


def ignore_interrupts(deathsig: bool = True) -> None:
    """The initializer of every worker process.

    Workers leave Ctrl-C to the process that started them, which stops them cleanly (a worker
    interrupted mid-task would print a traceback), and they end when that process dies: a killed
    apply or sync (kill -9, the OOM killer) would otherwise leave them blocked on their task queue
    forever, each holding its memory and the ledger's deleted files open (spec/storage.md §7.1).
    ``deathsig``: the pool was started on the main thread (see :func:`_exit_with_parent`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # also drops a Ctrl-C held pending since the fork
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # born blocked: see _held_interrupts
    _exit_with_parent(deathsig)


#: How often a worker's watchdog looks whether its parent is still there (seconds).
_WATCHDOG_SECONDS = 0.5


def _exit_with_parent(deathsig: bool) -> None:
    """End this worker as soon as its parent process is gone. A worker holds nothing but its
    current task, which its parent either redoes in place or no longer needs: no cleanup is owed.

    Linux, ``deathsig``: PR_SET_PDEATHSIG, the kernel sends SIGKILL when the parent dies. It fires
    when the *thread* that forked the worker ends, so it is asked for only for a pool started on
    the main thread. Everywhere: a daemon thread polls os.getppid(), and a reparented worker (its
    parent died before prctl, or there is no prctl) exits within _WATCHDOG_SECONDS."""
    import multiprocessing
    import sys

    parent = multiprocessing.parent_process()
    expected = parent.pid if parent is not None and parent.pid is not None else os.getppid()
    if deathsig and sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog alone
            pass
    if os.getppid() != expected:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        import time

        while os.getppid() == expected:
            time.sleep(_WATCHDOG_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="pithledger-parent-watchdog", daemon=True).start()
