"""Adversarial review of the lingering close (spec/serve.md §4) and the action body cost cap (§8): each test is a
fault found against a real server on 127.0.0.1 (tests/servekit.py)."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import servekit

VECTORS = Path(__file__).resolve().parents[2] / "vectors"
RECORD_DOC = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
ACTION = f"/pith/{SUFFIX}/action/author_attestation"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("review-serve")
    subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp / "L"), "apply", str(RECORD_DOC)],
        env=_env(tmp),
        capture_output=True,
        check=True,
        timeout=120,
    )
    return tmp, tmp / "L"


@pytest.fixture
def limited(ledger: tuple[Path, Path]) -> Iterator[servekit.Server]:
    """A server whose POST rate is spent after one request: every further POST is an early 429."""
    tmp, path = ledger
    srv = servekit.Server(path, _env(tmp), "--accept-events", "--post-rate", "0.001", "--post-burst", "1", timeout=30.0)
    yield srv
    srv.stop()


def _sockets(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts the server's sockets in /proc")
def test_a_client_that_closes_right_after_an_early_answer_does_not_leak_its_connection(
    limited: servekit.Server,
) -> None:
    # http.client sends head and a 1 MB body (it fits in loopback's buffers), reads the 429 head and closes: its reset
    # often reaches the server between the answer and the lingering close's shutdown(SHUT_WR), which then raised
    # ENOTCONN inside _linger -- after `lingering` was set, before reading was resumed and the linger timer armed. The
    # error was swallowed (by the ASGI send path), so the connection stayed forever: reading paused, no timer, its
    # socket open and its place held under the 32-per-address and 512-total caps. 40 such requests locked the client's
    # address out (503 too-many-connections) until the server restarted.
    assert limited.request("/digest.json")[0] == 200  # the event loop (and its self-pipe sockets) runs
    baseline = _sockets(limited.proc.pid)
    statuses = []
    for _ in range(40):
        conn = http.client.HTTPConnection("127.0.0.1", limited.port, timeout=10)
        try:
            conn.request("POST", ACTION, body=b" " * 1_000_000)
            statuses.append(conn.getresponse().status)
        except OSError:
            statuses.append(0)  # reset before the answer was read: allowed, not the point
        finally:
            conn.close()
    assert statuses.count(429) >= 30, statuses
    deadline = time.monotonic() + 15  # every linger ends within 5 s of its last byte
    while time.monotonic() < deadline and _sockets(limited.proc.pid) > baseline:
        time.sleep(0.5)
    assert _sockets(limited.proc.pid) <= baseline, "lingering connections were never closed"
    status, _, body = limited.request("/digest.json")
    assert status == 200, (status, body[:200])


def test_sigterm_ends_a_lingering_close_that_starts_after_the_stop(ledger: tuple[Path, Path]) -> None:
    # spec/serve.md §4: "A server that stops ends its lingering connections at once". A request whose body was still
    # arriving when SIGTERM came is answered (408 body-timeout after 30 s; uvicorn waits for it), and its lingering
    # close then started after the stop, so nothing ended it: a client trickling a byte every second kept the
    # stopping server up for another 30 s (60 s in all, measured).
    tmp, path = ledger
    srv = servekit.Server(path, _env(tmp), "--accept-events", timeout=30.0)
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=1)
    try:
        sock.sendall(f"POST {ACTION} HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n{{".encode())
        time.sleep(0.5)
        started = time.monotonic()
        srv.proc.terminate()
        answered = None
        while srv.proc.poll() is None and time.monotonic() - started < 50:
            try:
                sock.send(b" ")
                if sock.recv(4096) and answered is None:
                    answered = time.monotonic() - started
            except TimeoutError:
                pass
            except OSError:
                time.sleep(1)
                continue
            time.sleep(1)
        stopped = srv.proc.poll() is not None
        took = time.monotonic() - started
    finally:
        sock.close()
        if srv.proc.poll() is None:
            srv.proc.kill()
        srv.proc.wait()
    assert stopped
    assert answered is not None and answered < 35, answered  # the 408 body-timeout (30 s), as before, and read
    assert took < answered + 3, f"the server took {took:.0f} s to stop; its answer was sent after {answered:.0f} s"


def test_a_get_with_a_body_over_the_head_cap_is_answered_413_not_reset(ledger: tuple[Path, Path]) -> None:
    # A GET (or HEAD, OPTIONS) sending more than 16 KiB after its head, before it is answered, is cut off by the
    # connection guard: _stop() sees "a request in flight" and closes at once, assuming an answer is being written,
    # though none has started. The close with the client's bytes unread resets the connection: the client gets no
    # answer at all (spec/serve.md §4 promises 431 for an over-long head, and the lingering close for early answers).
    tmp, path = ledger
    srv = servekit.Server(path, _env(tmp), timeout=30.0)
    try:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            sock.sendall(b"GET /digest.json HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100_000)
            got = b""
            try:
                while chunk := sock.recv(65536):
                    got += chunk
            except ConnectionResetError:
                pass
        finally:
            sock.close()
        assert got.startswith(b"HTTP/1.1 413 "), got[:200]
        assert b"body-too-large" in got
    finally:
        srv.stop()
