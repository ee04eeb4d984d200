"""``pull``: fill a ledger from any Pith-shaped mirror, by the patterns of its ``pith-mirrors.json``.

Rules and rationale: spec/pull.md. The manifest, the resolver and every bundle are hostile input:
the manifest only says where to look (its public key is never used: receipts verify against the
built-in registry key), a resolver's answer is checked against the bundle it leads to, and a bundle
is applied only when it is about the record the ID names. Bundles go through strict decoding,
:func:`~pithledger.records.bundle.read_bundle` and the ledger's full verification, in batches as ``sync``
applies them. Fetching runs on ``connections`` threads, each with its own keep-alive client; the
ledger is written on the calling thread only.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import lmdb
import msgspec

from pithledger.errors import (
    AmbiguousId,
    BadManifest,
    LedgerError,
    MalformedId,
    NotFound,
    PithledgerError,
    SourceError,
    SourceFileMissing,
    SourceTimeout,
    UnsafePath,
)
from pithledger.mirror import resolveindex
from pithledger.mirror.http11 import Client, Response
from pithledger.mirror.publish import MAX_FETCH, SYNC_BATCH_BYTES, SYNC_BATCH_EVENTS, commit_counted
from pithledger.mirror.transport import (
    Deadline,
    check_relative,
    check_url,
    read_file,
)
from pithledger.records import ids
from pithledger.records.bundle import Bundle, read_bundle
from pithledger.records.canonical import strict_decode
from pithledger.records.mint import mint
from pithledger.records.model import record_ids
from pithledger.store import Batch, Ledger
from pithledger.store.sidecars import open_sidecar

__all__ = [
    "BadManifest",
    "Manifest",
    "Mirror",
    "RateLimit",
    "Target",
    "digest_base",
    "fetch_id_list",
    "parse_manifest",
    "pull",
    "target_of_line",
    "targets_of_args",
]

MANIFEST_FILE = "pith-mirrors.json"
MANIFEST_TYPE = "pith_mirror_manifest"
MANIFEST_VERSION = "1.0"
MAX_MANIFEST = 1024 * 1024
MAX_RESOLVER = 64 * 1024
MAX_MIRRORS = 16
MAX_PATTERN = 2048
MAX_ID_LINE = 1024 * 1024
MAX_ETAG = 1024
RESOLVER_PATH = "/api/pith-number/resolve"
DEFAULT_CONNECTIONS = 4
MAX_CONNECTIONS = 64
DEFAULT_RATE = 50.0
CACHE_DIR = "pull-cache"
CACHE_MAP_SIZE = 1 << 30


# --- the manifest ----------------------------------------------------------------------------------


class Pattern(NamedTuple):
    """Where a record's bundle is: an http(s) URL template, or (``root`` set) a path template inside a
    local manifest's directory."""

    template: str
    root: str | None = None
    slot: str = "{suffix}"

    def where(self, suffix: str) -> str:
        filled = self.template.replace(self.slot, suffix)
        return filled if self.root is None else f"{self.root}/{filled}"


class Mirror(NamedTuple):
    name: str
    patterns: tuple[Pattern, ...]  # bundle_pattern, then well_known_pattern when it differs
    resolver: str | None  # <base_url>/api/pith-number/resolve, for an http(s) base_url
    resolve_index: Pattern | None = None  # resolve_pattern: a published tree's static resolve index (slot {shard})


class Manifest(NamedTuple):
    location: str
    mirrors: tuple[Mirror, ...]  # "primary" ones first, then manifest order
    ignored: tuple[str, ...]  # mirrors this version cannot use (another scheme), with why


def _string(value: Any, where: str, *, limit: int = MAX_PATTERN) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise BadManifest(f"{where} is not a string of 1 to {limit:,} characters")
    return value


def _pattern(value: Any, where: str, location: str, local_root: str | None, slot: str = "{suffix}") -> Pattern | str:
    """A usable pattern, or why this version cannot use it (a scheme other than http(s))."""
    text = _string(value, where)
    if text.count(slot) != 1 or text.replace(slot, "").count("{") or text.replace(slot, "").count("}"):
        raise BadManifest(f"{where} {text[:200]!r} must hold {slot} exactly once (and no other braces)")
    filler = "A" * ids.SUFFIX_LEN if slot == "{suffix}" else "pith/AA"
    sample = text.replace(slot, filler)
    scheme = urllib.parse.urlsplit(sample).scheme.lower() if ":" in sample.split("/", 1)[0] else ""
    if scheme in ("http", "https"):
        try:
            check_url(sample)
        except SourceError as exc:
            raise BadManifest(f"{where}: {exc.message}") from None
        return Pattern(text, None, slot)
    if scheme:
        return f"{where}: {scheme}: is not a scheme pithledger reads"
    if local_root is not None:  # a local manifest: a path inside its directory ("/" is that directory's root)
        rel = text.lstrip("/") if text.startswith("/") and not text.startswith("//") else text
        try:
            check_relative(rel.replace(slot, filler), where)
        except UnsafePath as exc:
            raise BadManifest(exc.message) from None
        return Pattern(rel, local_root, slot)
    joined = urllib.parse.urljoin(location, text)  # relative to the manifest's URL, like a link in a page
    try:
        check_url(joined.replace(slot, filler))
    except SourceError as exc:
        raise BadManifest(f"{where}: {exc.message}") from None
    return Pattern(joined, None, slot)


