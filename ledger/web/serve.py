"""``pithledger serve``: a read-only HTTP server over a ledger, with Pith's paths (spec/serve.md).

Starlette routes on uvicorn (spec/adr/0007-serve-starlette-uvicorn.md). Every handler is a synchronous
read of one LMDB snapshot per document (a read-only handle: it never waits for an ``apply`` in another
process) run in a worker thread, record-sized ones a bounded number at once; uvicorn's protocol is
wrapped with head deadlines, head size caps, connection caps and a lingering close (:func:`guarded`, spec/serve.md §4). Pages are rendered by :mod:`pithledger.render.pages`,
the same renderer ``publish`` writes ``index.html`` files with.

Nothing here writes: GET, HEAD and OPTIONS (CORS preflight) are answered, every other method is 405 —
except, with ``--accept-events``, POST to an action path, answered by :mod:`pithledger.web.actions` (its
writer thread owns every write; spec/serve.md §8), and, with ``--witness``, POST /add-checkpoint, answered
by :mod:`pithledger.tlog.witness` (it writes only its own state directory; spec/transparency.md §6.2).
Redirect targets are built from a resolved Pith Number, never from the request, so there is no open
redirect; absolute URLs come from ``--base-url`` (default: the bound address), never from ``Host``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import logging
import re
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import lmdb
import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pithledger.audit import DEPTH, DIGEST_VERSION
from pithledger.errors import (
    ActionError,
    AmbiguousId,
    CannotListen,
    CannotWrite,
    DamagedSignedRecord,
    DerivationPending,
    HTTPError,
    LogWouldFork,
    MalformedId,
    NoSuchTile,
    NotFound,
    PithledgerError,
    PortInUse,
)
from pithledger.merge import MERGE_VERSION
from pithledger.mirror.logsite import CACHE_CHECKPOINT, CACHE_IMMUTABLE, CACHE_PARTIAL, LogServer, manifest_fields
from pithledger.mirror.publish import (
    MAX_FETCH,
    NODE_DIR,
    digest_doc,
    node_doc,
    node_file,
    part_index_doc,
    recent_rows,
    signing_key_doc,
)
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes
from pithledger.render import badge, pages, record_doc
from pithledger.store import Ledger
from pithledger.store.sidecars import MetadataStore
from pithledger.tlog.witness import MAX_BODY as MAX_WITNESS_BODY
from pithledger.tlog.witness import Witness
from pithledger.web.actions import ACTION_KINDS, MAX_BODY, Actions, RateLimit, ServingLedger, read_body, request_bundle
from pithledger.web.actions import Limits as PostLimits
from pithledger.web.ops import CONTENT_TYPE, AccessLog, Ops, Proxies, health, open_log, replaced

if TYPE_CHECKING:
    from pithledger.tlog.signing import LogSigner

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Longest path and query string answered (bytes); longer is 400 ``request-too-long``.
MAX_PATH = 1024
MAX_QUERY = 2048
MAX_ACCEPT = 2048
#: Longest request head (request line and header fields, bytes); longer is 431 and the connection closed.
MAX_HEAD = 16 * 1024
#: Cache-Control of documents that change as events arrive, and of the ones that do not.
CACHE_MUTABLE = "public, max-age=60"
CACHE_STABLE = "public, max-age=3600"
LOG_PAGE = 1000
#: Rendered pages and record JSON kept in memory (bytes of bodies, and records whose key is remembered).
CACHE_BYTES = 64 * 1024 * 1024
CACHE_ENTRIES = 20_000
_SUFFIX26 = re.compile(r"^[A-Z2-7]{26}\Z")
_JSON = "application/json"
_JSONL = "application/jsonl"  # JSON lines: `pithledger export`'s output
_HTML = "text/html; charset=utf-8"
CORS = {
    "access-control-allow-origin": "*",
    "access-control-expose-headers": "ETag, Content-Length, Location",
}
SECURITY = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}


# --- content negotiation and caching ----------------------------------------------------------------------


def wants_json(accept: str | None) -> str | None:
    """The JSON media type to answer with (``application/ld+json`` or ``application/json``), or None
    for HTML. The representation with the highest q wins (most specific media range decides a type's q);
    on a tie HTML wins, so ``*/*`` (curl's default) and browsers get the page. A header that is too
    long or unreadable counts as ``*/*``."""
    if not accept or len(accept) > MAX_ACCEPT:
        return None
    ranges: list[tuple[str, str, float]] = []
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if "/" not in media:
            continue
        q = 1.0
        for f in fields[1:]:
            name, _, value = f.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = -1.0
        if not 0.0 <= q <= 1.0:
            continue
        kind, _, sub = media.partition("/")
        ranges.append((kind, sub, q))

    def q_of(kind: str, sub: str) -> float:
        best, spec = 0.0, -1
        for k, s, q in ranges:
            score = 2 if (k, s) == (kind, sub) else 1 if (k == kind and s == "*") else 0 if (k, s) == ("*", "*") else -1
            if score > spec:
                best, spec = q, score
        return best if spec >= 0 else 0.0

    html = max(q_of("text", "html"), q_of("application", "xhtml+xml"))
    ld, js = q_of("application", "ld+json"), q_of("application", "json")
    if max(ld, js) > html:
        return "application/ld+json" if ld >= js else _JSON
    return None


def etag_of(body: bytes) -> str:
    """Content-addressed: the SHA-256 of the representation's bytes (spec/serve.md §3)."""
    return '"' + hashlib.sha256(body).hexdigest() + '"'


def _not_modified(request: Request, etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header or len(header) > 8192:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)


def respond(
    request: Request,
    body: bytes,
    media_type: str,
    *,
    cache: str = CACHE_MUTABLE,
    status: int = 200,
    extra: dict[str, str] | None = None,
) -> Response:
    etag = etag_of(body)
    headers = {"etag": etag, "cache-control": cache, **CORS, **SECURITY, **(extra or {})}
    if media_type.startswith("text/html"):
        headers["content-security-policy"] = pages.CSP_HEADER
    if status == 200 and _not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, status_code=status, media_type=media_type, headers=headers)


def error_response(status: int, code: str, message: str, extra: dict[str, str] | None = None) -> Response:
    body = canonical_bytes({"error": code, "message": message}) + b"\n"
    return Response(
        body,
        status_code=status,
        media_type=_JSON,
        headers={"cache-control": "no-store", **CORS, **SECURITY, **(extra or {})},
    )


# --- the site ------------------------------------------------------------------------------------------------


