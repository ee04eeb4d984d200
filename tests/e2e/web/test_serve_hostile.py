"""`pithledger serve` under load and hostility (issue #20 §2, spec/serve.md §4): a real server process on
127.0.0.1 over a real LMDB ledger; every wait bounded (socket timeouts, deadlines), nothing but loopback."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.common import TESTS
from helpers.eventpool import BOB, EVE, P, bundles_of, pool
from pithledger.audit import DEPTH, Pair, bucket_pair, inner_pair, record_pair
from pithledger.mirror.publish import node_file
from pithledger.records.events import make_event
from pithledger.store import Ledger

ATTACKER = "127.0.0.2"  # all of 127.0.0.0/8 is loopback: the attacker is another client address than the test's


class Server:
    """``pithledger.web.serve.run`` in its own process, with the limits given (short timeouts keep tests short)."""

    def __init__(self, ledger: Path, **limits: Any) -> None:
        code = (
            "import sys, json; from pathlib import Path; from pithledger.web.serve import run, Limits; "
            "run(Path(sys.argv[1]), port=0, limits=Limits(**json.loads(sys.argv[2])))"
        )
        env = {k: v for k, v in os.environ.items() if k != "PITHLEDGER_LEDGER"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(ledger), json.dumps(limits)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"at http://127\.0\.0\.1:(\d+)/", line)
        assert m, line + (self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(m[1])

    def get(self, path: str, timeout: float = 20.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "ledger"
    with Ledger(path, create=True) as led:
        led.apply_batch(bundles_of(pool()))
    return path


@pytest.fixture
def server(ledger: Path) -> Iterator[Server]:
    s = Server(ledger, head_timeout=2.0)
    yield s
    s.stop()


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return s


def _read_all(s: socket.socket, limit: int = 1 << 20) -> bytes:
    out = b""
    try:
        while len(out) < limit:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


# --- 1. slowloris --------------------------------------------------------------------------------------------


def test_one_client_holding_a_thousand_half_sent_requests_does_not_starve_the_others(server: Server) -> None:
    held: list[socket.socket] = []
    try:
        for _ in range(1000):
            s = _connect(server.port, ATTACKER)
            s.sendall(b"GET /digest.json HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
            held.append(s)
        # Another client is answered while they are held, at once: no 503, no wait for any timeout.
        for _ in range(5):
            status, body = server.get("/digest.json", timeout=10)
            assert status == 200, body
        # The attacker's excess connections were refused with a named 503, the admitted ones time out (408).
        answers = [_read_all(s) for s in held[-3:]]
        assert all(a.startswith(b"HTTP/1.1 503 ") and b'"too-many-connections"' in a for a in answers), answers
        deadline = time.monotonic() + 20
        first = held[0]
        first.settimeout(max(0.1, deadline - time.monotonic()))
        late = _read_all(first)
        assert late.startswith(b"HTTP/1.1 408 ") and b'"request-timeout"' in late, late
    finally:
        for s in held:
            s.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_head_deadline(server: Server) -> None:
    s = _connect(server.port)
    try:
        s.settimeout(20)
        assert _read_all(s).startswith(b"HTTP/1.1 408 ")
    finally:
        s.close()
    assert server.get("/digest.json")[0] == 200


def test_the_per_client_cap_refuses_the_excess_only(server: Server) -> None:
    held = [_connect(server.port, ATTACKER) for _ in range(32)]
    try:
        extra = _connect(server.port, ATTACKER)
        extra.sendall(b"GET /digest.json HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_all(extra)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503 ") and b"retry-after: 5" in answer and b"too-many-connections" in answer
        # a held one is still served normally
        held[0].sendall(b"GET /digest.json HTTP/1.1\r\nHost: x\r\n\r\n")
        held[0].settimeout(10)
        assert held[0].recv(65536).startswith(b"HTTP/1.1 200 ")
    finally:
        for s in held:
            s.close()
    assert server.get("/digest.json")[0] == 200


# --- 2. request heads are bounded before they are parsed ----------------------------------------------------


def _flood_head(server: Server, opening: bytes) -> tuple[int, bytes]:
    """Send ``opening`` then a header value of up to 64 MiB until the server stops reading; what was sent, and the
    answer."""
    s = _connect(server.port)
    s.settimeout(3)
    sent = 0
    try:
        s.sendall(opening)
        chunk = b"a" * 65536
        try:
            while sent < 64 * 1024 * 1024:
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        return sent, _read_all(s)
    finally:
        s.close()


def test_a_huge_header_is_refused_431_after_reading_a_bounded_prefix(server: Server) -> None:
    before = server.cpu_seconds()
    sent, answer = _flood_head(server, b"GET /digest.json HTTP/1.1\r\nHost: x\r\nX-Big: ")
    # The server stopped reading long before 64 MiB (the socket buffers hold a few MiB at most).
    assert sent < 16 * 1024 * 1024, sent
    assert answer.startswith(b"HTTP/1.1 431 ") and b'"request-too-long"' in answer, answer[:200]
    assert server.cpu_seconds() - before < 2.0  # before the bound: tens of seconds, quadratic in the value
    assert server.get("/digest.json")[0] == 200


def test_a_huge_head_pipelined_behind_a_request_in_flight_is_bounded_too(server: Server) -> None:
    """A head sent while the previous request is still being answered is counted too: only a POST's
    body may exceed a head's worth of bytes in flight, and only up to an action's body size."""
    sent, answer = _flood_head(
        server, b"GET /digest.json HTTP/1.1\r\nHost: x\r\n\r\nGET /digest.json HTTP/1.1\r\nHost: x\r\nX-Big: "
    )
    assert sent < 16 * 1024 * 1024, sent
    # the server stopped reading it: answered 431, or (its first answer still being written) closed
    assert answer == b"" or b"HTTP/1.1 431 " in answer, answer[:300]
    assert server.get("/digest.json")[0] == 200


def test_a_head_of_many_small_headers_is_bounded_too_and_a_normal_head_passes(server: Server) -> None:
    s = _connect(server.port)
    try:
        s.sendall(
            b"GET /digest.json HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(4000)) + b"\r\n"
        )
        assert _read_all(s).startswith(b"HTTP/1.1 431 ")
    finally:
        s.close()
    status, _ = server.get("/digest.json", headers={f"X-{i}": "v" * 100 for i in range(50)})  # ~6 KiB: fine
    assert status == 200


# --- 3. one snapshot per document, while another process applies ----------------------------------------

WRITER = """
import random, sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from pithledger.records.events import make_event
from pithledger.store import Ledger
from helpers.eventpool import BOB, bundles_of
rng = random.Random(7)
with Ledger(Path(sys.argv[1])) as led:
    for b in range(int(sys.argv[3])):
        subjects = ["pith:2026:" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(26)) for _ in range(4)]
        led.apply_batch(bundles_of([make_event("graph_snapshot", s, {"graph_snapshot": {"b": b}}, BOB,
                                               created_at="2026-07-01T00:00:00Z") for s in subjects]))
