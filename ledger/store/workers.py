"""The worker pools: pure functions of bytes (signature checks, derivation, fsck) run on threads or
worker processes while the single writer goes on, in order, with at most a bounded number of tasks
ahead, and in place when no worker can run them (one core, a worker died). A worker never touches
the ledger (ADR 0009): it gets bytes and returns bytes.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TYPE_CHECKING, TypeVar

from ..events import check_event, is_pithledger_envelope
from .entries import EvidenceEntry, LogEntry, _Checked, _checked_decoder, _checked_encoder, _entry_encoder
from .env import _event_key, _json_decoder

if TYPE_CHECKING:  # imported where used: `state` starts without them (tens of ms)
    from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor


# Copies are verified in chunks of _VERIFY_CHUNK (each hand-over to a worker costs the reading thread
# a GIL round trip with the executor's threads: fewer, larger ones), on threads for a handle's first
# chunks (a small apply does not pay for processes), then on worker processes.
_VERIFY_CHUNK = 512
_PROCESS_AFTER_CHUNKS = 4  # a handle's 4th chunk starts the worker processes
_WORKERS = min(4, os.cpu_count() or 1)
#: finish derives the states of a step on the worker processes when it holds at least this many
#: records (fewer: here, where starting processes would cost more than they save), in tasks of
#: _DERIVE_PART records (or _DERIVE_PART_ENTRIES log entries), at most _DERIVE_AHEAD tasks ahead of the
#: writer (bounds what waits in memory).
_PARALLEL_STATES = 256
_DERIVE_PART = 256
_DERIVE_PART_ENTRIES = 2048  # a part also closes at this many log entries gathered
_DERIVE_AHEAD = 2 * _WORKERS


def _verify_offers(items: list[tuple[bytes, str, bool]]) -> bytes:
    """What the writer stores for a chunk of offered copies (a msgpack list of :class:`_Checked`):
    each copy's verdict, and for a valid one its ids key and its log entry's bytes, for another its
    evidence entry's. Items: (canonical bytes, recomputed id or "", whether the caller vouches that
    the Ed25519 signature of these exact bytes verified before: rebuild). Runs on the ledger's worker
    processes (or threads) while the thread that reads the input goes on. Every copy is verified from
    its canonical bytes (what the log and the evidence hold, what fsck re-verifies), decoded plainly:
    they are the encoding of a strictly decoded value."""
    out = []
    for data, cid, known in items:
        event = _json_decoder.decode(data)
        v = check_event(event, event_id=cid or None, size=len(data), signature_known_good=known)
        if v.status == "valid":
            entry = LogEntry(seq=0, event=data, facts=v.facts, event_id="" if is_pithledger_envelope(event) else v.event_id)
            out.append(_Checked(_event_key(v.event_id), _entry_encoder.encode(entry), "cited" in v.facts or "revokes" in v.facts))
        else:
            out.append(_Checked(None, _entry_encoder.encode(EvidenceEntry(event=data, verdict=v)), verdict=v))
    return _checked_encoder.encode(out)


_T = TypeVar("_T", covariant=True)
_A = TypeVar("_A")
_R = TypeVar("_R")


class _Pending(Protocol[_T]):
    """What the writer needs of a result computed elsewhere (a Future, or _Done)."""

    def result(self) -> _T: ...
    def done(self) -> bool: ...
    def cancel(self) -> bool: ...


class _Done(Generic[_T]):
    """A result computed in place (no worker pool)."""

    def __init__(self, value: _T) -> None:
        self._value = value

    def result(self) -> _T:
        return self._value

    def done(self) -> bool:
        return True

    def cancel(self) -> bool:
        return False


def _outcome(part: _Pending[bytes], items: list[tuple[bytes, str, bool]]) -> list[_Checked]:
    from concurrent.futures import BrokenExecutor

    try:
        encoded = part.result()
    except BrokenExecutor:  # a worker process died (killed, out of memory): verify here instead
        encoded = _verify_offers(items)
    return _checked_decoder.decode(encoded)


def ignore_interrupts(deathsig: bool = True) -> None:
    """The initializer of every worker process (the ledger's, and apply's checker in cli/_bundles.py).

    Workers leave Ctrl-C to the process that started them, which stops them cleanly (a worker
    interrupted mid-task would print a traceback), and they end when that process dies: a killed
    apply or sync (kill -9, the OOM killer) would otherwise leave them blocked on their task queue
    forever, each holding its memory and the ledger's deleted files open (spec/storage.md §7.1).
    ``deathsig``: the pool was started on the main thread (see :func:`_exit_with_parent`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
    import threading

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


class _Workers:
    """The pools of one ledger handle and the ordered fan-out of pure work onto them."""

    _pool: ThreadPoolExecutor | None
    _procs: ProcessPoolExecutor | None  # signature checks of big runs (see _signature_pool)
    _chunks_checked: int
    _no_procs: bool

    def _signature_pool(self) -> Executor | None:
        """Where a chunk of Ed25519 checks runs. Threads would do (libsodium releases the GIL), but a
        thread must take the GIL back after every check, and while the caller's thread runs Python it
        gets it only once per switch interval, so checks crawl exactly when they should overlap
        (measured: a tenth of them done while the main thread decodes). From the _PROCESS_AFTER_CHUNKS-th
        chunk on (a big run), they go to worker processes, which need no GIL; if none can be started, to threads."""
        self._chunks_checked += 1
        if self._chunks_checked >= _PROCESS_AFTER_CHUNKS:
            self._process_pool()
        return self._procs or self._pool

    def _process_pool(self) -> Executor | None:
        """The worker processes (started if need be), or None where there are none (one core, no
        processes allowed, or one died: from then on this handle works in place)."""
        if self._procs is None and _WORKERS > 1 and not self._no_procs:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                # The workers never touch the ledger (an LMDB environment must not be used across fork,
                # nor opened twice in one process): they get bytes and return bytes.
                context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
                import threading

                on_main = threading.current_thread() is threading.main_thread()
                self._procs = ProcessPoolExecutor(max_workers=_WORKERS, mp_context=context, initializer=ignore_interrupts,
                                                  initargs=(on_main,))
            except (OSError, ValueError):  # pragma: no cover - no processes here: threads
                self._no_procs = True
        return self._procs

    def _verify(self, items: list[tuple[bytes, str, bool]]) -> _Pending[bytes]:
        pool = self._signature_pool()
        if pool is None:
            return _Done(_verify_offers(items))
        from concurrent.futures import BrokenExecutor

        try:
            return pool.submit(_verify_offers, items)
        except (BrokenExecutor, RuntimeError):  # a worker process died (killed, out of memory): no processes from now on
            if pool is self._procs:
                self._drop_procs()
            return _Done(_verify_offers(items))

    def _drop_procs(self) -> None:
        """A worker process died: no processes for this handle from now on (the work is done in place)."""
        if self._procs is not None:
            self._procs.shutdown(wait=False, cancel_futures=True)
            self._procs = None
        self._no_procs = True

    def _start_pool(self) -> None:
        if self._pool is None and _WORKERS > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="pithledger-work")

    def _on_workers(self, func: Callable[[list[_A]], _R], parts: Iterator[list[_A]], *, parallel: bool) -> Iterator[_R]:
        """``func(part)`` of each part, in order: computed on the worker processes (at most
        _DERIVE_AHEAD parts ahead) when ``parallel`` (work big enough to pay for them) and there are
        any, else here. A part whose worker fails (killed, out of memory) is computed here instead:
        the outcome never depends on the workers."""
        from concurrent.futures import BrokenExecutor

        running: deque[tuple[list[_A], _Pending[_R] | None]] = deque()
        while True:
            while len(running) < _DERIVE_AHEAD and (part := next(parts, None)) is not None:
                pool, future = self._process_pool() if parallel else None, None
                if pool is not None:
                    try:
                        future = pool.submit(func, part)
                    except (BrokenExecutor, RuntimeError):
                        self._drop_procs()
                running.append((part, future))
            if not running:
                return
            part, waiting = running.popleft()
            if waiting is None:
                yield func(part)
                continue
            try:
                result = waiting.result()
            except BrokenExecutor:
                self._drop_procs()
                result = func(part)
            yield result
