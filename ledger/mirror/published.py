"""Reading a published mirror (a directory, or an http(s) URL) as an audit source: ``Published``,
and the layout of the files ``publish`` writes (spec/audit.md §4), which both sides share.

Everything read from a source is treated as hostile: every node file must hash to what its parent
claims, and bundles go through the same strict decoding and verification as any other input.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pithledger.audit import (
    ALPHABET,
    DEPTH,
    DIGEST_VERSION,
    Pair,
    bucket_of,
    bucket_pair,
    inner_pair,
    record_event_root,
)
from pithledger.errors import MalformedSource, PithledgerError, SourceError, SourceFileMissing, UnsafePath
from pithledger.merge import MERGE_VERSION
from pithledger.mirror.transport import (
    DEFAULT_DEADLINE,
    DEFAULT_TIMEOUT,
    Deadline,
    as_deadline,
    check_url,
    http_get,
    read_file,
)
from pithledger.records.bundle import Bundle, read_bundle
from pithledger.records.canonical import strict_decode
from pithledger.records.events import is_pithledger_envelope, verify_event

DIGEST_FILE = "pithledger/digest.json"
RECORDS_DIR = "pithledger/records"
NODE_DIR = "pithledger/nodes"
PART_INDEX_FILE = "parts.json"
PART_INDEX_TYPE = "pithledger_part_index"
PART_INDEX_VERSION = "1"
MAX_FETCH = 64 * 1024 * 1024
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""Budget of a reader's node cache, in estimated bytes of parsed (compact) node values."""

PITH_NUMBER = re.compile(r"pith:[0-9]{4}:[A-Z2-7]{26}", re.ASCII)
_HEX64 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_EVENT_ID = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_EVENT_ID_PREFIX = "sha256:"


def _packed_event_ids(ids: Any) -> bytes | None:
    """The 32-byte digests of a list of ``sha256:<64 lowercase hex>`` strings, sorted and concatenated;
    None for anything else. Checked a list at a time (buckets hold millions of ids): every id is 71
    characters, the prefixes joined are n copies of ``sha256:``, the rest is lowercase and decodes as
    hex to exactly 32 bytes per id (whitespace or any non-hex character breaks the decoding or the count)."""
    if not isinstance(ids, list) or not all(type(i) is str and len(i) == 71 for i in ids):
        return None
    ordered = sorted(ids)
    if "".join(i[:7] for i in ordered) != _EVENT_ID_PREFIX * len(ordered):
        return None
    digits = "".join(i[7:] for i in ordered)
    if digits != digits.lower() or not digits.isascii():
        return None
    try:
        packed = bytes.fromhex(digits)
    except ValueError:
        return None
    return packed if len(packed) == 32 * len(ordered) else None


def _node_file(prefix: str, pair: Pair) -> str:
    """Node files are named by prefix and digest: a re-publish adds files and never rewrites one, so a
    reader that started from the previous digest file still finds the whole previous tree."""
    tag = hashlib.sha256(pair.events + pair.states).hexdigest()[:24]
    return f"{NODE_DIR}/{prefix or 'root'}-{tag}.json"


def _digest(value: Any, where: str) -> bytes:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise MalformedSource(f"{where} is not 64 lowercase hex characters")
    return bytes.fromhex(value)


def _pair_of(value: Any, where: str) -> Pair:
    if not isinstance(value, dict):
        raise MalformedSource(f"{where}: not a digest pair {{events, states}}")
    return Pair(_digest(value.get("events"), f"{where}: events"), _digest(value.get("states"), f"{where}: states"))


def check_pith_number(name: Any, where: str) -> str:
    """A long Pith Number (ASCII, ``pith:YYYY:`` + 26 base32 characters), before it names a path or URL."""
    if not isinstance(name, str) or not PITH_NUMBER.fullmatch(name):
        raise UnsafePath(f"{where}: {str(name)[:80]!r} is not a long Pith Number (pith:YYYY:<26 base32 characters>)")
    return name


def _check_prefix(prefix: Any, inner: bool) -> str:
    ok = (
        isinstance(prefix, str)
        and all(c in ALPHABET for c in prefix)
        and (len(prefix) < DEPTH if inner else len(prefix) == DEPTH)
    )
    if not ok:
        raise SourceError(
            f"{prefix!r} is not the prefix of {'an inner node' if inner else 'a bucket'} of the digest tree"
        )
    return str(prefix)


# --- reading a published mirror ------------------------------------------------------------------


class _Bucket(NamedTuple):
    pairs: dict[str, Pair]
    events: dict[str, bytes]  # each record's event digests, 32 bytes each, sorted and concatenated


_Node = dict[str, Pair] | _Bucket


