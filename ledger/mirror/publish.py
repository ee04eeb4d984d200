"""Static mirrors: publish a ledger as files any web server can host, and sync from one (read back
as an audit source by ledger/mirror/published.py, whose names are importable from here too). Layout:
spec/audit.md.

Everything read from a source is treated as hostile: every node file must hash to what its parent
claims, and bundles go through the same strict decoding and verification as any other input.
"""

from __future__ import annotations

import contextlib
import os
import random
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pithledger.audit import DEPTH, DIGEST_VERSION, LISTED_IDS, Pair, Source, Walk, record_event_root
from pithledger.errors import DerivationPending, PithledgerError, SourceError, SourceTimeout
from pithledger.files import read_regular, write_if_changed, write_linked
from pithledger.merge import MERGE_VERSION
from pithledger.mirror import resolveindex
from pithledger.mirror.published import (
    DEFAULT_CACHE_BYTES,
    DIGEST_FILE,
    MAX_FETCH,
    NODE_DIR,
    PART_INDEX_FILE,
    PART_INDEX_TYPE,
    PART_INDEX_VERSION,
    Published,
    _node_file,
    _pair_of,
    _part_file,
    ledger_id,
    record_dir,
    record_parts,
)
from pithledger.mirror.transport import (
    DEFAULT_DEADLINE,
    DEFAULT_TIMEOUT,
    Deadline,
)
from pithledger.records.bundle import Bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import verify_event
from pithledger.records.keys import PITH_REGISTRY_KEYS, LocalKey, public_key_doc
from pithledger.render import badge, pages, record_doc
from pithledger.store import Batch, Ledger, open_settled
from pithledger.store.sidecars import MetadataStore

if TYPE_CHECKING:
    from pithledger.tlog.signing import LogSigner

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_DEADLINE",
    "DEFAULT_TIMEOUT",
    "DIGEST_FILE",
    "MAX_FETCH",
    "NODE_DIR",
    "PART_INDEX_FILE",
    "Deadline",
    "Published",
    "check_bundles",
    "open_source",
    "part_index_doc",
    "publish",
    "record_dir",
    "sync",
]


def node_file(prefix: str, doc: dict[str, Any]) -> str:
    """The file name of a node document (as :func:`node_doc` builds it)."""
    return _node_file(prefix, _pair_of(doc["digest"], "node"))


def node_doc(ledger: Ledger, prefix: str) -> dict[str, Any] | None:
    """The node document ``publish`` writes for ``prefix`` (None when the ledger's tree has no such
    node): what a live server answers at the node's file name (spec/serve.md §1)."""
    pair = ledger.root() if prefix == "" else ledger.children(prefix[:-1]).get(prefix[-1])
    if pair is None:
        return None
    if len(prefix) < DEPTH:
        return {
            "prefix": prefix,
            "digest": _pair_json(pair),
            "children": {c: _pair_json(p) for c, p in sorted(ledger.children(prefix).items())},
        }
    records = ledger.bucket(prefix)
    if pending := ledger.pending_among(records):
        # Its stored leaf is the last finished run's, its events in the log are newer: the two would not agree.
        raise DerivationPending(
            f"bucket {prefix} holds {len(pending)} record(s) whose derivation is pending ({pending[0]} ...)"
        )
    return {
        "prefix": prefix,
        "digest": _pair_json(pair),
        "records": {
            n: {"event_root": p.events.hex(), "state_sha256": p.states.hex(), "event_ids": ledger.record_events(n)}
            for n, p in sorted(records.items())
        },
    }


def digest_doc(ledger: Ledger) -> dict[str, Any]:
    """The digest file readers of a published mirror start from."""
    return {
        "digest_version": DIGEST_VERSION,
        "merge_version": MERGE_VERSION,
        "depth": DEPTH,
        "root": _pair_json(ledger.root()),
    }


