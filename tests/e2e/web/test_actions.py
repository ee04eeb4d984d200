"""`serve --accept-events` and `pithledger submit`, end to end through real processes (spec/serve.md §8):
a real ledger holding Pith's receipted record FHIBFT2FCAH6TNYKWKJEBOYM4L, real keys and signatures,
real servers on 127.0.0.1, a second mirror that syncs and pulls what was submitted."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import servekit
from helpers.common import TESTS
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.web.actions import MAX_BODY

VECTORS = TESTS / "vectors"
RECORD_DOC = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
NUMBER = "pith:2025:" + SUFFIX
ACTION = f"/pith/{SUFFIX}/action/author_attestation"
PAYLOAD = '{"author_name":"Josiah Carberry","orcid":"0000-0002-1825-0097"}'


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


def pl(tmp: Path, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args],
        capture_output=True,
        text=True,
        env=_env(tmp),
        timeout=120,
        input=stdin,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


class Server(servekit.Server):
    def __init__(self, ledger: Path, tmp: Path, *extra: str) -> None:
        super().__init__(ledger, _env(tmp), *extra, timeout=60.0)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(tmp, ledger, e.json): a ledger holding Pith's record, a key `alice`, and her signed attestation."""
    tmp = tmp_path_factory.mktemp("actions")
    ledger = tmp / "L"
    pl(tmp, "--ledger", str(ledger), "apply", str(RECORD_DOC))
    pl(tmp, "keys", "new", "alice")
    pl(
        tmp,
        "--ledger",
        str(ledger),
        "event",
        "author_attestation",
        "--subject",
        SUFFIX,
        "--key",
        "alice",
        "--payload",
        PAYLOAD,
        "--created-at",
        "2026-06-01T00:00:00Z",
        "-o",
        str(tmp / "e.json"),
    )
    yield tmp, ledger, tmp / "e.json"


@pytest.fixture(scope="module")
def server(site: tuple[Path, Path, Path]) -> Iterator[Server]:
    tmp, ledger, _ = site
    srv = Server(
        ledger, tmp, "--accept-events", "--post-rate", "1000", "--post-burst", "1000", "--post-total-rate", "1000"
    )
    yield srv
    srv.stop()


def _event_of(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text())["events"][0]
    return value


def _key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"actions test {name}".encode()).digest())


def _attestation(n: int, key: LocalKey | None = None) -> dict[str, Any]:
    return make_event(
        "author_attestation",
        NUMBER,
        {"author_name": f"Author {n}"},
        key or _key("bob"),
        created_at=f"2026-06-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z",
    )


def _post(srv: Server, event: dict[str, Any], path: str = ACTION) -> tuple[int, dict[str, str], Any]:
    status, headers, body = srv.request(
        path, "POST", body=canonical_bytes(write_bundle(NUMBER, [event])), headers={"content-type": "application/json"}
    )
    return status, headers, json.loads(body)


def test_submit_shows_in_state_and_reaches_other_mirrors_by_sync_and_pull(
    site: tuple[Path, Path, Path], server: Server
) -> None:
    tmp, ledger, e = site
    event_id = _event_of(e)["event_id"]
    before = server.json("/digest.json")
    out = pl(tmp, "submit", str(e), server.base)
    assert out.stdout.startswith("new ") and event_id in out.stdout and "(HTTP 201)" in out.stdout
    # at once: the state, the record page and the digests (derived in the same commit)
    state = server.json(f"/pith/{SUFFIX}/state.json")
    assert event_id in [a["event_id"] for a in state["current"]["author_attestations"]]
    status, _, page = server.request(f"/pith/{SUFFIX}")
    assert status == 200 and b"Josiah Carberry" in page
    after = server.json("/digest.json")
    assert after["events"] == before["events"] + 1 and after["states_root"] != before["states_root"]
    # durable and held: the same event again is 200, a duplicate; the ledger is unchanged
    again = json.loads(pl(tmp, "submit", str(e), server.base, "--json").stdout)
    assert (
        again["refused"] == 0
        and again["events"][0]["status"] == "duplicate"
        and again["events"][0]["http_status"] == 200
    )
    assert server.json("/digest.json") == after
    # other mirrors get it like any other event
    synced = tmp / "synced"
    pl(tmp, "--ledger", str(synced), "sync", server.base)
    got = json.loads(pl(tmp, "--ledger", str(synced), "state", SUFFIX).stdout)
    assert event_id in [a["event_id"] for a in got["current"]["author_attestations"]]
    pulled = tmp / "pulled"
    pl(tmp, "--ledger", str(pulled), "pull", server.base, SUFFIX)
    got = json.loads(pl(tmp, "--ledger", str(pulled), "state", SUFFIX).stdout)
    assert event_id in [a["event_id"] for a in got["current"]["author_attestations"]]
    digest = json.loads(pl(tmp, "--ledger", str(synced), "digest", "--json").stdout)
    assert digest["states_root"] == after["states_root"]


