"""The in-process lane: a test here may start no process and open no listening socket (those are
tests/e2e/'s, which CI runs beside). The library's own worker pools (multiprocessing) are allowed: they
are how a ledger derives, whoever calls it."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.fanout import local  # the fanout tests' fixture (test_fanout.py of this folder)

WRONG_LANE = "the in-process lane (tests/unit) started {what}: move this test to tests/e2e"


@pytest.fixture(autouse=True)
def _in_process_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    seen: list[str] = []

    def refuse(what: str) -> None:
        seen.append(what)  # failed at teardown too, should the test catch the error raised here
        raise AssertionError(WRONG_LANE.format(what=what))

    def popen(self: subprocess.Popen[Any], args: Any, *a: Any, **k: Any) -> None:
        refuse(f"a process ({args!r:.80})")

    def listen(self: socket.socket, *a: Any) -> None:
        refuse("a server (a listening socket)")

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(socket.socket, "listen", listen)
    yield
    if seen:
        pytest.fail(WRONG_LANE.format(what=seen[0]), pytrace=False)


__all__ = ["local"]
