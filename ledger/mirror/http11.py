"""A keep-alive HTTP/1.1 GET (and POST) client for reading Pith-shaped mirrors, on the sans-IO parser ``h11``.

The other end is hostile, under the rules of :mod:`pithledger.mirror.transport` (spec/audit.md §5, and
spec/pull.md §6 for what differs): one wall-clock timeout per request (connect, TLS, head, body and
the redirects it follows), a run-wide :class:`~pithledger.mirror.transport.Deadline`, caps on header fields
and header bytes and body bytes, same-origin redirects only, TLS verified for https, no proxies, no
cookies, no compression. What differs from ``_transport.http_get``: the connection is kept open for
the next request to the same origin (``h11`` does the framing; a connection the server closed while
idle is opened again once, since a GET may be repeated), a request may carry ``If-None-Match``, and
statuses other than 200 are returned (304, 404) or raised (others) after the body is drained, so the
connection stays usable.

One :class:`Client` per thread: a Client and its connections are not shared.
"""

from __future__ import annotations

import socket
import ssl
from typing import NamedTuple
from urllib.parse import SplitResult

import h11

from pithledger.errors import (
    RedirectRefused,
    SourceConnectionError,
    SourceHTTPStatus,
    SourceProtocolError,
    SourceTooLarge,
)
from pithledger.mirror.transport import (
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_REDIRECTS,
    REDIRECTS,
    USER_AGENT,
    Deadline,
    _Clock,
    _default_tls,
    _origin,
    check_url,
    connect_errors,
    follow_redirect,
    read_errors,
)

_RECV = 256 * 1024
#: Bytes of an error or 304 body read (and dropped) to keep the connection; beyond it the connection is closed.
MAX_DRAIN = 64 * 1024

Origin = tuple[str, str, int]
_Post = tuple[str, bytes, str]  # method, body, content type


class Response(NamedTuple):
    status: int  # 200, 304, 404 or 410 (every other status raises)
    body: bytes  # the body of a 200; b"" otherwise
    etag: bytes | None  # the ETag field of a 200 or 304, when there is exactly one
    url: str  # the URL that answered (after redirects)


class _Conn:
    """One connection to one origin, kept open between requests while both sides allow it."""

    def __init__(self, origin: Origin, sock: socket.socket) -> None:
        self.origin = origin
        self.sock = sock
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.used = False  # a request completed on it: a close before the next answer may be an idle timeout

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover - closing never matters
            pass


class _Reset(Exception):
    """A reused connection was closed by the server before any byte of the answer: send again."""


