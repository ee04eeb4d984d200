"""Hostile and broken published mirrors: every fault is a named SourceError, never a traceback or a hang.

Broken HTTP comes from raw socket servers on 127.0.0.1 in threads (every wait bounded: socket
timeouts, stop events, joins with timeouts); broken directories are real published trees, damaged.
"""

from __future__ import annotations

import copy
import functools
import http.server
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pithledger.mirror.transport import MAX_HEADER_BYTES, Deadline, http_get
from pithledger.audit import Pair, bucket_pair, compare, inner_pair
from pithledger.errors import (MalformedSource, PithledgerError, RedirectRefused, SourceConnectionError, SourceError, SourceFileMissing,
                               SourceHTTPStatus, SourceProtocolError, SourceTimeout, SourceTLSError, SourceTooLarge, UnsafePath)
from pithledger.mirror.publish import (
    DIGEST_FILE,
    Published,
    _node_file,
    publish,
    record_dir,
    sync,
)
from pithledger.store import Ledger

from helpers.eventpool import pool
from helpers.ledgers import ledger_with

Handler = Callable[[socket.socket, str, threading.Event], None]


# --- a raw HTTP server on 127.0.0.1 -------------------------------------------------------------------


class RawServer:
    """Accepts connections, reads one request head, and hands the socket to ``handler``."""

    def __init__(self, handler: Handler, eager: bool = False) -> None:
        self.handler = handler
        self.eager = eager  # answer on the first bytes received (a TLS ClientHello has no request head)
        self.stop = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[str] = []
        self.workers: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            worker.start()
            self.workers.append(worker)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                    if self.eager:
                        break
                path = data.split(b" ", 2)[1].decode("latin-1") if data.count(b" ") >= 2 else ""
                self.requests.append(path)
                self.handler(conn, path, self.stop)
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        for worker in self.workers:
            worker.join(5)


@pytest.fixture
def raw() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler, eager: bool = False) -> RawServer:
        server = RawServer(handler, eager)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def replies(data: bytes) -> Handler:
    def handler(conn: socket.socket, path: str, stop: threading.Event) -> None:
        conn.sendall(data)
    return handler


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body


def get(url: str, **kw: Any) -> bytes:
    kw.setdefault("timeout", 5)
    kw.setdefault("max_bytes", 1 << 20)
    return http_get(url, **kw)


# --- HTTP -------------------------------------------------------------------------------------------


def test_a_well_formed_reply_is_read(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(ok(b"hello")))
    assert get(server.url + "/x") == b"hello"


def test_bad_status_line_is_a_protocol_error(raw) -> None:  # type: ignore[no-untyped-def]
    for reply in (b"HTPT/1.1 200 OK\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n", b"SSH-2.0-OpenSSH_9.6\r\n", b"\x00\x01\x02\r\n\r\n"):
        server = raw(replies(reply))
        with pytest.raises(SourceProtocolError, match="status line"):
            get(server.url + "/x")


def test_an_empty_reply_is_a_protocol_error(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b""))
    with pytest.raises(SourceProtocolError, match="closed"):
        get(server.url + "/x")


def test_101_header_fields_are_refused(raw) -> None:  # type: ignore[no-untyped-def]
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(101))
    server = raw(replies(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 0\r\n\r\n"))
    with pytest.raises(SourceProtocolError, match="more than 100 header fields"):
        get(server.url + "/x")
    fine = raw(replies(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(99)) + b"Content-Length: 2\r\n\r\nok"))
    assert get(fine.url + "/x") == b"ok"


def test_a_header_block_over_64_kib_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * MAX_HEADER_BYTES + b"\r\n\r\n"))
    with pytest.raises(SourceProtocolError, match="bytes of header fields"):
        get(server.url + "/x")


def test_malformed_header_lines_are_refused(raw) -> None:  # type: ignore[no-untyped-def]
    for line in (b"no colon here", b" folded: value", b"bad name: x", b"X-A: a\x00b"):
        server = raw(replies(b"HTTP/1.1 200 OK\r\n" + line + b"\r\nContent-Length: 0\r\n\r\n"))
        with pytest.raises(SourceProtocolError):
            get(server.url + "/x")