def parse_manifest(data: bytes, location: str, *, local_root: str | None = None) -> Manifest:
    """Check a ``pith-mirrors.json`` strictly (spec/pull.md §1). Pure. ``location``: the manifest's
    URL (relative patterns are resolved against it) or file name; ``local_root``: for a local manifest,
    its directory (patterns may then also be paths inside it)."""
    entries = _manifest_entries(data, location)
    usable: list[tuple[bool, Mirror]] = []
    ignored: list[str] = []
    for i, entry in enumerate(entries):
        mirror = _manifest_mirror(entry, i, location, local_root, ignored)
        if mirror is not None:
            usable.append(mirror)
    if not usable:
        raise BadManifest(
            f"{location} names no mirror this version can read" + (f" ({'; '.join(ignored)})" if ignored else "")
        )
    ordered = [m for primary, m in usable if primary] + [m for primary, m in usable if not primary]
    return Manifest(location, tuple(ordered), tuple(ignored))


def _manifest_entries(data: bytes, location: str) -> list[Any]:
    """A manifest's head checked (JSON object, type, version): its list of mirror entries."""
    try:
        doc = strict_decode(data, max_bytes=MAX_MANIFEST, what=location)
    except PithledgerError as exc:
        raise BadManifest(f"{location}: {exc.message}") from None
    if not isinstance(doc, dict):
        raise BadManifest(f"{location} is not a JSON object")
    if doc.get("manifest_type") != MANIFEST_TYPE:
        raise BadManifest(f"{location}: manifest_type is {str(doc.get('manifest_type'))[:80]!r}, not {MANIFEST_TYPE!r}")
    if doc.get("manifest_version") != MANIFEST_VERSION:
        raise BadManifest(
            f"{location}: manifest_version {str(doc.get('manifest_version'))[:80]!r} is not supported "
            f"(this version reads {MANIFEST_VERSION!r})",
            hint="upgrade pithledger to read newer manifests",
        )
    entries = doc.get("mirrors")
    if not isinstance(entries, list) or not entries:
        raise BadManifest(f"{location}: mirrors is not a non-empty list")
    if len(entries) > MAX_MIRRORS:
        raise BadManifest(f"{location} lists {len(entries)} mirrors; at most {MAX_MIRRORS} are read")
    return entries


def _manifest_mirror(
    entry: Any, i: int, location: str, local_root: str | None, ignored: list[str]
) -> tuple[bool, Mirror] | None:
    """One entry of a manifest's mirrors: (is it primary, the mirror), or None when it has no pattern this
    version reads; why a pattern is not read is appended to ``ignored``."""
    where = f"{location}: mirrors[{i}]"
    if not isinstance(entry, dict):
        raise BadManifest(f"{where} is not an object")
    name = entry.get("name")
    name = name[:200] if isinstance(name, str) and name else f"mirrors[{i}]"
    found: list[Pattern] = []
    for key in ("bundle_pattern", "well_known_pattern"):
        if key not in entry and key == "well_known_pattern":
            continue
        got = _pattern(entry.get(key), f"{where}: {key}", location, local_root)
        if isinstance(got, str):
            ignored.append(got)
        elif got not in found:
            found.append(got)
    index = None
    if "resolve_pattern" in entry:  # a pithledger tree's static resolve index (spec/pull.md §2.1)
        got_index = _pattern(entry["resolve_pattern"], f"{where}: resolve_pattern", location, local_root, "{shard}")
        if isinstance(got_index, str):
            ignored.append(got_index)
        else:
            index = got_index
    resolver = None
    base = entry.get("base_url")
    if isinstance(base, str) and base.startswith(("http://", "https://")) and len(base) <= MAX_PATTERN:
        try:
            parts = check_url(base)
        except SourceError as exc:
            raise BadManifest(f"{where}: base_url: {exc.message}") from None
        if parts.query:
            raise BadManifest(f"{where}: base_url {base[:200]!r} has a query")
        resolver = base.rstrip("/") + RESOLVER_PATH
    if not found:
        return None
    return entry.get("status") == "primary", Mirror(name, tuple(found), resolver, index)


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def manifest_location(source: str) -> tuple[str, str | None]:
    """(the manifest's URL or file, its directory for a local one) for SOURCE: a manifest URL or file,
    a mirror's base URL, or a directory holding ``pith-mirrors.json``."""
    if _is_url(source):
        path = urllib.parse.urlsplit(source).path
        return (source if path.endswith(".json") else source.rstrip("/") + "/" + MANIFEST_FILE), None
    file = Path(source)
    if file.is_dir():
        file = file / MANIFEST_FILE
    return str(file), str(file.parent)


def load_manifest(
    source: str, client: Client, *, timeout: float | None, deadline: Deadline, keep: list[bytes] | None = None
) -> Manifest:
    location, root = manifest_location(source)
    try:
        if root is None:
            resp = client.get(location, timeout=timeout, deadline=deadline, max_bytes=MAX_MANIFEST)
            if resp.status != 200:
                raise SourceFileMissing(f"{location}: HTTP {resp.status} (no manifest there)")
            data = resp.body
        else:
            data = read_file(root, Path(location).name, max_bytes=MAX_MANIFEST, deadline=deadline)
    except SourceFileMissing as exc:
        raise BadManifest(
            f"no mirror manifest at {location} ({exc.message})",
            hint="give a pith-mirrors.json (URL or file) or the base URL of a mirror that serves one",
        ) from None
    if keep is not None:
        keep.append(data)
    return parse_manifest(data, location, local_root=root)


