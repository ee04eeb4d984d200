"""Reading bytes from a published mirror, whose other end is treated as hostile: a small HTTP/1.1
client over sockets and a directory reader confined to its tree. Rules and defaults: spec/audit.md §5.

Every fault a source can cause is a named :class:`~pithledger.errors.SourceError` subclass (all with
code ``bad-source``), never a traceback and never a hang:

- HTTP: one wall-clock ``timeout`` for a whole request (connect, TLS, headers, body and any redirects
  it follows), checked before every socket read, so a server trickling one byte at a time is cut off;
  a run-wide :class:`Deadline` shared by every request of one reader; caps on header fields, header
  bytes and body bytes; strict status line, header, Content-Length and chunked parsing; redirects
  only within the same origin (scheme, host, port), at most :data:`MAX_REDIRECTS`. No proxies, no
  cookies, no compression, one connection per request (``Connection: close``).
- Directories: a relative path of plain components is resolved, must stay inside the tree's real
  path (a symlink inside the tree that stays inside it is followed), is opened with
  ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file (``fstat``) before a byte is read.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import socket
import ssl
import stat
import time
from collections.abc import Iterator
from urllib.parse import SplitResult, urljoin, urlsplit

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
    UnsafePath,
)
from pithledger.files import READ_FLAGS as _O_FLAGS  # (its names here before they moved to ledger/files.py)
from pithledger.files import kind as _kind

DEFAULT_TIMEOUT = 30.0
"""Seconds of wall clock for one whole request (including the redirects it follows)."""
DEFAULT_DEADLINE = 600.0
"""Seconds of wall clock for every request of one reader (one :class:`Deadline`)."""
MAX_HEADERS = 100
"""Header fields in one response (interim 1xx responses and chunked trailers count too)."""
MAX_HEADER_BYTES = 64 * 1024
"""Bytes of status lines, header fields and trailers in one response."""
MAX_REDIRECTS = 5
MAX_CHUNK_LINE = 4096
MAX_CHUNKS = 1 << 20
"""Chunks in one chunked body: each costs a parse, so a body of 1-byte chunks is refused, not crawled through."""
_RECV = 256 * 1024
USER_AGENT = "pithledger/0.1"


# --- deadlines -------------------------------------------------------------------------------------


class Deadline:
    """A wall-clock budget (monotonic clock) from its creation; ``None`` seconds: no limit.

    One reader shares one Deadline across all its requests; pass the same object to several readers to
    bound a whole run.
    """

    def __init__(self, seconds: float | None = DEFAULT_DEADLINE) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError("a deadline must be a positive number of seconds, or None")
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        return math.inf if self._end is None else self._end - time.monotonic()

    def check(self, what: str) -> None:
        if self.remaining() <= 0:
            raise SourceTimeout(f"{what}: the run's deadline of {self.seconds:g} s has passed")


def as_deadline(value: Deadline | float | None) -> Deadline:
    return value if isinstance(value, Deadline) else Deadline(value)


class _Clock:
    """One request's time: the earlier of its own timeout and the run's deadline."""

    def __init__(self, what: str, timeout: float | None, run: Deadline) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError("a timeout must be a positive number of seconds, or None")
        self.what = what
        self.timeout = timeout
        self.run = run
        self._end = math.inf if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float:
        """Seconds left, as a socket timeout; raises SourceTimeout when none are."""
        own = self._end - time.monotonic()
        run = self.run.remaining()
        if run <= 0 and run <= own:
            raise SourceTimeout(f"{self.what}: the run's deadline of {self.run.seconds:g} s has passed")
        if own <= 0:
            raise SourceTimeout(f"{self.what}: no complete response within {self.timeout:g} s")
        left = min(own, run)
        return left if left != math.inf else 3600.0  # no limit at all: still never an unbounded single wait

    def expired(self) -> SourceTimeout:
        try:
            self.remaining()
        except SourceTimeout as exc:
            return exc
        return SourceTimeout(f"{self.what}: the server did not answer in time")


# --- HTTP ------------------------------------------------------------------------------------------


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def check_url(url: str) -> SplitResult:
    """An absolute http(s) URL without credentials or fragment, ASCII only; else SourceError."""
    if not url.isascii() or any(c in url for c in "\0\r\n\t "):
        raise SourceError(
            f"{url!r} is not a usable URL (non-ASCII, whitespace or control characters)", hint="percent-encode the URL"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise SourceError(f"{url!r} is not a usable URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"{url!r} is not an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise SourceError(
            f"{url!r} carries credentials; pithledger does not send any", hint="remove user:password@ from the URL"
        )
    if parts.fragment:
        raise SourceError(f"{url!r} has a fragment (#...)", hint="remove the fragment")
    return parts


class _Reader:
    """Buffered reads from a socket; every recv waits at most the clock's remaining time."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        self.sock = sock
        self.clock = clock
        self.buf = bytearray()

    def _fill(self) -> bool:
        self.sock.settimeout(self.clock.remaining())
        data = self.sock.recv(_RECV)
        if not data:
            return False
        self.buf += data
        return True

    def line(self, limit: int, what: str) -> bytes:
        """One line without its CRLF (or bare LF); at most ``limit`` bytes with its terminator."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                if i + 1 > limit:
                    raise _TooLong()
                out = bytes(self.buf[: i + 1])
                del self.buf[: i + 1]
                return out[:-2] if out.endswith(b"\r\n") else out[:-1]
            if len(self.buf) >= limit:
                raise _TooLong()
            start = len(self.buf)
            if not self._fill():
                raise SourceProtocolError(f"{self.clock.what}: the connection closed in the middle of {what}")

    def exact(self, n: int, what: str) -> bytes:
        out = bytearray()
        self.exact_into(out, n, what)
        return bytes(out)

    def exact_into(self, out: bytearray, n: int, what: str) -> None:
        """Append the next ``n`` bytes to ``out``, moving them as they arrive (never a copy per byte)."""
        want = n
        while True:
            take = min(n, len(self.buf))
            out += memoryview(self.buf)[:take]
            del self.buf[:take]
            n -= take
            if n == 0:
                return
            if not self._fill():
                raise SourceProtocolError(f"{self.clock.what}: {what} ended after {want - n:,} of {want:,} bytes")

    def rest(self, limit: int) -> bytes:
        while len(self.buf) <= limit:
            if not self._fill():
                break
        if len(self.buf) > limit:
            raise SourceTooLarge(f"{self.clock.what}: the body is larger than {limit:,} bytes")
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def expect_crlf(self) -> bool:
        """Consume the CRLF (or bare LF) that ends a chunk's data; False for anything else."""
        while len(self.buf) < 2 and not self.buf.startswith(b"\n"):
            if not self._fill():
                return False
        if self.buf.startswith(b"\r\n"):
            del self.buf[:2]
            return True
        if self.buf.startswith(b"\n"):
            del self.buf[:1]
            return True
        return False