def test_a_chunked_body_is_read(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\n"))
    assert get(server.url + "/x") == b"hello!"


@pytest.mark.parametrize("body", [
    b"ZZ\r\nhello\r\n0\r\n\r\n",            # not a hex size
    b"5\r\nhel",                            # connection closed in a chunk
    b"3\r\nhello\r\n0\r\n\r\n",             # chunk longer than its size
    b"5\r\nhello\r\n",                      # closed before the last chunk
    b"-5\r\nhello\r\n0\r\n\r\n",            # negative size
    b"0x5\r\nhello\r\n0\r\n\r\n",           # a prefix int() would accept
    b"5\r\nhello\r\n0\r\n",                 # no end of trailer
], ids=["bad-size", "cut-in-chunk", "chunk-too-long", "no-last-chunk", "negative", "0x-prefix", "no-trailer-end"])
def test_broken_chunked_body_is_refused(raw, body: bytes) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body))
    with pytest.raises(SourceProtocolError, match="broken chunked body"):
        get(server.url + "/x")


def test_unknown_transfer_or_content_encoding_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    for fields in (b"Transfer-Encoding: gzip, chunked\r\n", b"Content-Encoding: gzip\r\nContent-Length: 0\r\n",
                   b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"):
        server = raw(replies(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n0\r\n\r\n"))
        with pytest.raises(SourceProtocolError):
            get(server.url + "/x")


def trickle(conn: socket.socket, path: str, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    while not stop.wait(0.2):
        conn.sendall(b"x")


def test_trickling_server_is_cut_off_at_the_deadline(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(trickle)
    start = time.monotonic()
    with pytest.raises(SourceTimeout, match="no complete response within 1 s"):
        get(server.url + "/x", timeout=1)
    assert time.monotonic() - start < 2.5


def test_trickling_headers_are_cut_off_too(raw) -> None:  # type: ignore[no-untyped-def]
    def handler(conn: socket.socket, path: str, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.2):
            conn.sendall(b"X")
    server = raw(handler)
    start = time.monotonic()
    with pytest.raises(SourceTimeout):
        get(server.url + "/x", timeout=1)
    assert time.monotonic() - start < 2.5


def test_trickling_published_source_is_cut_off(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(trickle)
    start = time.monotonic()
    with pytest.raises(SourceTimeout):
        Published(server.url, timeout=1)
    assert time.monotonic() - start < 2.5


def test_the_run_deadline_spans_requests(raw) -> None:  # type: ignore[no-untyped-def]
    def slow(conn: socket.socket, path: str, stop: threading.Event) -> None:
        stop.wait(0.3)
        conn.sendall(ok(b"x"))
    server = raw(slow)
    run = Deadline(1.0)
    start = time.monotonic()
    with pytest.raises(SourceTimeout, match="run's deadline of 1 s"):
        for _ in range(20):
            get(server.url + "/x", timeout=30, deadline=run)
    assert time.monotonic() - start < 2.5


def redirect(location: str, status: int = 302) -> bytes:
    return b"HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (status, location.encode())


def test_redirect_to_another_port_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    other = raw(replies(ok(b"elsewhere")))
    server = raw(replies(redirect(other.url + "/x")))
    with pytest.raises(RedirectRefused, match="redirect to another origin refused"):
        get(server.url + "/x")
    assert other.requests == []


def test_redirect_to_another_scheme_or_host_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    for target in ("https://127.0.0.1:{port}/x", "http://localhost:{port}/x", "ftp://127.0.0.1/x", "//127.0.0.2:{port}/x"):
        server = raw(lambda conn, path, stop, t=target: conn.sendall(redirect(t.format(port=server.port))))
        with pytest.raises(RedirectRefused, match="another origin"):
            get(server.url + "/x")


def test_redirect_loop_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(lambda conn, path, stop: conn.sendall(redirect("/b" if path == "/a" else "/a")))
    with pytest.raises(RedirectRefused, match="redirect loop"):
        get(server.url + "/a")


def test_more_than_five_redirects_are_refused(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(lambda conn, path, stop: conn.sendall(redirect(f"/{int(path[1:]) + 1}")))
    with pytest.raises(RedirectRefused, match="more than 5 redirects"):
        get(server.url + "/0")
    assert len(server.requests) == 6


def test_same_origin_redirects_are_followed(raw) -> None:  # type: ignore[no-untyped-def]
    def handler(conn: socket.socket, path: str, stop: threading.Event) -> None:
        hops = {"/dir/x": redirect("y", 301), "/dir/y": redirect("/z", 308), "/z": redirect(f"{server.url}/final", 307)}
        conn.sendall(hops.get(path) or ok(b"here"))
    server = raw(handler)
    assert get(server.url + "/dir/x") == b"here"
    assert server.requests == ["/dir/x", "/dir/y", "/z", "/final"]


def test_oversized_body_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    declared = raw(replies(b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n"))
    with pytest.raises(SourceTooLarge, match="1,001 bytes; the limit is 1,000"):
        get(declared.url + "/x", max_bytes=1000)
    streamed = raw(replies(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 5000))
    with pytest.raises(SourceTooLarge):
        get(streamed.url + "/x", max_bytes=1000)
    chunked = raw(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"200\r\n" + b"x" * 512 + b"\r\n" * 1 + b"300\r\n"))
    with pytest.raises(SourceTooLarge):
        get(chunked.url + "/x", max_bytes=1000)


def test_content_length_mismatch_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    short = raw(replies(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10))
    with pytest.raises(SourceProtocolError, match="ended after 10 of 100 bytes"):
        get(short.url + "/x")
    long = raw(replies(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + b"x" * 50))
    with pytest.raises(SourceProtocolError, match="Content-Length mismatch"):
        get(long.url + "/x")


@pytest.mark.parametrize("value", [b"-1", b"abc", b"1, 2", b"+5", b"0x10", b"", b"99999999999999999999"])
def test_invalid_content_length_is_refused(raw, value: bytes) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b"HTTP/1.1 200 OK\r\nContent-Length: " + value + b"\r\n\r\nhello"))
    with pytest.raises(SourceProtocolError, match="invalid Content-Length"):
        get(server.url + "/x")


def test_connection_reset_is_named(raw) -> None:  # type: ignore[no-untyped-def]
    def reset(conn: socket.socket, path: str, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
    server = raw(reset)
    with pytest.raises((SourceConnectionError, SourceProtocolError)) as info:
        get(server.url + "/x")
    assert isinstance(info.value, SourceError)


def test_refused_connection_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SourceConnectionError, match="cannot connect"):
        get(f"http://127.0.0.1:{port}/x")


def test_tls_to_a_plain_http_server_is_a_tls_error(raw) -> None:  # type: ignore[no-untyped-def]
    plain = raw(replies(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"), eager=True)  # answers the ClientHello in HTTP
    with pytest.raises(SourceTLSError, match="TLS"):
        get(f"https://127.0.0.1:{plain.port}/x", timeout=5)


def test_tls_to_a_silent_server_times_out(raw) -> None:  # type: ignore[no-untyped-def]
    silent = raw(lambda conn, path, stop: None)  # never completes the request head: the handshake stalls
    start = time.monotonic()
    with pytest.raises(SourceTimeout):
        get(f"https://127.0.0.1:{silent.port}/x", timeout=1)
    assert time.monotonic() - start < 2.5


def test_error_statuses_are_named(raw) -> None:  # type: ignore[no-untyped-def]
    gone = raw(replies(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
    with pytest.raises(SourceFileMissing):
        get(gone.url + "/x")
    broken = raw(replies(b"HTTP/1.0 500 Oops\r\n\r\n"))
    with pytest.raises(SourceHTTPStatus) as info:
        get(broken.url + "/x")
    assert info.value.status == 500


def test_urls_with_credentials_or_bad_ports_are_refused() -> None:
    for url in ("http://user:pw@127.0.0.1/", "http://127.0.0.1:99999/", "http://127.0.0.1/x#frag", "http://127.0.0.1/\u00e9"):
        with pytest.raises(SourceError):
            get(url)


# --- a published tree to damage ---------------------------------------------------------------------


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Ledger, Path]]:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        yield a, tmp_path / "pub"


def pair_of(value: dict[str, str]) -> Pair:
    return Pair(bytes.fromhex(value["events"]), bytes.fromhex(value["states"]))


def pair_json(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


def chain(pub: Path, prefix: str) -> list[tuple[str, Path, dict[str, Any]]]:
    """The node files from the root down to ``prefix``: (prefix, path, value)."""
    pair = pair_of(json.loads((pub / DIGEST_FILE).read_text())["root"])
    out = []
    for i in range(len(prefix) + 1):
        p = prefix[:i]
        path = pub / _node_file(p, pair)
        value = json.loads(path.read_text())
        out.append((p, path, value))
        if i < len(prefix):
            pair = pair_of(value["children"][prefix[i]])
    return out


def buckets(pub: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in (pub / "pithledger" / "nodes").glob("*.json") if len(p.name.split("-")[0]) == 3)


def rewrite_bucket(pub: Path, prefix: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Mutate a bucket's records, then recompute every digest up to digest.json: the only fault is the mutation."""
    nodes = chain(pub, prefix)
    _, path, value = nodes[-1]
    mutate(value["records"])
    new = bucket_pair({n: Pair(bytes.fromhex(r["event_root"]), bytes.fromhex(r["state_sha256"])) for n, r in value["records"].items()})
    value["digest"] = pair_json(new)
    (pub / _node_file(prefix, new)).write_text(json.dumps(value))
    for p, _, parent in reversed(nodes[:-1]):
        parent["children"][prefix[len(p)]] = pair_json(new)
        new = inner_pair(p, {c: pair_of(v) for c, v in parent["children"].items()})
        parent["digest"] = pair_json(new)
        (pub / _node_file(p, new)).write_text(json.dumps(parent))
    digest = json.loads((pub / DIGEST_FILE).read_text())
    digest["root"] = pair_json(new)
    (pub / DIGEST_FILE).write_text(json.dumps(digest))


def full_walk(source: Published, ledger: Ledger) -> None:
    """Everything a reader can be asked: both comparisons, then every node, record and bundle."""
    compare(ledger, source)
    compare(source, ledger)
    stack = [""]
    while stack:
        prefix = stack.pop()
        if len(prefix) < 3:
            stack += [prefix + c for c in source.children(prefix)]
            continue
        for number in source.bucket(prefix):
            source.record_events(number)
            source.bundle_bytes(number)


def test_rewrite_helper_keeps_a_valid_tree(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    rewrite_bucket(pub, buckets(pub)[0], lambda records: None)
    assert compare(ledger, Published(str(pub))).consistent


# --- directories -------------------------------------------------------------------------------------


def run_bounded(fn: Callable[[], Any], seconds: float = 10) -> BaseException | None:
    """Run ``fn`` on a thread; fail the test if it does not finish in time. Returns what it raised."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (blocked)"
    return outcome[0]


def test_fifo_in_place_of_a_node_file_does_not_block(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    os.mkfifo(path)
    try:
        exc = run_bounded(lambda: full_walk(Published(str(pub)), ledger))
        assert isinstance(exc, UnsafePath) and "a FIFO, not a regular file" in exc.message
    finally:
        try:  # should a reader still be blocked on the FIFO, release it
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_fifo_in_place_of_a_bundle_does_not_block(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    number = next(iter(ledger.subjects()))
    bundle = pub / record_dir(number) / "bundle.json"
    bundle.unlink()
    os.mkfifo(bundle)
    exc = run_bounded(lambda: Published(str(pub)).bundle_bytes(number))
    assert isinstance(exc, UnsafePath)


def test_symlink_to_etc_passwd_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    path.symlink_to("/etc/passwd")
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        full_walk(Published(str(pub)), ledger)
    (pub / DIGEST_FILE).unlink()
    (pub / DIGEST_FILE).symlink_to("/etc/passwd")
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        Published(str(pub))


def test_a_symlinked_directory_leading_out_is_refused(published: tuple[Ledger, Path], tmp_path: Path) -> None:
    ledger, pub = published
    outside = tmp_path / "outside"
    (pub / "pithledger" / "nodes").rename(outside)
    (pub / "pithledger" / "nodes").symlink_to(outside)
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        full_walk(Published(str(pub)), ledger)


def test_a_symlink_inside_the_tree_is_followed(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.rename(pub / "moved.json")
    path.symlink_to(Path("..", "..", "moved.json"))
    assert compare(ledger, Published(str(pub))).consistent


def test_a_directory_in_place_of_a_node_file_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    path.mkdir()
    with pytest.raises(UnsafePath, match="a directory, not a regular file"):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize("name", [
    "../../../../etc/passwd", "/etc/passwd", "pith:2026:../../../../../../etc/pa", "pith:2026:AAAAAAAAAAAAA\0AAAAAAAAAAAA",
    "pith:2026:AAAAAAAAAAAAA\\AAAAAAAAAAAA", "pith:\u0662\u0660\u0662\u0666:AAAAAAAAAAAAAAAAAAAAAAAAAA",
    "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA\n", "pith:2026:aaaaaaaaaaaaaaaaaaaaaaaaaa", "pith:AAAAAAAA",
], ids=["dotdot", "absolute", "dotdot-in-suffix", "nul", "backslash", "non-ascii-digits", "trailing-newline", "lowercase", "short"])
def test_dotdot_record_name_in_a_bucket_is_refused(published: tuple[Ledger, Path], name: str) -> None:
    ledger, pub = published
    prefix = buckets(pub)[0]

    def rename(records: dict[str, Any]) -> None:
        records[name] = records.pop(next(iter(records)))
    rewrite_bucket(pub, prefix, rename)
    with pytest.raises(UnsafePath, match="is not a long Pith Number"):
        full_walk(Published(str(pub)), ledger)


def test_a_record_filed_under_the_wrong_bucket_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    first, second = buckets(pub)[:2]
    other = next(iter(chain(pub, second)[-1][2]["records"]))
    rewrite_bucket(pub, first, lambda records: records.__setitem__(other, records.pop(next(iter(records)))))
    with pytest.raises(MalformedSource, match="belongs in bucket"):
        full_walk(Published(str(pub)), ledger)


def test_names_are_checked_before_they_build_a_path(published: tuple[Ledger, Path]) -> None:
    _, pub = published
    source = Published(str(pub))
    for bad in ("../../etc/passwd", "pith:2026:../../../../../../../../etc/pa", "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA/x"):
        with pytest.raises(UnsafePath):
            source.bundle_bytes(bad)
        with pytest.raises(UnsafePath):
            source.record_events(bad)
    for prefix in ("../", "a", "AAAA", "/"):
        with pytest.raises(SourceError):
            source.children(prefix)
        with pytest.raises(SourceError):
            source.bucket(prefix)


def test_an_absent_node_file_is_a_broken_source(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    chain(pub, buckets(pub)[0])[-1][1].unlink()
    with pytest.raises(SourceFileMissing, match="is listed by its parent, but its file"):
        full_walk(Published(str(pub)), ledger)


def test_an_absent_node_file_over_http_is_a_broken_source(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    chain(pub, buckets(pub)[0])[-1][1].unlink()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(pub)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with Ledger(pub.parent / "empty", create=True) as empty:
            with pytest.raises(SourceFileMissing, match="is listed by its parent, but its file"):
                compare(empty, Published(f"http://127.0.0.1:{server.server_address[1]}", timeout=5))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


# --- malformed node files ----------------------------------------------------------------------------


@pytest.mark.parametrize("event_ids", [
    "sha256:" + "ab" * 32, 7, [7], [{"id": 1}], ["sha256:" + "zz" * 32], ["sha256:" + "ab" * 31], ["sha256:" + "AB" * 32],
    ["ab" * 32], ["sha256:" + "ab" * 32] * 2, None, {"a": 1}, ["sha256: " + "ab" * 31 + "a"],
], ids=["string", "int", "ints", "objects", "non-hex", "short", "uppercase", "no-prefix", "duplicates", "null", "object", "space"])
def test_malformed_event_ids_are_named(published: tuple[Ledger, Path], event_ids: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, buckets(pub)[0])[-1]
    value["records"][next(iter(value["records"]))]["event_ids"] = event_ids
    path.write_text(json.dumps(value))
    with pytest.raises(MalformedSource, match="event_ids of"):
        full_walk(Published(str(pub)), ledger)


def test_a_duplicated_event_id_is_refused_even_when_the_digests_agree(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published

    def duplicate(records: dict[str, Any]) -> None:
        rec = records[next(iter(records))]
        rec["event_ids"] = rec["event_ids"] + rec["event_ids"][:1]  # the event root over a set is unchanged
    rewrite_bucket(pub, buckets(pub)[0], duplicate)
    with pytest.raises(MalformedSource, match="names an event twice"):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize("records", [[], "x", 1, None, {"pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA": []}],
                         ids=["list", "string", "int", "null", "record-not-object"])
def test_malformed_records_are_named(published: tuple[Ledger, Path], records: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, buckets(pub)[0])[-1]
    value["records"] = records
    path.write_text(json.dumps(value))
    with pytest.raises(SourceError):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize("child", [[], "x", 1, None, {"events": 1, "states": 2}, {"events": "ab" * 31, "states": "ab" * 32},
                                   {"events": "AB" * 32, "states": "ab" * 32}, {"events": " " + "ab" * 31 + "a", "states": "ab" * 32}],
                         ids=["list", "string", "int", "null", "ints", "short", "uppercase", "space"])
def test_malformed_children_are_named(published: tuple[Ledger, Path], child: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, "")[-1]
    value["children"][next(iter(value["children"]))] = child
    path.write_text(json.dumps(value))
    with pytest.raises(MalformedSource):
        full_walk(Published(str(pub)), ledger)


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


MUTATIONS: list[Any] = [None, True, 0, -1, 2**53, "", "x", "ab" * 32, "../../etc/passwd", [], [1], {}, {"a": "b"}]


def test_every_leaf_of_every_node_file_mutated_gives_only_named_errors(published: tuple[Ledger, Path]) -> None:
    """Each value (and each key) of digest.json and every node file, replaced by other JSON types: the
    reader either still works or raises a PithledgerError; nothing else escapes."""
    ledger, pub = published
    files = [pub / DIGEST_FILE, *sorted((pub / "pithledger" / "nodes").glob("*.json"))]
    tried = 0
    for path in files:
        original = path.read_text()
        doc = json.loads(original)
        try:
            for where in leaves(doc):
                variants: list[Any] = [replaced(doc, where, m) for m in MUTATIONS]
                if where and isinstance(where[-1], str):  # a key renamed
                    parent = replaced(doc, (), doc)
                    target = parent
                    for step in where[:-1]:
                        target = target[step]
                    renamed = copy.deepcopy(parent)
                    t2 = renamed
                    for step in where[:-1]:
                        t2 = t2[step]
                    t2["../" + where[-1]] = t2.pop(where[-1])
                    variants.append(renamed)
                for variant in variants:
                    path.write_text(json.dumps(variant))
                    tried += 1
                    try:
                        full_walk(Published(str(pub)), ledger)
                    except PithledgerError:
                        pass
                    except Exception as exc:  # noqa: BLE001
                        pytest.fail(f"{type(exc).__name__}: {exc} escaped; {path.name} at {where} = {variant!r:.200}")
        finally:
            path.write_text(original)
    assert tried > 300


# --- subtrees one side lacks ---------------------------------------------------------------------------


def test_a_bucket_the_source_lacks_is_missing_records_not_an_error(tmp_path: Path) -> None:
    events = pool()
    extra = "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"  # its bucket (and top-level node "A") holds no other record
    with ledger_with(tmp_path / "a", [e for e in events if e["subject_pith_number"] != extra]) as a:
        assert extra not in set(a.subjects()) and not any(s.rsplit(":", 1)[-1].startswith("A") for s in a.subjects())
        publish(a, tmp_path / "pub")
    source = Published(str(tmp_path / "pub"))
    assert source.children("A") == {} and source.children("AA") == {} and source.bucket("AAA") == {}
    assert source.record_events(extra) == []
    with ledger_with(tmp_path / "b", events) as b:
        mine = compare(b, source)
        theirs = compare(source, b)
        lacked = sorted(b.record_events(extra))
    assert [(d.pith_number, d.kind, d.a_lacks, d.b_lacks) for d in mine.divergent if d.pith_number == extra] == [
        (extra, "missing-on-b", [], lacked)]
    assert [(d.pith_number, d.kind, d.a_lacks, d.b_lacks) for d in theirs.divergent if d.pith_number == extra] == [
        (extra, "missing-on-a", lacked, [])]


# --- bounded memory -------------------------------------------------------------------------------------


def test_node_cache_is_bounded_and_evicted_nodes_are_verified_again(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    with Ledger(pub.parent / "empty", create=True) as empty:
        unbounded = Published(str(pub))
        expected = compare(empty, unbounded)
        tiny = Published(str(pub), cache_bytes=1)
        assert compare(empty, tiny) == expected
        assert len(tiny._cache) == 1
        assert len(unbounded._cache) > 1 and unbounded._cache.used <= 64 * 1024 * 1024
        full_walk(tiny, ledger)


def test_a_slow_mirror_is_stopped_by_the_run_deadline(published: tuple[Ledger, Path], raw) -> None:  # type: ignore[no-untyped-def]
    """Every file arrives well within the request timeout, but the whole walk cannot finish within the
    run's deadline: audit and sync stop with SourceTimeout, and sync leaves the ledger as it was."""
    _, pub = published

    def slow_files(conn: socket.socket, path: str, stop: threading.Event) -> None:
        stop.wait(0.25)
        file = pub / path.lstrip("/")
        conn.sendall(ok(file.read_bytes()) if file.is_file() else b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    server = raw(slow_files)
    with Ledger(pub.parent / "empty", create=True) as empty:
        start = time.monotonic()
        with pytest.raises(SourceTimeout, match="run's deadline of 1 s"):
            compare(empty, Published(server.url, timeout=5, deadline=1.0))
        with pytest.raises(SourceTimeout, match="run's deadline of 1 s"):
            sync(empty, server.url, timeout=5, deadline=Deadline(1.0))
        assert time.monotonic() - start < 5
        assert list(empty.subjects()) == []