class Site:
    """What the handlers read: one read-only ledger handle and the display-metadata sidecar."""

    def __init__(
        self,
        ledger_path: Path,
        *,
        base_url: str,
        name: str = "pithledger mirror",
        mirror_key: dict[str, str] | None = None,
        accept_events: PostLimits | None = None,
        builds: int = 2,
        log: LogSigner | None = None,
        witness: Witness | None = None,
        ops: Ops | None = None,
    ) -> None:
        self.actions: Actions | None = None
        self.witness = witness  # serve --witness: POST /add-checkpoint (spec/transparency.md §6.2)
        self.witness_rates = RateLimit(PostLimits()) if witness is not None else None
        self.gate: Any = contextlib.nullcontext()
        if accept_events is None:
            self.ledger = Ledger(ledger_path, readonly=True)
        else:  # one environment for reads and the writer thread (py-lmdb refuses opening it twice)
            writer = ServingLedger(ledger_path)
            self.ledger, self.gate = writer, writer.gate
            self.actions = Actions(writer, accept_events)
        self.meta = MetadataStore(ledger_path, readonly=True)
        self.base_url = base_url.rstrip("/")
        self.name = name
        self.mirror_key = mirror_key
        self.log = LogServer(log)  # the transparency log's paths (checkpoint with --key only)
        self._cache: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()  # rendered pages and record JSON
        self._cache_bytes = 0
        self._records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # the caches above: handlers run in worker threads
        #: Record-sized builds at once; the others wait on the event loop, not in a thread.
        self.builds = asyncio.Semaphore(builds)
        #: Metrics, the access log and the trusted proxies (spec/serve.md §9)
        self.ops = ops if ops is not None else Ops()
        self.ops.watch(self.read, self.ledger)

    def close(self) -> None:
        self.ops.log.close()
        self.meta.close()
        if self.actions is not None and not self.actions.close():
            return  # the writer is blocked on another process's write lock: the process exit closes the ledger
        self.ledger.close()

    def read(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on one snapshot of the ledger (every read inside sees the same commit, spec/serve.md
        §4); when another process grew the map since we opened it, adopt the new size and retry.
        ``gate``: with --accept-events, the writer thread grows the map only while no read runs.
        A ledger replaced under the server (a restore, spec/serve.md §9.2) is never read: every path that reads it
        is ``503 ledger-replaced`` until the server is restarted, as ``/healthz`` says (one ``stat`` per read)."""
        why = replaced(self.ledger)
        if why is not None:
            raise HTTPError(503, "ledger-replaced", why)
        with self.gate:
            try:
                with self.ledger.snapshot():
                    return fn()
            except lmdb.MapResizedError:
                self.ledger.env.set_mapsize(0)
                with self.ledger.snapshot():
                    return fn()

    def subject(self, ident: str) -> str:
        """The long Pith Number an identifier names, as an HTTP error when it names none."""
        if len(ident) > 200:
            raise HTTPError(400, "malformed-id", "the identifier is longer than 200 characters")
        try:
            subject: str = self.read(lambda: self.ledger.resolve(ident))
        except MalformedId as exc:
            raise HTTPError(400, exc.code, exc.message) from None
        except AmbiguousId as exc:
            raise HTTPError(400, exc.code, exc.message) from None
        except NotFound as exc:
            raise HTTPError(404, exc.code, exc.message) from None
        return subject

    def record_subject(self, ident: str) -> str:
        """Like :meth:`subject`, for a redirect to a record page: the record must be present."""
        subject = self.subject(ident)
        if (
            not _SUFFIX26.match(ids.suffix_of_pith_number(subject))
            or self.state(subject).get("record_status") != "present"
        ):
            raise HTTPError(
                404,
                "not-found",
                f"{subject} has events here but no record_created stands yet (pending): it has no record page",
            )
        return subject

    def bundle_bytes(self, subject: str) -> bytes:
        """What publish writes at pith/<suffix>/bundle.json: the whole export while a reader can take
        it (64 MiB), else its first part (spec/audit.md §4)."""

        def build() -> bytes:
            parts = self.ledger.export_parts(subject)
            if len(parts) == 1:
                return _json_body(parts[0])
            whole = _json_body(self.ledger.export(subject))
            return whole if len(whole) <= MAX_FETCH else _json_body(parts[0])

        body: bytes = self.read(build)
        return body

    def export_bytes(self, subject: str) -> bytes:
        """What ``pithledger export`` prints (and publish writes at pith/<suffix>/export.jsonl): the
        record's bundles, then one bundle per record citing it. The page's "verify yourself" commands
        apply it: the record's bundle alone lacks the inbound citations, so it gives another state."""

        def build() -> bytes:
            return b"".join(
                _json_body(b) for b in [*self.ledger.export_parts(subject), *self.ledger.inbound_bundles(subject)]
            )

        body: bytes = self.read(build)
        return body

    def rendered(self, subject: str, kind: str, root: str, page: str) -> bytes:
        body: bytes = self.read(lambda: self._rendered(subject, kind, root, page))
        return body

    def _rendered(self, subject: str, kind: str, root: str, page: str) -> bytes:
        """The record page (``kind`` "html") or record JSON ("json") of a present record.

        A rendering depends only on the state (which covers every standing event, record_created ones
        included), the display metadata and this site's settings, so it is cached under the hash of the
        state bytes and of the metadata; a subject's canonical record never changes (the subject is its
        hash), so it is remembered to find the metadata. A hit costs two LMDB reads and two hashes."""
        sha = self.ledger.stored_state_sha256(subject)
        with self._lock:
            record = self._records.get(subject)
        if kind == "html" and sha is not None and record is not None:  # a hit reads neither the state nor the events
            hit = self._cached((subject, kind, root, page, sha, self._meta_hash(self.meta.get(record)), b""))
            if hit is not None:
                return hit
        data = self.state_bytes(subject)
        state: dict[str, Any] | None = None
        if record is None:
            state = msgspec.json.decode(data)
            if (
                state.get("record_status") != "present"
            ):  # pragma: no cover - the suffix index holds present records only
                raise HTTPError(404, "not-found", f"no record {subject} in this ledger")
            record = state["current"]["canonical_record"]
            with self._lock:
                if len(self._records) >= CACHE_ENTRIES:
                    self._records.clear()
                self._records[subject] = record
        meta = self.meta.get(record)
        inbound: list[record_doc.CitingRow] | None = None
        rows = b""
        if kind == "json":  # the document also names what this mirror knows of the records citing it
            if state is None:
                state = msgspec.json.decode(data)
            inbound = self.inbound_rows(state)
            rows = hashlib.sha256(msgspec.json.encode(inbound)).digest()
        key = (subject, kind, root, page, sha or hashlib.sha256(data).digest(), self._meta_hash(meta), rows)
        hit = self._cached(key)
        if hit is not None:
            return hit
        if state is None:
            state = msgspec.json.decode(data)
        events = self.export(subject)["events"]
        if kind == "json":
            valid: list[str] = self.read(lambda: self.ledger.record_events(subject))
            body = _json_body(record_doc.record_document(state, events, valid, meta, inbound or [], self.urls()))
        else:
            body = pages.record_page(
                state, pages.record_facts(state, events), meta, self.links(root, page), mirror=self.name
            ).encode()
        self._keep(key, body)
        return body

    def _cached(self, key: tuple[Any, ...]) -> bytes | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def _keep(self, key: tuple[Any, ...], body: bytes) -> None:
        with self._lock:
            if key not in self._cache:
                self._cache[key] = body
                self._cache_bytes += len(body)
            while self._cache_bytes > CACHE_BYTES and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= len(old)

    def badge(self, subject: str) -> bytes:
        """The record's badge (a function of its state's badges), cached under the stored state's sha256."""

        def build() -> bytes:
            sha = self.ledger.stored_state_sha256(subject)
            key = (subject, "badge", sha)
            if sha is not None and (hit := self._cached(key)) is not None:
                return hit
            state = msgspec.json.decode(self.ledger.state_bytes(subject))
            body = badge.badge_svg(state["pith_number"], state["current"]["badges"])
            if sha is not None:
                self._keep(key, body)
            return body

        body: bytes = self.read(build)
        return body

    @staticmethod
    def _meta_hash(meta: Any) -> bytes:
        return hashlib.sha256(msgspec.json.encode(meta)).digest() if meta is not None else b""

    def state_bytes(self, subject: str) -> bytes:
        data: bytes = self.read(lambda: self.ledger.state_bytes(subject))
        return data

    def state(self, subject: str) -> dict[str, Any]:
        value: dict[str, Any] = msgspec.json.decode(self.state_bytes(subject))
        return value

    def export(self, subject: str) -> dict[str, Any]:
        value: dict[str, Any] = self.read(lambda: self.ledger.export(subject))
        return value

    def digest(self) -> dict[str, Any]:
        root, counts = self.read(lambda: (self.ledger.root(), self.ledger.counts()))
        return {
            "events_root": root.events.hex(),
            "states_root": root.states.hex(),
            "records": counts["records"],
            "events": counts["events"],
            "digest_version": DIGEST_VERSION,
            "merge_version": MERGE_VERSION,
        }

    def manifest(self) -> dict[str, Any]:
        b = self.base_url
        return {
            "manifest_type": "pith_mirror_manifest",
            "manifest_version": "1.0",
            "merge_version": MERGE_VERSION,
            "mirrors": [
                {
                    "name": self.name,
                    "mirror_type": "https" if b.startswith("https") else "http",
                    "base_url": b,
                    "bundle_pattern": f"{b}/pith/{{suffix}}/bundle.json",
                    "state_pattern": f"{b}/pith/{{suffix}}/state.json",
                    "well_known_pattern": f"{b}/.well-known/pith/{{suffix}}/bundle.json",
                    "public_key": self.mirror_key,
                    "status": "mirror",
                }
                | manifest_fields(self.log.signer, b)
            ],
            "notes": "Current state is computed by deterministic merge, not by trusting this manifest.",
        }

    @property
    def base_path(self) -> str:
        """The path of ``--base-url`` without its last slash ("" at a host's root), percent-encoded: what
        every root-relative URL the server emits starts with, so that a proxy serving it under a path
        (nginx ``location /mirror/ { proxy_pass http://127.0.0.1:8080/; }``) keeps its clients there."""
        return quote(urlsplit(self.base_url).path.rstrip("/"), safe="/%!$&'()*+,;=:@-._~")

    def links(self, root: str, page: str = "") -> pages.Links:
        return pages.Links(root=root, page=page, base_url=self.base_url, server=True)

    def urls(self) -> record_doc.Urls:
        return record_doc.Urls(base=self.base_url, server=True)

    def inbound_rows(self, state: dict[str, Any]) -> list[record_doc.CitingRow]:
        def state_of(number: str) -> dict[str, Any] | None:
            try:
                return self.state(number)
            except PithledgerError:
                return None

        rows: list[record_doc.CitingRow] = self.read(lambda: record_doc.inbound_rows(state, state_of, self.meta.get))
        return rows

    def record_doc(self, subject: str) -> dict[str, Any]:
        """The record document as served (decoded from the cached bytes)."""
        value: dict[str, Any] = msgspec.json.decode(self.rendered(subject, "json", "../", ""))
        return value

    def events_doc(self, subject: str) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            held = msgspec.json.decode(self.bundle_bytes(subject))["events"]
            return record_doc.events_document(
                subject, held, self.ledger.record_events(subject), self.ledger.inbound_bundles(subject)
            )

        doc: dict[str, Any] = self.read(build)
        return doc

    def recent(self, n: int = 50) -> list[pages.IndexRow]:
        rows: list[pages.IndexRow] = self.read(lambda: recent_rows(self.ledger, self.meta, n))
        return rows


# --- handlers ---------------------------------------------------------------------------------------------


def _site(request: Request) -> Site:
    site: Site = request.app.state.site
    return site


def _redirect(site: Site, subject: str, tail: str = "") -> Response:
    """A 302 to the record's page under the base URL's path: behind a proxy at https://host/mirror/ a
    Location of /pith/... would leave the mirror (spec/serve.md §2)."""
    suffix = ids.suffix_of_pith_number(subject)
    if not _SUFFIX26.match(suffix):  # pragma: no cover - resolve returns long Pith Numbers only
        raise HTTPError(404, "not-found", "no such record")
    location = f"{site.base_path}/pith/{suffix}{tail}"
    return Response(status_code=302, headers={"location": location, "cache-control": "no-store", **CORS, **SECURITY})


Handler = Callable[[Request], Response]


def _in_thread(heavy: bool = False) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """Run a handler in a worker thread, off the event loop: a record's page, bundle or node document
    can take a second to build (a record flooded with valid events), and on the loop it would stall
    every other connection. ``heavy``: record-sized work, at most ``Limits.builds`` at once; a request
    over it waits on the loop, holding no thread."""

    def wrap(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(fn)
        async def endpoint(request: Request) -> Response:
            if not heavy:
                return await run_in_threadpool(fn, request)
            async with _site(request).builds:
                return await run_in_threadpool(fn, request)

        return endpoint

    return wrap


def _json_body(value: Any) -> bytes:
    return canonical_bytes(value) + b"\n"


def _index_response(request: Request, ident: str | None, root: str) -> Response:
    """The site index; with ``ident``, a redirect to its record, or the index naming why there is none
    (under the error's status): what the search boxes, whose target is /resolve, show a browser."""
    site = _site(request)
    error, status = "", 200
    if ident:
        try:
            return _redirect(site, site.record_subject(ident))
        except HTTPError as exc:
            error, status = exc.message, exc.status
    body = pages.index_page(site.recent(), site.digest(), site.links(root), mirror=site.name, error=error).encode()
    if status != 200:
        return Response(
            body,
            status_code=status,
            media_type=_HTML,
            headers={"cache-control": "no-store", "content-security-policy": pages.CSP_HEADER, **CORS, **SECURITY},
        )
    return respond(request, body, _HTML)


@_in_thread(heavy=True)
def index(request: Request) -> Response:
    return _index_response(request, request.query_params.get("id") or request.query_params.get("q"), "")


@_in_thread()
def resolve(request: Request) -> Response:
    site = _site(request)
    ident = request.path_params.get("ident") or request.query_params.get("id") or request.query_params.get("q")
    accept = request.headers.get("accept") or ""
    if "text/html" in accept and wants_json(accept) is None and "ident" not in request.path_params:
        # a browser (it names text/html and prefers it) at the search boxes' target: errors as the index
        # page, not JSON; API clients and curl (no Accept, */*) keep the JSON errors
        return _index_response(request, ident or "", "")
    if not ident:
        raise HTTPError(400, "usage", "give an identifier: /resolve?id=ID or /resolve/ID")
    return _redirect(site, site.record_subject(ident))


def _record_response(request: Request, suffix: str, root: str, page: str) -> Response:
    site = _site(request)
    if not _SUFFIX26.match(suffix):
        return _redirect(site, site.record_subject(suffix))
    subject = site.subject(suffix)
    media = wants_json(request.headers.get("accept"))
    kind = "json" if media is not None and not page else "html"
    body = site.rendered(subject, kind, root, page)
    return respond(request, body, media if kind == "json" and media else _HTML, extra={"vary": "Accept"})


@_in_thread(heavy=True)
def record(request: Request) -> Response:
    return _record_response(request, request.path_params["suffix"], "../", "")


@_in_thread(heavy=True)
def record_index_html(request: Request) -> Response:
    return _record_response(request, request.path_params["suffix"], "../../", "/index.html")


def _suffix_subject(request: Request) -> str:
    site = _site(request)
    suffix = request.path_params["suffix"]
    if not _SUFFIX26.match(suffix):
        raise HTTPError(
            404,
            "not-found",
            "record files are named by the 26-character suffix (/pith/<suffix>/...); "
            "use /resolve?id=ID for any other identifier form",
        )
    return site.subject(suffix)  # a suffix resolves to present records only (spec/identifiers.md §7)


@_in_thread(heavy=True)
def state_json(request: Request) -> Response:
    subject = _suffix_subject(request)
    return respond(request, _site(request).state_bytes(subject) + b"\n", _JSON)


@_in_thread(heavy=True)
def badge_svg(request: Request) -> Response:
    """``/pith/<suffix>/badge.svg``: the record's badge (spec/badge-and-latex.md §1), embeddable from any site."""
    return respond(
        request,
        _site(request).badge(_suffix_subject(request)),
        badge.MEDIA_TYPE,
        extra={"content-security-policy": badge.CSP, "cross-origin-resource-policy": "cross-origin"},
    )


@_in_thread(heavy=True)
def bundle_json(request: Request) -> Response:
    subject = _suffix_subject(request)
    return respond(request, _site(request).bundle_bytes(subject), _JSON)


@_in_thread(heavy=True)
def export_jsonl(request: Request) -> Response:
    subject = _suffix_subject(request)
    return respond(request, _site(request).export_bytes(subject), _JSONL)


@_in_thread(heavy=True)
def events_json(request: Request) -> Response:
    subject = _suffix_subject(request)
    return respond(request, _json_body(_site(request).events_doc(subject)), _JSON)


# --- Pith's Agent API (spec/serve.md §1, §2) ----------------------------------------------------------


@_in_thread(heavy=True)
def record_json(request: Request) -> Response:
    """``/pith/<suffix>.json``: the record document, whatever ``Accept`` says."""
    site = _site(request)
    subject = _suffix_subject(request)
    return respond(request, site.rendered(subject, "json", "../", ""), _JSON)


@_in_thread(heavy=True)
def graph_json(request: Request) -> Response:
    site = _site(request)
    subject = _suffix_subject(request)
    return respond(request, _json_body(record_doc.graph_document(site.record_doc(subject))), _JSON)


@_in_thread()
def resolution_json(request: Request) -> Response:
    """``/api/pith-number/<suffix>/resolve.json``: the resolver's answer for this record (what a
    published tree carries in place of the resolver)."""
    site = _site(request)
    subject = _suffix_subject(request)
    return respond(request, _json_body(record_doc.resolution(site.state(subject), site.urls())), _JSON)


#: Query parameters of Pith's resolver that name the identifier (any ID form is accepted in each).
RESOLVE_PARAMS = ("arxiv", "doi", "pith", "id")


@_in_thread()
def api_resolve(request: Request) -> Response:
    """``/api/pith-number/resolve?arxiv=ID&json=true`` (or doi=, pith=, id=): the resolution as JSON
    with ``json=true``, else a 302 to the record page."""
    site = _site(request)
    given = [(k, v) for k in RESOLVE_PARAMS for v in request.query_params.getlist(k)]
    if len(given) != 1 or not given[0][1]:
        raise HTTPError(
            400, "usage", "give one identifier: /api/pith-number/resolve?arxiv=ID (or doi=, pith=, id=)&json=true"
        )
    subject = site.record_subject(given[0][1])
    if request.query_params.get("json", "").lower() not in ("true", "1"):
        return _redirect(site, subject)
    return respond(request, _json_body(record_doc.resolution(site.state(subject), site.urls())), _JSON)


@_in_thread()
def paper(request: Request) -> Response:
    """``/paper/<8-char short, or arXiv id>`` (any ID form): a 302 to the record page."""
    site = _site(request)
    return _redirect(site, site.record_subject(request.path_params["ident"]))


async def schema(request: Request) -> Response:
    return respond(request, record_doc.schema_bytes(), _JSON, cache=CACHE_STABLE)


async def pith_other(request: Request) -> Response:
    """``/pith/<anything else>``: a record's unknown file is 404; any other ID form redirects to the record."""
    ident = request.path_params["ident"]
    if re.match(r"[A-Z2-7]{26}(/|\.)", ident) or ident.endswith(".json"):
        raise HTTPError(404, "not-found", f"no such record path on this mirror: /pith/{ident[:200]}")
    return await resolve(request)


@_in_thread()
def log_json(request: Request) -> Response:
    """This mirror's append log, a page at a time: what a follower reads to stay up to date."""
    site = _site(request)
    try:
        since = int(request.query_params.get("since", "0"))
        limit = int(request.query_params.get("limit", str(LOG_PAGE)))
    except ValueError:
        raise HTTPError(400, "usage", "since and limit must be decimal integers") from None
    if not (0 <= since < 2**63 and 1 <= limit <= LOG_PAGE):
        raise HTTPError(400, "usage", f"since must be >= 0 and limit between 1 and {LOG_PAGE}")

    def page() -> list[dict[str, Any]]:
        out = []
        for entry in site.ledger.log(since):
            v = entry.verdict
            out.append(
                {
                    "seq": entry.seq,
                    "event_id": v.event_id,
                    "event_type": v.event_type,
                    "subject": v.subject,
                    "trust": v.trust,
                }
            )
            if len(out) >= limit:
                break
        return out

    items: list[dict[str, Any]] = site.read(page)
    doc: dict[str, Any] = {
        "events": items,
        "next": f"{site.base_path}/events.json?since={items[-1]['seq'] + 1}&limit={limit}"
        if len(items) == limit
        else None,
    }
    return respond(request, _json_body(doc), _JSON)


# --- operations (spec/serve.md §9) ---------------------------------------------------------------------


@_in_thread()
def healthz(request: Request) -> Response:
    """``/healthz``: 200 while the ledger reads (its event count, its last commit), else 503 and why; never cached."""
    site = _site(request)
    status, doc = health(site.ledger, site.read)
    return Response(
        _json_body(doc),
        status_code=status,
        media_type=_JSON,
        headers={"cache-control": "no-store", **SECURITY, **({"retry-after": "30"} if status == 503 else {})},
    )


@_in_thread()
def metrics(request: Request) -> Response:
    """``/metrics``: this server's registry in the Prometheus text format 0.0.4 (its own, never the global one),
    announced as such whatever prometheus-client's latest is (spec/serve.md §9.3)."""
    from prometheus_client import generate_latest

    return Response(
        generate_latest(_site(request).ops.registry),
        headers={"content-type": CONTENT_TYPE, "cache-control": "no-store", **SECURITY},
    )


async def manifest(request: Request) -> Response:
    return respond(request, _json_body(_site(request).manifest()), _JSON, cache=CACHE_STABLE)


async def signing_key(request: Request) -> Response:
    return respond(request, _json_body(signing_key_doc()), _JSON, cache=CACHE_STABLE)


@_in_thread()
def digest(request: Request) -> Response:
    return respond(request, _json_body(_site(request).digest()), _JSON)


# --- the published layout (spec/audit.md §4), live: `sync` and `audit` read this server as a mirror -----


@_in_thread()
def mirror_digest(request: Request) -> Response:
    site = _site(request)
    return respond(request, _json_body(site.read(lambda: digest_doc(site.ledger))), _JSON)


@_in_thread(heavy=True)
def mirror_node(request: Request) -> Response:
    """A digest-tree node file, named by prefix and digest. Only the current node is answered: a
    reader holding an older parent gets 404 and runs again (as with a re-published tree)."""
    site = _site(request)
    m = re.fullmatch(r"(root|[A-Z2-7]{1,%d})-([0-9a-f]{24})\.json" % DEPTH, request.path_params["name"])
    if not m:
        raise HTTPError(404, "not-found", "no such node file")
    prefix = "" if m[1] == "root" else m[1]
    try:
        doc = site.read(lambda: node_doc(site.ledger, prefix))
    except DerivationPending as exc:  # an apply or sync is running (or was killed): come back when it has finished
        raise HTTPError(503, exc.code, exc.message) from None
    if doc is None or node_file(prefix, doc) != f"{NODE_DIR}/{request.path_params['name']}":
        raise HTTPError(
            404, "not-found", f"node {m[1]} has another digest now (the ledger changed): read digest.json again"
        )
    return respond(request, _json_body(doc), _JSON)


@_in_thread(heavy=True)
def mirror_record(request: Request) -> Response:
    site = _site(request)
    year, suffix, name = request.path_params["year"], request.path_params["suffix"], request.path_params["name"]
    number = f"pith:{year}:{suffix}"
    m = re.fullmatch(r"state\.json|parts\.json|bundle(?:-([1-9][0-9]{0,5}))?\.json", name)
    if not (ids.PITH_NUMBER_RE.match(number) and m):
        raise HTTPError(404, "not-found", "no such record file")
    if name == "state.json":
        return respond(request, site.state_bytes(number) + b"\n", _JSON)
    n = int(m[1] or 0)

    def build() -> bytes:
        parts = site.ledger.export_parts(number)
        if (
            name == "parts.json"
        ):  # the part index, for every record (publish writes it for 2+ parts only: spec/audit.md §4)
            return _json_body(part_index_doc(number, parts, site.ledger.record_events(number)))
        if n >= len(parts):
            raise HTTPError(404, "not-found", f"{number} has {len(parts)} bundle part(s)")
        return _json_body(parts[n])

    return respond(request, site.read(build), _JSON)


# --- the transparency log (spec/transparency.md §4): C2SP tlog-tiles, from the live ledger ------------


@_in_thread()
def log_checkpoint(request: Request) -> Response:
    """``/checkpoint``: the log's signed checkpoint now (signed once per tree size)."""
    site = _site(request)
    body: bytes | None = None
    for _ in range(2):  # once more on a refusal: a snapshot begun before publish signed a larger tree reads it then
        try:
            body = site.read(lambda: site.log.checkpoint(site.ledger))
            break
        except NoSuchTile as exc:
            raise HTTPError(404, exc.code, exc.message) from None
        except LogWouldFork as exc:
            refused = exc
        except (DamagedSignedRecord, CannotWrite) as exc:  # the key's record: nothing is signed without it
            raise HTTPError(503, exc.code, exc.message) from None
    if body is None:
        raise HTTPError(503, refused.code, refused.message)  # nothing signed (spec/transparency.md §4.1)
    return respond(request, body, "text/plain; charset=utf-8", cache=CACHE_CHECKPOINT)


@_in_thread()
def log_tile(request: Request) -> Response:
    """``/tile/<L>/<N>[.p/<W>]``, ``/tile/entries/<N>[.p/<W>]``: only each tile's one canonical path,
    as sent (no percent-encoding, no dot segments); beyond the tree is 404."""
    site = _site(request)
    rel = "tile/" + request.path_params.get("rest", "")
    if (request.scope.get("raw_path") or b"").split(b"?", 1)[0] != b"/" + rel.encode("utf-8", "surrogateescape"):
        raise HTTPError(404, "not-found", "tile paths are sent as they are named, without percent-encoding")
    try:
        body, full = site.read(lambda: LogServer.tile(site.ledger, rel))
    except NoSuchTile as exc:
        raise HTTPError(404, exc.code, exc.message) from None
    return respond(request, body, "application/octet-stream", cache=CACHE_IMMUTABLE if full else CACHE_PARTIAL)


# --- the action endpoints (spec/serve.md §8): serve --accept-events -----------------------------------

_ACTION_PATH = re.compile(r"^/pith/[^/]+/action/[^/]+\Z")


def _accepts_post(app: Any, scope: Scope) -> bool:
    """A POST is answered only on an action path of a server started with --accept-events, and at
    /add-checkpoint of one started with --witness."""
    if scope.get("path") == "/add-checkpoint":
        return getattr(app.state.site, "witness", None) is not None
    return getattr(app.state.site, "actions", None) is not None and bool(_ACTION_PATH.match(scope.get("path", "")))


async def add_checkpoint(request: Request) -> Response:
    """``POST /add-checkpoint`` (serve --witness): C2SP tlog-witness, spec/transparency.md §6.2. The body is
    bounded (declared and streamed), the work (a signature check, a lock, an fsync) runs off the event loop."""
    site = _site(request)
    wit = site.witness
    if wit is None or site.witness_rates is None:  # pragma: no cover - Guard answers 405 first
        raise HTTPError(405, "method-not-allowed", "this server is no witness")
    plain = {"cache-control": "no-store", **SECURITY}
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or len(length) > 18 or int(length) > MAX_WITNESS_BODY):
        return Response(
            f"body-too-large: an add-checkpoint body is at most {MAX_WITNESS_BODY:,} bytes\n",
            status_code=413,
            media_type="text/plain",
            headers={**plain, "connection": "close"},
        )
    wait = site.witness_rates.take(request.client.host if request.client else "?")
    if wait > 0:
        return Response(
            "rate-limited: too many requests; wait before sending more\n",
            status_code=429,
            media_type="text/plain",
            headers={**plain, "retry-after": str(max(1, int(wait + 0.999)))},
        )
    body = bytearray()

    async def read() -> None:
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > MAX_WITNESS_BODY:
                raise ActionError(
                    413, "body-too-large", f"an add-checkpoint body is at most {MAX_WITNESS_BODY:,} bytes"
                )

    try:
        await asyncio.wait_for(read(), timeout=30.0)
    except ActionError as exc:
        return Response(
            f"{exc.code}: {exc.message}\n",
            status_code=exc.status,
            media_type="text/plain",
            headers={**plain, "connection": "close"},
        )
    except TimeoutError:
        return Response(
            "body-timeout: the body did not arrive within 30 s\n",
            status_code=408,
            media_type="text/plain",
            headers={**plain, "connection": "close"},
        )
    answer = await run_in_threadpool(wit.handle, bytes(body))
    # the media type exactly as given (C2SP clients compare text/x.tlog.size whole; Starlette would add a charset)
    return Response(answer.body, status_code=answer.status, headers={**plain, "content-type": answer.content_type})


async def action(request: Request) -> Response:
    """``POST /pith/<suffix>/action/<kind>``: a signed event (or event bundle) about the record."""
    site = _site(request)
    actions = site.actions
    if actions is None:  # pragma: no cover - Guard answers 405 first
        raise HTTPError(405, "method-not-allowed", "this mirror does not accept events")
    kind = request.path_params["kind"]
    client = request.client.host if request.client else "?"  # the effective client (Guard: spec/serve.md §9.1)
    subject = "-"
    try:
        if kind not in ACTION_KINDS:
            raise ActionError(
                404, "not-found", f"no action {kind[:60]!r}; the actions are {', '.join(sorted(ACTION_KINDS))}"
            )
        subject = _suffix_subject(request)
        actions.check_head(client, request.headers.get("content-length"))
        bundle = request_bundle(await read_body(request.stream()), subject, kind)
        answer = await actions.submit(bundle, kind)
    except ActionError as exc:
        site.ops.refused_submission(client=client, kind=kind, subject=subject, reason=exc.code)
        return error_response(exc.status, exc.code, exc.message, exc.headers)
    except HTTPError as exc:
        site.ops.refused_submission(client=client, kind=kind, subject=subject, reason=exc.code)
        raise
    site.ops.events(client=client, kind=kind, subject=subject, status=answer.status, body=answer.body)
    body = canonical_bytes(answer.body) + b"\n"
    return Response(
        body,
        status_code=answer.status,
        media_type=_JSON,
        headers={"cache-control": "no-store", **CORS, **SECURITY, **answer.headers},
    )


async def http_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPError):
        return error_response(exc.status, exc.code, exc.message, {"retry-after": "30"} if exc.status == 503 else None)
    status = getattr(exc, "status_code", 500)
    if status == 404:
        return error_response(404, "not-found", f"no such path on this mirror: {request.url.path[:200]}")
    if status == 405:
        return error_response(
            405,
            "method-not-allowed",
            "this mirror is read-only: GET, HEAD and OPTIONS only",
            {"allow": "GET, HEAD, OPTIONS"},
        )
    return error_response(500, "server-error", "the request could not be answered")