class Client:
    """Keep-alive GETs, one open connection per origin; ``tls`` replaces the system's verifying
    context. ``requests`` counts calls of :meth:`get` (its redirect hops, and a resend on a connection
    the server had closed while idle, are part of it); ``connections_opened`` counts connections."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self._conns: dict[Origin, _Conn] = {}
        self.connections_opened = 0
        self.requests = 0

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def get(
        self, url: str, *, timeout: float | None, deadline: Deadline, max_bytes: int, etag: bytes | None = None
    ) -> Response:
        """GET ``url`` following same-origin redirects: a :class:`Response` for 200, 304 (only when
        ``etag`` was sent), 404 and 410; a :class:`~pithledger.errors.SourceError` for anything else."""
        clock = _Clock(url, timeout, deadline)
        parts = check_url(url)
        self.requests += 1
        origin = _origin(parts)
        seen = {url}
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            status, headers, body = self._request(current, parts, clock, max_bytes, etag)
            if status in (200, 304, 404, 410):
                if status == 304 and etag is None:
                    raise SourceProtocolError(f"{current}: HTTP 304 (not modified) to a request that named no ETag")
                tags = headers.get(b"etag", [])
                return Response(status, body if status == 200 else b"", tags[0] if len(tags) == 1 else None, current)
            if status in REDIRECTS:
                current, parts = follow_redirect(url, current, status, headers.get(b"location", []), origin, seen)
                continue
            raise SourceHTTPStatus(f"cannot fetch {current}: HTTP {status}", status)
        raise RedirectRefused(f"{url}: more than {MAX_REDIRECTS} redirects")

    def post(
        self,
        url: str,
        body: bytes,
        *,
        timeout: float | None,
        deadline: Deadline,
        max_bytes: int,
        content_type: str = "application/json",
    ) -> Response:
        """POST ``body`` to ``url``: a :class:`Response` with the status and body of whatever the server
        answered (an error's body bounded like a 200's). Redirects are not followed (a 3xx is returned
        as it is): a POST is never sent to a URL its sender did not name. A connection the server had
        closed while idle is opened again once, as for a GET; an event is idempotent (spec/serve.md §8)."""
        clock = _Clock(url, timeout, deadline)
        parts = check_url(url)
        self.requests += 1
        status, headers, answer = self._request(url, parts, clock, max_bytes, None, ("POST", body, content_type))
        tags = headers.get(b"etag", [])
        return Response(status, answer, tags[0] if len(tags) == 1 else None, url)

    # --- one exchange --------------------------------------------------------------------------

    def _request(
        self, url: str, parts: SplitResult, clock: _Clock, max_bytes: int, etag: bytes | None, post: _Post | None = None
    ) -> tuple[int, dict[bytes, list[bytes]], bytes]:
        origin = _origin(parts)
        for attempt in range(2):
            conn = self._conns.pop(origin, None)
            fresh = conn is None
            if conn is None:
                conn = self._connect(url, origin, clock)
            try:
                status, headers, body, reusable = self._exchange(url, parts, conn, clock, max_bytes, etag, post)
            except _Reset:
                conn.close()
                if fresh or attempt:  # pragma: no cover - _exchange raises _Reset only for a used connection
                    raise SourceConnectionError(f"{url}: the server closed the connection before answering") from None
                continue
            except BaseException:
                conn.close()
                raise
            if reusable:
                conn.used = True
                self._conns[origin] = conn
            else:
                conn.close()
            return status, headers, body
        raise SourceConnectionError(f"{url}: the server closed the connection before answering")  # pragma: no cover

    def _connect(self, url: str, origin: Origin, clock: _Clock) -> _Conn:
        scheme, host, port = origin
        with connect_errors(url, clock):
            sock = socket.create_connection((host, port), timeout=clock.remaining())
            sock.setsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
            )  # one small request per exchange: never wait to coalesce
            if scheme == "https":
                try:
                    sock.settimeout(clock.remaining())
                    sock = (self.tls or _default_tls()).wrap_socket(sock, server_hostname=host)
                except BaseException:
                    sock.close()
                    raise
        self.connections_opened += 1
        return _Conn(origin, sock)

    def _exchange(
        self,
        url: str,
        parts: SplitResult,
        conn: _Conn,
        clock: _Clock,
        max_bytes: int,
        etag: bytes | None,
        post: _Post | None = None,
    ) -> tuple[int, dict[bytes, list[bytes]], bytes, bool]:
        """Send one GET (or ``post``: method, body, content type) and read its whole answer: (status,
        header fields, body, connection reusable). A POST's answer body is kept whatever its status."""
        exchange = _Exchange(url, conn, clock, max_bytes, keep_all=post is not None)
        with read_errors(url, clock):
            try:
                exchange.send(_request(parts, conn, etag, post))
                return exchange.read()
            except h11.RemoteProtocolError as exc:
                if conn.used and not exchange.received_any:
                    raise _Reset() from None
                raise SourceProtocolError(f"{url}: not a valid HTTP/1.1 response ({exc})") from None
            except h11.LocalProtocolError as exc:  # pragma: no cover - our requests are well-formed
                raise SourceProtocolError(f"{url}: cannot send the request ({exc})") from None


def _request(parts: SplitResult, conn: _Conn, etag: bytes | None, post: _Post | None) -> bytes:
    """The bytes of one GET (or ``post``: method, body, content type) on ``conn``, through its h11 state."""
    _, host, port = conn.origin
    default = 443 if parts.scheme == "https" else 80
    host_field = f"[{host}]" if ":" in host else host
    if port != default:
        host_field += f":{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    fields = [
        ("Host", host_field),
        ("User-Agent", USER_AGENT),
        ("Accept", "application/json, */*"),
        ("Accept-Encoding", "identity"),
    ]
    if etag is not None:
        fields.append(("If-None-Match", etag.decode("latin-1")))
    h = conn.h11
    if post is None:
        data = h.send(h11.Request(method="GET", target=target, headers=fields)) or b""
    else:
        fields += [("Content-Type", post[2]), ("Content-Length", str(len(post[1])))]
        data = h.send(h11.Request(method=post[0], target=target, headers=fields)) or b""
        data += h.send(h11.Data(data=post[1])) or b""
    data += h.send(h11.EndOfMessage()) or b""
    return data