class _TooLong(Exception):
    pass


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])(?: [\x09\x20-\x7e\x80-\xff]*)?")
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(rb"[\x09\x20-\x7e\x80-\xff]*")
_DIGITS = re.compile(rb"[0-9]{1,18}")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?")


class _Head:
    def __init__(self, status: int, fields: dict[str, list[bytes]]) -> None:
        self.status = status
        self.fields = fields

    def get(self, name: str) -> list[bytes]:
        return self.fields.get(name, [])


class _HeaderBudget:
    def __init__(self, what: str) -> None:
        self.what = what
        self.bytes_left = MAX_HEADER_BYTES
        self.fields = 0

    def line(self, reader: _Reader, part: str) -> bytes:
        try:
            line = reader.line(self.bytes_left, part)
        except _TooLong:
            raise SourceProtocolError(f"{self.what}: more than {MAX_HEADER_BYTES:,} bytes of header fields") from None
        self.bytes_left -= len(line) + 2
        return line

    def fields_into(self, reader: _Reader, out: dict[str, list[bytes]], part: str) -> None:
        while True:
            line = self.line(reader, part)
            if not line:
                return
            self.fields += 1
            if self.fields > MAX_HEADERS:
                raise SourceProtocolError(f"{self.what}: more than {MAX_HEADERS} header fields")
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.fullmatch(name):
                raise SourceProtocolError(f"{self.what}: a malformed header field line {line[:60]!r}")
            value = value.strip(b" \t")
            if not _FIELD_VALUE.fullmatch(value):
                raise SourceProtocolError(f"{self.what}: header field {name.decode()} holds control characters")
            out.setdefault(name.decode("ascii").lower(), []).append(value)


