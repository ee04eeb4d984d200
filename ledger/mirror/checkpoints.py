"""What a mirror remembers of each log it read: the source's checkpoint, checked against the last one seen.

spec/transparency.md §6.4. ``sync``, ``pull`` and ``audit`` read a source's signed ``checkpoint`` when its
manifest names one (``checkpoint`` / ``log_key``), verify it (the log key pinned per origin on first use,
or given), check the witness cosignatures asked for, and check it against the checkpoint this ledger last
saw from that origin — remembered outside consensus in ``<ledger>/checkpoints/<hex sha256(origin)>.json``,
written once it is checked (the command line does so before its run commits anything), under a lock on
the origin held from the check to the run's end — with a consistency proof the reader builds itself from
the source's tiles (verified against the signed root, :class:`pithledger.tlog.tiles.TileClient`). Two views that do not
extend each other are a fork: named (:class:`LogFork`), evidence written, nothing synced.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pithledger.errors import (
    BadCheckpoint,
    BadRequest,
    BadVerifierKey,
    DamagedMemory,
    Inconsistent,
    LogFork,
    LogKeyChanged,
    NotVerified,
    NotWitnessed,
    OriginBusy,
    PithledgerError,
    SourceError,
    SourceFileMissing,
    UnknownLog,
    UnsupportedKeyType,
)
from pithledger.layout import CHECKPOINTS_DIR
from pithledger.mirror.transport import (
    DEFAULT_TIMEOUT,
    Deadline,
    as_deadline,
    check_relative,
    check_url,
    http_get,
    read_file,
)
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.tlog import merkle
from pithledger.tlog import witness as w

if TYPE_CHECKING:
    from pithledger.tlog.note import NoteVerifier

MANIFEST_FILE = "pith-mirrors.json"
MAX_MANIFEST = 1024 * 1024
#: A plain C2SP tlog-tiles log's checkpoint, at its base.
CHECKPOINT_NAME = "checkpoint"
#: A checkpoint note is at most 64 KiB (signed-note limits, ledger/tlog/note.py).
MAX_CHECKPOINT = 64 * 1024
#: A tile is at most 256 hashes of 32 bytes; an entry bundle 256 entries of 64 KiB.
MAX_TILE = 256 * (2 + 0xFFFF)
MEMORY_DIR = CHECKPOINTS_DIR  # (ledger/layout.py: backup copies it too)
MEMORY_TYPE = "pithledger_seen_checkpoint"


def _origin_of(note: bytes, source: str) -> str:
    try:
        return w.note_origin(note)
    except BadRequest as exc:
        raise BadCheckpoint(f"{source}: the checkpoint is no signed note ({exc.message})") from None


@dataclass(frozen=True)
class Seen:
    """A checkpoint remembered for an origin."""

    origin: str
    log_key: str
    size: int
    root: bytes
    note: str
    source: str


@dataclass
class Check:
    """What a run's checkpoint check found: ``status`` unlogged, first (no memory of the origin), same, or
    extends; ``pending`` is what :func:`commit` remembers (the command line: at once). ``held``: the
    origin's memory lock, when the check was asked to hold it until the run ends (:meth:`release`)."""

    source: str
    status: str
    origin: str = ""
    size: int = 0
    previous: int | None = None
    cosigned_by: list[str] = field(default_factory=list)
    pending: Seen | None = None
    held: contextlib.ExitStack | None = field(default=None, repr=False, compare=False)

    def release(self) -> None:
        """Let the next run of this origin check against what this one remembered (idempotent)."""
        if self.held is not None:
            self.held.close()
            self.held = None

    def document(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "origin": self.origin or None,
            "size": self.size if self.status != "unlogged" else None,
            "previous_size": self.previous,
            "cosigned_by": self.cosigned_by,
        }

    def line(self) -> str:
        if self.status == "unlogged":
            return f"unlogged: {self.source} publishes no checkpoint (no log to check)"
        how = {
            "first": "first seen from this origin",
            "same": "the same tree as seen before",
            "extends": f"extends size {self.previous} seen before (consistency proof checked)",
        }[self.status]
        cos = f"; cosigned by {', '.join(self.cosigned_by)}" if self.cosigned_by else ""
        return f"checkpoint: {self.origin} size {self.size}, {how}{cos}"


