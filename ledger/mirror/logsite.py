"""The mirror's log on the web: C2SP tlog-tiles beside a published tree (``publish --key``), the same
paths served from a ledger (``serve --key``), and the client that checks a published log end to end
(``verify-log``). spec/transparency.md §4; the formats are ledger/tlog/tiles.py and ledger/tlog/note.py.

A published log is ``checkpoint`` (the signed note) and ``tile/<L>/<N>[.p/<W>]``,
``tile/entries/<N>[.p/<W>]`` under the mirror's base. Publishing adds only the tiles that are new since
the checkpoint already there, refuses (before writing anything) when a tile already there differs from
this ledger's (a fork of one's own log), and writes the checkpoint last, so a reader never sees a
checkpoint whose tiles are absent.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pithledger.errors import (
    BadProof,
    CannotWrite,
    LogCheckFailed,
    NoPublishedLog,
    NoSuchTile,
    PithledgerError,
    PublishedLogDiffers,
    SourceFileMissing,
)
from pithledger.files import disk_full
from pithledger.tlog.merkle import EMPTY_ROOT, leaf_hash, node_hash
from pithledger.tlog.note import Checkpoint, NoteSigner, NoteVerifier, open_checkpoint
from pithledger.tlog.proofs import event_sha256, parse_entry, verifier_of
from pithledger.tlog.signing import LogSigner, sign_tree
from pithledger.tlog.tiles import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TileClient,
    TilePath,
    entries_path,
    entry_bundle,
    hash_tile,
    parse_tile_path,
    tile_path,
    tiles_for,
    tree_hash,
)

if TYPE_CHECKING:
    from pithledger.mirror.published import Published
    from pithledger.store import Ledger

CHECKPOINT_FILE = "checkpoint"
TILE_DIR = "tile"
MAX_CHECKPOINT = 1 << 16
#: Cache-Control of full tiles (immutable: the bytes at a full tile's path never change) and of the
#: checkpoint and partial tiles (the checkpoint changes as events arrive; a partial tile is superseded).
CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
CACHE_CHECKPOINT = "no-cache"
CACHE_PARTIAL = "public, max-age=60"


# --- publishing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogPlan:
    """What a publish of the log will do, decided before anything is written."""

    size: int
    old_size: int  # the size the checkpoint already in the directory covers (0: none of this log)
    note: bytes  # the signed checkpoint to write last
    checkpoint: Checkpoint


def _read_file(directory: Path, rel: str, limit: int) -> bytes | None:
    """A regular file publish may compare against (never following a symlink); None when absent."""
    from pithledger.files import existing, read_regular

    st = existing(directory / rel)
    if st is None:
        return None
    if st.st_size > limit:
        return b""  # larger than any file of ours at that path: it differs
    return read_regular(directory / rel, st.st_size) or b""


def plan_log(ledger: Ledger, directory: Path, signer: LogSigner) -> LogPlan:
    """The tree to publish (the ledger's log at its size now) and the checks that come first: the
    directory's checkpoint, when it is this log's (same key and origin), must be a prefix of ours (its
    root equals our tree's at its size), and every tile already there that we would write must hold
    our bytes. Raises :class:`PublishedLogDiffers` otherwise; nothing is written either way."""
    with ledger.snapshot():
        size = ledger.tlog_size()
        root = tree_hash(ledger, size)
    checkpoint = Checkpoint(signer.name, size, root)
    old_size = 0
    held = _read_file(directory, CHECKPOINT_FILE, MAX_CHECKPOINT)
    if held:
        try:
            theirs, _ = open_checkpoint(held, [signer.verifier], origin=signer.name)
        except PithledgerError:
            theirs = None  # another key's or origin's log (or damaged): its tiles are still checked below
        if theirs is not None:
            if theirs.size > size:
                raise PublishedLogDiffers(
                    f"{directory}/{CHECKPOINT_FILE} signs a log of {theirs.size:,} entries; this ledger's has {size:,}"
                )
            with ledger.snapshot():
                ours = tree_hash(ledger, theirs.size)
            if ours != theirs.root:
                raise PublishedLogDiffers(
                    f"{directory}/{CHECKPOINT_FILE} signs a tree of size {theirs.size:,} whose root is not this "
                    f"ledger's at that size"
                )
            old_size = theirs.size
            kept = set(tile_paths(old_size)).intersection(tile_paths(size))  # what the new tree takes from before
            if any(_read_file(directory, rel, 0) is None for rel in kept):
                # a tile the new checkpoint needs from before is absent (deleted, a partial copy): publish
                # every tile again, each one there still compared, rather than sign a tree a reader cannot read
                old_size = 0
    if (directory / TILE_DIR).exists():
        for rel, data in _tiles(ledger, size, old_size):
            there = _read_file(directory, rel, len(data))
            if there is not None and there != data:
                raise PublishedLogDiffers(f"{directory}/{rel} holds other bytes than this ledger's log has there")
    with ledger.snapshot():  # the tree hashes of a prefix never change: a later snapshot reads the same ones
        note = sign_tree(signer, size, root, lambda m: tree_hash(ledger, m))
    return LogPlan(size, old_size, note, checkpoint)


def tile_paths(size: int) -> Iterator[str]:
    """The path of every tile of the tree at ``size`` (tlog.tiles_for's, without their contents)."""
    level = 0
    while hashes := size >> (TILE_HEIGHT * level):
        full, partial = divmod(hashes, TILE_WIDTH)
        for n, width in [(n, TILE_WIDTH) for n in range(full)] + ([(full, partial)] if partial else []):
            yield tile_path(level, n, width)
            if level == 0:
                yield entries_path(n, width)
        level += 1


def _tiles(ledger: Ledger, size: int, old_size: int) -> Iterator[tuple[str, bytes]]:
    """The tiles new between ``old_size`` and ``size``, each read in one snapshot."""
    with ledger.snapshot():
        yield from tiles_for(ledger, ledger.tlog_entries, size, old_size=old_size)


def write_tiles(ledger: Ledger, directory: Path, plan: LogPlan, write: Callable[[Path, str, bytes], bool]) -> int:
    """Write the tiles :func:`plan_log` checked (``write`` skips a file already holding the bytes); the
    number written. The checkpoint is :func:`write_checkpoint`'s, after everything else."""
    return sum(write(directory, rel, data) for rel, data in _tiles(ledger, plan.size, plan.old_size))


def write_checkpoint(directory: Path, plan: LogPlan, write: Callable[[Path, str, bytes], bool]) -> None:
    write(directory, CHECKPOINT_FILE, plan.note)


def manifest_fields(signer: NoteSigner | None, base_url: str) -> dict[str, Any]:
    """What a mirror manifest (``pith-mirrors.json``) says of the log: where its checkpoint is, the
    verifier key in signed-note form and the origin; nulls for a mirror that signs none."""
    if signer is None:
        return {"checkpoint": None, "log_key": None, "origin": None}
    return {
        "checkpoint": f"{base_url}/{CHECKPOINT_FILE}" if base_url else CHECKPOINT_FILE,
        "log_key": signer.vkey,
        "origin": signer.name,
    }


# --- serving ---------------------------------------------------------------------------------------------


class LogServer:
    """The log's paths answered from a ledger: the checkpoint (signed once per tree size) and tiles."""

    def __init__(self, signer: LogSigner | None) -> None:
        self.signer = signer
        self._signed: tuple[int, bytes, bytes] | None = None  # (size, root, note)

    def checkpoint(self, ledger: Ledger) -> bytes:
        """The signed checkpoint of the ledger's log now (read in the caller's snapshot)."""
        if self.signer is None:
            raise NoSuchTile(
                "this mirror signs no checkpoint (it was started without --key)",
                hint="start it with serve --key NAME to publish its log",
            )
        size, root = ledger.tlog_size(), ledger.tlog_root()
        cached = self._signed
        if cached is not None and cached[:2] == (size, root):
            return cached[2]
        note = sign_tree(self.signer, size, root, lambda m: tree_hash(ledger, m))
        self._signed = (size, root, note)
        return note

    @staticmethod
    def tile(ledger: Ledger, path: str) -> tuple[bytes, bool]:
        """A tile's bytes and whether it is full (immutable), read in the caller's snapshot; a path
        that is not one canonical tile path, or names a tile beyond the tree, is :class:`NoSuchTile`."""
        try:
            tile = parse_tile_path(path)
        except PithledgerError:
            raise NoSuchTile(f"/{path[:120]} is not the canonical path of a tile") from None
        if not _within(tile, ledger.tlog_size()):
            raise NoSuchTile(
                f"/{path} is beyond this mirror's log (its size is {ledger.tlog_size():,}: read /checkpoint)"
            )
        start = tile.n * TILE_WIDTH
        if tile.entries:
            data = entry_bundle(ledger.tlog_entries(start, start + tile.width))
        else:
            data = hash_tile(ledger, tile.level, tile.n, tile.width)
        return data, tile.width == TILE_WIDTH


def _within(tile: TilePath, size: int) -> bool:
    """Whether the tree of ``size`` holds every hash of the tile (a partial tile of a now-full index too)."""
    return (tile.n * TILE_WIDTH + tile.width) << (TILE_HEIGHT * tile.level) <= size


# --- a client that knows only the published tree -------------------------------------------------------------


@dataclass
class LogReport:
    """What :func:`check_published_log` found: the signed tree, how much was checked, and the faults
    (one per entry whose event could not be fetched or does not match; ``reason`` names each): the first
    MAX_FAULTS found, the others only counted (``faults_omitted``)."""

    source: str
    origin: str
    size: int
    root: str
    log_key: str
    key_from_manifest: bool
    records: int = 0
    events_matched: int = 0
    faults: list[dict[str, Any]] = field(default_factory=list)
    faults_omitted: int = 0

    def fault(self, fault: dict[str, Any]) -> None:
        if len(self.faults) < MAX_FAULTS:
            self.faults.append(fault)
        else:
            self.faults_omitted += 1

    def document(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "origin": self.origin,
            "size": self.size,
            "root": self.root,
            "log_key": self.log_key,
            "log_key_from_manifest": self.key_from_manifest,
            "records": self.records,
            "events_matched": self.events_matched,
            "consistent": not self.faults,
            "faults": self.faults,
            "faults_omitted": self.faults_omitted,
        }


#: verify-log lists at most this many faults and counts the rest: a hostile log can name millions.
MAX_FAULTS = 10_000


_T = TypeVar("_T")


def _scratch_call(step: Callable[[], _T]) -> _T:
    """A step of verify-log's scratch environment (in the system's temporary directory): a full disk there
    is ``error[disk-full]``, never a traceback (nor a SIGBUS: it has no lock file, and LMDB writes with write())."""
    import lmdb

    try:
        return step()
    except (lmdb.Error, OSError) as exc:
        where = Path(tempfile.gettempdir())
        raise disk_full(exc, where, "verify-log's scratch table") or CannotWrite(
            f"verify-log's scratch table in {where} could not be written: {exc}",
            hint="free space in the temporary directory (TMPDIR), or point TMPDIR elsewhere, then run it again",
        ) from None


class _Wanted:
    """What the entries name, kept on disk while the entry tiles stream past: (record, ledger id) ->
    (index, sha256), and every event id met (an id met twice is a duplicate entry). A temporary LMDB
    environment, written in transactions of _COMMIT_EVERY entries (an open write transaction holds its
    dirty pages in memory) and read back in chunks of at most _CHUNK ids of one record, so a log of n
    entries costs bounded memory whatever n and however its entries spread over records (in a dict, ~0.6
    KB an entry: 650 MB at 10^6), and ~330 B of disk an entry. The file's pages this process maps as it
    writes and reads are dropped from its map every _COMMIT_EVERY entries (clean page-cache pages: the
    data stays in the file), so its resident memory does not grow with the file either. The directory is
    removed as soon as the environment is open (it lives on through the open file), so no signal or crash
    leaves it behind."""

    _value = struct.Struct(">Q32s")

    def __init__(self, size: int) -> None:
        import lmdb

        directory = _scratch_call(lambda: tempfile.mkdtemp(prefix="pithledger-verify-log."))
        try:
            # sparse: the map only reserves address space; the file grows with what is written
            self._env = _scratch_call(
                lambda: lmdb.open(
                    directory,
                    map_size=min(1 << 40, (1 << 26) + size * 1024),
                    max_dbs=2,
                    subdir=True,
                    sync=False,
                    metasync=False,
                    lock=False,
                    readahead=False,
                )
            )
            st = os.stat(os.path.join(directory, "data.mdb"))
            self._file = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)  # how /proc/self/maps names its map
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self._map: tuple[int, int] | None = None  # (address, length) of the environment's map, once found
        # each open_db of a new table commits: a full disk fails here first (a traceback before)
        self._ids = _scratch_call(lambda: self._env.open_db(b"ids"))
        self._seen = _scratch_call(lambda: self._env.open_db(b"seen"))
        self._txn = _scratch_call(lambda: self._env.begin(write=True))
        self._puts = 0

    def add(self, event_key: bytes, record: str, ledger_id: str, index: int, sha256: str) -> bool:
        """Remember an entry (a later one for the same record and id replaces it); False: its event id was met before."""
        fresh: bool = self._txn.put(event_key, b"", db=self._seen, overwrite=False)
        self._txn.put(
            record.encode() + b"\0" + ledger_id.encode(), self._value.pack(index, bytes.fromhex(sha256)), db=self._ids
        )
        self._puts += 1
        if self._puts % _COMMIT_EVERY == 0:
            _scratch_call(self._txn.commit)
            self._release()
            self._txn = self._env.begin(write=True)
        return fresh

    def chunks(self) -> Iterator[tuple[str, dict[str, tuple[int, str]]]]:
        """(record, {ledger id: (index, sha256)}) of at most _CHUNK ids, records in order (bytes of their
        names); a record of more ids comes in several chunks, one after the other, its ids in order."""
        _scratch_call(self._txn.commit)
        self._txn = self._env.begin()
        record = b""
        ids: dict[str, tuple[int, str]] = {}
        for read, (key, value) in enumerate(self._txn.cursor(db=self._ids), 1):
            if read % _COMMIT_EVERY == 0:
                self._release()
            name, lid = bytes(key).split(b"\0", 1)
            if ids and (name != record or len(ids) >= _CHUNK):
                yield record.decode(), ids
                ids = {}
            record = name
            index, digest = self._value.unpack(value)
            ids[lid.decode()] = (index, digest.hex())
        if ids:
            yield record.decode(), ids

    def _release(self) -> None:
        """Drop this process's mappings of the file's pages (Linux; elsewhere nothing): MADV_DONTNEED on a
        shared file mapping only unmaps them, the next read maps them again (as ledger/store/env.py does)."""
        from pithledger.store.env import PAGE, libc_madvise

        madvise = libc_madvise()
        if madvise is None:
            return
        if self._map is None:
            try:
                with open("/proc/self/maps") as maps:
                    for line in maps:
                        fields = line.split()
                        if (
                            len(fields) >= 6
                            and fields[4] == str(self._file[2])
                            and _device(fields[3]) == self._file[:2]
                        ):
                            start, end = (int(x, 16) for x in fields[0].split("-"))
                            self._map = (start, end - start)
                            break
            except OSError:  # pragma: no cover - no /proc
                return
            if self._map is None:  # pragma: no cover - not mapped under that inode
                return
        start, length = self._map
        used = (self._env.info()["last_pgno"] + 1) * PAGE
        madvise(start, min(length, used), 4)  # MADV_DONTNEED

    def close(self) -> None:
        self._txn.abort()
        self._env.close()


def _device(field: str) -> tuple[int, int] | None:
    """(major, minor) of a /proc/self/maps device field ("fe:00")."""
    try:
        major, minor = field.split(":")
        return int(major, 16), int(minor, 16)
    except ValueError:
        return None


_COMMIT_EVERY = 1024
_CHUNK = 65_536


def _root_of_stream(leaves: Iterator[bytes]) -> tuple[bytes, int]:
    """RFC 9162's root over leaf hashes arriving one at a time, in O(log n) memory: a stack of the
    complete subtrees so far (sizes strictly decreasing), folded right to left at the end."""
    stack: list[tuple[int, bytes]] = []
    count = 0
    for leaf in leaves:
        count += 1
        node = (1, leaf)
        while stack and stack[-1][0] == node[0]:
            size, left = stack.pop()
            node = (size * 2, node_hash(left, node[1]))
        stack.append(node)
    if not stack:
        return EMPTY_ROOT, 0
    root = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        root = node_hash(left, root)
    return root, count


def _manifest_key(fetch: Callable[[str], bytes]) -> str:
    from pithledger.records.canonical import strict_decode

    try:
        doc = strict_decode(fetch("pith-mirrors.json"), what="pith-mirrors.json")
    except PithledgerError as exc:
        raise NoPublishedLog(
            f"cannot read the mirror's manifest for its log key: {exc.message}",
            hint="give the log key you trust: --log-key VKEY",
        ) from None
    mirrors = doc.get("mirrors") if isinstance(doc, dict) else None
    named = [m.get("log_key") for m in mirrors if isinstance(m, dict)] if isinstance(mirrors, list) else []
    keys = [k for k in named if isinstance(k, str)]
    if not keys:
        raise NoPublishedLog("the mirror's manifest names no log_key")
    return keys[0]


def check_published_log(
    location: str, log_key: str | None = None, *, timeout: float | None = 30.0, deadline: float | None = 600.0
) -> LogReport:
    """Check a published mirror's log knowing only what it publishes (a directory or an http(s) URL):
    verify its checkpoint under ``log_key`` (else the key its own manifest names: then this proves the
    published tree consistent with itself, not that it is the log you trust), recompute the checkpoint's
    root from the entry tiles (each tile checked against the signed root on the way, ledger/tlog/tiles.py),
    then fetch, for every entry, its record's bundle and check the named event: it must be there, be
    valid (signature and all, as ``apply`` checks it), be about the entry's record, and hash to the
    entry's sha256 (a Pith-envelope ``record_created`` as published: in its served form, spec/bundle.md §6,
    which is what its entry hashes).
    A bad checkpoint, tile or entry bundle raises (named); event faults are listed in the report."""
    from pithledger.mirror.published import Published

    given = verifier_of(log_key) if log_key is not None else None  # a mistyped key is named before any fetch
    source = Published(location, timeout=timeout, deadline=deadline)
    fetch = source._fetch
    from_manifest = log_key is None
    vkey = _manifest_key(fetch) if log_key is None else log_key
    verifier: NoteVerifier = given or verifier_of(vkey)
    client = TileClient(fetch)
    try:
        note = fetch(CHECKPOINT_FILE)
    except SourceFileMissing as exc:
        raise NoPublishedLog(f"{location} publishes no {CHECKPOINT_FILE}: {exc.message}") from None
    checkpoint, _ = open_checkpoint(note, [verifier], origin=verifier.name)
    try:
        client.trust(checkpoint)
    except SourceFileMissing as exc:  # the signed tree's right-edge tiles: promised by the checkpoint, absent
        raise LogCheckFailed(f"{location}: a tile of the tree its checkpoint signs is missing: {exc.message}") from None
    report = LogReport(location, checkpoint.origin, checkpoint.size, checkpoint.root.hex(), vkey, from_manifest)
    wanted = _Wanted(checkpoint.size)
    try:
        _check_entries(location, source, client, checkpoint, report, wanted)
    finally:
        wanted.close()
    report.faults.sort(key=lambda f: (f.get("index", -1), str(f.get("record", ""))))
    return report


def _check_entries(
    location: str, source: Published, client: TileClient, checkpoint: Checkpoint, report: LogReport, wanted: _Wanted
) -> None:
    """Recompute the root from the entry tiles, noting what each entry names in ``wanted``; then check each
    record's named events against its published bundle."""
    root, count = _root_of_stream(_entry_leaves(client, checkpoint, report, wanted))
    if count != checkpoint.size or root != checkpoint.root:
        raise LogCheckFailed(
            f"the entry tiles of {location} hash to {root.hex()} over {count:,} entries, not to the "
            f"checkpoint's root {checkpoint.root.hex()} at size {checkpoint.size:,}"
        )
    last, unreadable = "", ""
    for number, ids in wanted.chunks():  # a record's parts are read again for each chunk of its ids they carry
        if number != last:
            report.records += 1
            last = number
        if number == unreadable:  # named once, at its first chunk
            continue
        if not _check_chunk(source, number, ids, report):
            unreadable = number


def _entry_leaves(client: TileClient, checkpoint: Checkpoint, report: LogReport, wanted: _Wanted) -> Iterator[bytes]:
    """The leaf hashes of the log's entries, read off its entry tiles; each entry's names noted in ``wanted``
    (a malformed entry or an event named twice is a fault)."""
    for start in range(0, checkpoint.size, TILE_WIDTH * 16):
        for offset, data in enumerate(client.entries(start, min(start + TILE_WIDTH * 16, checkpoint.size), keep=False)):
            index = start + offset
            try:
                entry = parse_entry(data, f"entry {index}")
            except BadProof as exc:
                report.fault({"index": index, "reason": "malformed-entry", "message": exc.message})
            else:
                if not wanted.add(bytes.fromhex(entry.event_id), entry.record, entry.ledger_id, index, entry.sha256):
                    report.fault(
                        {
                            "index": index,
                            "event_id": entry.ledger_id,
                            "reason": "duplicate-entry",
                            "message": "the log names this event twice",
                        }
                    )
            yield leaf_hash(data)


def _check_chunk(source: Published, number: str, ids: dict[str, tuple[int, str]], report: LogReport) -> bool:
    """Check one chunk of a record's named events (ledger id: (index, sha256)) against its published bundle;
    False when the record's parts cannot be read (a fault, named once for the record)."""
    from pithledger.mirror.published import ledger_id, record_parts

    found: set[str] = set()
    try:
        for bundle, _ in record_parts(source, number, sorted(ids)):
            for event in bundle.events:
                eid = ledger_id(event)
                if eid is None or eid not in ids or eid in found:
                    continue
                _check_event(event, eid, number, ids[eid], report)
                found.add(eid)
            del bundle
    except PithledgerError as exc:
        report.fault({"record": number, "reason": exc.code, "message": exc.message})
        return False
    for eid in sorted(set(ids) - found):
        report.fault(
            {
                "index": ids[eid][0],
                "event_id": eid,
                "record": number,
                "reason": "event-missing",
                "message": "the record's published bundle does not carry the event the log names",
            }
        )
    return True


def _check_event(event: dict[str, Any], eid: str, number: str, named: tuple[int, str], report: LogReport) -> None:
    """One published event against the log entry naming it (index, sha256): valid, of the entry's record, and
    hashing to the entry's sha256; a fault where not."""
    from pithledger.records.events import verify_event

    index, sha = named
    verdict = verify_event(event)
    if verdict.status != "valid" or verdict.event_id != eid:
        report.fault(
            {
                "index": index,
                "event_id": eid,
                "record": number,
                "reason": "invalid-event",
                "message": f"the published event is not valid: {verdict.reason} {verdict.message}".strip(),
            }
        )
    elif verdict.subject != number:
        report.fault(
            {
                "index": index,
                "event_id": eid,
                "record": number,
                "reason": "wrong-record",
                "message": f"the event is about {verdict.subject}, not the entry's record",
            }
        )
    elif event_sha256(event) == sha:
        report.events_matched += 1
    else:
        report.fault(
            {
                "index": index,
                "event_id": eid,
                "record": number,
                "reason": "event-mismatch",
                "message": "the published event's bytes do not hash to the entry's sha256",
            }
        )