def _read_head(reader: _Reader, budget: _HeaderBudget) -> _Head:
    while True:
        line = budget.line(reader, "the status line")
        m = _STATUS_LINE.fullmatch(line)
        if m is None:
            raise SourceProtocolError(f"{budget.what}: not an HTTP/1.x status line: {line[:60]!r}")
        fields: dict[str, list[bytes]] = {}
        budget.fields_into(reader, fields, "the header fields")
        status = int(m.group(1))
        if status == 101:
            raise SourceProtocolError(f"{budget.what}: the server switched protocols (HTTP 101), unasked")
        if status >= 200:
            return _Head(status, fields)
        # an interim 1xx response: its fields count against the same budget; the real one follows


def _list_values(values: list[bytes]) -> list[bytes]:
    return [v.strip(b" \t") for value in values for v in value.split(b",") if v.strip(b" \t")]


def _read_body(reader: _Reader, head: _Head, budget: _HeaderBudget, max_bytes: int) -> bytes:
    what = budget.what
    encodings = [v.lower() for v in _list_values(head.get("content-encoding"))]
    if any(v != b"identity" for v in encodings):
        raise SourceProtocolError(
            f"{what}: a Content-Encoding ({b', '.join(encodings).decode()}) that was not asked for"
        )
    te = [v.lower() for v in _list_values(head.get("transfer-encoding"))]
    lengths = _list_values(head.get("content-length"))
    if head.get("transfer-encoding") and not te:
        raise SourceProtocolError(f"{what}: an empty Transfer-Encoding")
    if head.get("content-length") and not lengths:
        raise SourceProtocolError(f"{what}: an invalid Content-Length (empty)")
    if te:
        if te != [b"chunked"]:
            raise SourceProtocolError(f"{what}: an unsupported Transfer-Encoding ({b', '.join(te).decode()})")
        if lengths:
            raise SourceProtocolError(f"{what}: both Transfer-Encoding and Content-Length (ambiguous framing)")
        return _read_chunked(reader, budget, max_bytes)
    if lengths:
        if len(set(lengths)) != 1 or not _DIGITS.fullmatch(lengths[0]):
            shown = b", ".join(head.get("content-length")).decode("latin-1")[:80]
            raise SourceProtocolError(f"{what}: an invalid Content-Length ({shown})")
        n = int(lengths[0])
        if n > max_bytes:
            raise SourceTooLarge(f"{what}: the body is {n:,} bytes; the limit is {max_bytes:,}")
        body = reader.exact(n, "the body (Content-Length mismatch)")
        if reader.buf:
            raise SourceProtocolError(f"{what}: more bytes than its Content-Length of {n:,} (Content-Length mismatch)")
        return body
    return reader.rest(max_bytes)


