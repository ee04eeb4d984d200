"""What an operator watches a running ``serve`` by (spec/serve.md §9): the client address behind a trusted
proxy, ``/healthz``, ``/metrics`` (Prometheus text format) and the access log.

Everything here is outside consensus and local to one server: a private metrics registry per server (never
prometheus-client's global one), labels only from sets the server defines (a route's template, never the raw
path: a client choosing paths must not choose time series), and a log written by its own thread from a
bounded buffer, so a slow or blocked stderr never stalls the event loop (lines past the buffer are dropped
and counted). ``prometheus_client`` is imported by this module only, which only ``serve`` imports.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pithledger.errors import CannotWrite, PithledgerError

if TYPE_CHECKING:
    from pithledger.store import Ledger

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


# --- the client address ----------------------------------------------------------------------------------


class Proxies:
    """``serve --forwarded-allow-ips``: the peers whose ``X-Forwarded-For`` / ``Forwarded`` is believed.

    :meth:`client` is the one place the effective client address is computed (spec/serve.md §9.1): the TCP
    peer, unless the peer is trusted; then the right-most address of ``X-Forwarded-For`` (or, without that
    header, of ``Forwarded``'s ``for=``) that is not itself trusted. A malformed element, an obfuscated or
    ``unknown`` one, met before that address means the chain cannot be read: the peer is used."""

    def __init__(self, spec: str = "") -> None:
        self.any = False
        self.networks: list[Network] = []
        for item in (s.strip() for s in spec.split(",")):
            if not item:
                continue
            if item == "*":
                self.any = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(
                    f"{item[:80]!r} is no IP address or network (e.g. 127.0.0.1, 10.0.0.0/8, ::1)"
                ) from None

    def __bool__(self) -> bool:
        return self.any or bool(self.networks)

    def trusts(self, host: str) -> bool:
        if self.any:
            return _ip(host) is not None
        ip = _ip(host)
        return ip is not None and any(ip.version == n.version and ip in n for n in self.networks)

    def listed(self, host: str) -> bool:
        """A peer named by an address or network (never by ``*``): only these are exempt from the per-address
        connection cap (spec/serve.md §9.1); with ``*`` every client would be."""
        ip = _ip(host)
        return ip is not None and any(ip.version == n.version and ip in n for n in self.networks)

    def client(self, peer: str, headers: Iterable[tuple[bytes, bytes]]) -> str:
        if not self or not self.trusts(peer):
            return peer
        xff: list[bytes] = []
        fwd: list[bytes] = []
        for name, value in headers:
            if name == b"x-forwarded-for":
                xff.append(value)
            elif name == b"forwarded":
                fwd.append(value)
        # X-Forwarded-For first: what nginx, Apache, Caddy, HAProxy and Traefik append by default; a proxy that
        # writes only Forwarded must drop a client's X-Forwarded-For (spec/serve.md §9.1)
        if xff:
            chain = [_addr(item) for item in b",".join(xff).split(b",")]
        elif fwd:
            chain = [_forwarded_for(element) for element in b",".join(fwd).split(b",")]
        else:
            return peer
        for found in reversed(chain):
            if found is None:
                return peer  # unreadable: nothing left of it is the proxies' word
            if not self.trusts(found):
                return found
        return chain[0] or peer  # every hop a trusted proxy: the first one is the client


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address, an IPv4-mapped IPv6 one (``::ffff:10.0.0.2``, what a dual-stack socket reports) as IPv4."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _addr(raw: bytes) -> str | None:
    """One address of a forwarding chain, normalised (``[v6]:port``, ``v4:port`` and ``[v6]`` read too), or None."""
    text = raw.strip(b" \t").decode("latin-1")
    if len(text) > 64:
        return None
    port = ""
    if text.startswith("["):
        text, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else "0"
    elif text.count(":") == 1:
        text, _, port = text.partition(":")
    if port and not (re.fullmatch(r"[0-9]{1,5}", port) and int(port) <= 65535):
        return None
    if "%" in text:  # a zone index means nothing off-link, and its text would make a client per spelling
        return None
    ip = _ip(text)
    return str(ip) if ip is not None else None


def _forwarded_for(element: bytes) -> str | None:
    """The ``for=`` of one element of RFC 7239's ``Forwarded``, or None (absent, obfuscated, malformed)."""
    found: str | None = None
    for pair in element.split(b";"):
        name, eq, value = pair.strip(b" \t").partition(b"=")
        if eq and name.lower() == b"for":
            if found is not None:
                return None
            value = value[1:-1] if len(value) >= 2 and value[:1] == value[-1:] == b'"' else value
            found = _addr(value) or ""
    return found or None


# --- the access log ----------------------------------------------------------------------------------------

_UNSAFE = re.compile(r'[^\x21-\x7e]|["\\]')


def escaped(text: str, limit: int = 2048) -> str:
    """``text`` as one logfmt value: every character outside printable ASCII, ``"`` and ``\\`` as ``\\xNN`` /
    ``\\uNNNN`` (no control character, newline or bidi mark from a client reaches the log), cut to ``limit``."""
    out = _UNSAFE.sub(
        lambda m: (
            f"\\x{ord(m[0]):02x}"
            if ord(m[0]) < 0x100
            else f"\\u{ord(m[0]):04x}"
            if ord(m[0]) < 0x10000
            else f"\\U{ord(m[0]):08x}"
        ),
        text[:limit],
    )
    return out + ("..." if len(text) > limit else "")


def now_iso_ms() -> str:
    """The access log's timestamp: UTC to the millisecond (the witness's `now_iso` is to the second)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def open_log(target: str) -> IO[str] | None:
    """The access log's stream: ``-`` for stderr, else FILE appended to (created ``0666`` less the umask), opened
    once and line-buffered; a FIFO without a reader is refused, not waited for. None: stderr."""
    if target == "-":
        return None
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise CannotWrite(f"cannot open the access log {target}: {exc.strerror}") from None
    os.set_blocking(fd, True)
    return open(fd, "a", buffering=1, encoding="utf-8", errors="backslashreplace")


class AccessLog:
    """Lines written by a thread of their own from a buffer of at most ``capacity`` lines: a handler only
    appends (never blocks on the stream); when the stream does not keep up, what does not fit is dropped and
    counted (``pithledger_access_log_dropped_total``), never waited for."""

    def __init__(
        self, stream: IO[str] | None, capacity: int = 10_000, dropped: Callable[[], None] | None = None
    ) -> None:
        self.stream = stream
        self.capacity = capacity
        self._lines: deque[str] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._dropped = dropped
        self._thread = threading.Thread(target=self._run, name="pithledger-access-log", daemon=True)
        self._thread.start()

    def write(self, line: str) -> None:
        with self._cond:
            if len(self._lines) >= self.capacity:
                if self._dropped is not None:
                    self._dropped()
                return
            self._lines.append(line)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._lines and not self._stop:
                    self._cond.wait()
                if not self._lines:
                    return
                batch = "".join(f"{line}\n" for line in self._lines)
                self._lines.clear()
            stream = self.stream or sys.stderr
            try:
                stream.write(batch)
                stream.flush()
            except (OSError, ValueError):
                pass  # a log that cannot be written is not worth a request

    def close(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)  # a blocked stream is left to the process exit
        if self.stream is not None and not self._thread.is_alive():
            self.stream.close()


# --- metrics -----------------------------------------------------------------------------------------------

#: Methods named in a label; any other is counted as "other" (a client chooses the method it sends).
METHODS = frozenset({"GET", "HEAD", "POST", "OPTIONS"})
#: What ``/metrics`` is answered as: the Prometheus text format 0.0.4 (spec/serve.md §9.3), whatever the installed
#: prometheus-client calls its latest (0.26 names 1.0.0; every name here is a legacy name, so the bytes are 0.0.4's).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The answers of the connection guard and of the HTTP parser (``pithledger_connections_refused_total{reason}``).
GUARD_CODES = (
    "too-many-connections",
    "request-timeout",
    "request-too-long",
    "body-too-large",
    "malformed-request",
)
#: Every reason a POSTed event or submission is refused under (``pithledger_events_refused_total{reason}``):
#: the request's codes (spec/serve.md §8), the strict decoder's (spec/identifiers.md §1.2) and an event's
#: verdict codes (spec/events.md §2.2, §2.4, §3). Each series exists at 0 from the start, so ``increase()``
#: sees the first refusal; a reason outside the list still counts, from its first refusal on.
REFUSAL_REASONS = (
    # the request
    "not-found",
    "malformed-id",
    "body-too-large",
    "rate-limited",
    "body-timeout",
    "too-many-values",
    "bad-request",
    "bad-bundle",
    "bundle-inconsistent",
    "subject-mismatch",
    "kind-mismatch",
    "no-events",
    "too-many-events",
    "ledger-busy",
    "busy",
    "ledger-replaced",
    # the body's JSON
    "malformed-json",
    "invalid-utf8",
    "trailing-data",
    "duplicate-key",
    "float-not-allowed",
    "non-finite-number",
    "integer-out-of-range",
    "lone-surrogate",
    "nesting-too-deep",
    "document-too-large",
    # an event's verdict
    "event-too-large",
    "bad-envelope",
    "bad-time",
    "unsupported-event-version",
    "id-mismatch",
    "unknown-registry-key",
    "fingerprint-mismatch",
    "bad-key",
    "bad-signature",
    "wrong-target",
    "bad-payload",
    "unverifiable-signature",
    "no-receipt",
    "unreadable-receipt",
    "unknown-receipt-key",
    "bad-receipt",
    "bad-record",
    "record-subject-mismatch",
    "hash-mismatch",
    "bad-relation",
    "bad-orcid",
    "bad-proof",
    "proof-digest-mismatch",
    "bad-headers",
)
#: Statuses whose ``pithledger_http_requests_total`` series exist at 0 for every route from the start: the ones
#: spec/serve.md §9.3's 5xx alert reads (any other status's series appears at its first answer).
KNOWN_STATUSES = ("500", "503")
#: Remembered sync/pull sources reported at most (one file each in ``<ledger>/checkpoints/``).
MAX_SOURCES = 1000


class LedgerCollector(Collector):
    """The ledger's gauges, read when ``/metrics`` is scraped (one read transaction)."""

    def __init__(self, read: Callable[[Callable[[], Any]], Any], ledger: Ledger) -> None:
        self.read = read
        self.ledger = ledger

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("pithledger_ledger_readable", "1 when the ledger could be read for this scrape, else 0")
        try:
            counts, used = self.read(lambda: (self.ledger.counts(), _used_bytes(self.ledger)))
        except (PithledgerError, OSError, Exception):  # noqa: BLE001 - a damaged ledger is reported, not raised
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily("pithledger_ledger_events", "Events in the ledger's log", value=counts["events"])
        yield GaugeMetricFamily("pithledger_ledger_records", "Records with a derived state", value=counts["records"])
        yield GaugeMetricFamily(
            "pithledger_ledger_pending", "Records whose derivation is pending", value=counts["pending"]
        )
        yield GaugeMetricFamily(
            "pithledger_ledger_bytes", "Bytes of the ledger's data file in use (LMDB pages)", value=used
        )
        commit = last_commit(self.ledger)
        if commit is not None:
            yield GaugeMetricFamily(
                "pithledger_last_commit_timestamp_seconds",
                "When the ledger's data file was last written (every commit writes it), Unix time",
                value=commit,
            )
        sources = GaugeMetricFamily(
            "pithledger_source_last_success_timestamp_seconds",
            "When sync/pull last checked each logged source's checkpoint (<ledger>/checkpoints/), Unix time",
            labels=["source"],
        )
        for source, at in remembered_sources(self.ledger.path):
            sources.add_metric([source], at)
        yield sources


def _used_bytes(ledger: Ledger) -> int:
    info, stat = ledger.env.info(), ledger.env.stat()
    return int((info["last_pgno"] + 1) * stat["psize"])


def last_commit(ledger: Ledger) -> float | None:
    """The data file's modification time: LMDB writes a meta page at every commit (no state is read)."""
    try:
        return os.stat(Path(ledger.path) / "data.mdb").st_mtime
    except OSError:
        return None


def remembered_sources(ledger_path: Path) -> list[tuple[str, float]]:
    """(source, seen_at) of each checkpoint ``sync``/``pull`` remembered (spec/transparency.md §6.4), newest
    per source; unreadable files are skipped. Sources that publish no checkpoint leave nothing here."""
    from pithledger.mirror.checkpoints import MEMORY_DIR, MEMORY_TYPE
    from pithledger.records.canonical import strict_decode

    best: dict[str, float] = {}
    try:
        names = sorted(os.listdir(Path(ledger_path) / MEMORY_DIR))[: MAX_SOURCES * 2]
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(Path(ledger_path) / MEMORY_DIR / name, "rb") as fh:
                doc = strict_decode(fh.read(1024 * 1024), max_bytes=1024 * 1024, what="a remembered checkpoint")
            if doc.get("memory_type") != MEMORY_TYPE:
                continue
            source, seen = str(doc["source"]), doc["seen_at"]
            at = datetime.strptime(seen, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
        except (OSError, PithledgerError, KeyError, TypeError, ValueError, AttributeError):
            continue
        best[source] = max(at, best.get(source, 0.0))
    return sorted(best.items())[:MAX_SOURCES]


class Ops:
    """One server's metrics registry, access log and trusted proxies."""

    def __init__(self, *, proxies: Proxies | None = None, log: AccessLog | None = None) -> None:
        self.proxies = proxies or Proxies()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "pithledger_http_requests",
            "HTTP requests answered, by route template, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.duration = Histogram(
            "pithledger_http_request_duration_seconds",
            "Time from a request's head to its answer's last byte, by route",
            ["route"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.accepted = Counter("pithledger_events_accepted", "Events POSTed and appended (new)", registry=r)
        self.held = Counter(
            "pithledger_events_held", "Events POSTed that the ledger held already (duplicates)", registry=r
        )
        self.refused = Counter(
            "pithledger_events_refused",
            "Refused POSTed events (or submissions, when refused before their events were read), by reason",
            ["reason"],
            registry=r,
        )
        self.refused_connections = Counter(
            "pithledger_connections_refused",
            "Connections or requests answered by the connection guard (caps, deadlines, sizes), by error code",
            ["reason"],
            registry=r,
        )
        self.log_dropped = Counter(
            "pithledger_access_log_dropped", "Access-log lines dropped because the log did not keep up", registry=r
        )
        self.log = log if log is not None else AccessLog(None, dropped=self.log_dropped.inc)
        if log is not None and log._dropped is None:
            log._dropped = self.log_dropped.inc
        # every known label at 0: a series that appears at its first increment is invisible to increase() and
        # rate(), so an alert on them would miss the first refusal (spec/serve.md §9.3)
        for reason in REFUSAL_REASONS:
            self.refused.labels(reason)
        for code in GUARD_CODES:
            self.refused_connections.labels(code)

    def routes(self, known: Iterable[tuple[str, str]]) -> None:
        """Create the request series the 5xx alert reads, at 0: each (route template, its method) with each of
        :data:`KNOWN_STATUSES` (``unmatched`` with GET too)."""
        for route, method in [*known, ("unmatched", "GET")]:
            for status in KNOWN_STATUSES:
                self.requests.labels(route, method, status)

    def watch(self, read: Callable[[Callable[[], Any]], Any], ledger: Ledger) -> None:
        self.registry.register(LedgerCollector(read, ledger))

    def request(
        self, *, client: str, peer: str, method: str, path: str, route: str, status: int, size: int, seconds: float
    ) -> None:
        label = method if method in METHODS else "other"
        self.requests.labels(route, label, str(status)).inc()
        self.duration.labels(route).observe(seconds)
        via = f" peer={peer}" if peer != client else ""
        self.log.write(
            f'ts={now_iso_ms()} client={escaped(client, 64)}{via} method={escaped(method, 16)} path="{escaped(path)}" '
            f"status={status} bytes={size} seconds={seconds:.6f}"
        )

    def events(self, *, client: str, kind: str, subject: str, status: int, body: dict[str, Any]) -> None:
        """A line per event of an answered submission: accepted (new or held) or refused, with its id and reason."""
        docs = body.get("events")
        if not isinstance(docs, list) or not docs:
            self.refused_submission(
                client=client, kind=kind, subject=subject, reason=str(body.get("error", f"http-{status}"))
            )
            return
        request_reason = str(body.get("error", ""))
        for doc in docs:
            verdict = str(doc.get("status", ""))
            if status in (200, 201):
                (self.accepted if verdict == "new" else self.held).inc()
                word, why = ("accepted" if verdict == "new" else "held"), ""
            else:
                reason = str(doc.get("reason") or request_reason or f"http-{status}")
                self.refused.labels(reason).inc()
                word, why = "refused", f" reason={escaped(reason, 80)}"
            self.log.write(
                f"ts={now_iso_ms()} client={escaped(client, 64)} event={word} id={escaped(str(doc.get('event_id', '')), 80)} "
                f"kind={escaped(str(doc.get('event_type', kind)), 60)} subject={escaped(str(doc.get('subject', subject)), 80)}{why}"
            )

    def refused_submission(self, *, client: str, kind: str, subject: str, reason: str) -> None:
        self.refused.labels(reason).inc()
        self.log.write(
            f"ts={now_iso_ms()} client={escaped(client, 64)} event=refused id=- kind={escaped(kind, 60)} "
            f"subject={escaped(subject, 80)} reason={escaped(reason, 80)}"
        )

    def guard_refused(self, peer: str, code: str, status: int) -> None:
        """An answer of the connection guard or of the HTTP parser (outside the application: no route, method or
        path known)."""
        self.refused_connections.labels(code).inc()
        self.log.write(f"ts={now_iso_ms()} client={escaped(peer, 64)} guard={code} status={status}")


def replaced(ledger: Ledger) -> str | None:
    """Why the server must not answer from its ledger handle, or None: the file at ``<ledger>/data.mdb`` is not the
    one it opened (a restore swapped the directory, another ledger was copied in, or the file was removed), so what
    it would read is a file nobody else sees. One ``stat`` (spec/serve.md §9.2)."""
    opened = ledger.opened_file
    if opened is None:
        return None
    data = os.path.join(ledger.path, "data.mdb")  # as given, not resolved: a restore swaps the directory
    try:
        st = os.stat(data)
        if (st.st_dev, st.st_ino) == opened:
            return None
    except OSError:
        pass
    return f"{data} is no longer the file this server opened (replaced or removed): restart the server"


def health(ledger: Ledger, read: Callable[[Callable[[], Any]], Any]) -> tuple[int, dict[str, Any]]:
    """``/healthz``: 200 with the event count and the last commit time while the ledger reads; else 503 and why.
    Cheap: a stat, a 4 KiB read of the data file's head and the log's entry count; no state is read."""
    data = Path(ledger.path) / "data.mdb"
    try:
        why = replaced(ledger)
        if why is not None:
            return 503, {"status": "unavailable", "reason": "ledger-replaced", "message": why}
        with open(data, "rb") as fh:  # the path still reads (permissions, an I/O error)
            fh.read(4096)
        events: int = read(lambda: ledger.counts()["events"])
    except OSError as exc:
        return 503, {
            "status": "unavailable",
            "reason": "ledger-unreadable",
            "message": f"{data}: {exc.strerror or exc}",
        }
    except Exception as exc:  # noqa: BLE001 - whatever the ledger raises, the answer is 503 naming it
        code = exc.code if isinstance(exc, PithledgerError) else "ledger-error"
        return 503, {"status": "unavailable", "reason": code, "message": "the ledger could not be read"}
    commit = last_commit(ledger)
    at = (
        datetime.fromtimestamp(commit, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if commit is not None
        else None
    )
    return 200, {"status": "ok", "events": events, "last_commit": at}