# --- reading a source's log ------------------------------------------------------------------------


class _Files:
    """Bytes of a source by a path relative to its base (a directory or an http(s) base URL)."""

    def __init__(self, base: str, timeout: float | None, deadline: Deadline) -> None:
        self.base = base
        self.is_url = base.startswith(("http://", "https://"))
        self.timeout = timeout
        self.deadline = deadline

    def get(self, rel: str, max_bytes: int) -> bytes:
        check_relative(rel, self.base)
        if self.is_url:
            return http_get(
                self.base.rstrip("/") + "/" + urllib.parse.quote(rel),
                timeout=self.timeout,
                deadline=self.deadline,
                max_bytes=max_bytes,
            )
        return read_file(self.base, rel, max_bytes=max_bytes, deadline=self.deadline)


def _manifest_log(doc: Any) -> tuple[str, str | None, str | None] | None:
    """(checkpoint reference, log_key, origin) a manifest names, at its top level or in a mirror entry."""
    if not isinstance(doc, dict):
        return None
    places = (
        [doc] + [m for m in doc.get("mirrors", []) if isinstance(m, dict)]
        if isinstance(doc.get("mirrors", []), list)
        else [doc]
    )
    for place in places:
        ref = place.get("checkpoint")
        if isinstance(ref, str) and ref:
            key, origin = place.get("log_key"), place.get("origin")
            return ref, key if isinstance(key, str) else None, origin if isinstance(origin, str) else None
    return None


@dataclass
class SourceLog:
    """A source's published log: where it is, what its manifest says, its checkpoint note (unverified)."""

    files: _Files  # relative to the log's base (the checkpoint's directory)
    name: str  # the checkpoint's file name there
    note: bytes
    manifest_key: str | None
    manifest_origin: str | None


def _log_base(source: str, manifest_url: str | None, ref: str) -> tuple[str, str]:
    """(the log's base, the checkpoint's path under it) for a manifest's checkpoint reference."""
    if manifest_url is None:  # a directory: the checkpoint is a file of the tree (tlog-tiles: at the log's base)
        rel = ref.lstrip("/") if not ref.startswith(("http://", "https://")) else "checkpoint"
        parent, _, name = rel.rpartition("/")
        check_relative(rel, source)
        return (str(Path(source, parent)) if parent else source), name
    url = urllib.parse.urljoin(manifest_url, ref)
    a, b = check_url(url), check_url(manifest_url)
    if (a.scheme, a.netloc) != (b.scheme, b.netloc):
        # a manifest naming its public URL (--base-url) read through another address: the log is at the
        # mirror's base, as tlog-tiles lays it out; a checkpoint is verified wherever it is read from
        return manifest_url.rpartition("/")[0], "checkpoint"
    base, _, name = url.rpartition("/")
    return base, name


def read_source_log(
    location: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = 600.0,
    manifest: bytes | None = None,
) -> SourceLog | None:
    """The log SOURCE publishes (a mirror's base directory or URL, or a manifest URL or file), or None
    when it publishes none. Looked up in this order (spec/transparency.md §6.5): a manifest given (a
    file, a URL ending in .json, or ``manifest``: its bytes, when the caller read them already) decides
    alone; at a base, its ``pith-mirrors.json`` decides when present (a manifest naming no checkpoint:
    unlogged); with no manifest there, a plain C2SP tlog-tiles log: ``checkpoint`` at the base."""
    run = as_deadline(deadline)
    given = manifest is not None
    if location.startswith(("http://", "https://")):
        path = urllib.parse.urlsplit(location).path
        given = given or path.endswith(".json")
        manifest_url = location if path.endswith(".json") else location.rstrip("/") + "/" + MANIFEST_FILE
        base_dir, name = manifest_url.rpartition("/")[0], manifest_url.rpartition("/")[2]
        files = _Files(base_dir, timeout, run)
        murl: str | None = manifest_url
    else:
        p = Path(location)
        if p.is_file():
            p, name, given = p.parent, p.name, True
        else:
            name = MANIFEST_FILE
        files, murl = _Files(str(p), timeout, run), None
    try:
        data = files.get(name, MAX_MANIFEST) if manifest is None else manifest
    except SourceFileMissing:
        if given:
            return None
        return _plain_log(files)
    try:
        doc = strict_decode(data, what=MANIFEST_FILE)
    except PithledgerError as exc:
        raise SourceError(f"{location}: {exc.message}") from None
    named = _manifest_log(doc)
    if named is None:
        return None
    ref, key, origin = named
    base, cp_name = _log_base(files.base, murl, ref)
    log_files = _Files(base, timeout, run)
    try:
        note = log_files.get(cp_name, MAX_CHECKPOINT)
    except SourceFileMissing:
        raise BadCheckpoint(f"{location}: the manifest names a checkpoint ({ref[:200]}) that is absent") from None
    return SourceLog(log_files, cp_name, note, key, origin)