def _read_chunked(reader: _Reader, budget: _HeaderBudget, max_bytes: int) -> bytes:
    """The body of a chunked response, collected in one bytearray: O(body) memory whatever the chunk
    sizes (a list of chunk objects cost ~40 bytes per body byte at 1-byte chunks), at most MAX_CHUNKS chunks."""
    what = budget.what
    body = bytearray()
    chunks = 0
    while True:
        try:
            line = reader.line(MAX_CHUNK_LINE, "a chunked body")
        except _TooLong:
            raise SourceProtocolError(
                f"{what}: broken chunked body (a chunk size line over {MAX_CHUNK_LINE} bytes)"
            ) from None
        except SourceProtocolError:
            raise SourceProtocolError(
                f"{what}: broken chunked body (the connection closed before its last chunk)"
            ) from None
        m = _CHUNK_SIZE.fullmatch(line)
        if m is None:
            raise SourceProtocolError(f"{what}: broken chunked body (a bad chunk size line {line[:40]!r})")
        size = int(m.group(1), 16)
        if size == 0:
            break
        chunks += 1
        if chunks > MAX_CHUNKS:
            raise SourceProtocolError(f"{what}: broken chunked body (more than {MAX_CHUNKS:,} chunks)")
        if len(body) + size > max_bytes:
            raise SourceTooLarge(f"{what}: the body is larger than {max_bytes:,} bytes")
        try:
            reader.exact_into(body, size, "a chunk")
        except SourceProtocolError:
            raise SourceProtocolError(f"{what}: broken chunked body (a chunk shorter than its size)") from None
        if not reader.expect_crlf():
            raise SourceProtocolError(f"{what}: broken chunked body (a chunk longer than its size)")
    try:
        budget.fields_into(reader, {}, "the chunked trailer")
    except SourceProtocolError as exc:
        raise SourceProtocolError(f"{what}: broken chunked body (trailer: {exc.message})") from None
    return bytes(body)


def _connect(parts: SplitResult, clock: _Clock, tls: ssl.SSLContext | None) -> socket.socket:
    _, host, port = _origin(parts)
    sock = socket.create_connection((host, port), timeout=clock.remaining())
    if parts.scheme != "https":
        return sock
    try:
        sock.settimeout(clock.remaining())
        return (tls or _default_tls()).wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


_TLS: ssl.SSLContext | None = None


def _default_tls() -> ssl.SSLContext:
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()  # verifies the certificate chain and the host name
    return _TLS


def _request_bytes(parts: SplitResult) -> bytes:
    _, host, port = _origin(parts)
    default = 443 if parts.scheme == "https" else 80
    host_field = f"[{host}]" if ":" in host else host
    if port != default:
        host_field += f":{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (
        f"GET {target} HTTP/1.1\r\nHost: {host_field}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n"
        f"Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
    ).encode("ascii")


