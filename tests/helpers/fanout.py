"""What tests/unit/test_fanout.py and tests/e2e/test_fanout.py share: Worker functions with known timing and faults
(`_slow_square`, `_fails_on_seven`), seeded parts, and the `local` executor fixture."""

from __future__ import annotations

import random
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


def _parts(n: int, seed: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(i, rng.random() * 0.02) for i in range(n)]


@pytest.fixture(params=["in-place", "processes-1", "processes-2"])
def local(request: pytest.FixtureRequest) -> Iterator[Fanout]:
    kind = str(request.param)
    fan = Fanout.in_place() if kind == "in-place" else Fanout.processes(int(kind.rsplit("-", 1)[1]))
    with fan:
        yield fan