# --- IDs -------------------------------------------------------------------------------------------


class Target(NamedTuple):
    """One ID to pull: what was given, where, and what is known of the record it names."""

    text: str
    where: str
    number: str | None = None  # the long Pith Number, when known
    suffix: str | None = None  # its 26-character suffix, when known
    query: ids.ParsedId | None = None  # what the resolver is asked, when the suffix is not known


def _target(text: str, where: str) -> Target:
    try:
        q = ids.parse_id(text)
    except MalformedId as exc:
        raise MalformedId(f"{where}: {exc.message}") from None
    if q.kind == "pith_number":
        return Target(text, where, q.value, q.suffix)
    if q.kind == "suffix" and len(q.suffix) == ids.SUFFIX_LEN:
        return Target(text, where, None, q.suffix)
    return Target(text, where, query=q)


def targets_of_args(values: Iterable[str]) -> list[Target]:
    return [_target(v, "argument") for v in values]


def target_of_line(line: bytes, where: str) -> Target | None:
    """One line of an ``--ids`` file: an ID in any form, an arXiv metadata snapshot object (minted
    offline into its Pith Number), or nothing (blank, ``#`` comment)."""
    if len(line) > MAX_ID_LINE:
        raise MalformedId(f"{where}: a line longer than {MAX_ID_LINE:,} bytes")
    try:
        text = line.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise MalformedId(f"{where}: not UTF-8") from None
    if not text or text.startswith("#"):
        return None
    if text.startswith("{"):
        meta = strict_decode(text.encode(), what=where)
        try:
            rid = record_ids(mint(meta))
        except PithledgerError as exc:
            exc.message = f"{where}: {exc.message}"
            raise
        return Target(str(meta["id"]).strip(), where, rid.pith_number, ids.suffix_of_pith_number(rid.pith_number))
    return _target(text, where)


#: An ID list read from a URL (``--ids-from URL``): at most this many bytes (as a bundle).
MAX_ID_LIST = MAX_FETCH


def fetch_id_list(url: str, *, timeout: float | None = 30.0, deadline: Deadline | float | None = None) -> bytes:
    """The body of an ID list at an http(s) URL (one ID or arXiv snapshot line a line, spec/pull.md §2),
    through the hostile transport: same-origin redirects only, ``timeout`` for the whole request, at
    most :data:`MAX_ID_LIST` bytes. 404/410 is :class:`SourceFileMissing`; anything else but 200 a
    :class:`SourceError`. The lines are read by :func:`target_of_line`, as a file's are."""
    client = Client()
    try:
        run = deadline if isinstance(deadline, Deadline) else Deadline(deadline)
        resp = client.get(url, timeout=timeout, deadline=run, max_bytes=MAX_ID_LIST)
    finally:
        client.close()
    if resp.status != 200:
        raise SourceFileMissing(f"no ID list at {url}: HTTP {resp.status}", hint="check the URL of the listing")
    return resp.body


def _resolver_query(q: ids.ParsedId) -> str:
    if q.kind == "doi":
        return "doi=" + urllib.parse.quote(ids.arxiv_doi(q.value), safe="")
    if q.kind == "arxiv":
        value = q.value + (f"v{q.version}" if q.version is not None else "")
        return "arxiv=" + urllib.parse.quote(value, safe="")
    return "pith=" + urllib.parse.quote("pith:" + q.suffix, safe="")


def _names_record(q: ids.ParsedId | None, number: str, aliases: dict[str, str] | None) -> str | None:
    """None when a record (its number and its canonical record's aliases) is the one ``q`` names;
    else why not."""
    if q is None:
        return None
    if q.kind == "suffix":
        return (
            None
            if ids.suffix_of_pith_number(number).startswith(q.suffix)
            else f"{number} does not start with {q.suffix}"
        )
    if aliases is None:
        return "the bundle carries no canonical_record, so nothing shows which paper it is"
    if q.kind == "doi":
        want, kind = ids.arxiv_doi(q.value), "doi"
    elif q.version is not None:
        want, kind = f"{q.value}v{q.version}", "arxiv_version"
    else:
        want, kind = q.value, "arxiv"
    got = aliases.get(kind)
    return None if got == want else f"its record is arXiv {aliases.get('arxiv_version')}, not {want}"


# --- politeness ------------------------------------------------------------------------------------