def _cost(value: _Node) -> int:
    """Estimated bytes a cached value holds (Python object overheads included, roughly)."""
    if isinstance(value, _Bucket):
        return 256 + sum(400 + len(n) + len(value.events[n]) for n in value.pairs)
    return 256 + 260 * len(value)


class _Cache:
    """Least-recently-used node values, bounded by estimated bytes. The newest entry is always kept,
    so one node larger than the budget is still read once per use, not once per record."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._items: OrderedDict[str, tuple[_Node, int]] = OrderedDict()

    def get(self, prefix: str) -> _Node | None:
        item = self._items.get(prefix)
        if item is None:
            return None
        self._items.move_to_end(prefix)
        return item[0]

    def put(self, prefix: str, value: _Node) -> None:
        cost = _cost(value)
        old = self._items.pop(prefix, None)
        if old is not None:
            self.used -= old[1]
        self._items[prefix] = (value, cost)
        self.used += cost
        while self.used > self.budget and len(self._items) > 1:
            _, (_, freed) = self._items.popitem(last=False)
            self.used -= freed

    def __len__(self) -> int:
        return len(self._items)


class PartIndex:
    """A record's part index, read: part ``numbers[i]`` holds the valid events whose ids lie in
    ``[firsts[i], lasts[i]]`` (ascending, disjoint); ``count`` parts in all."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.firsts: list[str] = []
        self.lasts: list[str] = []
        self.numbers: list[int] = []

    def locate(self, event_id: str) -> int | None:
        """The part that holds ``event_id``, if any part's range covers it."""
        i = bisect.bisect_right(self.firsts, event_id) - 1
        return self.numbers[i] if i >= 0 and event_id <= self.lasts[i] else None