def _pair_json(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


def open_source(
    location: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = DEFAULT_DEADLINE,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> Source:
    """A ledger directory, a published directory, or an http(s) URL of a published mirror (see
    :class:`Published` for ``timeout``, ``deadline`` and ``cache_bytes``)."""
    if location.startswith(("http://", "https://")) or Path(location, DIGEST_FILE).is_file():
        return Published(location, timeout=timeout, deadline=deadline, cache_bytes=cache_bytes)
    if Path(location, "data.mdb").is_file():
        return open_settled(Path(location))
    raise SourceError(f"{location} is neither a ledger directory, a published mirror nor an http(s) URL")


# --- publishing ------------------------------------------------------------------------------------


def publish(
    ledger: Ledger, directory: Path, key: LocalKey | None = None, base_url: str = "", log: LogSigner | None = None
) -> dict[str, int]:
    """Write (or bring up to date) a static mirror of ``ledger`` in ``directory``.

    Only subtrees whose digests changed since the last publish are walked and rewritten. Node files
    are never overwritten (named by digest) and the digest file readers start from is replaced last:
    a reader sees the old tree or the new one, never a mixture. Node files of the old tree that the
    new one no longer references are removed at the end.

    ``log``: the log key; with it the transparency log is published too (ledger/mirror/logsite.py): its tree
    at the size the ledger has now, checked against what the directory holds before anything is
    written, the new tiles after the digest file, the signed ``checkpoint`` last of all.
    """
    from pithledger.errors import CannotWrite
    from pithledger.mirror.logsite import manifest_fields, plan_log, write_checkpoint, write_tiles

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CannotWrite(
            f"{directory} exists and is not a directory",
            hint="publish into a directory: a new one, or one an earlier publish wrote",
        ) from None
    except OSError as exc:
        raise CannotWrite(f"cannot create the directory {directory}: {exc.strerror}") from None
    plan = plan_log(ledger, directory, log) if log is not None else None  # a fork is refused before anything is written
    try:
        # local files, read without a deadline: a long re-publish must not lose its view of the old tree
        old: Published | None = Published(str(directory), deadline=None)
    except SourceError:
        old = None
    counts = {"records_written": 0, "nodes_written": 0, "nodes_removed": 0}
    replaced: list[str] = []
    site = _Pages(ledger, base_url)
    stack: list[tuple[str, Pair]] = [("", ledger.root())]
    changed: list[str] = []  # the records written, and the arXiv ids they carry: their resolve shards are rebuilt
    changed_arxiv: set[str] = set()
    while stack:
        prefix, pair = stack.pop()
        theirs = _old_pair(old, prefix)
        if theirs == pair:
            continue
        if theirs is not None:
            replaced.append(_node_file(prefix, theirs))
        if len(prefix) < DEPTH:
            mine = ledger.children(prefix)
            node = {
                "prefix": prefix,
                "digest": _pair_json(pair),
                "children": {c: _pair_json(p) for c, p in sorted(mine.items())},
            }
            stack += [(prefix + c, mine[c]) for c in sorted(mine, reverse=True)]
        else:
            records = ledger.bucket(prefix)
            old_records = _old_bucket(old, prefix)
            node = {
                "prefix": prefix,
                "digest": _pair_json(pair),
                "records": {
                    n: {
                        "event_root": p.events.hex(),
                        "state_sha256": p.states.hex(),
                        "event_ids": ledger.record_events(n),
                    }
                    for n, p in sorted(records.items())
                },
            }
            for number, rec in records.items():
                if old_records.get(number) == rec:
                    continue
                changed_arxiv |= _publish_record(ledger, directory, number, site)
                changed.append(number)
                counts["records_written"] += 1
        counts["nodes_written"] += write_if_changed(directory, _node_file(prefix, pair), canonical_bytes(node) + b"\n")
    # The static resolve index (spec/serve.md §7.1), before the manifest that names it: the shards of what
    # changed, or all of them on a tree without a whole index of this version.
    counts["resolve_shards_written"], counts["resolve_shards_removed"] = resolveindex.update(
        ledger, directory, changed, changed_arxiv, full=not resolveindex.is_complete(directory)
    )
    del changed, changed_arxiv
    manifest: dict[str, Any] = {
        "manifest_type": "pith_mirror_manifest",
        "manifest_version": "1.0",
        "merge_version": MERGE_VERSION,
        "mirrors": [
            {
                "name": "pithledger mirror",
                "mirror_type": "https" if base_url.startswith("https") else "static",
                "base_url": base_url,
                "bundle_pattern": f"{base_url}/pith/{{suffix}}/bundle.json",
                "state_pattern": f"{base_url}/pith/{{suffix}}/state.json",
                "well_known_pattern": f"{base_url}/.well-known/pith/{{suffix}}/bundle.json",
                "resolve_pattern": base_url + resolveindex.PATTERN,
                "public_key": public_key_doc(key.name, key.public_key) if key else None,
                "status": "mirror",
            }
            | manifest_fields(log, base_url)
        ],
        "notes": "Current state is computed by deterministic merge, not by trusting this manifest.",
    }
    write_if_changed(directory, "pith-mirrors.json", canonical_bytes(manifest) + b"\n")
    write_if_changed(directory, "pith-signing-key.json", canonical_bytes(signing_key_doc()) + b"\n")
    write_if_changed(directory, "index.html", site.index())
    write_if_changed(directory, record_doc.SCHEMA_PATH, record_doc.schema_bytes())
    site.close()
    digest = {
        "digest_version": DIGEST_VERSION,
        "merge_version": MERGE_VERSION,
        "depth": DEPTH,
        "root": _pair_json(ledger.root()),
    }
    write_if_changed(directory, DIGEST_FILE, canonical_bytes(digest) + b"\n")
    if plan is not None:  # every record the checkpoint's entries name is published by now
        counts["tiles_written"] = write_tiles(ledger, directory, plan, write_if_changed)
        write_checkpoint(directory, plan, write_if_changed)
        counts["log_size"] = plan.size
    for rel in replaced:
        if (directory / rel).is_symlink() or (directory / rel).exists():
            _unlink(directory / rel)
            counts["nodes_removed"] += 1
    return counts


class _Pages:
    """Renders the static pages of a publish: the same renderer as ``serve`` (pithledger.render.pages), with
    links relative to the page so the tree works on any static host, and under file://."""

    def __init__(self, ledger: Ledger, base_url: str) -> None:
        self.ledger = ledger
        self.meta = MetadataStore(ledger.path, readonly=True)
        self.base_url = base_url or "$MIRROR"
        self.given_base = base_url.rstrip("/")

    def record(self, state: dict[str, Any], events: list[dict[str, Any]]) -> bytes:
        links = pages.Links(root="../../", page="/index.html", base_url=self.base_url, server=False)
        meta = self.meta.get(state["current"]["canonical_record"])
        return pages.record_page(state, pages.record_facts(state, events), meta, links).encode()

    def agent_files(self, state: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, bytes]:
        """Pith's Agent API documents of a present record, as static files (spec/serve.md §7): the
        record document, its graph and events, the resolver's answer for it (no ``paper/<short8>``: a
        redirect a server computes). Links use ``--base-url`` when given, else are relative to the record
        document."""
        number = state["pith_number"]
        suffix = number.rsplit(":", 1)[-1]
        urls = record_doc.Urls(base=self.given_base, server=False)

        def state_of(n: str) -> dict[str, Any] | None:
            try:
                value: dict[str, Any] = msgspec.json.decode(self.ledger.state_bytes(n))
                return value
            except PithledgerError:
                return None

        meta = self.meta.get(state["current"]["canonical_record"])
        valid = self.ledger.record_events(number)
        doc = record_doc.record_document(
            state, events, valid, meta, record_doc.inbound_rows(state, state_of, self.meta.get), urls
        )
        api = f"api/pith-number/{suffix}"
        evs = record_doc.events_document(number, events, valid, self.ledger.inbound_bundles(number))
        body = {
            f"pith/{suffix}.json": doc,
            f"{api}/graph.json": record_doc.graph_document(doc),
            f"{api}/events.json": evs,
            f"pith/{suffix}/events.json": evs,
            f"{api}/resolve.json": record_doc.resolution(
                state, record_doc.Urls(base=self.given_base, server=False, up="../../../")
            ),
        }
        return {rel: canonical_bytes(value) + b"\n" for rel, value in body.items()}

    def index(self) -> bytes:
        root = self.ledger.root()
        counts = self.ledger.counts()
        roots = {
            "events_root": root.events.hex(),
            "states_root": root.states.hex(),
            "records": counts["records"],
            "events": counts["events"],
            "digest_version": DIGEST_VERSION,
            "merge_version": MERGE_VERSION,
        }
        links = pages.Links(root="", page="/index.html", base_url=self.base_url, server=False)
        return pages.index_page(recent_rows(self.ledger, self.meta), roots, links).encode()

    def close(self) -> None:
        self.meta.close()


def recent_rows(ledger: Ledger, meta: MetadataStore, n: int = 50) -> list[pages.IndexRow]:
    """Index rows of the records of the last events appended (newest first), at most ``n``."""
    total = ledger.counts()["events"]
    order: dict[str, None] = {}
    for entry in ledger.log(max(0, total - 20 * n)):
        subject = entry.verdict.subject
        order.pop(subject, None)
        order[subject] = None
    rows = []
    for subject in reversed(order):
        try:
            state = msgspec.json.decode(ledger.state_bytes(subject))
        except PithledgerError:
            continue
        row = pages.index_row(state, meta.get(state["current"]["canonical_record"]) if state.get("current") else None)
        if row is not None:
            rows.append(row)
        if len(rows) >= n:
            break
    return rows


def signing_key_doc() -> dict[str, Any]:
    """The Pith registry key(s) this mirror verifies receipts with, in the shape Pith's manifest uses."""
    out: list[dict[str, Any]] = []
    for key in PITH_REGISTRY_KEYS.values():
        out.append(
            public_key_doc(key.key_id, key.public_key)
            | {
                "format": "raw",
                "rotates_at": None,
                "notes": "Pith signs canonical record SHA-256 digests with this key: ed25519_verify(public_key, "
                "message=canonical_sha256_bytes, signature=base64decode(signature_b64)). Built into pithledger.",
            }
        )
    return {"key_type": "pith_signing_keys", "keys": out}


def _publish_record(ledger: Ledger, directory: Path, number: str, site: _Pages | None = None) -> set[str]:
    """A subject's bundle and state under its own path; a PRESENT record also under Pith's
    ``pith/<suffix>/`` paths, which only it can claim (no two records share a 26-character suffix),
    with its page ``pith/<suffix>/index.html`` (spec/serve.md §5). Returns the arXiv ids it carries (its
    canonical record's; for a record not present, any its events name: it may have been present before),
    whose resolve shards the publish rebuilds."""
    suffix = number.rsplit(":", 1)[-1]
    values = ledger.export_parts(number)
    index = part_index_doc(number, values, ledger.record_events(number)) if len(values) > 1 else None
    parts = [canonical_bytes(part) + b"\n" for part in values]
    del values
    whole = canonical_bytes(ledger.export(number)) + b"\n" if len(parts) > 1 else parts[0]
    bundle = whole if len(whole) <= MAX_FETCH else parts[0]  # Pith's single-file path, while a reader can take it
    state = ledger.state_bytes(number) + b"\n"
    own = record_dir(number)
    value = msgspec.json.decode(state)
    present = value.get("record_status") == "present"  # the top level, never a payload's bytes
    pith_bundle = [f"pith/{suffix}/bundle.json", f".well-known/pith/{suffix}/bundle.json"]
    pith_state = [f"pith/{suffix}/state.json"]
    # pith/<suffix>/export.jsonl: what `pithledger export` prints, the file the page's commands apply (the
    # bundle lacks the inbound citations, which the state counts); the record's only part when none cite it.
    export = f"pith/{suffix}/export.jsonl"
    inbound = [canonical_bytes(b) + b"\n" for b in ledger.inbound_bundles(number)] if present else []
    alone = present and len(parts) == 1 and not inbound
    # One copy of each file on disk, hard links at its other paths (spec/serve.md §7)
    for n, data in enumerate(parts):
        write_linked(
            directory,
            [f"{own}/{_part_file(n)}"]
            + (pith_bundle if present and n == 0 and data is bundle else [])
            + ([export] if alone and n == 0 else []),
            data,
        )
    if present and bundle is not parts[0]:
        write_linked(directory, pith_bundle, bundle)
    if present and not alone:
        write_if_changed(directory, export, b"".join(parts) + b"".join(inbound))
    del inbound
    # The part index only where there is a choice of parts: a one-part record's reader takes part 0, as for a
    # tree without an index (spec/audit.md §4); an index an older version wrote for it goes.
    if index is not None:
        write_if_changed(directory, f"{own}/{PART_INDEX_FILE}", canonical_bytes(index) + b"\n")
    else:
        _remove_stale(directory, f"{own}/{PART_INDEX_FILE}")
    # paper/<short8>/index.html, which earlier versions wrote, is a redirect a server computes: gone with
    # the record's next change (spec/serve.md §7), its directory too once empty.
    _remove_stale(directory, f"paper/{suffix[:8]}/index.html", rmdir=True)
    write_linked(directory, [f"{own}/state.json"] + (pith_state if present else []), state)
    if present:
        write_if_changed(directory, f"pith/{suffix}/badge.svg", badge.badge_svg(number, value["current"]["badges"]))
        if site is not None:
            events = [e for part in parts for e in msgspec.json.decode(part)["events"]]
            write_if_changed(directory, f"pith/{suffix}/index.html", site.record(value, events))
            files = site.agent_files(value, events)
            by_bytes: dict[bytes, list[str]] = {}
            for rel, data in files.items():
                by_bytes.setdefault(data, []).append(rel)
            for data, rels in by_bytes.items():
                write_linked(directory, rels, data)
        return {str(value["current"]["canonical_record"]["source"]["id"])}
    if _owner(directory / pith_state[0]) == number:
        _unlink(directory / f"pith/{suffix}/index.html")
        _unlink(directory / export)
        _unlink(directory / f"pith/{suffix}/badge.svg")
    for rel in (
        pith_bundle + pith_state
    ):  # a record revoked away gives up Pith's paths; a pending subject never takes them
        if _owner(directory / rel) == number:
            _unlink(directory / rel)
    return {a for part in parts for a in _claimed_arxiv_ids(part)}


def _claimed_arxiv_ids(part: bytes) -> set[str]:
    """The arXiv ids the canonical records of a bundle's events name (any of them: an extra shard rebuilt
    from the ledger costs a file, a missed one would keep a stale answer)."""
    found: set[str] = set()
    for event in msgspec.json.decode(part).get("events", []):
        payload = event.get("payload") if isinstance(event, dict) else None
        record = payload.get("canonical_record") if isinstance(payload, dict) else None
        source = record.get("source") if isinstance(record, dict) else None
        if isinstance(source, dict) and isinstance(source.get("id"), str):
            found.add(source["id"])
    return found


def _owner(path: Path) -> Any:
    """The ``pith_number`` a published JSON file names, None when there is none (or no regular file)."""
    try:
        size = os.lstat(path).st_size
    except OSError:
        return None
    held = read_regular(path, size) if size <= MAX_FETCH else None
    try:
        return msgspec.json.decode(held).get("pith_number") if held is not None else None
    except (msgspec.DecodeError, AttributeError):
        return None


def _remove_stale(directory: Path, rel: str, rmdir: bool = False) -> None:
    """Remove the regular file an older version published at ``rel`` (and, with ``rmdir``, its directory
    when that is left empty). Nothing is followed: a symlink or non-directory on the way, or anything but
    a regular file at ``rel``, is left as it is (it is not ours)."""
    path = directory
    for part in Path(rel).parts[:-1]:
        path = path / part
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return
        except OSError:
            return
    target = directory / rel
    try:
        if not stat.S_ISREG(os.lstat(target).st_mode):
            return
    except OSError:
        return
    _unlink(target)
    if rmdir:
        with contextlib.suppress(OSError):  # not empty (a file not ours): left
            target.parent.rmdir()


def _unlink(path: Path) -> None:
    from pithledger.errors import CannotWrite

    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise CannotWrite(f"cannot remove {path}: {exc.strerror}") from None


def part_index_doc(number: str, parts: list[dict[str, Any]], valid_ids: list[str]) -> dict[str, Any]:
    """The part index of a record exported in ``parts`` (spec/audit.md §4): for each part in order, the
    first and last of the valid event ids it carries, or null when it carries none (copies held as
    evidence only). A reader fetches only the parts whose ranges cover ids it lacks."""
    valid = set(valid_ids)
    ranges: list[list[str] | None] = []
    for part in parts:
        held = [i for e in part.get("events", []) if (i := ledger_id(e)) is not None and i in valid]
        ranges.append([min(held), max(held)] if held else None)
    return {
        "index_type": PART_INDEX_TYPE,
        "index_version": PART_INDEX_VERSION,
        "pith_number": number,
        "event_root": record_event_root(valid_ids).hex(),
        "parts": ranges,
    }


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


#: A sync batch closes at this many events or bytes of bundles, whichever comes first (spec/audit.md §5).
SYNC_BATCH_EVENTS = 10_000
SYNC_BATCH_BYTES = 64 * 1024 * 1024


def commit_counted(batch: Batch, counts: dict[str, Any]) -> None:
    """Commit a batch of a run (``sync``, ``pull``), deferring derivation to the run's ``finish()``, and
    add what it applied to the run's ``counts``."""
    applied = batch.commit(defer=True)  # derived once per record, by finish()
    counts["batches"] += 1
    for key in ("new", "duplicate", "invalid", "unverified"):
        counts[key] += getattr(applied, key)
    counts["rejected"] += applied.rejected


def sync(
    ledger: Ledger,
    location: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = DEFAULT_DEADLINE,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    batch_events: int = SYNC_BATCH_EVENTS,
    batch_bytes: int = SYNC_BATCH_BYTES,
) -> dict[str, Any]:
    """Pull from a published mirror every record where it holds events this ledger lacks.

    Divergent records are acted on as the walk finds them, and each record's bundle part by part: only
    the parts that carry ids this ledger lacks (by the record's part index), added to the batch one at a
    time, so memory holds one batch and one part, not a record's every part nor every difference.
    Bundles are applied in batches, one durable transaction each, like ``apply``. A record whose
    bundle cannot be fetched or read, or is about another record, is named in ``skipped`` and the
    rest go on (parts of it already read are applied: they are valid events like any others). A record
    whose bundle does not carry, as valid events, every id the source's digests advertise for it is
    named in ``lying``: on every run, since the ledger still lacks those ids.
    ``timeout``, ``deadline`` and ``cache_bytes``: see :class:`Published`. A sync stopped by its
    deadline keeps what it applied; running it again continues (applied bundles dedup).
    """
    source = Published(location, timeout=timeout, deadline=deadline, cache_bytes=cache_bytes)
    ledger.finish()  # the walk reads this ledger's digest tree: whole, not pending
    walk = Walk(ledger, source, max_ids=None)  # deferred commits leave the stored tree as it is until finish()
    counts: dict[str, Any] = {
        "records_fetched": 0,
        "new": 0,
        "duplicate": 0,
        "invalid": 0,
        "unverified": 0,
        "batches": 0,
        "digests_read": 0,
        "rejected": [],
        "skipped": [],
        "lying": [],
    }
    writer = _SyncWriter(ledger, counts, batch_events=batch_events, batch_bytes=batch_bytes)
    try:
        for div in walk.divergences():
            if not div.a_lacks:
                continue
            number = div.pith_number
            if not _sync_parts(source, number, div.a_lacks, writer, counts):
                continue
            counts["records_fetched"] += 1
            writer.expect(number, div.a_lacks)
            del div
            if writer.full():
                writer.flush()
    except KeyboardInterrupt:
        counts["digests_read"] = walk.reads
        writer.flush()
        raise  # what is pending is finished by the next writer or settled reader (spec/storage.md §3.1)
    except BaseException:
        writer.flush()
        ledger.finish()
        raise
    counts["digests_read"] = walk.reads
    writer.flush()
    ledger.finish()
    return counts


def _sync_parts(source: Published, number: str, lacks: list[str], writer: _SyncWriter, counts: dict[str, Any]) -> bool:
    """:func:`sync`'s fetch of one divergent record: the parts that carry ids this ledger lacks, each added to the
    batch as it arrives; False (the record named in ``skipped``) when they cannot be fetched or read."""
    try:
        for bundle, nbytes in record_parts(source, number, lacks):
            writer.add(bundle, nbytes)
            del bundle
            if writer.full():
                writer.flush()
    except SourceTimeout:
        if source.deadline.remaining() <= 0:
            raise  # the run's deadline: stop here (what was applied stays)
        counts["skipped"].append(
            {
                "pith_number": number,
                "reason": "bad-source",
                "message": "the bundle did not arrive within the request timeout",
            }
        )
        return False
    except PithledgerError as exc:
        counts["skipped"].append({"pith_number": number, "reason": exc.code, "message": exc.message})
        return False
    return True


class _SyncWriter:
    """:func:`sync`'s writer: parts are added to a batch as they arrive (their copies are verified while the next
    ones are fetched), committed when it holds ``batch_events`` events or ids expected, or ``batch_bytes`` bytes;
    after each commit, each record whose every wanted part was in it is checked for the ids it must yield."""

    def __init__(self, ledger: Ledger, counts: dict[str, Any], *, batch_events: int, batch_bytes: int) -> None:
        self.ledger, self.counts = ledger, counts
        self.batch_events, self.batch_bytes = batch_events, batch_bytes
        self.batch: Batch | None = None
        self.expected: dict[str, list[str]] = {}  # records whose every wanted part is in the batch -> their ids
        self.events = 0
        self.nbytes = 0
        self.ids = 0  # ids expected

    def add(self, bundle: Bundle, nbytes: int) -> None:
        if self.nbytes and self.nbytes + nbytes > self.batch_bytes:
            self.flush()  # the batch would pass its bytes with this part: it holds one large part, not two
        if self.batch is None:
            self.batch = self.ledger.batch()
        self.batch.add(bundle)
        self.events += len(bundle.events) + 1  # a bundle without events still counts: batches always close
        self.nbytes += nbytes

    def expect(self, number: str, advertised: list[str]) -> None:
        self.expected[number] = advertised
        self.ids += len(advertised)

    def full(self) -> bool:
        return self.events >= self.batch_events or self.nbytes >= self.batch_bytes or self.ids >= self.batch_events

    def flush(self) -> None:
        if self.batch is not None:
            commit_counted(self.batch, self.counts)
            self.batch = None
        for number, advertised in self.expected.items():
            if missing := self.ledger.lacking(advertised):
                self.counts["lying"].append(
                    {"pith_number": number, "missing_event_ids": missing[:LISTED_IDS], "missing_count": len(missing)}
                )
        self.expected.clear()
        self.events = self.nbytes = self.ids = 0


# --- checking a source's bundles against its own digests -----------------------------------------------


class BundleCheck(msgspec.Struct):
    """What :func:`check_bundles` found: ``records`` the source's digests name, ``checked`` of them read,
    ``faults`` one per record whose bundle does not carry, as valid events, what its digests advertise
    (``reason`` "missing-events", with the ids, at most LISTED_IDS listed) or could not be read (the
    source error's code and message)."""

    records: int
    checked: int
    faults: list[dict[str, Any]]
    seed: int | None = None


def _names(source: Published) -> Iterator[str]:
    """Every record the source's digests name, in digest-tree order (one bucket held at a time)."""
    stack = [""]
    while stack:
        prefix = stack.pop()
        if len(prefix) < DEPTH:
            stack += [prefix + c for c in sorted(source.children(prefix), reverse=True)]
        else:
            yield from sorted(source.bucket(prefix))


def _check_record(source: Published, number: str) -> dict[str, Any] | None:
    advertised = source.record_events(number)
    carried: set[str] = set()
    for bundle, _ in record_parts(source, number, advertised):
        for event in bundle.events:
            verdict = verify_event(event)
            if verdict.status == "valid":
                carried.add(verdict.event_id)
        del bundle
    missing = [i for i in advertised if i not in carried]
    if not missing:
        return None
    return {
        "pith_number": number,
        "reason": "missing-events",
        "message": f"its bundle does not carry {len(missing):,} of the {len(advertised):,} event(s) its digests advertise, as valid events",
        "missing_event_ids": missing[:LISTED_IDS],
        "missing_count": len(missing),
    }


def check_bundles(source: Published, *, sample: int | None = None, seed: int | None = None) -> BundleCheck:
    """Read a published mirror's bundles against its own digests (spec/audit.md §5.1): every record, or
    a uniform sample of ``sample`` of them drawn with ``seed`` (reservoir sampling over the digest
    tree's order, so the same tree and seed check the same records). Every event of the parts that
    hold advertised ids is verified as ``apply`` would; a record is at fault when some advertised id is
    not among the valid events carried, or its bundle cannot be read. Pure reading: no ledger."""
    faults: list[dict[str, Any]] = []

    def check(number: str) -> None:
        try:
            fault = _check_record(source, number)
        except SourceTimeout:
            if source.deadline.remaining() <= 0:
                raise
            fault = {
                "pith_number": number,
                "reason": "bad-source",
                "message": "the bundle did not arrive within the request timeout",
            }
        except PithledgerError as exc:
            fault = {"pith_number": number, "reason": exc.code, "message": exc.message}
        if fault is not None:
            faults.append(fault)

    total = checked = 0
    chosen: list[str] = []
    rng = random.Random(seed)
    for number in _names(source):
        total += 1
        if sample is None:  # every record, checked as the walk names it: nothing held but the faults
            check(number)
            checked += 1
        elif len(chosen) < sample:
            chosen.append(number)
        elif (j := rng.randrange(total)) < sample:
            chosen[j] = number
    for number in sorted(chosen):
        check(number)
        checked += 1
    faults.sort(key=lambda f: str(f["pith_number"]))
    return BundleCheck(records=total, checked=checked, faults=faults, seed=seed)