@contextlib.contextmanager
def connect_errors(url: str, clock: _Clock) -> Iterator[None]:
    """What connecting (TCP, then TLS) can raise, as the SourceError a user reads, naming ``url``."""
    try:
        yield
    except SourceError:
        raise
    except TimeoutError:
        raise clock.expired() from None
    except ssl.SSLCertVerificationError as exc:
        raise SourceTLSError(
            f"{url}: the server's certificate does not verify: {exc.verify_message or exc.reason}"
        ) from None
    except ssl.SSLError as exc:
        raise SourceTLSError(f"{url}: the TLS handshake failed ({exc.reason or exc})") from None
    except OSError as exc:
        raise SourceConnectionError(f"cannot connect to {url}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def read_errors(url: str, clock: _Clock) -> Iterator[None]:
    """What an exchange on an open connection can raise, as the SourceError a user reads, naming ``url``."""
    try:
        yield
    except SourceError:
        raise
    except TimeoutError:
        raise clock.expired() from None
    except ssl.SSLError as exc:
        raise SourceTLSError(f"{url}: TLS failed while reading: {exc.reason or exc}") from None
    except OSError as exc:
        reason = "reset" if isinstance(exc, ConnectionResetError) else exc.strerror or str(exc)
        raise SourceConnectionError(f"{url}: the connection failed while reading the response ({reason})") from None


def _exchange(
    url: str, parts: SplitResult, clock: _Clock, max_bytes: int, tls: ssl.SSLContext | None
) -> tuple[_Head, bytes]:
    """One GET on a fresh connection: its head, and its body when the status is 200."""
    with connect_errors(url, clock):
        sock = _connect(parts, clock, tls)
    with read_errors(url, clock), sock:
        sock.settimeout(clock.remaining())
        sock.sendall(_request_bytes(parts))
        reader = _Reader(sock, clock)
        budget = _HeaderBudget(url)
        head = _read_head(reader, budget)
        body = _read_body(reader, head, budget, max_bytes) if head.status == 200 else b""
        return head, body


#: Statuses whose Location is followed (same origin only).
REDIRECTS = (301, 302, 303, 307, 308)


def follow_redirect(
    url: str, current: str, status: int, locations: list[bytes], origin: tuple[str, str, int], seen: set[str]
) -> tuple[str, SplitResult]:
    """The target of a redirect answered to ``current`` (``url``: the request the caller made), checked:
    exactly one Location, a URL of ``origin``, not seen before (added to ``seen``); else a SourceError."""
    if len(locations) != 1:
        raise SourceProtocolError(f"{current}: HTTP {status} without exactly one Location")
    try:
        target = urljoin(current, locations[0].decode("ascii")).partition("#")[0]
    except (UnicodeDecodeError, ValueError):
        raise SourceProtocolError(f"{current}: HTTP {status} with an unusable Location") from None
    try:
        target_parts = check_url(target)
    except SourceError:
        raise RedirectRefused(f"{url}: redirect to another origin refused ({target[:200]!r})") from None
    if _origin(target_parts) != origin:
        raise RedirectRefused(f"{url}: redirect to another origin refused ({target[:200]})")
    if target in seen:
        raise RedirectRefused(f"{url}: redirect loop (back to {target[:200]})")
    seen.add(target)
    return target, target_parts


def http_get(
    url: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | None = None,
    max_bytes: int,
    tls: ssl.SSLContext | None = None,
) -> bytes:
    """The body of a 200 response to GET ``url``, following same-origin redirects; else a SourceError.

    ``timeout`` bounds the whole request including redirects; ``deadline`` (shared) bounds the run.
    """
    run = deadline or Deadline(None)
    clock = _Clock(url, timeout, run)
    parts = check_url(url)
    origin = _origin(parts)
    seen = {url}
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        head, body = _exchange(current, parts, clock, max_bytes, tls)
        if head.status == 200:
            return body
        if head.status in REDIRECTS:
            current, parts = follow_redirect(url, current, head.status, head.get("location"), origin, seen)
            continue
        if head.status in (404, 410):
            raise SourceFileMissing(f"{current}: HTTP {head.status} (no such file)")
        raise SourceHTTPStatus(f"cannot fetch {current}: HTTP {head.status}", head.status)
    raise RedirectRefused(f"{url}: more than {MAX_REDIRECTS} redirects")


# --- directories -----------------------------------------------------------------------------------


def check_relative(rel: str, where: str) -> list[str]:
    """The components of a relative path: non-empty, no ``.``/``..``, no NUL, no backslash, not absolute."""
    parts = rel.split("/")
    if (
        not rel
        or rel.startswith("/")
        or "\\" in rel
        or "\0" in rel
        or ":" in parts[0]
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise UnsafePath(f"{where}: refusing the path {rel!r} (not a plain relative path inside the mirror)")
    return parts


def read_file(root: str, rel: str, *, max_bytes: int, deadline: Deadline | None = None) -> bytes:
    """The bytes of regular file ``rel`` inside directory ``root``; nothing outside it, nothing but files."""
    if deadline is not None:
        deadline.check(f"{root}: reading {rel}")
    parts = check_relative(rel, root)
    base = os.path.realpath(root)
    path = os.path.join(root, *parts)
    real = os.path.realpath(os.path.join(base, *parts))
    if os.path.commonpath([base, real]) != base:
        raise UnsafePath(f"{path} leads outside the mirror's tree (to {real})")
    try:
        fd = os.open(real, _O_FLAGS)
    except FileNotFoundError:
        raise SourceFileMissing(f"{path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path} became a symlink while being read") from None
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise SourceTooLarge(f"{path} is {st.st_size:,} bytes; the limit is {max_bytes:,}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise SourceTooLarge(f"{path} is larger than {max_bytes:,} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
