"""Hostile and broken published mirrors: every fault is a named SourceError, never a traceback or a hang.

Broken HTTP comes from raw socket servers on 127.0.0.1 in threads (every wait bounded: socket
timeouts, stop events, joins with timeouts); broken directories are real published trees, damaged.
"""

from __future__ import annotations

import functools
import http.server
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.hostile_sources import buckets, chain, get
from pithledger.audit import compare
from pithledger.errors import (
    RedirectRefused,
    SourceConnectionError,
    SourceError,
    SourceFileMissing,
    SourceHTTPStatus,
    SourceProtocolError,
    SourceTimeout,
    SourceTLSError,
    SourceTooLarge,
)
from pithledger.mirror.publish import (
    Published,
    sync,
)
from pithledger.mirror.transport import MAX_HEADER_BYTES, Deadline
from pithledger.store import Ledger

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


# --- HTTP -------------------------------------------------------------------------------------------


def test_a_well_formed_reply_is_read(raw) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(ok(b"hello")))
    assert get(server.url + "/x") == b"hello"


def test_bad_status_line_is_a_protocol_error(raw) -> None:  # type: ignore[no-untyped-def]
    for reply in (
        b"HTPT/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"\x00\x01\x02\r\n\r\n",
    ):
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
    fine = raw(
        replies(
            b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(99)) + b"Content-Length: 2\r\n\r\nok"
        )
    )
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
    server = raw(
        replies(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\n"
        )
    )
    assert get(server.url + "/x") == b"hello!"


@pytest.mark.parametrize(
    "body",
    [
        b"ZZ\r\nhello\r\n0\r\n\r\n",  # not a hex size
        b"5\r\nhel",  # connection closed in a chunk
        b"3\r\nhello\r\n0\r\n\r\n",  # chunk longer than its size
        b"5\r\nhello\r\n",  # closed before the last chunk
        b"-5\r\nhello\r\n0\r\n\r\n",  # negative size
        b"0x5\r\nhello\r\n0\r\n\r\n",  # a prefix int() would accept
        b"5\r\nhello\r\n0\r\n",  # no end of trailer
    ],
    ids=["bad-size", "cut-in-chunk", "chunk-too-long", "no-last-chunk", "negative", "0x-prefix", "no-trailer-end"],
)
def test_broken_chunked_body_is_refused(raw, body: bytes) -> None:  # type: ignore[no-untyped-def]
    server = raw(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body))
    with pytest.raises(SourceProtocolError, match="broken chunked body"):
        get(server.url + "/x")


def test_unknown_transfer_or_content_encoding_is_refused(raw) -> None:  # type: ignore[no-untyped-def]
    for fields in (
        b"Transfer-Encoding: gzip, chunked\r\n",
        b"Content-Encoding: gzip\r\nContent-Length: 0\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
    ):
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
    for target in (
        "https://127.0.0.1:{port}/x",
        "http://localhost:{port}/x",
        "ftp://127.0.0.1/x",
        "//127.0.0.2:{port}/x",
    ):
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
    chunked = raw(
        replies(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"200\r\n"
            + b"x" * 512
            + b"\r\n" * 1
            + b"300\r\n"
        )
    )
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
    plain = raw(
        replies(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"), eager=True
    )  # answers the ClientHello in HTTP
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


# --- a published tree to damage ---------------------------------------------------------------------


# --- directories -------------------------------------------------------------------------------------


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


# --- subtrees one side lacks ---------------------------------------------------------------------------


# --- bounded memory -------------------------------------------------------------------------------------


def test_a_slow_mirror_is_stopped_by_the_run_deadline(published: tuple[Ledger, Path], raw) -> None:  # type: ignore[no-untyped-def]
    """Every file arrives well within the request timeout, but the whole walk cannot finish within the
    run's deadline: audit and sync stop with SourceTimeout, and sync leaves the ledger as it was."""
    _, pub = published

    def slow_files(conn: socket.socket, path: str, stop: threading.Event) -> None:
        stop.wait(0.25)
        file = pub / path.lstrip("/")
        conn.sendall(
            ok(file.read_bytes()) if file.is_file() else b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        )

    server = raw(slow_files)
    with Ledger(pub.parent / "empty", create=True) as empty:
        start = time.monotonic()
        with pytest.raises(SourceTimeout, match="run's deadline of 1 s"):
            compare(empty, Published(server.url, timeout=5, deadline=1.0))
        with pytest.raises(SourceTimeout, match="run's deadline of 1 s"):
            sync(empty, server.url, timeout=5, deadline=Deadline(1.0))
        assert time.monotonic() - start < 5
        assert list(empty.subjects()) == []