def _plain_log(files: _Files) -> SourceLog | None:
    """A plain C2SP tlog-tiles log at the base (``checkpoint``, ``tile/...``), or None: no checkpoint there."""
    try:
        note = files.get(CHECKPOINT_NAME, MAX_CHECKPOINT)
    except SourceFileMissing:
        return None
    return SourceLog(files, CHECKPOINT_NAME, note, None, None)


def source_tiles(
    location: str, *, timeout: float | None = DEFAULT_TIMEOUT, deadline: Deadline | float | None = 600.0
) -> Callable[[str], bytes]:
    """``fetch(path)`` of the tiles of the log SOURCE publishes, each read bounded (MAX_TILE, the timeout
    and deadline): relative to its checkpoint's directory when SOURCE names one (read_source_log's
    order), else to SOURCE itself. What ``consistency --source`` reads: checkpoints are given, only
    tiles are needed, so any C2SP tlog-tiles log will do (no pithledger digest or manifest)."""
    run = as_deadline(deadline)
    log = read_source_log(location, timeout=timeout, deadline=run)
    files = log.files if log is not None else _Files(location, timeout, run)

    def fetch(rel: str) -> bytes:
        return files.get(rel, MAX_TILE)

    return fetch


def check_vkeys(log_key: str | None, witness_keys: Sequence[str]) -> None:
    """The keys given on the command line, parsed before anything is fetched: a malformed one is
    ``bad-verifier-key``, one of a type pithledger cannot check ``unsupported-key-type`` — a mistake of
    the reader's, never reported as a checkpoint that does not verify (which reads as tampering)."""
    from pithledger.tlog.note import NoteVerifier

    for what, vkey in ([("--log-key", log_key)] if log_key is not None else []) + [
        ("--witness-key", k) for k in witness_keys
    ]:
        try:
            NoteVerifier.from_vkey(vkey)
        except BadVerifierKey as exc:
            raise type(exc)(f"{what} {vkey[:120]!r}: {exc.message}") from None


def tile_client(log: SourceLog, cp: w.Signed) -> Any:
    """A TileClient over the source's tiles, trusting only ``cp`` (whose right-edge tiles it checks)."""
    from pithledger.tlog.note import Checkpoint
    from pithledger.tlog.tiles import TileClient

    def fetch(rel: str) -> bytes:
        return log.files.get(rel, MAX_TILE)

    try:
        return TileClient(fetch, Checkpoint.parse(cp.text))
    except SourceError:
        raise
    except PithledgerError as exc:
        raise BadCheckpoint(f"{log.files.base}: {exc.message}") from None


def prove_from_tiles(log: SourceLog, old_size: int, new: w.Signed) -> tuple[list[bytes], bytes]:
    """(the consistency proof from ``old_size`` to ``new`` and the root of the first ``old_size`` leaves),
    both from the source's tiles, each tile checked against ``new``'s signed root."""
    from pithledger.tlog.tiles import consistency_proof, tree_hash

    client = tile_client(log, new)
    try:
        return consistency_proof(client, old_size, new.size), tree_hash(client, old_size)
    except SourceError:
        raise
    except LookupError as exc:
        raise BadCheckpoint(f"{log.files.base}: a tile is missing: {exc}") from None
    except PithledgerError as exc:
        raise BadCheckpoint(f"{log.files.base}: {exc.message}") from None


# --- the memory ------------------------------------------------------------------------------------


def memory_path(ledger_path: Path, origin: str) -> Path:
    return Path(ledger_path) / MEMORY_DIR / f"{w.origin_hash(origin)}.json"