"""


def _pair(doc: dict[str, str]) -> Pair:
    return Pair(bytes.fromhex(doc["events"]), bytes.fromhex(doc["states"]))


def test_node_documents_hash_to_their_digest_while_apply_commits(ledger: Path, tmp_path: Path) -> None:
    import shutil

    live = tmp_path / "live"
    shutil.copytree(ledger, live)
    server = Server(live)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(live), str(TESTS), "400"])
    checked, bad = 0, []
    try:
        deadline = time.monotonic() + 60
        while writer.poll() is None and time.monotonic() < deadline:
            status, body = server.get("/pithledger/digest.json")
            assert status == 200
            prefix, pair = "", _pair(json.loads(body)["root"])
            while True:  # walk down one path: every node answered must hash to the digest it is named by
                status, body = server.get(
                    "/" + node_file(prefix, {"digest": {"events": pair.events.hex(), "states": pair.states.hex()}})
                )
                if status in (404, 503):  # changed since (or pending): the reader starts again
                    break
                doc = json.loads(body)
                checked += 1
                if len(prefix) < DEPTH:
                    kids = {c: _pair(p) for c, p in doc["children"].items()}
                    if inner_pair(prefix, kids) != _pair(doc["digest"]):
                        bad.append(prefix or "root")
                    if not kids:
                        break
                    c = sorted(kids)[checked % len(kids)]
                    prefix, pair = prefix + c, kids[c]
                else:
                    recs = {n: record_pair(r["event_ids"], r["state_sha256"]) for n, r in doc["records"].items()}
                    if bucket_pair(recs) != _pair(doc["digest"]):
                        bad.append(prefix)
                    break
    finally:
        writer.kill()
        writer.wait(10)
        server.stop()
    assert checked >= 50, checked
    assert not bad, f"{len(bad)} of {checked} node documents did not hash to their own digest: {bad[:5]}"


# --- 4. a record flooded with valid events --------------------------------------------------------------


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger whose record P[0] holds 220 valid findings of 60 kB each: a state of some 13 MB."""
    path = tmp_path_factory.mktemp("flood") / "ledger"
    big = [
        make_event(
            "integrity_finding",
            P[0],
            {"severity": "info", "finding_type": "note", "description": f"{i} " + "x" * 60_000},
            [BOB, EVE][i % 2],
            created_at=f"2026-07-{1 + i % 28:02d}T00:{i // 60:02d}:{i % 60:02d}Z",
        )
        for i in range(220)
    ]
    with Ledger(path, create=True) as led:
        led.apply_batch(bundles_of(pool()))
        led.apply_batch(bundles_of(big))
    return path