def test_a_tampered_event_is_422_and_nothing_is_kept(site: tuple[Path, Path, Path], server: Server) -> None:
    tmp, ledger, e = site
    bad = tmp / "tampered.json"
    bad.write_text(e.read_text().replace("Josiah Carberry", "Mallory Forger"))
    forged = _event_of(e) | {"payload": {"author_name": "Mallory Forger"}}
    forged.pop("event_id")
    forged["event_id"] = (
        "sha256:" + hashlib.sha256(canonical_bytes(forged)).hexdigest()
    )  # a right id, a wrong signature
    before = server.json("/digest.json")
    out = pl(tmp, "submit", str(bad), server.base, check=False)
    assert (
        out.returncode == 1
        and out.stdout.startswith("invalid ")
        and "[id-mismatch]" in out.stdout
        and "(HTTP 422)" in out.stdout
    )
    status, headers, body = _post(server, forged)
    assert status == 422 and body["error"] == "bad-signature" and body["events"][0]["status"] == "invalid"
    assert headers["cache-control"] == "no-store"
    assert server.json("/digest.json") == before
    held = json.loads(pl(tmp, "--ledger", str(ledger), "evidence", "--json").stdout)
    assert (held["entries"], held["records"]) == (0, {})  # not even as evidence


def test_wrong_kind_subject_or_body_is_400(site: tuple[Path, Path, Path], server: Server) -> None:
    _, _, e = site
    event = _event_of(e)
    status, _, body = _post(server, event, f"/pith/{SUFFIX}/action/timestamp_anchor")
    assert (status, body["error"]) == (400, "kind-mismatch")
    other = make_event(
        "author_attestation",
        "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P",
        {"author_name": "X"},
        _key("bob"),
        created_at="2026-06-01T00:00:00Z",
    )
    status, _, raw = server.request(ACTION, "POST", body=canonical_bytes(other))  # a bare event, about another record
    assert (status, json.loads(raw)["error"]) == (400, "subject-mismatch")
    for junk, code in ((b"{", "malformed-json"), (b'{"a":1.5}', "float-not-allowed"), (b"[]", "bad-bundle")):
        status, _, raw = server.request(ACTION, "POST", body=junk)
        assert (status, json.loads(raw)["error"]) == (400, code), junk
    status, _, raw = server.request(f"/pith/{SUFFIX}/action/record_created", "POST", body=canonical_bytes(event))
    assert status == 404
    status, _, raw = server.request(
        "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/action/author_attestation", "POST", body=canonical_bytes(event)
    )
    assert status == 404
    status, _, _ = server.request(ACTION)  # GET of an action URL
    assert status == 404