class _Exchange:
    """One request sent on a connection and its answer read, event by event as h11 parses them: more data
    needed, interim 1xx heads, the head, the body, the end. A reset of a used connection before any byte of
    the answer is :class:`_Reset` (the request is sent again on a new connection)."""

    def __init__(self, url: str, conn: _Conn, clock: _Clock, max_bytes: int, *, keep_all: bool) -> None:
        self.url, self.conn, self.clock, self.max_bytes = url, conn, clock, max_bytes
        self.keep_all = keep_all  # a POST's answer body is kept whatever its status
        self.received_any = False
        self.budget = _Budget(url)
        self.status = 0
        self.headers: dict[bytes, list[bytes]] = {}
        self.body = bytearray()
        self.dropped = 0  # bytes of a body not kept (drained so the connection may be reused)

    def send(self, data: bytes) -> None:
        try:
            self.conn.sock.settimeout(self.clock.remaining())
            self.conn.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            if self.conn.used:
                raise _Reset() from None
            raise

    def read(self) -> tuple[int, dict[bytes, list[bytes]], bytes, bool]:
        h = self.conn.h11
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                self._receive()
                continue
            if isinstance(event, h11.InformationalResponse):
                self._interim(event)
                continue
            if isinstance(event, h11.Response):
                self._head(event)
                continue
            if isinstance(event, h11.Data):
                if not self._data(event):  # not worth reading: the connection goes instead
                    return self.status, self.headers, b"", False
                continue
            if isinstance(event, h11.EndOfMessage):
                self.budget.take(list(event.headers))
                break
            if isinstance(event, h11.ConnectionClosed):  # pragma: no cover - h11 raises on a cut message
                raise SourceProtocolError(f"{self.url}: the connection closed before the response was complete")
            raise SourceProtocolError(f"{self.url}: unexpected HTTP event {type(event).__name__}")  # pragma: no cover
        reusable = h.our_state is h11.DONE and h.their_state is h11.DONE
        if reusable:
            h.start_next_cycle()
        return self.status, self.headers, bytes(self.body), reusable

    def _receive(self) -> None:
        conn = self.conn
        conn.sock.settimeout(self.clock.remaining())
        try:
            chunk = conn.sock.recv(_RECV)
        except ConnectionResetError:
            if conn.used and not self.received_any:
                raise _Reset() from None
            raise
        if not chunk and conn.used and not self.received_any:
            raise _Reset()
        self.received_any = self.received_any or bool(chunk)
        conn.h11.receive_data(chunk)

    def _interim(self, event: h11.InformationalResponse) -> None:
        if event.status_code == 101:
            raise SourceProtocolError(f"{self.url}: the server switched protocols (HTTP 101), unasked")
        self.budget.take(list(event.headers), 15 + len(event.reason))

    def _head(self, event: h11.Response) -> None:
        self.status = event.status_code
        self.budget.take(list(event.headers), 15 + len(event.reason))
        for name, value in event.headers:
            self.headers.setdefault(bytes(name), []).append(bytes(value))
        _check_framing(self.url, self.headers, 200 if self.keep_all else self.status, self.max_bytes)

    def _data(self, event: h11.Data) -> bool:
        """Keep (or drain) a piece of the body; False once a drained body passed MAX_DRAIN."""
        if self.status == 200 or self.keep_all:
            if len(self.body) + len(event.data) > self.max_bytes:
                raise SourceTooLarge(f"{self.url}: the body is larger than {self.max_bytes:,} bytes")
            self.body += event.data
            return True
        self.dropped += len(event.data)
        return self.dropped <= MAX_DRAIN


class _Budget:
    """Header fields and bytes of one response: interim 1xx heads, the head and chunked trailers
    together, as in ``_transport`` (h11 bounds only what is still incomplete when more data is needed,
    so a whole oversized head in one read would pass it)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fields = 0
        self.bytes = 0

    def take(self, headers: list[tuple[bytes, bytes]], line: int = 0) -> None:
        self.fields += len(headers)
        self.bytes += line + 2 + sum(len(n) + len(v) + 4 for n, v in headers)
        if self.fields > MAX_HEADERS:
            raise SourceProtocolError(f"{self.url}: more than {MAX_HEADERS} header fields")
        if self.bytes > MAX_HEADER_BYTES:
            raise SourceProtocolError(f"{self.url}: more than {MAX_HEADER_BYTES:,} bytes of header fields")


def _check_framing(url: str, headers: dict[bytes, list[bytes]], status: int, max_bytes: int) -> None:
    """What h11 lets through and ``_transport`` refuses: both framings at once, a compressed body,
    and (for a 200) a declared length over the cap, refused before the body is read."""
    if b"transfer-encoding" in headers and b"content-length" in headers:
        raise SourceProtocolError(f"{url}: both Transfer-Encoding and Content-Length (ambiguous framing)")
    encodings = [
        v.strip().lower() for value in headers.get(b"content-encoding", []) for v in value.split(b",") if v.strip()
    ]
    if any(v != b"identity" for v in encodings):
        raise SourceProtocolError(
            f"{url}: a Content-Encoding ({b', '.join(encodings).decode('latin-1')}) that was not asked for"
        )
    if status == 200 and (lengths := headers.get(b"content-length")):
        n = int(lengths[0])  # h11 checked it: digits, one value
        if n > max_bytes:
            raise SourceTooLarge(f"{url}: the body is {n:,} bytes; the limit is {max_bytes:,}")