def test_a_flooded_record_page_is_bounded(flooded: Path) -> None:
    path = flooded
    server = Server(path)
    try:
        suffix = P[0].split(":")[2]
        status, page = server.get(f"/pith/{suffix}")
        assert status == 200 and re.search(rb"[0-9]+ more in", page)  # 200 rows shown, the rest named
        assert len(page) < 1024 * 1024, len(page)  # each row's text is cut: not 200 x 60 kB
        assert page.count(b"x" * 290) >= 150 and b"x" * 300 not in page  # cut to 300 characters
        status, state = server.get(f"/pith/{suffix}/state.json")
        assert status == 200 and state.count(b"x" * 60_000) == 220  # the whole text is still served, in the state
    finally:
        server.stop()


# --- 4. a client that stops reading ------------------------------------------------------------------------


def _request_unread(port: int, path: str) -> socket.socket:
    """A GET from the attacker's address on a socket with a tiny receive window, its answer left unread."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    s.bind((ATTACKER, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


@pytest.mark.parametrize(
    ("request_line", "limits"),
    [
        # the defaults' order: keep-alive (5 s) ends before the send deadline (30 s), and uvicorn then closes the
        # connection with the body still held; a first version stopped watching a closing connection
        ("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n", {"keep_alive": 1, "send_timeout": 2.0}),
        (
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            {"send_timeout": 1.0},
        ),  # closed right after the answer
        ("GET {path} HTTP/1.0\r\n\r\n", {"send_timeout": 1.0}),
    ],
    ids=["keep-alive-ends-first", "connection-close", "http-1.0"],
)
def test_a_stalled_response_on_a_closing_connection_is_dropped_too(
    flooded: Path, request_line: str, limits: dict[str, Any]
) -> None:
    server = Server(flooded, **limits)
    suffix = P[0].split(":")[2]
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((ATTACKER, 0))
        s.settimeout(10)
        s.connect(("127.0.0.1", server.port))
        try:
            s.sendall(request_line.format(path=f"/pith/{suffix}/state.json").encode())
            time.sleep(3 * limits["send_timeout"] + limits.get("keep_alive", 0))  # reads nothing meanwhile
            got = _read_all(s, limit=14_000_000)
        finally:
            s.close()
        assert got.startswith((b"HTTP/1.1 200 ", b"HTTP/1.0 200 ")) and len(got) < 6_000_000, len(
            got
        )  # cut off: the body is 13 MB
        assert server.get("/digest.json")[0] == 200
    finally:
        server.stop()


def test_a_client_that_stops_reading_a_large_response_is_dropped_after_the_send_deadline(flooded: Path) -> None:
    server = Server(flooded, send_timeout=1.0)
    suffix = P[0].split(":")[2]
    try:
        status, whole = server.get(f"/pith/{suffix}/state.json")
        assert status == 200 and len(whole) > 12_000_000
        stalled = _request_unread(server.port, f"/pith/{suffix}/state.json")
        paused = _request_unread(server.port, f"/pith/{suffix}/state.json")
        try:
            time.sleep(0.3)  # a pause well inside the deadline costs nothing: this one reads it all
            paused.settimeout(30)
            got = _read_all(paused, limit=len(whole) + 65536)
            assert got.endswith(whole), len(got)
            time.sleep(3.0)  # the other one reads nothing for 3 x the deadline: the server drops it
            stalled.settimeout(10)
            got = _read_all(stalled, limit=len(whole) + 65536)
            assert got.startswith(b"HTTP/1.1 200 ") and len(got) < len(whole) // 2, len(got)  # cut off, not delivered
        finally:
            stalled.close()
            paused.close()
        assert server.get("/digest.json")[0] == 200  # and the server answers as before
    finally:
        server.stop()