class Published:
    """A published mirror tree, in a directory or at an http(s) base URL.

    ``timeout``: seconds of wall clock for one whole HTTP request (default 30); ``deadline``: a
    :class:`Deadline` (or seconds) for every request of this reader together (default 600, from
    construction; ``None``: no limit); ``cache_bytes``: budget of verified nodes kept in memory
    (default 64 MiB, estimated); evicted nodes are fetched and verified again when needed.
    """

    def __init__(
        self,
        location: str,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        deadline: Deadline | float | None = DEFAULT_DEADLINE,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._name = location
        self.is_url = location.startswith(("http://", "https://"))
        self.timeout = timeout
        self.deadline = as_deadline(deadline)
        self._cache = _Cache(cache_bytes)
        if self.is_url:
            parts = check_url(location)
            if parts.query:
                raise SourceError(f"{location!r}: a mirror's base URL has no query (?...)")
        elif not Path(location, DIGEST_FILE).is_file():
            raise SourceError(
                f"{location} is not a published pithledger mirror (no {DIGEST_FILE})",
                hint="publish one with `pithledger publish DIR`",
            )
        try:
            digest = self._json(DIGEST_FILE)
        except SourceFileMissing:
            raise SourceFileMissing(
                f"{location} is not a published pithledger mirror (no {DIGEST_FILE})",
                hint="check the URL: it must be the base of a tree written by `pithledger publish`",
            ) from None
        if not isinstance(digest, dict) or digest.get("digest_version") != DIGEST_VERSION:
            raise MalformedSource(f"{location}: {DIGEST_FILE} is not a {DIGEST_VERSION} digest")
        if digest.get("merge_version") != MERGE_VERSION:
            raise SourceError(
                f"{location} publishes states of {str(digest.get('merge_version'))[:80]!r}, not {MERGE_VERSION!r}"
            )
        if digest.get("depth", DEPTH) != DEPTH or type(digest.get("depth", DEPTH)) is not int:
            raise MalformedSource(
                f"{location}: {DIGEST_FILE} has a digest tree of depth {str(digest.get('depth'))[:20]}, not {DEPTH}"
            )
        self._root = _pair_of(digest.get("root"), f"{location}: {DIGEST_FILE}: root")

    @property
    def name(self) -> str:
        return self._name

    def _fetch(self, rel: str) -> bytes:
        if self.is_url:
            url = self.name.rstrip("/") + "/" + urllib.parse.quote(rel)
            return http_get(url, timeout=self.timeout, deadline=self.deadline, max_bytes=MAX_FETCH)
        return read_file(self.name, rel, max_bytes=MAX_FETCH, deadline=self.deadline)

    def _json(self, rel: str) -> Any:
        try:
            return strict_decode(self._fetch(rel), what=rel)
        except SourceError:
            raise
        except PithledgerError as exc:
            raise MalformedSource(f"{self.name}: {exc.message}") from None

    def _node(self, prefix: str, expected: Pair) -> dict[str, Any]:
        rel = _node_file(prefix, expected)
        try:
            node = self._json(rel)
        except SourceFileMissing:
            raise SourceFileMissing(
                f"{self.name}: node {prefix or '(root)'} is listed by its parent, but its file {rel} is absent",
                hint="the source is incomplete (broken), or was re-published while being read: run the command again",
            ) from None
        if not isinstance(node, dict) or node.get("prefix") != prefix:
            raise MalformedSource(f"{self.name}: node file for {prefix or '(root)'} is malformed")
        if _pair_of(node.get("digest"), f"{self.name}: node {prefix or '(root)'}: digest") != expected:
            raise SourceError(
                f"{self.name}: node {prefix or '(root)'} does not match its parent's digest",
                hint="the source changed while being read, or is broken; run the command again",
            )
        return node

    def _expected(self, prefix: str) -> Pair | None:
        """The digest pair the parent lists for ``prefix``; None when the source has no such subtree."""
        if prefix == "":
            return self._root
        return self.children(prefix[:-1]).get(prefix[-1])

    def root(self) -> Pair:
        return self._root

    def children(self, prefix: str) -> dict[str, Pair]:
        """Verified children of an inner node; ``{}`` for a subtree this source does not hold."""
        _check_prefix(prefix, inner=True)
        cached = self._cache.get(prefix)
        if isinstance(cached, dict):  # verified once; the walk up to the root is not repeated
            return cached
        if self._root == _EMPTY and prefix == "":
            return {}
        expected = self._expected(prefix)
        if expected is None:
            return {}
        node = self._node(prefix, expected)
        where = f"{self.name}: node {prefix or '(root)'}"
        kids = node.get("children")
        if not isinstance(kids, dict) or not all(isinstance(c, str) and len(c) == 1 and c in ALPHABET for c in kids):
            raise MalformedSource(f"{where} has malformed children")
        out = {c: _pair_of(v, f"{where}: child {c}") for c, v in kids.items()}
        if inner_pair(prefix, out) != expected:
            raise SourceError(f"{self.name}: children of {prefix or '(root)'} do not hash to its digest")
        self._cache.put(prefix, out)
        return out

    def _bucket(self, prefix: str) -> _Bucket:
        _check_prefix(prefix, inner=False)
        cached = self._cache.get(prefix)
        if isinstance(cached, _Bucket):
            return cached
        expected = self._expected(prefix)
        if expected is None:
            return _Bucket({}, {})
        node = self._node(prefix, expected)
        where = f"{self.name}: bucket {prefix}"
        records = node.get("records")
        if not isinstance(records, dict):
            raise MalformedSource(f"{where}: records is not an object")
        pairs: dict[str, Pair] = {}
        events: dict[str, bytes] = {}
        for name, rec in records.items():
            check_pith_number(name, where)
            if name.rsplit(":", 1)[-1][:DEPTH] != prefix:
                raise MalformedSource(
                    f"{where} holds {name}, which belongs in bucket {name.rsplit(':', 1)[-1][:DEPTH]}"
                )
            if not isinstance(rec, dict):
                raise MalformedSource(f"{where}: record {name} is not an object")
            ids: Any = rec.get("event_ids")
            packed = _packed_event_ids(ids)
            if packed is None:
                raise MalformedSource(f"{where}: event_ids of {name} is not a list of sha256:<64 hex> event ids")
            if len(set(ids)) != len(ids):
                raise MalformedSource(f"{where}: event_ids of {name} names an event twice")
            pairs[name] = Pair(
                _digest(rec.get("event_root"), f"{where}: {name}: event_root"),
                _digest(rec.get("state_sha256"), f"{where}: {name}: state_sha256"),
            )
            if record_event_root(ids) != pairs[name].events:
                raise SourceError(f"{self.name}: event ids of {name} do not hash to its event root")
            events[name] = packed
        if bucket_pair(pairs) != expected:
            raise SourceError(f"{self.name}: records of bucket {prefix} do not hash to its digest")
        out = _Bucket(pairs, events)
        self._cache.put(prefix, out)
        return out

    def bucket(self, prefix: str) -> dict[str, Pair]:
        """Verified records of a bucket; ``{}`` for a bucket this source does not hold."""
        return self._bucket(prefix).pairs

    def record_events(self, pith_number: str) -> list[str]:
        check_pith_number(pith_number, self.name)
        packed = self._bucket(pith_number.rsplit(":", 1)[-1][:DEPTH]).events.get(pith_number, b"")
        return ["sha256:" + packed[i : i + 32].hex() for i in range(0, len(packed), 32)]

    def bundle_bytes(self, pith_number: str, part: int = 0) -> bytes:
        """Part ``part`` of a record's published bundle (spec/audit.md §4: bundle.json, bundle-1.json, ...)."""
        check_pith_number(pith_number, self.name)
        return self._fetch(f"{record_dir(pith_number)}/{_part_file(part)}")

    def part_index(self, pith_number: str) -> PartIndex | None:
        """Where the record's valid events are among its bundle parts (spec/audit.md §4), checked against
        the record's event root in the verified bucket; None when the tree has no index (published by a
        version before it)."""
        check_pith_number(pith_number, self.name)
        where = f"{self.name}: the part index of {pith_number}"
        try:
            doc = self._json(f"{record_dir(pith_number)}/{PART_INDEX_FILE}")
        except SourceFileMissing:
            return None
        if (
            not isinstance(doc, dict)
            or doc.get("index_type") != PART_INDEX_TYPE
            or doc.get("index_version") != PART_INDEX_VERSION
        ):
            raise MalformedSource(f"{where} is not a {PART_INDEX_TYPE} version {PART_INDEX_VERSION}")
        if doc.get("pith_number") != pith_number:
            raise MalformedSource(f"{where} is about {str(doc.get('pith_number'))[:80]!r}")
        pair = self.bucket(bucket_of(pith_number)).get(pith_number)
        if pair is None or _digest(doc.get("event_root"), f"{where}: event_root") != pair.events:
            raise SourceError(
                f"{where} is of another version of the record than the digests advertise",
                hint="the source was re-published while being read, or is broken; run the command again",
            )
        parts = doc.get("parts")
        if not isinstance(parts, list) or not parts:
            raise MalformedSource(f"{where}: parts is not a non-empty list")
        index = PartIndex(len(parts))
        for n, entry in enumerate(parts):
            if entry is None:
                continue
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and all(type(i) is str and _EVENT_ID.fullmatch(i) for i in entry)
                and entry[0] <= entry[1]
                and (not index.lasts or index.lasts[-1] < entry[0])
            ):
                raise MalformedSource(
                    f"{where}: parts[{n}] is not a [first, last] pair of event ids above the previous part's"
                )
            index.firsts.append(entry[0])
            index.lasts.append(entry[1])
            index.numbers.append(n)
        return index