class RateLimit:
    """At most ``rate`` requests per second across every thread (a token bucket holding one token:
    request n starts no earlier than (n-1)/rate seconds after the first). ``rate`` 0: no limit.
    ``clock`` and ``sleep`` are injectable (tests use a fake clock)."""

    def __init__(
        self, rate: float, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        if rate < 0:
            raise ValueError("a rate is a number of requests per second, 0 for no limit")
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self.sleep = sleep
        self._next = -float("inf")
        self._lock = threading.Lock()
        self.granted = 0

    def acquire(self, deadline: Deadline | None = None) -> None:
        if not self.interval:
            with self._lock:
                self.granted += 1
            return
        with self._lock:
            now = self.clock()
            slot = max(now, self._next)
            wait = slot - now
            late = deadline is not None and wait > deadline.remaining()
            if not late:
                self._next = slot + self.interval
                self.granted += 1
        if late and deadline is not None:
            self.sleep(max(0.0, deadline.remaining()))  # then the deadline has passed: the run stops there
            raise SourceTimeout(
                f"the run's deadline of {deadline.seconds:g} s passed before the next request could start"
            )
        if wait > 0:
            self.sleep(wait)


# --- the cache of what was applied (outside consensus) ---------------------------------------------


class CacheEntry(msgspec.Struct, frozen=True, array_like=True):
    sha256: bytes  # of the body last applied from the URL
    etag: bytes | None  # its ETag, sent back as If-None-Match
    pith_number: str  # what that body was about ...
    aliases: dict[str, str] | None  # ... and its canonical record's aliases (None: it carried none)


_cache_encoder = msgspec.msgpack.Encoder()
_cache_decoder = msgspec.msgpack.Decoder(CacheEntry)


class PullCache:
    """``<ledger>/pull-cache/``: sha256(URL) -> :class:`CacheEntry`. Never read by the reducer, the
    digests or anything else: removing it only makes the next pull fetch and offer everything again."""

    def __init__(self, ledger_path: Path) -> None:
        self.path = Path(ledger_path) / CACHE_DIR
        self.env = open_sidecar(self.path, map_size=CACHE_MAP_SIZE, what="the pull cache")

    @staticmethod
    def _key(url: str) -> bytes:
        return hashlib.sha256(url.encode()).digest()

    def get(self, url: str) -> CacheEntry | None:
        with self.env.begin() as txn:
            raw = txn.get(self._key(url))
        if raw is None:
            return None
        try:
            return _cache_decoder.decode(raw)
        except msgspec.DecodeError:
            return None

    def put_many(self, items: list[tuple[str, CacheEntry]]) -> None:
        if not items:
            return
        try:
            with self.env.begin(write=True) as txn:
                for url, entry in items:
                    txn.put(self._key(url), _cache_encoder.encode(entry))
        except lmdb.MapFullError:
            with self.env.begin(write=True) as txn:  # a cache, not data: start it again
                txn.drop(self.env.open_db(), delete=False)
        except lmdb.Error as exc:
            raise LedgerError(f"the pull cache was not written: {exc}") from None

    def close(self) -> None:
        self.env.close()


# --- fetching one record ---------------------------------------------------------------------------


class Fetched(NamedTuple):
    target: Target
    bundle: Bundle
    nbytes: int
    url: str
    entry: CacheEntry


class Outcome(NamedTuple):
    """A record not applied: ``kind`` is unchanged, not_published, unresolved, skipped, lying, repeated
    or stopped; ``entry``: a cache entry to refresh (an unchanged body under a new ETag)."""

    target: Target
    kind: str
    pith_number: str | None = None
    reason: str = ""
    message: str = ""
    url: str | None = None
    entry: CacheEntry | None = None


class _Stop(Exception):
    """The run's deadline passed: nothing more is started."""


class _Worker:
    def __init__(
        self,
        manifest: Manifest,
        cache: PullCache,
        *,
        timeout: float | None,
        deadline: Deadline,
        limit: RateLimit,
        claimed: set[str],
        lock: threading.Lock,
        shards: ShardCache | None = None,
    ) -> None:
        self.shards = shards if shards is not None else ShardCache()
        self.manifest = manifest
        self.cache = cache
        self.timeout = timeout
        self.deadline = deadline
        self.limit = limit
        self.client = Client()
        self.claimed = claimed
        self.lock = lock

    def _get(self, url: str, max_bytes: int, etag: bytes | None = None) -> Response:
        self.limit.acquire(self.deadline)
        return self.client.get(url, timeout=self.timeout, deadline=self.deadline, max_bytes=max_bytes, etag=etag)

    def _failed(self, exc: PithledgerError) -> None:
        if isinstance(exc, SourceTimeout) and self.deadline.remaining() <= 0:
            raise _Stop() from None

    def run(self, target: Target) -> Fetched | Outcome:
        try:
            return self._run(target)
        except _Stop:
            return Outcome(
                target,
                "stopped",
                target.number,
                "bad-source",
                f"the run's deadline of {self.deadline.seconds:g} s passed",
            )

    def _run(self, target: Target) -> Fetched | Outcome:
        number, suffix = target.number, target.suffix
        if suffix is None:
            got = self._resolve(target)
            if isinstance(got, Outcome):
                return got
            number, suffix = got, ids.suffix_of_pith_number(got)
        # The same ID twice is fetched once. Two different IDs of one record are each fetched and each
        # checked against the bundle: one ID's check never vouches for another's (a resolver may lie for one).
        q = target.query
        key = (number or suffix) + ("" if q is None or q.kind == "suffix" else f" {q.kind} {q.value} {q.version}")
        with self.lock:
            if key in self.claimed:
                return Outcome(target, "repeated", number)
            self.claimed.add(key)
        failures: list[tuple[str, PithledgerError]] = []
        for mirror in self.manifest.mirrors:
            for pattern in mirror.patterns:
                url = pattern.where(suffix)
                got2 = self._fetch(target, number, suffix, url, pattern, failures)
                if got2 is not None:
                    return got2
        if failures:
            url, exc = failures[0]
            more = f" (and {len(failures) - 1} more place(s) failed)" if len(failures) > 1 else ""
            return Outcome(target, "skipped", number, exc.code, exc.message + more, url)
        return Outcome(target, "not_published", number)

    def _about(
        self, target: Target, number: str | None, suffix: str, got: str, aliases: dict[str, str] | None
    ) -> str | None:
        """Why a body about ``got`` is not what ``target`` asked for; None when it is."""
        if number is not None and got != number:
            return f"the bundle is about {got}, not {number}"
        if ids.suffix_of_pith_number(got) != suffix:
            return f"the bundle is about {got}, not a record with suffix {suffix}"
        why = _names_record(target.query, got, aliases)
        return None if why is None else f"{target.text} names another record: {why}"

    def _fetch(
        self,
        target: Target,
        number: str | None,
        suffix: str,
        url: str,
        pattern: Pattern,
        failures: list[tuple[str, PithledgerError]],
    ) -> Fetched | Outcome | None:
        cached = self.cache.get(url)
        try:
            if pattern.root is None:
                resp = self._get(url, MAX_FETCH, cached.etag if cached else None)
                if resp.status in (404, 410):
                    return None
                status, body, etag = resp.status, resp.body, resp.etag
            else:
                body = read_file(
                    pattern.root,
                    pattern.template.replace("{suffix}", suffix),
                    max_bytes=MAX_FETCH,
                    deadline=self.deadline,
                )
                status, etag = 200, None
        except SourceFileMissing:
            return None
        except PithledgerError as exc:
            self._failed(exc)
            failures.append((url, exc))
            return None
        if etag is not None and len(etag) > MAX_ETAG:
            etag = None
        digest = hashlib.sha256(body).digest() if status == 200 else None
        if cached is not None and (status == 304 or digest == cached.sha256):
            lie = self._about(target, number, suffix, cached.pith_number, cached.aliases)
            if lie is not None:
                return Outcome(target, "lying", cached.pith_number, "lying", lie, url)
            refresh = (
                cached
                if status == 304 or etag == cached.etag
                else CacheEntry(cached.sha256, etag, cached.pith_number, cached.aliases)
            )
            return Outcome(
                target, "unchanged", cached.pith_number, url=url, entry=None if refresh is cached else refresh
            )
        try:
            bundle = read_bundle(strict_decode(body, what=url))
        except PithledgerError as exc:
            failures.append((url, exc))
            return None
        aliases = None
        if bundle.canonical_record is not None:
            aliases = record_ids(bundle.canonical_record).aliases  # read_bundle checked it is a canonical record
        lie = self._about(target, number, suffix, bundle.pith_number, aliases)
        if lie is not None:
            return Outcome(target, "lying", bundle.pith_number, "lying", lie, url)
        assert digest is not None
        return Fetched(target, bundle, len(body), url, CacheEntry(digest, etag, bundle.pith_number, aliases))

    def _resolve(self, target: Target) -> str | Outcome:
        """The long Pith Number a mirror's resolver gives for the target's ID (checked as far as the
        ID allows before anything is fetched), or the outcome that ends the record."""
        assert target.query is not None
        failure: tuple[str, PithledgerError] | None = None
        asked = False
        why_not: str | None = None
        for mirror in self.manifest.mirrors:
            if mirror.resolve_index is not None and (shard := resolveindex.shard_of(target.query)) is not None:
                asked = True
                got = self._from_index(target, mirror.resolve_index, shard)
                if isinstance(got, (str, Outcome)):
                    return got
                if isinstance(got, _NotListed):
                    why_not = why_not or got.message
                else:
                    failure = failure or got
            if mirror.resolver is None:
                continue
            asked = True
            url = f"{mirror.resolver}?{_resolver_query(target.query)}&json=true"
            try:
                resp = self._get(url, MAX_RESOLVER)
            except PithledgerError as exc:
                self._failed(exc)
                failure = failure or (url, exc)
                continue
            if resp.status != 200:
                continue
            try:
                doc = strict_decode(resp.body, max_bytes=MAX_RESOLVER, what=url)
            except PithledgerError as exc:
                return Outcome(
                    target, "unresolved", None, exc.code, f"the resolver's answer is not JSON: {exc.message}", url
                )
            number = doc.get("pith_number") if isinstance(doc, dict) else None
            if not isinstance(number, str) or not ids.PITH_NUMBER_RE.match(number):
                return Outcome(
                    target,
                    "unresolved",
                    None,
                    "unresolved",
                    "the resolver's answer is not an object with a long pith_number",
                    url,
                )
            if target.query.kind == "suffix" and (why := _names_record(target.query, number, None)) is not None:
                return Outcome(target, "lying", number, "lying", f"the resolver named another record: {why}", url)
            return number
        if failure is not None:
            return Outcome(target, "skipped", None, failure[1].code, failure[1].message, failure[0])
        message = (
            (why_not or "no mirror resolved it")
            if asked
            else "no mirror of the manifest has a resolver (base_url) or a resolve index (resolve_pattern)"
        )
        return Outcome(target, "unresolved", None, "unresolved", message)

    def _from_index(
        self, target: Target, pattern: Pattern, shard: str
    ) -> str | Outcome | _NotListed | tuple[str, PithledgerError]:
        """What a published tree's static resolve index gives for the target (spec/pull.md §2.1): its long
        Pith Number; an outcome ending the record (a shard that is not one); why it is not listed (not in
        its shard, no such shard, ambiguous): the next mirror is asked; or the failure (url, error) of
        reading the shard. A shard read (or found absent) is kept for the run's other IDs."""
        assert target.query is not None
        url = pattern.where(shard)
        entries = self.shards.get(url)
        if entries is None:
            absent = resolveindex.empty_shard(shard)  # no shard: nothing of it is listed
            try:
                if pattern.root is None:
                    resp = self._get(url, resolveindex.MAX_SHARD)
                    if resp.status in (404, 410):
                        self.shards.put(url, absent, 0)
                        return _NotListed(f"not in the mirror's resolve index (no shard {url})")
                    if resp.status != 200:
                        raise SourceError(f"{url}: HTTP {resp.status}")
                    body = resp.body
                else:
                    body = read_file(
                        pattern.root,
                        pattern.template.replace(pattern.slot, shard),
                        max_bytes=resolveindex.MAX_SHARD,
                        deadline=self.deadline,
                    )
            except SourceFileMissing:
                self.shards.put(url, absent, 0)
                return _NotListed(f"not in the mirror's resolve index (no shard {url})")
            except PithledgerError as exc:
                self._failed(exc)
                return url, exc
            try:
                entries = resolveindex.read_shard(
                    strict_decode(body, max_bytes=resolveindex.MAX_SHARD, what=url), shard
                )
            except PithledgerError as exc:
                return Outcome(
                    target, "unresolved", None, exc.code, f"the resolve index is not JSON: {exc.message}", url
                )
            except resolveindex.BadShard as exc:
                return Outcome(target, "unresolved", None, "unresolved", f"the resolve index is unusable: {exc}", url)
            self.shards.put(url, entries, len(body))
        number, why = resolveindex.lookup(target.query, entries)  # a short form: only a listed record it starts
        return _NotListed(f"{why} ({url})") if number is None else number


class _NotListed(NamedTuple):
    message: str


class ShardCache:
    """Resolve-index shards read in this run (decoded and checked), shared by the workers: one shard
    answers up to a thousand IDs. Bounded by the bytes of the bodies held; the oldest go first."""

    LIMIT = 8 * 1024 * 1024
    MAX_HELD = 4096  # absent shards cost no bytes: bounded in number too

    def __init__(self) -> None:
        self._held: dict[str, tuple[Any, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, url: str) -> Any:
        with self._lock:
            got = self._held.get(url)
            return None if got is None else got[0]

    def put(self, url: str, entries: Any, nbytes: int) -> None:
        with self._lock:
            if url in self._held:
                return
            while self._held and (self._bytes + nbytes > self.LIMIT or len(self._held) >= self.MAX_HELD):
                self._bytes -= self._held.pop(next(iter(self._held)))[1]
            self._held[url] = (entries, nbytes)
            self._bytes += nbytes


# --- the run ---------------------------------------------------------------------------------------


def _local(ledger: Ledger, targets: Iterable[Target]) -> Iterator[Target]:
    """Targets whose record the ledger already resolves get its long Pith Number: no resolver asked."""
    for t in targets:
        if t.suffix is None:
            try:
                number = ledger.resolve(t.text)
            except (NotFound, AmbiguousId):
                yield t
                continue
            t = Target(t.text, t.where, number, ids.suffix_of_pith_number(number))  # our own resolution: no alias check
        yield t


def digest_base(manifest: Manifest) -> str | None:
    """Where the source's pithledger digest tree would be (spec/pull.md §4.1): the directory of its
    manifest, when its first mirror's bundle pattern lies under that directory (the manifest describes
    the tree beside it, as ``publish`` and ``serve`` write it); else None (no digest is read)."""
    first = manifest.mirrors[0].patterns[0]
    if first.root is not None:
        return first.root
    base = manifest.location.rsplit("/", 1)[0]
    return base if first.template.startswith(base + "/") else None


def _leaves_differ(ledger: Ledger, source: Any, numbers: set[str]) -> tuple[set[str], int]:
    """Of ``numbers`` (held here), those whose record the source's tree lacks or lists with another
    event root, and the digests read: the walk descends only where the digests differ *and* one of
    ``numbers`` lies below, so it costs at most the paths to the records asked for."""
    from pithledger.audit import DEPTH

    wanted: set[str] = set()
    by_bucket: dict[str, list[str]] = {}  # so a bucket costs its own records, not every record asked for
    for n in numbers:
        suffix = ids.suffix_of_pith_number(n)
        wanted.update(suffix[:k] for k in range(1, DEPTH + 1))
        by_bucket.setdefault(suffix[:DEPTH], []).append(n)
    differ: set[str] = set()
    reads = 2
    if ledger.root() == source.root():
        return differ, reads
    stack = [""]
    while stack:
        prefix = stack.pop()
        if len(prefix) < DEPTH:
            ours, theirs = ledger.children(prefix), source.children(prefix)
            reads += len(ours) + len(theirs)
            stack += [
                prefix + c for c in set(ours) | set(theirs) if prefix + c in wanted and ours.get(c) != theirs.get(c)
            ]
            continue
        ours_b, theirs_b = ledger.bucket(prefix), source.bucket(prefix)
        reads += len(ours_b) + len(theirs_b)
        for n in by_bucket.get(prefix, []):
            a, b = ours_b.get(n), theirs_b.get(n)
            if a is None or b is None or a.events != b.events:
                differ.add(n)
    return differ, reads


def _by_digest(
    ledger: Ledger, manifest: Manifest, todo: list[Target], *, timeout: float | None, deadline: Deadline
) -> tuple[list[Target], list[Outcome], str, int]:
    """(the targets still to fetch, the held ones the source's digests show unchanged, what was read,
    the digests read): spec/pull.md §4.1.

    A target is left out only when the ledger holds its record and the source's digest tree lists the
    record with the same event root: the source then advertises exactly the events held here, so its
    bundle could bring nothing new. Anything else is fetched as before (§3, §4). A source without a
    readable digest tree — a plain Pith-shaped one, or one whose tree is broken, changes while being
    walked, or times out — is refreshed as before, and the reason is reported."""
    from pithledger.mirror.published import Published

    held = {t.number for t in todo if t.number is not None and ledger.record_events(t.number)}
    if not held:
        return todo, [], "not read (no record this ledger holds was asked for)", 0
    base = digest_base(manifest)
    if base is None:
        return todo, [], "none (the manifest's first mirror is not beside it)", 0
    try:
        source = Published(base, timeout=timeout, deadline=deadline)
    except SourceFileMissing:
        return todo, [], "none (a plain Pith-shaped source: no pithledger/digest.json)", 0
    except SourceError as exc:
        return todo, [], f"unusable [{exc.code}]: {exc.message[:300]}", 0
    try:
        differ, reads = _leaves_differ(ledger, source, held)
    except SourceError as exc:  # a node missing or not matching its parent, a timeout, ...
        return todo, [], f"unusable [{exc.code}]: {exc.message[:300]}", 0
    fetch: list[Target] = []
    same: list[Outcome] = []
    for t in todo:
        if t.number in held and t.number not in differ:
            same.append(Outcome(t, "unchanged", t.number))
        else:
            fetch.append(t)
    return fetch, same, "used", reads


def pull(
    ledger: Ledger,
    source: str,
    targets: list[Target] | None,
    *,
    connections: int = DEFAULT_CONNECTIONS,
    rate: float = DEFAULT_RATE,
    timeout: float | None = 30.0,
    deadline: Deadline | float | None = 3600.0,
    batch_events: int = SYNC_BATCH_EVENTS,
    batch_bytes: int = SYNC_BATCH_BYTES,
    progress: Callable[[dict[str, Any]], None] | None = None,
    limit: RateLimit | None = None,
    check: Callable[[bytes], None] | None = None,
    digests: bool = True,
) -> dict[str, Any]:
    """Fetch the bundles of ``targets`` (None: every record the ledger holds) from the mirrors of
    SOURCE's manifest and apply them in batches; the report of spec/pull.md §5. ``digests``: when the
    source is also a published pithledger tree, skip held records whose leaf there equals ours (§4.1)."""
    if not 1 <= connections <= MAX_CONNECTIONS:
        raise ValueError(f"connections must be 1..{MAX_CONNECTIONS}")
    run = deadline if isinstance(deadline, Deadline) else Deadline(deadline)
    limit = limit or RateLimit(rate)
    boot = Client()
    manifest = _pull_manifest(source, boot, limit, timeout=timeout, deadline=run, check=check)
    ledger.finish()
    if targets is None:
        targets = [Target(n, "ledger", n, ids.suffix_of_pith_number(n)) for n in ledger.subjects()]
    todo = list(_local(ledger, targets))
    same: list[Outcome] = []
    digest_note, digests_read = "not read (--no-digests)", 0
    if digests:
        todo, same, digest_note, digests_read = _by_digest(ledger, manifest, todo, timeout=timeout, deadline=run)
    counts = _pull_counts(manifest, todo, same, digest_note, digests_read)
    for unchanged in same:
        _count(counts, unchanged)
    counts["ids"] += len(same)
    cache = PullCache(ledger.path)
    results: queue.Queue[Fetched | Outcome | None] = queue.Queue(maxsize=connections)
    stop = threading.Event()
    feed = iter(todo)
    feed_lock = threading.Lock()
    claimed: set[str] = set()
    claim_lock = threading.Lock()
    shards = ShardCache()
    workers: list[_Worker] = []

    def work() -> None:
        worker = _Worker(
            manifest,
            cache,
            timeout=timeout,
            deadline=run,
            limit=limit,
            claimed=claimed,
            lock=claim_lock,
            shards=shards,
        )
        workers.append(worker)
        _work(worker, feed, feed_lock, stop, results)

    threads = [
        threading.Thread(target=work, name=f"pull-{i}", daemon=True) for i in range(min(connections, max(1, len(todo))))
    ]
    writer = _PullWriter(ledger, cache, counts, batch_events=batch_events, batch_bytes=batch_bytes)
    done = 0
    try:
        for t in threads:
            t.start()
        running = len(threads)
        while running:
            item = results.get()
            if item is None:
                running -= 1
                continue
            done += 1
            if writer.take(item):
                stop.set()
            if progress is not None:
                progress(
                    {
                        "done": done,
                        "total": len(todo),
                        "records_fetched": counts["records_fetched"],
                        "new": counts["new"],
                        "unchanged": counts["unchanged"],
                        "batches": counts["batches"],
                    }
                )
        writer.flush()
    except KeyboardInterrupt:
        stop.set()
        writer.flush()
        raise  # what is pending is finished by the next writer or settled reader (spec/storage.md §3.1)
    except BaseException:
        stop.set()
        writer.flush()
        ledger.finish()
        raise
    finally:
        stop.set()
        counts["requests"] = sum(w.client.requests for w in workers) + boot.requests
        counts["connections_opened"] = sum(w.client.connections_opened for w in workers) + boot.connections_opened
        cache.close()
    ledger.finish()
    if counts["stopped"] is not None:
        counts["not_tried"] = len(todo) - done + counts["not_tried"]
    for key in ("not_published", "unresolved", "skipped", "lying"):
        counts[key].sort(key=lambda d: (d["id"], d.get("pith_number") or ""))
    return counts


def _pull_manifest(
    source: str,
    boot: Client,
    limit: RateLimit,
    *,
    timeout: float | None,
    deadline: Deadline,
    check: Callable[[bytes], None] | None,
) -> Manifest:
    """:func:`pull`'s first step: SOURCE's manifest, read through ``boot`` (closed after), and checked by
    ``check`` (the source's log: its manifest's bytes) before any record is fetched (spec/pull.md §5.1)."""
    try:
        limit.acquire(deadline)
        raw: list[bytes] = []
        manifest = load_manifest(source, boot, timeout=timeout, deadline=deadline, keep=raw)
    finally:
        boot.close()
    if check is not None:
        check(raw[0])
    return manifest


def _pull_counts(
    manifest: Manifest, todo: list[Target], same: list[Outcome], digest_note: str, digests_read: int
) -> dict[str, Any]:
    """:func:`pull`'s report (spec/pull.md §5), before any record is fetched."""
    return {
        "source": manifest.location,
        "mirrors": [m.name for m in manifest.mirrors],
        "mirrors_ignored": list(manifest.ignored),
        "ids": len(todo),
        "records_fetched": 0,
        "new": 0,
        "duplicate": 0,
        "invalid": 0,
        "unverified": 0,
        "batches": 0,
        "unchanged": 0,
        "repeated": 0,
        "not_published": [],
        "unresolved": [],
        "skipped": [],
        "lying": [],
        "rejected": [],
        "requests": 0,
        "connections_opened": 0,
        "stopped": None,
        "not_tried": 0,
        "digest": digest_note,
        "digests_read": digests_read,
        "unchanged_by_digest": len(same),
    }


def _work(
    worker: _Worker,
    feed: Iterator[Target],
    feed_lock: threading.Lock,
    stop: threading.Event,
    results: queue.Queue[Fetched | Outcome | None],
) -> None:
    """One of :func:`pull`'s fetching threads: takes targets off ``feed`` until it is empty or the run stops,
    and puts each one's result on ``results`` for the writer, then None."""
    try:
        while not stop.is_set():
            with feed_lock:
                target = next(feed, None)
            if target is None:
                break
            try:
                results.put(worker.run(target))  # blocks while the writer is busy: bounded memory
            except BaseException as exc:  # pragma: no cover - a bug: say which record, stop the run
                results.put(Outcome(target, "skipped", target.number, "internal-error", repr(exc)[:300]))
    finally:
        worker.client.close()
        results.put(None)  # the writer drains until every worker has said so


class _PullWriter:
    """:func:`pull`'s writer: fetched bundles are added to a batch, committed when it holds ``batch_events`` events
    or ``batch_bytes`` bytes; the cache entries of what was fetched are written only once that is committed."""

    def __init__(
        self, ledger: Ledger, cache: PullCache, counts: dict[str, Any], *, batch_events: int, batch_bytes: int
    ) -> None:
        self.ledger, self.cache, self.counts = ledger, cache, counts
        self.batch_events, self.batch_bytes = batch_events, batch_bytes
        self.batch: Batch | None = None
        self.pending: list[tuple[str, CacheEntry]] = []
        self.events = 0
        self.nbytes = 0

    def take(self, item: Fetched | Outcome) -> bool:
        """One worker's result, counted (and its bundle batched); True when it stops the run."""
        if isinstance(item, Fetched):
            self.counts["records_fetched"] += 1
            if self.batch is None:
                self.batch = self.ledger.batch()
            self.batch.add(item.bundle)
            self.pending.append((item.url, item.entry))
            self.events += len(item.bundle.events) + 1  # a bundle without events still counts: batches always close
            self.nbytes += item.nbytes
            if self.events >= self.batch_events or self.nbytes >= self.batch_bytes:
                self.flush()
            return False
        _count(self.counts, item)
        if item.entry is not None and item.url is not None:
            self.pending.append((item.url, item.entry))
        return item.kind == "stopped"

    def flush(self) -> None:
        if self.batch is not None:
            commit_counted(self.batch, self.counts)
            self.batch = None
        self.cache.put_many(self.pending)  # only once what they describe is committed
        self.pending.clear()
        self.events = self.nbytes = 0


def _count(counts: dict[str, Any], item: Outcome) -> None:
    t = item.target
    if item.kind == "unchanged":
        counts["unchanged"] += 1
    elif item.kind == "repeated":
        counts["repeated"] += 1
    elif item.kind == "stopped":
        counts["stopped"] = item.message
        counts["not_tried"] += 1
    else:
        doc: dict[str, Any] = {"id": t.text, "where": t.where, "pith_number": item.pith_number}
        if item.kind != "not_published":
            doc |= {"reason": item.reason, "message": item.message, "url": item.url}
        counts[item.kind].append(doc)