def _lock_path(ledger_path: Path, origin: str) -> Path:
    return memory_path(ledger_path, origin).with_suffix(".lock")


def evidence_dir(ledger_path: Path) -> Path:
    return Path(ledger_path) / MEMORY_DIR / "evidence"


def remembered(ledger_path: Path, origin: str) -> Seen | None:
    path = memory_path(ledger_path, origin)
    if not path.exists():
        return None
    doc = w.read_small(path, "the remembered checkpoint", DamagedMemory)
    try:
        if doc["memory_type"] != MEMORY_TYPE or doc["origin"] != origin:
            raise KeyError("memory_type")
        return Seen(
            origin,
            str(doc["log_key"]),
            int(doc["size"]),
            w.unb64_hash(str(doc["root"]), "root"),
            str(doc["checkpoint"]),
            str(doc["source"]),
        )
    except (KeyError, TypeError, ValueError, BadRequest):
        raise DamagedMemory(f"the remembered checkpoint {path} is damaged") from None


def commit(ledger_path: Path, check: Check) -> None:
    """Remember the checkpoint a check passed (the command line does so at once, before its run commits
    anything: spec/transparency.md §6.4). A check that holds the origin's lock (``hold``) was
    made against the memory as it still is: no other run can have remembered anything meanwhile. Without
    it, the memory is never rolled back: a concurrent run that saw a larger tree of the origin keeps its
    memory (and a fork between the two runs' views goes unseen: the command line always holds the lock)."""
    seen = check.pending
    if seen is None:
        return
    with contextlib.ExitStack() as stack:
        if check.held is None:
            stack.enter_context(w.locked(_lock_path(ledger_path, seen.origin)))
        now = remembered(ledger_path, seen.origin)
        if now is not None and (now.size > seen.size or (now.size == seen.size and now.root != seen.root)):
            return
        doc = {
            "memory_type": MEMORY_TYPE,
            "memory_version": w.VERSION,
            "origin": seen.origin,
            "log_key": seen.log_key,
            "size": seen.size,
            "root": w.b64(seen.root),
            "checkpoint": seen.note,
            "source": seen.source,
            "seen_at": w.now_iso(),
        }
        w.write_atomic(memory_path(ledger_path, seen.origin), canonical_bytes(doc) + b"\n")


# --- the check -------------------------------------------------------------------------------------


def verify_source(
    log: SourceLog, source: str, *, log_key: str | None, pinned: Seen | None, witness_keys: Sequence[str]
) -> tuple[w.Signed, str, list[str]]:
    """The source's checkpoint, verified: (checkpoint, the log key used, the witnesses that cosigned it)."""
    from pithledger.tlog.note import NoteVerifier

    origin = _origin_of(log.note, source)
    if log.manifest_origin is not None and log.manifest_origin != origin:
        raise BadCheckpoint(
            f"{source}: the manifest names origin {log.manifest_origin[:200]!r}, its checkpoint {origin[:200]!r}"
        )
    key = _log_key(log, source, origin, log_key, pinned)
    check_vkeys(log_key, witness_keys)
    try:
        NoteVerifier.from_vkey(key)
    except UnsupportedKeyType as exc:  # the log's key is of a type we cannot check: not a bad checkpoint
        raise UnsupportedKeyType(f"{source}: the log key {key[:120]}: {exc.message}") from None
    except PithledgerError as exc:  # pinned keys were parsed when pinned: this is the manifest's
        raise BadCheckpoint(
            f"{source}: the manifest's log_key {key[:120]!r} is no verifier key: {exc.message}"
        ) from None
    witnesses = [NoteVerifier.from_vkey(v) for v in witness_keys]
    cp = _open_cosigned(log, source, origin, key, witnesses)
    if cp.origin != origin:  # pragma: no cover - the origin is the note's first line
        raise BadCheckpoint(f"{source}: the checkpoint's origin is not its first line")
    if cp.size == 0 and cp.root != merkle.EMPTY_ROOT:  # remembered, it would pass any later tree as extending it
        raise BadCheckpoint(f"{source}: the checkpoint of size 0 does not carry the root of the empty tree")
    log_name = NoteVerifier.from_vkey(key).name
    if log_name not in cp.verified_by:
        raise BadCheckpoint(f"{source}: the checkpoint carries no valid signature by the log key {key[:120]}")
    cosigned = [v.name for v in witnesses if v.name in cp.verified_by]
    missing = [v.name for v in witnesses if v.name not in cp.verified_by]
    if missing:
        raise NotWitnessed(
            f"{source}: the checkpoint of {origin[:200]!r} size {cp.size} is not cosigned by {', '.join(missing)}"
        )
    return cp, key, cosigned