_EMPTY = inner_pair("", {})


def record_dir(number: str) -> str:
    """Where a subject's own files live in a published tree: unique per long Pith Number, so no subject
    (a forged year on a real suffix, say) can overwrite another's (spec/audit.md §4)."""
    _, year, suffix = number.split(":")
    return f"{RECORDS_DIR}/{year}/{suffix}"


def _part_file(n: int) -> str:
    return "bundle.json" if n == 0 else f"bundle-{n}.json"


# --- reading a record's bundle (sync, verify-log) ------------------------------------------------


def ledger_id(event: Any) -> str | None:
    """The id a ledger holds this copy under if it is valid (spec/events.md §2.3), None when it cannot
    be one: our envelope's declared ``event_id`` when it is a string (a valid copy's recomputes to it);
    for Pith's envelope the id its receipt authenticates, when it verifies. Never raises on junk."""
    if not isinstance(event, dict):
        return None
    if is_pithledger_envelope(event):
        declared = event.get("event_id")
        return declared if type(declared) is str else None
    verdict = verify_event(event)
    return verdict.event_id if verdict.status == "valid" else None


def read_part(source: Published, number: str, part: int) -> tuple[Bundle, int]:
    data = source.bundle_bytes(number, part)
    bundle = read_bundle(strict_decode(data, what=f"the bundle of {number}" + (f" (part {part})" if part else "")))
    if bundle.pith_number != number:
        raise SourceError(f"the bundle at {number}'s path is about {bundle.pith_number}")
    return bundle, len(data)


def record_parts(source: Published, number: str, wanted: list[str]) -> Iterator[tuple[Bundle, int]]:
    """The parts of one record's published bundle that carry the ids in ``wanted``, one at a time.

    With a part index (spec/audit.md §4): exactly the parts whose ranges cover a wanted id, in order,
    each once, so at most the number of parts and never one without a wanted id. Without one (a tree
    published before the index existed): part 0, 1, ... until every wanted id has been seen, a part is
    absent, or as many parts were read as the record has advertised ids (each part of an honest tree
    carries at least one)."""
    index = source.part_index(number)
    if index is not None:
        for part in sorted({n for i in wanted if (n := index.locate(i)) is not None}):
            yield read_part(source, number, part)
        return
    missing = set(wanted)
    for part in range(max(1, len(source.record_events(number)))):
        try:
            bundle, nbytes = read_part(source, number, part)
        except SourceFileMissing:
            if part == 0:
                raise
            return
        missing.difference_update(ledger_id(e) for e in bundle.events)
        yield bundle, nbytes
        if not missing:
            return