async def pithledger_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, NotFound):
        return error_response(404, exc.code, exc.message)
    if isinstance(exc, PithledgerError):
        return error_response(500 if exc.code.startswith("ledger") else 400, exc.code, exc.message)
    return error_response(500, "server-error", "the request could not be answered")  # pragma: no cover


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug or a damaged ledger: a JSON 500 for the client; the traceback goes to the server's log only."""
    return error_response(500, "server-error", "the request could not be answered")


class Guard:
    """Outermost ASGI layer: the effective client address, the access log and request metrics (spec/serve.md
    §9), read-only methods, CORS preflight, bounded request lines."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ops: Ops = self.app.state.site.ops  # type: ignore[attr-defined]
        started_at = time.perf_counter()
        peer = str(scope["client"][0]) if scope.get("client") else "?"
        # computed once, here: the rate limits (request.client) and the log read it (spec/serve.md §9.1)
        client = ops.proxies.client(peer, scope.get("headers") or ())
        if client != peer:
            scope["client"] = (client, 0)
        answered = [0, 0]  # status, body bytes

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered[0] = int(message["status"])
            elif message["type"] == "http.response.body":
                answered[1] += len(message.get("body", b""))
            await send(message)

        try:
            await self._answer(scope, receive, counted)
        finally:
            route = scope.get("route")
            raw = scope.get("raw_path") or scope.get("path", "").encode()
            query = scope.get("query_string") or b""
            path = (raw + (b"?" + query if query else b"")).decode("latin-1")
            ops.request(
                client=client,
                peer=peer,
                method=str(scope.get("method", "")),
                path=path,
                route=getattr(route, "path", None) or "unmatched",
                status=answered[0],
                size=answered[1],
                seconds=time.perf_counter() - started_at,
            )

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method == "OPTIONS":
            # an action path of a server accepting events also takes POST, so a page on another site may submit
            allowed = "GET, HEAD, OPTIONS, POST" if _accepts_post(self.app, scope) else "GET, HEAD, OPTIONS"
            headers = "Accept, If-None-Match, Cache-Control" + (", Content-Type" if allowed.endswith("POST") else "")
            await Response(
                status_code=204,
                headers={
                    **CORS,
                    "access-control-allow-methods": allowed,
                    "access-control-allow-headers": headers,
                    "access-control-max-age": "86400",
                    "allow": allowed,
                },
            )(scope, receive, send)
            return
        if method not in ("GET", "HEAD") and not (method == "POST" and _accepts_post(self.app, scope)):
            await error_response(
                405,
                "method-not-allowed",
                "this mirror is read-only: GET, HEAD and OPTIONS only",
                {"allow": "GET, HEAD, OPTIONS"},
            )(scope, receive, send)
            return
        if len(scope.get("raw_path") or b"") > MAX_PATH or len(scope.get("query_string", b"")) > MAX_QUERY:
            await error_response(
                400, "request-too-long", f"paths are at most {MAX_PATH} bytes and queries {MAX_QUERY}"
            )(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:  # noqa: BLE001 - the last line of defence: never a traceback to a client
            if not started:
                await error_response(500, "server-error", "the request could not be answered")(scope, receive, send)


def create_app(site: Site) -> ASGIApp:
    routes = [
        Route("/", index),
        Route("/index.html", index),
        Route("/resolve", resolve),
        Route("/resolve/{ident:path}", resolve),
        Route("/pith-mirrors.json", manifest),
        Route("/pith-signing-key.json", signing_key),
        Route("/digest.json", digest),
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/events.json", log_json),
        Route("/pith/{suffix}/state.json", state_json),
        Route("/pith/{suffix}/bundle.json", bundle_json),
        Route("/pith/{suffix}/events.json", events_json),
        Route("/pith/{suffix}/export.jsonl", export_jsonl),
        Route("/pith/{suffix}/index.html", record_index_html),
        Route("/pith/{suffix}/badge.svg", badge_svg),
        Route("/.well-known/pith/{suffix}/bundle.json", bundle_json),
        Route("/pithledger/digest.json", mirror_digest),
        Route("/pithledger/nodes/{name}", mirror_node),
        Route("/pithledger/records/{year}/{suffix}/{name}", mirror_record),
        Route("/checkpoint", log_checkpoint),
        Route("/tile", log_tile),  # else Starlette would redirect it to /tile/
        Route("/tile/{rest:path}", log_tile),
        Route("/pith/{suffix}.json", record_json),
        Route("/api/pith-number/resolve", api_resolve),
        Route("/api/pith-number/{suffix}/graph.json", graph_json),
        Route("/api/pith-number/{suffix}/events.json", events_json),
        Route("/api/pith-number/{suffix}/resolve.json", resolution_json),
        Route("/paper/{ident:path}", paper),
        Route(f"/{record_doc.SCHEMA_PATH}", schema),
        Route("/pith/{suffix}/action/{kind}", action, methods=["POST"]),
        Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
        Route("/pith/{suffix}", record),
        Route("/pith/{ident:path}", pith_other),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            HTTPError: http_error,
            404: http_error,
            405: http_error,
            PithledgerError: pithledger_error,
            Exception: server_error,
        },
    )
    # Starlette's own slash redirects (/digest.json/ -> http://<Host>/digest.json) are built from the Host
    # header and drop the base URL's path: such a path is a 404, and every redirect is :func:`_redirect`'s.
    app.router.redirect_slashes = False
    app.state.site = site
    site.ops.routes((r.path, "POST" if r.methods == {"POST"} else "GET") for r in routes)
    return Guard(app)


# --- running ------------------------------------------------------------------------------------------------


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a named error (port in use, address not here, no permission)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotListen(f"cannot use host {host!r}: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it (Linux): a response's head and body are two writes, and with
        # Nagle the second waits for the client's delayed ACK (~40 ms per keep-alive request).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(addr)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on {host} is already in use") from None
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


#: What a client must read of a stalled response in every ``Limits.send_timeout`` seconds (spec/serve.md §4).
SEND_PROGRESS = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """What one client, and all of them, may hold of the server (spec/serve.md §4)."""

    #: A request head (request line and header fields) longer than this is answered 431 and the connection closed.
    max_head: int = MAX_HEAD
    #: Seconds a connection may take, from its opening or from the end of its last response, to send a whole head.
    head_timeout: float = 10.0
    #: Seconds an idle keep-alive connection is kept.
    keep_alive: int = 5
    #: Connections held at once per client address, and in all.
    per_client: int = 32
    total: int = 512
    #: Record-sized documents built at once (each in a worker thread); further requests wait their turn.
    builds: int = 2
    #: Seconds a response may stall: while a connection holds bytes the kernel has not taken yet (from the
    #: moment they go over asyncio's high-water mark, 64 KiB, or the response is complete with some still
    #: held, the connection closing or not), its client must read SEND_PROGRESS of them (or half, if less) in
    #: every such period, else the connection is dropped and what it held with it.
    send_timeout: float = 30.0
    #: The lingering close (nginx's lingering_close): a connection closed while its request's body is still
    #: arriving (an answer sent before the body was read: 413, 404, 405, 429, 408) is half-closed after the
    #: answer, then what its client still sends is read and dropped until the client closes, or nothing arrives
    #: for linger_timeout s, or linger_time s or linger_bytes bytes in all have passed; then it is closed. Why:
    #: a close with the client's bytes unread resets the connection, and clients that send a whole body before
    #: reading (Python's urllib and http.client) lost the answer to ECONNRESET.
    linger_time: float = 30.0
    linger_timeout: float = 5.0
    linger_bytes: int = 16 * 1024 * 1024


class _Lingering(asyncio.Transport):
    """The transport uvicorn's protocol is given: each call goes to the socket's transport, except close(),
    which the guard answers (it may linger first), and pause_reading() while lingering (the drain reads on)."""

    def __init__(self, real: asyncio.Transport, close: Callable[[], None]) -> None:
        super().__init__()
        self.real = real
        self.lingering = False
        self._close = close

    def close(self) -> None:
        self._close()

    def is_closing(self) -> bool:
        return self.lingering or self.real.is_closing()

    def abort(self) -> None:
        self.real.abort()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.real.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self.real.writelines(list_of_data)

    def write_eof(self) -> None:
        self.real.write_eof()

    def can_write_eof(self) -> bool:
        return self.real.can_write_eof()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.real.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if not self.lingering:
            self.real.pause_reading()

    def resume_reading(self) -> None:
        self.real.resume_reading()

    def is_reading(self) -> bool:
        return self.real.is_reading()

    def get_write_buffer_size(self) -> int:
        return self.real.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.real.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.real.set_write_buffer_limits(high, low)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.real.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.real.get_protocol()


@dataclass
class _GuardState:
    """What the connections of one server share: its bounds, who holds how many connections, and whether it stops."""

    limits: Limits
    ops: Ops | None
    held: dict[str, int]  # admitted connections per client address
    admitted: int = 0  # admitted connections in all
    stopping: bool = False  # the server stops (shutdown() was called): a lingering close that starts now ends at once

    def trusted(self, host: str) -> bool:
        """A listed proxy (never ``*``): exempt from the per-address cap."""
        return bool(self.ops is not None and self.ops.proxies and self.ops.proxies.listed(host))

    def refused(self, peer: str | None, code: str, status: int) -> None:
        if self.ops is not None:
            self.ops.guard_refused(peer or "?", code, status)


class _Guarded(asyncio.Protocol):
    """The guard's half of a guarded protocol (:func:`guarded`): placed before uvicorn's protocol class in the
    bases, so each method here runs first and hands on to uvicorn's through ``super()``."""

    _guard: _GuardState  # set per server by guarded()
    # uvicorn's protocol's own attributes, used here
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    _peer: str | None = None
    _admitted = False
    _refused = False
    _deadline: asyncio.TimerHandle | None = None
    _waiting: object = None  # the request cycle when the head deadline was armed
    _counted: object = None  # the request cycle whose following bytes _head_bytes counts
    _head_bytes = 0
    _stall: asyncio.TimerHandle | None = None  # armed while the transport's send buffer is over its high-water mark
    _stall_held = 0  # the bytes that buffer held when it was armed
    _real: asyncio.Transport  # the socket's transport; uvicorn (and self.transport) hold a _Lingering around it
    _wrapped: _Lingering | None = None
    _linger_timer: asyncio.TimerHandle | None = None  # armed while lingering
    _linger_until = 0.0  # loop time the linger ends at the latest
    _linger_last = 0.0  # loop time of the last byte drained
    _linger_read = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's is typed so
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        mine = self._guard.held.get(host, 0) >= self._guard.limits.per_client and not self._guard.trusted(host)
        if mine or self._guard.admitted >= self._guard.limits.total:
            self._refused = True
            self._guard.refused(host, "too-many-connections", 503)
            _refuse(
                transport,
                "too-many-connections",
                f"this client holds {self._guard.limits.per_client} connections to this mirror already"
                if mine
                else f"this mirror holds {self._guard.limits.total} connections already: try again shortly",
            )
            return
        self._guard.held[host] = self._guard.held.get(host, 0) + 1
        self._guard.admitted += 1
        self._peer, self._admitted = host, True
        self._real, self._wrapped = transport, _Lingering(transport, self._close_requested)
        super().connection_made(self._wrapped)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._unstall()
        self._unlinger()
        if not self._admitted:
            return
        self._admitted = False
        assert self._peer is not None
        self._guard.held[self._peer] -= 1
        if not self._guard.held[self._peer]:
            del self._guard.held[self._peer]
        self._guard.admitted -= 1
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._wrapped is not None and self._wrapped.lingering:
            self._linger_read += len(data)  # dropped: the request was answered
            self._linger_last = self.loop.time()
            if self._linger_read > self._guard.limits.linger_bytes:
                self._end_linger()
            return
        if self._refused:
            return  # answered already; what it still sends is dropped until it or the linger closes
        view = memoryview(data)
        while view:
            if self.cycle is not self._counted:  # a head completed: what follows is its body, or the next head
                self._counted, self._head_bytes = self.cycle, 0
            # While a request is in flight, what arrives is its body or a pipelined next head: a POST may
            # send a body of an action's size (spec/serve.md §8), any other request a head's worth.
            flight = self.cycle is not None and not self.cycle.response_complete
            body = MAX_BODY if flight and self.cycle.scope.get("method") == "POST" else 0
            room = self._guard.limits.max_head + body - self._head_bytes
            if room <= 0:
                if flight and not self.cycle.response_started and getattr(self.cycle, "more_body", False):
                    # a request's body (as sent: chunk framing counts) passed the cap unanswered: a POST's over an
                    # action's size, any other method's over a head's worth (a GET with a body, review-serve)
                    self._too_large(post=bool(body))
                    return
                self._stop("request-too-long", f"a request head is at most {self._guard.limits.max_head} bytes", 431)
                return
            chunk, view = view[:room], view[room:]
            self._head_bytes += len(chunk)
            super().data_received(bytes(chunk))
            if self.transport.is_closing():
                return

    def on_response_complete(self) -> None:
        self._head_bytes = 0  # the next head is counted from its first byte
        cycle = self.cycle
        if (
            cycle is not None
            and cycle.response_complete
            and getattr(cycle, "more_body", False)
            and not self.transport.is_closing()
        ):
            # answered before its body arrived (an early 404, 405, 429 kept alive): the rest of the body is
            # not parsed on, the connection ends with the lingering close
            self.transport.close()
        super().on_response_complete()  # type: ignore[misc]  # uvicorn's protocol, the next base
        if not self.transport.is_closing():
            self._arm()
        if self._stall is None and self.transport.get_write_buffer_size():
            # uvicorn writes a body in one go and calls it complete at once: what the client has not
            # read yet stays held (through keep-alive, and a close that waits for it), so it is watched
            # even where it never crossed the high-water mark
            self._watch()

    def pause_writing(self) -> None:
        if self._admitted:  # a refused connection's answer is one small write: never paused, but never ours
            super().pause_writing()
        self._watch()

    def resume_writing(self) -> None:
        if self.transport.get_write_buffer_size():  # under the low-water mark, but still held: watched anew
            self._watch()
        else:
            self._unstall()
        if self._admitted:
            super().resume_writing()

    def _watch(self) -> None:
        self._unstall()
        self._stall_held = self.transport.get_write_buffer_size()
        self._stall = self.loop.call_later(self._guard.limits.send_timeout, self._check_stall)

    def _unstall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _check_stall(self) -> None:
        # asyncio reports only the crossing of its high and low marks, and a whole body is one write, so
        # progress is read off what is still held: the client must have read SEND_PROGRESS of it (or half).
        # A closing transport is no exception: uvicorn closes a keep-alive connection when its idle time is
        # up, or at once after a `Connection: close` answer, and asyncio's close waits, unbounded, for the
        # buffer to drain.
        self._stall = None
        held = self.transport.get_write_buffer_size()
        if not held:
            return
        if held <= self._stall_held - min(SEND_PROGRESS, self._stall_held // 2):
            self._watch()
            return
        # A response is being written (or was), so no answer can be added: the connection is dropped, and
        # with it the unsent body it held (uvicorn's send returns once its cycle is disconnected).
        self.transport.abort()

    def _arm(self) -> None:
        self._disarm()
        self._waiting = self.cycle
        self._deadline = self.loop.call_later(self._guard.limits.head_timeout, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        idle = self.cycle is None or self.cycle.response_complete  # a request in flight re-arms when answered
        if self.cycle is self._waiting and idle and not self.transport.is_closing():
            self._stop(
                "request-timeout", f"a request head must arrive within {self._guard.limits.head_timeout:g} s", 408
            )

    def shutdown(self) -> None:
        self._guard.stopping = True
        if self._wrapped is not None and self._wrapped.lingering:  # the server stops: no one waits for a drain
            self._end_linger()
            return
        super().shutdown()  # type: ignore[misc]  # uvicorn's protocol, the next base

    def _close_requested(self) -> None:
        """uvicorn (or this guard) closes the connection: at once, unless the request's body is still
        arriving; then the lingering close (spec/serve.md §4)."""
        assert self._wrapped is not None
        if self._wrapped.lingering:
            return  # it ends on its own bounds
        real = self._real
        if (
            real.is_closing()
            or self._refused
            or not getattr(self.cycle, "more_body", False)
            or not real.can_write_eof()
        ):
            real.close()
        else:
            self._linger()

    def _linger(self) -> None:
        assert self._wrapped is not None
        real = self._real
        self._disarm()
        self._wrapped.lingering = True
        now = self.loop.time()
        # a server that stops ends its lingering connections at once (shutdown()); one whose linger starts
        # after that (its answer came later, e.g. a 408 body-timeout) gets LINGER s to read its answer
        total = min(LINGER, self._guard.limits.linger_time) if self._guard.stopping else self._guard.limits.linger_time
        self._linger_until, self._linger_last, self._linger_read = now + total, now, 0
        self._linger_timer = self.loop.call_later(min(self._guard.limits.linger_timeout, total), self._check_linger)
        real.resume_reading()
        # the answer goes first (write_eof waits for the buffer), then FIN: the client reads the answer and
        # EOF while it still sends, and its bytes are read here, so no reset takes the answer away
        try:
            real.write_eof()
        except OSError:
            # the client reset the connection already (shutdown: ENOTCONN), e.g. it read the answer's head and
            # closed: nothing to linger for. Raised here it went up the ASGI send and was swallowed, leaving
            # the connection open for ever, unread, with its place under the caps (review-serve).
            self._end_linger()

    def _check_linger(self) -> None:
        self._linger_timer = None
        now = self.loop.time()
        due = min(self._linger_last + self._guard.limits.linger_timeout, self._linger_until)
        if now >= due:
            self._end_linger()
        else:
            self._linger_timer = self.loop.call_later(due - now, self._check_linger)

    def _unlinger(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _end_linger(self) -> None:
        self._unlinger()
        # an answer still unread after the bounds is dropped with the connection (close would wait for it)
        if self._real.get_write_buffer_size():
            self._real.abort()
        else:
            self._real.close()

    def _too_large(self, *, post: bool) -> None:
        """A request whose body, as sent, passed the cap before the application answered: the answer is
        written here, the application's request is ended (it sees a disconnect; its answer is dropped), and
        the connection lingers."""
        self.cycle.disconnected = True
        self.cycle.message_event.set()
        if post:
            message = f"the request is over {self._guard.limits.max_head + MAX_BODY:,} bytes as sent; an action body is at most {MAX_BODY:,}"
        else:
            message = f"the request is over {self._guard.limits.max_head:,} bytes as sent; only a POST to an action URL carries a body"
        _answer(self._real, 413, "body-too-large", message)
        self._guard.refused(self._peer, "body-too-large", 413)
        self._linger()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's parser (httptools or h11) refused what arrived as no HTTP/1.1 request: answered (JSON, like
        every error), counted and logged as the guard's own answers are (uvicorn did neither: review of #41)."""
        self._disarm()
        self._refused = True
        self._guard.refused(self._peer, "malformed-request", 400)
        _answer(self._real, 400, "malformed-request", "the request is not HTTP/1.1 this server can read")
        self.transport.close()

    def _stop(self, code: str, message: str, status: int) -> None:
        self._disarm()
        self._refused = True
        self._guard.refused(self._peer, code, status)
        if self.cycle is not None and not self.cycle.response_complete:  # an answer is being written: no second one
            self.transport.close()
            return
        _refuse(self._real, code, message, status, pause=status == 431)


def guarded(base: type[Any], limits: Limits, ops: Ops | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ``base`` with bounds it lacks: a deadline for a request head to arrive,
    a cap on a head's bytes counted as they arrive (before the parser accumulates them: httptools
    concatenates a header value chunk by chunk, quadratic in its length), a deadline for a stalled
    response to be read on (uvicorn waits for a client that never reads, holding the unsent body), and
    per-address and total connection caps. A connection over a cap is answered 503 at once and closed; it is never admitted,
    so it does not count against anybody else (uvicorn's own ``limit_concurrency`` counts every open
    connection, so one client holding many made every other client's requests 503). And a lingering close
    (``Limits.linger_time``): uvicorn is given a :class:`_Lingering` transport, so every close it asks for
    while a request's body is still arriving half-closes and drains, bounded, instead of resetting.
    ``ops``: its listed proxies (never ``*``) are exempt from the per-address cap (their connections carry many clients';
    the total cap still holds them), and every answer of the guard is counted and logged (spec/serve.md §9)."""
    state = _GuardState(limits=limits, ops=ops, held={})
    protocol: type[asyncio.Protocol] = type(f"Guarded{base.__name__}", (_Guarded, base), {"_guard": state})
    return protocol


#: Seconds a refused connection stays open after its answer, so the client reads it before the close.
LINGER = 1.0


def _refuse(transport: asyncio.Transport, code: str, message: str, status: int = 503, *, pause: bool = False) -> None:
    """Answer a connection outside the application (JSON like every error) and close it. The answer
    is followed by a half-close and, a moment later, the close: closing at once with the client's bytes
    unread would reset the connection, and the client might lose the answer."""
    _answer(transport, status, code, message)
    if pause:  # a client still sending a huge head is not read on: it waits, then the close resets it
        transport.pause_reading()
    if transport.can_write_eof():
        transport.write_eof()
    asyncio.get_running_loop().call_later(LINGER, transport.close)


def _answer(transport: asyncio.Transport, status: int, code: str, message: str) -> None:
    """An error answer written outside the application (JSON like every error), announcing the close."""
    reason = {
        400: "Bad Request",
        408: "Request Timeout",
        413: "Content Too Large",
        431: "Request Header Fields Too Large",
        503: "Service Unavailable",
    }[status]
    body = canonical_bytes({"error": code, "message": message}) + b"\n"
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"cache-control: no-store\r\nconnection: close\r\n" + ("retry-after: 5\r\n" if status == 503 else "") + "\r\n"
    )
    transport.write(head.encode() + body)


def _not_parser_refusal(record: logging.LogRecord) -> bool:
    return record.msg != "Invalid HTTP request received."


def run(
    ledger_path: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    base_url: str = "",
    name: str = "pithledger mirror",
    mirror_key: dict[str, str] | None = None,
    quiet: bool = False,
    http: str = "httptools",
    limits: Limits = Limits(),
    accept_events: PostLimits | None = None,
    log: LogSigner | None = None,
    witness: Witness | None = None,
    access_log: str = "-",
    forwarded_allow_ips: str = "",
) -> None:
    """Serve until SIGINT/SIGTERM. The ledger is opened (and checked) before the port is bound.
    ``http``: uvicorn's HTTP/1.1 parser, "httptools" (C, the default: ADR 0007) or "h11" (pure Python).
    ``access_log``: ``-`` (stderr) or a file appended to; ``forwarded_allow_ips``: the trusted proxies (spec/serve.md §9)."""
    import uvicorn
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    proxies = Proxies(forwarded_allow_ips)  # ValueError: the caller names the option
    stream = open_log(access_log)  # CannotWrite before anything else starts
    ops = Ops(proxies=proxies, log=AccessLog(stream))
    try:
        site = Site(
            ledger_path,
            base_url="",
            name=name,
            mirror_key=mirror_key,
            accept_events=accept_events,
            builds=limits.builds,
            log=log,
            witness=witness,
            ops=ops,
        )
    except BaseException:
        ops.log.close()
        raise
    try:
        sock = bind(host, port)
        site.base_url = (base_url or url_of(sock)).rstrip("/")
        protocol = guarded(import_from_string(HTTP_PROTOCOLS[http]), limits, ops)
        # The caps above replace uvicorn's limit_concurrency; h11's own bound is a backstop past ours.
        config = uvicorn.Config(
            create_app(site),
            log_level="warning",
            access_log=False,
            server_header=False,
            date_header=True,
            proxy_headers=False,
            lifespan="off",
            http=protocol,
            loop="asyncio",
            timeout_keep_alive=limits.keep_alive,
            limit_concurrency=None,
            backlog=1024,
            h11_max_incomplete_event_size=2 * limits.max_head,
        )
        # uvicorn's own line for what its parser refused would be written to stderr by the event loop, as often as
        # a client likes (a stderr pipe nobody reads then stalls every connection): the access log, written by its
        # own thread, carries it instead (guard=malformed-request, spec/serve.md §9.4)
        logging.getLogger("uvicorn.error").addFilter(_not_parser_refusal)
        server = uvicorn.Server(config)
        if not quiet:
            mode = "accepting signed events at POST /pith/<suffix>/action/<kind>" if accept_events else "read-only"
            if witness is not None:
                mode += f"; witness {witness.name} of {len(witness.logs):,} logs at POST /add-checkpoint"
            sys.stderr.write(f"serving {ledger_path} at {url_of(sock)}/ ({mode}; Ctrl-C to stop)\n")
            if witness is not None:
                sys.stderr.write(f"witness key (cosignature/v1): {witness.signer.cosigner.vkey}\n")
        if proxies.any:  # a warning, even with --quiet
            sys.stderr.write(
                "warning: --forwarded-allow-ips '*' believes X-Forwarded-For from every peer: any client can "
                "choose its address for the rate limits and the log; list the proxy's address instead\n"
            )
        sys.stderr.flush()
        server.run(sockets=[sock])
        sock.close()
    finally:
        site.close()