def _log_key(log: SourceLog, source: str, origin: str, log_key: str | None, pinned: Seen | None) -> str:
    """The key the source's checkpoint is verified under: the one given, else the one pinned (the manifest may not
    name another), else the manifest's (trust on first use: pinned once the run commits)."""
    if log_key is not None:
        return log_key
    if pinned is not None:
        if log.manifest_key is not None and log.manifest_key != pinned.log_key:
            raise LogKeyChanged(
                f"{source}: the log {origin[:200]!r} now names the key {log.manifest_key[:200]}, but this "
                f"ledger pinned {pinned.log_key[:200]} for it"
            )
        return pinned.log_key
    if log.manifest_key is not None:
        return log.manifest_key
    raise BadCheckpoint(
        f"{source} publishes a checkpoint, but no manifest names its log_key, and none is pinned or given",
        hint="give the log's key with --log-key VKEY",
    )


def _open_cosigned(log: SourceLog, source: str, origin: str, key: str, witnesses: Sequence[NoteVerifier]) -> w.Signed:
    """The source's checkpoint opened under the log key alone (its failure is the log's), then under each
    witness's (a cosignature that fails is that witness's, named), then under all of them."""
    try:
        cp = w.open_checkpoint(log.note, [key])
    except BadRequest as exc:
        raise BadCheckpoint(f"{source}: {exc.message}") from None
    except PithledgerError as exc:
        raise BadCheckpoint(
            f"{source}: the checkpoint does not verify under the log key {key[:120]}: {exc.message}"
        ) from None
    for witness in witnesses:
        try:
            w.open_checkpoint(log.note, [key], [witness])
        except PithledgerError as exc:
            raise NotWitnessed(
                f"{source}: the cosignature by the witness {witness.name} on the checkpoint of {origin[:200]!r} "
                f"size {cp.size} does not verify ({exc.message})"
            ) from None
    if witnesses:
        cp = w.open_checkpoint(log.note, [key], witnesses)
    return cp


def against_seen(log: SourceLog, source: str, old: Seen, new: w.Signed, key: str, where: Path, observer: str) -> str:
    """ "same" or "extends" when ``new`` extends ``old`` (the proof built from the source's tiles); else
    the evidence is written in ``where`` and :class:`LogFork` raised."""
    if new.size == old.size and new.root == old.root:
        return "same"
    proof: list[bytes] = []
    prefix: bytes | None = None
    if old.size < new.size and old.size > 0:
        proof, prefix = prove_from_tiles(log, old.size, new)
    old_signed = w.Signed(note=old.note, text="", origin=old.origin, size=old.size, root=old.root)
    verdict = w.judge(old_signed, new, proof, prefix)
    if verdict is None:
        return "extends"
    kind, x = verdict
    doc = w.evidence_doc(
        origin=new.origin,
        log_key=key,
        old=old.note,
        new=new.note,
        proof=proof,
        prefix=x,
        observer=observer,
        observed_at=w.now_iso(),
        kind=kind,
    )
    path = w.write_evidence(where, doc)
    what = {
        "same-size-different-root": f"two different trees of size {new.size}",
        "inconsistent-proof": f"size {new.size} does not extend the size {old.size} seen before (from {old.source[:200]})",
        "rollback": f"size {new.size} is smaller than the size {old.size} seen before (from {old.source[:200]})",
        "bad-proof": f"its tiles give no consistency proof from size {old.size} to {new.size}",
    }[kind]
    raise LogFork(f"{source}: the log {new.origin[:200]!r} forked: {what}", path)


