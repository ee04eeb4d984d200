"""Static mirrors: publish a ledger as files any web server can host, read one back (directory or
http(s) URL) as an audit source, and sync from one. Layout: spec/audit.md.

Everything read from a source is treated as hostile: every node file must hash to what its parent
claims, and bundles go through the same strict decoding and verification as any other input.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from .audit import ALPHABET, DEPTH, DIGEST_VERSION, Pair, Source, bucket_pair, compare, inner_pair, record_event_root
from .bundle import read_bundle
from .canonical import canonical_bytes, strict_decode
from .errors import PithledgerError, SourceError
from .keys import LocalKey, public_key_doc
from .merge import MERGE_VERSION
from .store import Ledger

DIGEST_FILE = "pithledger/digest.json"
NODE_DIR = "pithledger/nodes"
MAX_FETCH = 64 * 1024 * 1024


def _node_file(prefix: str, pair: Pair) -> str:
    """Node files are named by prefix and digest: a re-publish adds files and never rewrites one, so a
    reader that started from the previous digest file still finds the whole previous tree."""
    tag = hashlib.sha256(pair.events + pair.states).hexdigest()[:24]
    return f"{NODE_DIR}/{prefix or 'root'}-{tag}.json"


def _pair_json(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


def _pair_of(value: Any, where: str) -> Pair:
    try:
        return Pair(bytes.fromhex(value["events"]), bytes.fromhex(value["states"]))
    except (TypeError, KeyError, ValueError):
        raise SourceError(f"{where}: not a digest pair") from None


# --- reading a published mirror ------------------------------------------------------------------


class Published:
    """A published mirror tree, in a directory or at an http(s) base URL."""

    def __init__(self, location: str) -> None:
        self._name = location
        self.is_url = location.startswith(("http://", "https://"))
        if not self.is_url and not Path(location, DIGEST_FILE).is_file():
            raise SourceError(f"{location} is not a published pithledger mirror (no {DIGEST_FILE})",
                              hint="publish one with `pithledger publish DIR`")
        digest = self._json(DIGEST_FILE)
        if not isinstance(digest, dict) or digest.get("digest_version") != DIGEST_VERSION:
            raise SourceError(f"{location}: {DIGEST_FILE} is not a {DIGEST_VERSION} digest")
        if digest.get("merge_version") != MERGE_VERSION:
            raise SourceError(f"{location} publishes states of {digest.get('merge_version')!r}, not {MERGE_VERSION!r}")
        self._root = _pair_of(digest.get("root"), DIGEST_FILE)
        self._nodes: dict[str, dict[str, Any]] = {}
        self._children: dict[str, dict[str, Pair]] = {}
        self._buckets: dict[str, dict[str, Pair]] = {}

    @property
    def name(self) -> str:
        return self._name

    def _fetch(self, rel: str) -> bytes:
        if self.is_url:
            url = self.name.rstrip("/") + "/" + urllib.parse.quote(rel)
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    data = resp.read(MAX_FETCH + 1)
            except urllib.error.HTTPError as exc:
                raise SourceError(f"cannot fetch {url}: HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError) as exc:
                raise SourceError(f"cannot fetch {url}: {getattr(exc, 'reason', exc)}") from None
        else:
            try:
                with open(Path(self.name, rel), "rb") as fh:
                    data = fh.read(MAX_FETCH + 1)
            except OSError as exc:
                raise SourceError(f"cannot read {Path(self.name, rel)}: {exc.strerror}") from None
        if len(data) > MAX_FETCH:
            raise SourceError(f"{rel} from {self.name} is larger than {MAX_FETCH:,} bytes")
        return bytes(data)

    def _json(self, rel: str) -> Any:
        try:
            return strict_decode(self._fetch(rel), what=rel)
        except SourceError:
            raise
        except PithledgerError as exc:
            raise SourceError(f"{self.name}: {exc.message}") from None

    def _node(self, prefix: str, expected: Pair) -> dict[str, Any]:
        if prefix not in self._nodes:
            node = self._json(_node_file(prefix, expected))
            if not isinstance(node, dict) or node.get("prefix") != prefix:
                raise SourceError(f"{self.name}: node file for {prefix or '(root)'} is malformed")
            if _pair_of(node.get("digest"), prefix) != expected:
                raise SourceError(f"{self.name}: node {prefix or '(root)'} does not match its parent's digest",
                                  hint="the source changed while being read, or is broken; run the command again")
            self._nodes[prefix] = node
        return self._nodes[prefix]

    def _expected(self, prefix: str) -> Pair:
        if prefix == "":
            return self._root
        parent = self.children(prefix[:-1])
        if prefix[-1] not in parent:
            raise SourceError(f"{self.name}: no node {prefix}")
        return parent[prefix[-1]]

    def root(self) -> Pair:
        return self._root

    def children(self, prefix: str) -> dict[str, Pair]:
        if prefix in self._children:  # verified once; the walk up to the root is not repeated
            return self._children[prefix]
        if self._root == _EMPTY and prefix == "":
            return {}
        expected = self._expected(prefix)
        node = self._node(prefix, expected)
        kids = node.get("children")
        if not isinstance(kids, dict) or not all(c in ALPHABET and len(c) == 1 for c in kids):
            raise SourceError(f"{self.name}: node {prefix or '(root)'} has malformed children")
        out = {c: _pair_of(v, f"{prefix}{c}") for c, v in kids.items()}
        if inner_pair(prefix, out) != expected:
            raise SourceError(f"{self.name}: children of {prefix or '(root)'} do not hash to its digest")
        self._children[prefix] = out
        return out

    def bucket(self, prefix: str) -> dict[str, Pair]:
        if prefix in self._buckets:
            return self._buckets[prefix]
        expected = self._expected(prefix)
        node = self._node(prefix, expected)
        records = node.get("records")
        if not isinstance(records, dict):
            raise SourceError(f"{self.name}: bucket {prefix} is malformed")
        try:
            out = {n: Pair(bytes.fromhex(r["event_root"]), bytes.fromhex(r["state_sha256"])) for n, r in records.items()}
        except (TypeError, KeyError, ValueError):
            raise SourceError(f"{self.name}: bucket {prefix} is malformed") from None
        if bucket_pair(out) != expected:
            raise SourceError(f"{self.name}: records of bucket {prefix} do not hash to its digest")
        for n, r in records.items():
            if record_event_root(r.get("event_ids", [])) != out[n].events:
                raise SourceError(f"{self.name}: event ids of {n} do not hash to its event root")
        self._buckets[prefix] = out
        return out

    def record_events(self, pith_number: str) -> list[str]:
        prefix = pith_number.rsplit(":", 1)[-1][:DEPTH]
        self.bucket(prefix)
        return sorted(self._nodes[prefix]["records"][pith_number]["event_ids"])

    def bundle_bytes(self, pith_number: str) -> bytes:
        return self._fetch(f"pith/{pith_number.rsplit(':', 1)[-1]}/bundle.json")


_EMPTY = inner_pair("", {})


def open_source(location: str) -> Source:
    """A ledger directory, a published directory, or an http(s) URL of a published mirror."""
    if location.startswith(("http://", "https://")) or Path(location, DIGEST_FILE).is_file():
        return Published(location)
    if Path(location, "data.mdb").is_file():
        return Ledger(Path(location), readonly=True)
    raise SourceError(f"{location} is neither a ledger directory, a published mirror nor an http(s) URL")


# --- publishing ------------------------------------------------------------------------------------


def _write(root: Path, rel: str, data: bytes) -> bool:
    """Write-then-rename; skip when the file already holds these bytes. True when written."""
    path = root / rel
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return True


def publish(ledger: Ledger, directory: Path, key: LocalKey | None = None, base_url: str = "") -> dict[str, int]:
    """Write (or bring up to date) a static mirror of ``ledger`` in ``directory``.

    Only subtrees whose digests changed since the last publish are walked and rewritten. Node files
    are never overwritten (named by digest) and the digest file readers start from is replaced last:
    a reader sees the old tree or the new one, never a mixture. Node files of the old tree that the
    new one no longer references are removed at the end.
    """
    from .errors import CannotWrite

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CannotWrite(f"{directory} exists and is not a directory",
                          hint="publish into a directory: a new one, or one an earlier publish wrote") from None
    except OSError as exc:
        raise CannotWrite(f"cannot create the directory {directory}: {exc.strerror}") from None
    try:
        old: Published | None = Published(str(directory))
    except SourceError:
        old = None
    counts = {"records_written": 0, "nodes_written": 0, "nodes_removed": 0}
    replaced: list[str] = []
    stack: list[tuple[str, Pair]] = [("", ledger.root())]
    while stack:
        prefix, pair = stack.pop()
        theirs = _old_pair(old, prefix)
        if theirs == pair:
            continue
        if theirs is not None:
            replaced.append(_node_file(prefix, theirs))
        if len(prefix) < DEPTH:
            mine = ledger.children(prefix)
            node = {"prefix": prefix, "digest": _pair_json(pair), "children": {c: _pair_json(p) for c, p in sorted(mine.items())}}
            stack += [(prefix + c, mine[c]) for c in sorted(mine, reverse=True)]
        else:
            records = ledger.bucket(prefix)
            old_records = _old_bucket(old, prefix)
            node = {"prefix": prefix, "digest": _pair_json(pair),
                    "records": {n: {"event_root": p.events.hex(), "state_sha256": p.states.hex(),
                                    "event_ids": ledger.record_events(n)} for n, p in sorted(records.items())}}
            for number, rec in records.items():
                if old_records.get(number) == rec:
                    continue
                suffix = number.rsplit(":", 1)[-1]
                bundle = canonical_bytes(ledger.export(number)) + b"\n"
                _write(directory, f"pith/{suffix}/bundle.json", bundle)
                _write(directory, f".well-known/pith/{suffix}/bundle.json", bundle)
                _write(directory, f"pith/{suffix}/state.json", ledger.state_bytes(number) + b"\n")
                counts["records_written"] += 1
        counts["nodes_written"] += _write(directory, _node_file(prefix, pair), canonical_bytes(node) + b"\n")
    manifest: dict[str, Any] = {
        "manifest_type": "pith_mirror_manifest", "manifest_version": "1.0", "merge_version": MERGE_VERSION,
        "mirrors": [{"name": "pithledger mirror", "mirror_type": "https" if base_url.startswith("https") else "static",
                     "base_url": base_url,
                     "bundle_pattern": f"{base_url}/pith/{{suffix}}/bundle.json",
                     "state_pattern": f"{base_url}/pith/{{suffix}}/state.json",
                     "well_known_pattern": f"{base_url}/.well-known/pith/{{suffix}}/bundle.json",
                     "public_key": public_key_doc(key.name, key.public_key) if key else None,
                     "status": "mirror"}],
        "notes": "Current state is computed by deterministic merge, not by trusting this manifest.",
    }
    _write(directory, "pith-mirrors.json", canonical_bytes(manifest) + b"\n")
    digest = {"digest_version": DIGEST_VERSION, "merge_version": MERGE_VERSION, "depth": DEPTH,
              "root": _pair_json(ledger.root())}
    _write(directory, DIGEST_FILE, canonical_bytes(digest) + b"\n")
    for rel in replaced:
        try:
            (directory / rel).unlink()
            counts["nodes_removed"] += 1
        except FileNotFoundError:
            pass
    return counts


def _old_pair(old: Published | None, prefix: str) -> Pair | None:
    if old is None:
        return None
    try:
        return old.root() if prefix == "" else old.children(prefix[:-1]).get(prefix[-1])
    except SourceError:
        return None


def _old_bucket(old: Published | None, prefix: str) -> dict[str, Pair]:
    if old is None:
        return {}
    try:
        return old.bucket(prefix)
    except SourceError:
        return {}


# --- syncing ---------------------------------------------------------------------------------------


def sync(ledger: Ledger, location: str) -> dict[str, int]:
    """Pull from a published mirror every record where it holds events this ledger lacks."""
    source = Published(location)
    result = compare(ledger, source)
    counts = {"records_fetched": 0, "new": 0, "duplicate": 0, "invalid": 0, "digests_read": result.digests_read}
    for div in result.divergent:
        if not div.a_lacks:
            continue
        data = source.bundle_bytes(div.pith_number)
        try:
            bundle = read_bundle(strict_decode(data, what=f"{location} bundle of {div.pith_number}"))
        except PithledgerError as exc:
            raise SourceError(f"{location}: the bundle of {div.pith_number} is unusable: {exc.message}") from None
        if bundle.pith_number != div.pith_number:
            raise SourceError(f"{location}: the bundle at {div.pith_number}'s path is about {bundle.pith_number}")
        applied = ledger.apply_batch([bundle])
        counts["records_fetched"] += 1
        counts["new"] += applied.new
        counts["duplicate"] += applied.duplicate
        counts["invalid"] += applied.invalid
    return counts
