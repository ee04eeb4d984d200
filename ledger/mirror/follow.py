"""Follow mode: run a refresh (``sync``, ``pull``) again and again until told to stop (spec/pull.md §7).

The loop knows nothing of what a run does: ``run`` is any callable. A run that raises a named error
(:class:`~pithledger.errors.PithledgerError`: the source is missing, answers 500, sends a bad manifest,
...) is a *failed* run: it is reported like any other and the next one comes after a jittered
exponential backoff, so a dead source is asked less and less often (up to a cap) and many followers of
one source do not retry in step. Anything else raised (KeyboardInterrupt, a bug) ends the loop.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from pithledger.errors import PithledgerError

__all__ = ["MAX_BACKOFF", "Run", "backoff", "follow"]

T = TypeVar("T")

#: The longest wait after failed runs, whatever ``every`` is (unless ``every`` itself is longer).
MAX_BACKOFF = 3600.0


class Run(NamedTuple, Generic[T]):
    """One run of the loop: its number (from 1), what it returned or the named error it raised, when it
    started (wall clock, seconds since the epoch) and took, the failed runs in a row ending with it (0
    after a run that succeeded), and how long the loop now waits before the next run."""

    number: int
    result: T | None
    error: PithledgerError | None
    started_at: float
    seconds: float
    failures: int
    next_in: float


def backoff(failures: int, every: float, *, rand: Callable[[], float] = random.random) -> float:
    """The wait after ``failures`` failed runs in a row: ``every · 2^(failures−1)``, capped at
    ``max(every, min(10 · every, MAX_BACKOFF))``, then drawn uniformly from its upper half (jitter: many
    followers of one dead source spread out, and each wait is still at least half the capped base)."""
    cap = max(every, min(10 * every, MAX_BACKOFF))
    base = min(cap, every * 2.0 ** min(failures - 1, 60))
    return base * (0.5 + 0.5 * rand())


def follow(
    run: Callable[[], T],
    every: float,
    stop: threading.Event,
    on_run: Callable[[Run[T]], None],
    *,
    rand: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Call ``run`` every ``every`` seconds (start to start; at once again if a run took longer) until
    ``stop`` is set, calling ``on_run`` after each run; returns the number of runs. ``stop`` is checked
    before each run and ends the wait between runs at once: a caller's signal handler sets it. A run in
    progress is not interrupted by the loop; a caller that must end it early (the CLI on SIGTERM) does
    so by its own means, e.g. the KeyboardInterrupt at which ``sync`` and ``pull`` commit their batch."""
    if not every > 0:
        raise ValueError("every must be a positive number of seconds")
    number = failures = 0
    while not stop.is_set():
        number += 1
        began, wall = clock(), time.time()
        result: T | None = None
        error: PithledgerError | None = None
        try:
            result = run()
        except PithledgerError as exc:
            error = exc
        took = clock() - began
        failures = failures + 1 if error is not None else 0
        wait = backoff(failures, every, rand=rand) if failures else max(0.0, every - took)
        on_run(Run(number, result, error, wall, took, failures, wait))
        if wait > 0:
            stop.wait(wait)
    return number