def _check(
    ledger_path: Path | None,
    source: str,
    *,
    log_key: str | None,
    witness_keys: Sequence[str],
    timeout: float | None,
    deadline: Deadline | float | None,
    observer: str,
    evidence: Path | None,
    manifest: bytes | None = None,
    hold: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[Check, SourceLog | None, w.Signed | None]:
    check_vkeys(log_key, witness_keys)  # before anything is fetched
    run = as_deadline(deadline)
    log = read_source_log(source, timeout=timeout, deadline=run, manifest=manifest)
    if log is None:
        if log_key is not None or witness_keys:
            raise BadCheckpoint(
                f"{source} publishes no checkpoint, but --log-key / --witness-key ask for one",
                hint="leave them out to read an unlogged source",
            )
        return Check(source, "unlogged"), None, None
    origin = _origin_of(log.note, source)
    held = None
    if hold and ledger_path is not None:
        # Held from before the memory is read until the run ends: two runs of one origin on one ledger
        # could otherwise each check against the same memory, accept one side of a fork each, and the
        # second's commit would keep the first's silently (spec/transparency.md §6.4).
        held = contextlib.ExitStack()
        try:
            held.enter_context(
                w.locked(
                    _lock_path(ledger_path, origin),
                    None if on_wait is None else lambda: on_wait(origin),
                    wait=None if run.seconds is None else max(0.0, run.remaining()),
                )
            )
        except TimeoutError:
            raise OriginBusy(
                f"{source}: another run held the log {origin[:200]!r} of this ledger until this run's "
                f"deadline of {run.seconds:g} s"
            ) from None
    try:
        pinned = remembered(ledger_path, origin) if ledger_path is not None else None
        cp, key, cosigned = verify_source(log, source, log_key=log_key, pinned=pinned, witness_keys=witness_keys)
        status, previous = "first", None
        if pinned is not None:
            if log_key is not None and log_key != pinned.log_key:  # the key given replaces the one pinned
                pinned = Seen(pinned.origin, log_key, pinned.size, pinned.root, pinned.note, pinned.source)
            status, previous = (
                against_seen(log, source, pinned, cp, key, _evidence_at(ledger_path, evidence), observer),
                pinned.size,
            )
    except BaseException:
        if held is not None:
            held.close()
        raise
    seen = Seen(cp.origin, key, cp.size, cp.root, cp.note, source)
    return Check(source, status, cp.origin, cp.size, previous, cosigned, seen, held), log, cp


def _evidence_at(ledger_path: Path | None, evidence: Path | None) -> Path:
    return evidence or (evidence_dir(ledger_path) if ledger_path is not None else Path("pithledger-evidence"))


def check_source(
    ledger_path: Path | None,
    source: str,
    *,
    log_key: str | None = None,
    witness_keys: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = 600.0,
    observer: str = "pithledger",
    evidence: Path | None = None,
    manifest: bytes | None = None,
    hold: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Check:
    """Read and check SOURCE's checkpoint against this ledger's memory of its origin (``ledger_path``;
    None: no memory). ``evidence``: where a fork's evidence goes (default: the ledger's). Raises
    :class:`LogFork`, :class:`LogKeyChanged`, :class:`BadCheckpoint` or :class:`NotWitnessed`; the
    returned check's ``pending`` is for :func:`commit`. ``manifest``: the source's
    manifest bytes when the caller read them already (``pull``). ``hold``: keep the origin's memory lock
    from before the memory is read until :meth:`Check.release` (a run that will commit: another run of
    the same origin waits for it, then checks against what it remembered); ``on_wait(origin)`` is called
    when that lock is busy, before waiting."""
    return _check(
        ledger_path,
        source,
        log_key=log_key,
        witness_keys=witness_keys,
        timeout=timeout,
        deadline=deadline,
        observer=observer,
        evidence=evidence,
        manifest=manifest,
        hold=hold,
        on_wait=on_wait,
    )[0]


def check_pair(
    ledger_path: Path | None,
    a: str,
    b: str,
    *,
    witness_keys: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = 600.0,
    evidence: Path | None = None,
) -> list[Check]:
    """``audit A B``: each published side's checkpoint against the ledger's memory (nothing remembered),
    and, when both publish a log of the same origin, against each other (the larger side's tiles prove
    that it extends the smaller; else :class:`LogFork`)."""
    sides = []
    for source in (a, b):
        if source.startswith(("http://", "https://")) or Path(source, MANIFEST_FILE).is_file():
            sides.append(
                _check(
                    ledger_path,
                    source,
                    log_key=None,
                    witness_keys=witness_keys,
                    timeout=timeout,
                    deadline=deadline,
                    observer="pithledger audit",
                    evidence=evidence,
                )
            )
    logged = [s for s in sides if s[1] is not None and s[2] is not None]
    if (
        len(logged) == 2
        and logged[0][2] is not None
        and logged[1][2] is not None
        and logged[0][2].origin == logged[1][2].origin
    ):
        (ca, la, pa), (cb, lb, pb) = logged
        assert la is not None and lb is not None and pa is not None and pb is not None
        if pa.size > pb.size:
            (ca, la, pa), (cb, lb, pb) = (cb, lb, pb), (ca, la, pa)
        key_a, key_b = (ca.pending.log_key if ca.pending else ""), (cb.pending.log_key if cb.pending else "")
        if key_a != key_b:  # two keys under one origin: an impostor or a key change, not a fork either side signed
            raise LogKeyChanged(
                f"{ca.source} and {cb.source} publish logs of the same origin {pa.origin[:200]!r} under "
                f"different keys ({key_a[:120]} and {key_b[:120]}): they cannot be compared as one log",
                hint="audit each side against the key its operator gives (sync --log-key VKEY); "
                "at most one of them is the log you trust",
            )
        old = Seen(pa.origin, ca.pending.log_key if ca.pending else "", pa.size, pa.root, pa.note, ca.source)
        against_seen(
            lb,
            cb.source,
            old,
            pb,
            cb.pending.log_key if cb.pending else "",
            _evidence_at(ledger_path, evidence),
            "pithledger audit",
        )
    return [s[0] for s in sides]


def witness_source(
    wit: w.Witness, source: str, *, timeout: float | None = DEFAULT_TIMEOUT, deadline: Deadline | float | None = 600.0
) -> tuple[w.Signed, str]:
    """``pithledger witness SOURCE``: the witness reads the source's checkpoint and tiles itself, builds the
    consistency proof from the size it last cosigned, and runs add-checkpoint: (the checkpoint, its
    cosignature line). A smaller tree than the one cosigned is refused with rollback evidence."""
    log = read_source_log(source, timeout=timeout, deadline=deadline)
    if log is None:
        raise BadCheckpoint(f"{source} publishes no checkpoint: there is nothing to witness")
    origin = _origin_of(log.note, source)
    cfg = wit.logs.get(origin)
    if cfg is None:
        raise UnknownLog(f"this witness follows no log with origin {origin[:200]!r}")
    try:
        new = w.open_checkpoint(log.note, [cfg.vkey])
    except BadRequest:
        raise
    except PithledgerError as exc:
        raise NotVerified(f"{origin[:200]}: {exc.message}") from None
    last = wit.state(origin)
    size = last.size if last is not None else 0
    if last is not None and new.size < last.size:
        path = w.write_evidence(
            wit.evidence_dir,
            w.evidence_doc(
                origin=origin,
                log_key=cfg.vkey,
                old=last.note,
                new=new.note,
                proof=[],
                prefix=None,
                observer=wit.name,
                observed_at=w.now_iso(wit.clock),
                kind="rollback",
            ),
        )
        raise Inconsistent(
            f"{origin[:200]}: size {new.size} is smaller than the size {last.size} this witness cosigned", path
        )
    proof, prefix = prove_from_tiles(log, size, new) if 0 < size < new.size else ([], None)
    return new, wit.add_checkpoint(size, proof, log.note, prefix=prefix)


# --- the log's side: asking witnesses to cosign (publish --witness) ---------------------------------------

#: Bytes of a witness's answer read (a few signature lines).
MAX_ANSWER = 64 * 1024


@dataclass
class Asked:
    """One witness's answer to a publish: the cosignature lines, or why there are none."""

    url: str
    lines: list[str]
    refused: str | None = None


def ask_witnesses(directory: Path, urls: Sequence[str], *, timeout: float | None = DEFAULT_TIMEOUT) -> list[Asked]:
    """Post the checkpoint just published in ``directory`` to each witness (``URL/add-checkpoint``): first
    with old size 0, then, when the witness names the size it last cosigned (409), with the consistency
    proof from that size built from the directory's own tiles. The cosignature lines returned are added to
    the published checkpoint (rewritten atomically); a witness that refuses is named, and the checkpoint
    stays published without its cosignature."""
    from pithledger.mirror.http11 import Client
    from pithledger.tlog.note import Checkpoint, add_signatures, split_note

    log = read_source_log(str(directory), timeout=timeout, deadline=None)
    if log is None:
        raise BadCheckpoint(f"{directory} holds no checkpoint to have witnessed", hint="publish with --key NAME")
    note = log.note
    text, _ = split_note(note)
    parsed = Checkpoint.parse(text)
    cp = w.Signed(note=note.decode(), text=text, origin=parsed.origin, size=parsed.size, root=parsed.root)
    run = Deadline(None)
    answers: list[Asked] = []
    accepted: list[str] = []
    client = Client()
    try:
        for url in urls:
            target = url.rstrip("/") + "/add-checkpoint"
            old, asked = 0, None
            proof: list[bytes] = []
            for _ in range(3):  # old 0; the size the witness names; once more if it moved meanwhile
                try:
                    resp = client.post(
                        target,
                        w.request_body(old, proof, note),
                        timeout=timeout,
                        deadline=run,
                        max_bytes=MAX_ANSWER,
                        content_type="text/plain; charset=utf-8",
                    )
                except SourceError as exc:
                    asked = Asked(url, [], f"cannot reach the witness: {exc.message}")
                    break
                body = resp.body.decode("utf-8", "replace")
                if resp.status == 200:
                    lines = [line + "\n" for line in body.split("\n") if line]
                    refused = _foreign_lines(note, accepted, lines)
                    if refused:
                        asked = Asked(url, [], f"the witness answered 200 with {refused}: not added")
                        break
                    accepted += lines
                    asked = Asked(url, lines)
                    break
                if resp.status == 409 and body.strip().isdigit():
                    size = int(body.strip())
                    if size > cp.size:
                        asked = Asked(
                            url,
                            [],
                            f"the witness cosigned a larger tree of this log (size {size}) than this "
                            f"checkpoint's {cp.size}",
                        )
                        break
                    old = size
                    proof = prove_from_tiles(log, size, cp)[0] if 0 < size < cp.size else []
                    continue
                asked = Asked(url, [], f"HTTP {resp.status}: {body.strip()[:300]}")
                break
            answers.append(asked or Asked(url, [], "the witness kept naming another size"))
    finally:
        client.close()
    if accepted:
        # readable by a web server running as another user, like every file publish writes (spec/serve.md §7)
        w.write_atomic(Path(log.files.base) / log.name, add_signatures(note, accepted), mode=0o666)
    return answers


#: The most cosignature lines one witness's answer may add (C2SP: one per key the witness holds).
MAX_WITNESS_LINES = 4
_COSIGNATURE_BYTES = 8 + 64  # cosignature/v1 after the key ID: timestamp, Ed25519 signature


def _foreign_lines(note: bytes, accepted: Sequence[str], lines: Sequence[str]) -> str:
    """Why a witness's answer cannot be added to the checkpoint ("" if it can). A reader refuses a whole
    note when a signature by a key it trusts fails (spec/transparency.md §2.1), so an answer may add only
    cosignatures (cosignature/v1's length) under names and key IDs the note does not carry yet: a line in
    the log's name, or another witness's, would make the checkpoint unverifiable for its readers."""
    from pithledger.tlog.note import add_signatures, parse_signature_line, split_note

    if not lines:
        return "no signature lines"
    if len(lines) > MAX_WITNESS_LINES:
        return f"{len(lines)} signature lines (at most {MAX_WITNESS_LINES})"
    try:
        taken = {(s.name, s.key_id) for s in split_note(add_signatures(note, accepted))[1]}
        names = {name for name, _ in taken}  # before this answer: one witness may hold several keys
        for line in lines:
            sig = parse_signature_line(line[:-1])
            if len(sig.sig) != _COSIGNATURE_BYTES:
                return f"a line that is not a cosignature/v1 ({sig.name})"
            if sig.name in names or (sig.name, sig.key_id) in taken:
                return f"a line under a name already on the checkpoint ({sig.name})"
            taken.add((sig.name, sig.key_id))
        add_signatures(note, [*accepted, *lines])  # within the note's limits
    except PithledgerError as exc:
        return f"lines that cannot be added ({exc.message})"
    return ""