def _raw_post(port: int, head_length: int, body: bytes, chunked: bool = False) -> bytes:
    """A POST that declares ``head_length`` (or is chunked), sends ``body``, and returns what the server says."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {head_length}"
        sock.sendall(
            f"POST {ACTION} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n\r\n".encode()
        )
        try:
            if chunked:
                for i in range(0, len(body), 65536):
                    part = body[i : i + 65536]
                    sock.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            else:
                sock.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking it all: what it should do
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_a_large_body_is_413_before_it_is_read(server: Server) -> None:
    # a declared 5 MB body: refused on its head, after a few bytes only
    answer = _raw_post(server.port, 5 * 1024 * 1024, b"{" * 1000)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # a chunked body declares nothing: counted while it streams
    answer = _raw_post(server.port, 0, b" " * (MAX_BODY + 1), chunked=True)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # the server goes on
    assert server.json("/digest.json")["records"] == 1


#: An oversized body as Python's standard library sends one: whole, before it reads a byte of the answer.
BIG = 5 * 1024 * 1024


def _big_body(chunked: bool) -> bytes | Iterator[bytes]:
    """The bytes (sent with Content-Length), or a generator (sent chunked, in 64 KiB chunks, by urllib and
    http.client: they can tell no length)."""
    if not chunked:
        return b" " * BIG
    return (b" " * 65536 for _ in range(BIG // 65536))


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_body_is_413_for_clients_that_send_it_all_before_reading(
    server: Server, tmp_path: Path, chunked: bool
) -> None:
    """urllib.request and http.client send the whole body, then read: the server answers 413 early, and a
    close with their bytes unread would reset the connection (ECONNRESET, the 413 lost). The server half-closes
    and drains the rest (the lingering close, spec/serve.md §4), so each sees the 413, every time."""
    for _ in range(3):
        request = urllib.request.Request(
            server.base + ACTION, data=_big_body(chunked), method="POST", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 413 and json.loads(refused.value.read())["error"] == "body-too-large"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.request("POST", ACTION, body=_big_body(chunked), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 413 and resp.getheader("connection") == "close"
            assert json.loads(resp.read())["error"] == "body-too-large"
        finally:
            conn.close()
    curl = shutil.which("curl")
    if curl is not None:  # curl reads the answer after a failed send: it saw the 413 before, and still does
        big = tmp_path / "big.json"
        big.write_bytes(b" " * BIG)
        framing = ["-H", "Transfer-Encoding: chunked"] if chunked else []
        out = subprocess.run(
            [
                curl,
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-H",
                "Content-Type: application/json",
                *framing,
                "--data-binary",
                f"@{big}",
                server.base + ACTION,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stdout == "413", out.stdout + out.stderr
    assert server.json("/digest.json")["records"] == 1


def test_the_lingering_close_drains_a_client_that_never_stops_sending_only_so_far(server: Server) -> None:
    """After the 413 the server reads on and drops what arrives, but at most Limits.linger_bytes (16 MiB):
    a client sending without end is then cut off, it does not get to stream into the server for linger_time."""
    from pithledger.web.serve import Limits

    block = b" " * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(f"POST {ACTION} HTTP/1.1\r\nHost: x\r\nContent-Length: {10**15}\r\n\r\n".encode())
        with pytest.raises(OSError):  # the reset (or broken pipe) of the close after the drain
            while sent < 1 << 30:
                sock.sendall(block)
                sent += len(block)
    # what the kernel's buffers take on both sides (loopback autotuning: a few MiB each) comes on top
    assert sent < Limits().linger_bytes + 32 * 1024 * 1024, sent
    assert server.json("/digest.json")["records"] == 1


def test_a_burst_is_429_with_retry_after(site: tuple[Path, Path, Path]) -> None:
    tmp, ledger, e = site
    srv = Server(ledger, tmp, "--accept-events", "--post-rate", "0.5", "--post-burst", "3")
    try:
        event = _event_of(e)
        statuses = [_post(srv, event) for _ in range(6)]
        codes = [s for s, _, _ in statuses]
        # the first is 201 where this worker's ledger did not hold the event yet (pytest -n: the module's tests
        # may run on other workers, each with its own `site`), 200 where an earlier test put it there
        assert codes[0] in (200, 201) and codes[1:3] == [200, 200] and set(codes[3:]) == {429}, codes
        _, headers, body = statuses[-1]
        assert body["error"] == "rate-limited" and int(headers["retry-after"]) >= 1
    finally:
        srv.stop()


def test_without_accept_events_post_is_405(site: tuple[Path, Path, Path]) -> None:
    tmp, ledger, e = site
    srv = Server(ledger, tmp)
    try:
        status, headers, raw = srv.request(ACTION, "POST", body=e.read_bytes())
        assert status == 405 and json.loads(raw)["error"] == "method-not-allowed" and "POST" not in headers["allow"]
        status, headers, _ = srv.request(ACTION, "OPTIONS")  # nor does its CORS preflight offer POST
        assert status == 204 and "POST" not in headers["access-control-allow-methods"]
        # answered on its head, before a 5 MB body arrived: urllib (which sends it all first) still reads the
        # 405 (the connection lingers, spec/serve.md §4), not a reset
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(
                urllib.request.Request(srv.base + ACTION, data=b" " * BIG, method="POST"), timeout=60
            )
        assert refused.value.code == 405 and refused.value.headers["connection"] == "close"
        # http.client asks for keep-alive: the early answer keeps none, the rest of the body is drained, not parsed
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        try:
            conn.request("POST", ACTION, body=b" " * BIG)
            resp = conn.getresponse()
            assert resp.status == 405 and json.loads(resp.read())["error"] == "method-not-allowed"
        finally:
            conn.close()
    finally:
        srv.stop()


def test_the_cors_preflight_of_an_action_path_offers_post_when_accepting(server: Server) -> None:
    """A page on another site may submit an event: the preflight of an action path names POST and the
    Content-Type header, the answer carries Access-Control-Allow-Origin; other paths stay read-only."""
    status, headers, _ = server.request(
        ACTION, "OPTIONS", headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    )
    assert status == 204 and "POST" in headers["access-control-allow-methods"]
    assert "content-type" in headers["access-control-allow-headers"].lower()
    status, headers, _ = server.request("/digest.json", "OPTIONS")
    assert status == 204 and "POST" not in headers["access-control-allow-methods"]
    status, headers, _ = server.request(ACTION, "POST", body=b"{}", headers={"Content-Type": "application/json"})
    assert status == 400 and headers["access-control-allow-origin"] == "*"


_HOLD_LOCK = """
import sys, time, lmdb
env = lmdb.open(sys.argv[1], max_dbs=32)
txn = env.begin(write=True)
print("held", flush=True)
sys.stdin.readline()
txn.abort()
"""


def test_a_post_while_another_process_holds_the_write_lock_is_503_then_succeeds(site: tuple[Path, Path, Path]) -> None:
    tmp, ledger, e = site
    srv = Server(ledger, tmp, "--accept-events", "--post-wait", "0.5")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(ledger)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        event = _attestation(1)
        status, headers, body = _post(srv, event)
        assert status == 503 and body["error"] == "ledger-busy" and int(headers["retry-after"]) >= 1
        assert srv.json("/digest.json")["events"] >= 1  # reads go on meanwhile
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
        status, _, body = _post(srv, event)  # withdrawn before: nothing of it was written, so now it is new
        assert status == 201 and body["events"][0]["status"] == "new", body
    finally:
        if holder.poll() is None:
            holder.kill()
        srv.stop()
    out = pl(tmp, "--ledger", str(ledger), "fsck")
    assert "fsck: ok" in out.stdout


def test_posts_while_apply_runs_in_another_process_succeed_or_503_and_never_corrupt(
    site: tuple[Path, Path, Path],
) -> None:
    tmp, ledger, _ = site
    carol = _key("carol")
    lines = [
        canonical_bytes(write_bundle(NUMBER, [_attestation(1000 + 50 * b + i, carol) for i in range(50)]))
        for b in range(40)
    ]
    big = tmp / "big.jsonl"
    big.write_bytes(b"\n".join(lines) + b"\n")
    srv = Server(ledger, tmp, "--accept-events", "--post-wait", "2", "--post-rate", "1000", "--post-burst", "1000")
    try:
        applying = subprocess.Popen(
            [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", "--batch-size", "50", str(big)],
            env=_env(tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        mine = [_attestation(n, _key("dave")) for n in range(40)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda ev: _post(srv, ev), mine))
        assert applying.wait(timeout=120) == 0
        codes = [s for s, _, _ in answers]
        assert set(codes) <= {201, 503} and 201 in codes, codes
        for status, headers, body in answers:
            if status == 503:
                assert body["error"] == "ledger-busy" and headers["retry-after"]
        accepted = {b["events"][0]["event_id"] for s, _, b in answers if s == 201}
        time.sleep(0.5)
        state = srv.json(f"/pith/{SUFFIX}/state.json")
        held = {a["event_id"] for a in state["current"]["author_attestations"]}
        assert accepted <= held and len(held) >= 2000
    finally:
        srv.stop()
    out = pl(tmp, "--ledger", str(ledger), "fsck")
    assert "fsck: ok" in out.stdout, out.stdout


def test_event_post_signs_and_submits_in_one_step(site: tuple[Path, Path, Path], server: Server) -> None:
    tmp, ledger, _ = site
    out = pl(tmp, "--ledger", str(ledger), "event", "storage_attestation", "--example")
    payload = out.stdout
    done = pl(
        tmp,
        "--ledger",
        str(ledger),
        "event",
        "storage_attestation",
        "--subject",
        SUFFIX,
        "--key",
        "alice",
        "--payload",
        payload,
        "--post",
        server.base + "/pith/{suffix}/action/{kind}",
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("new ") and "storage_attestation" in done.stdout
    state = server.json(f"/pith/{SUFFIX}/state.json")
    eid = done.stdout.split()[3]
    assert eid in json.dumps(state)
