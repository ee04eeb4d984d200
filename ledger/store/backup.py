"""Backing up a ledger while other processes write to it: a consistent, compacted, verified copy of its
directory, renamed into place only once verified (spec/storage.md §9).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

from pithledger.errors import BackupExists, BackupFailed, CannotWrite, TlogNotBuilt
from pithledger.files import disk_full, room_for_lmdb
from pithledger.layout import CHECKPOINTS_DIR
from pithledger.store.ledger import Ledger
from pithledger.store.tuning import StoreTuning

#: A remembered checkpoint's file name (ledger/mirror/checkpoints.py: memory_path); its lock is ``<hash>.lock``.
_MEMORY_NAME = re.compile(r"[0-9a-f]{64}\.json")
_EVIDENCE = "evidence"  # checkpoints/evidence/: the fork evidence a sync or audit wrote (write-once files)


class _Facts(NamedTuple):
    """What a ledger holds at one snapshot, which its copy must hold too."""

    events: int
    pending: int
    tlog_size: int | None  # None: an older layout, no transparency log yet
    tlog_root: bytes | None
    digest_root: tuple[bytes, bytes]


def _facts(ledger: Ledger) -> _Facts:
    """Read inside ``ledger.snapshot()`` (the caller opened the tlog's databases before it began)."""
    counts = ledger.counts()
    try:
        size: int | None = ledger.tlog_size()
        root: bytes | None = ledger.tlog_root()
    except TlogNotBuilt:
        size = root = None
    pair = ledger.root()
    return _Facts(counts["events"], counts["pending"], size, root, (pair.events, pair.states))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """Every file and directory under ``root``, then ``root``: durable before the rename publishes it."""
    for dirpath, _, files in os.walk(root, topdown=False):
        for name in files:
            _fsync(Path(dirpath, name))
        _fsync(Path(dirpath))


def _copy_sidecars(source: Path, tmp: Path) -> list[str]:
    """Each LMDB environment in a subdirectory of the ledger (display metadata, pull's cache: the sidecars
    rebuild carries, spec/storage.md §8), as a compacted snapshot of its own."""
    copied = []
    for side in sorted(source.iterdir()):
        if not (side.is_dir() and not side.is_symlink() and (side / "data.mdb").is_file()):
            continue
        (tmp / side.name).mkdir()
        room_for_lmdb(side, f"cannot open the sidecar {side}", readonly=True)
        env = lmdb.open(str(side), readonly=True, subdir=True, max_dbs=32)
        try:
            env.copy(str(tmp / side.name), compact=True)
        finally:
            env.close()
        copied.append(side.name)
    return copied


def _copy_file(src: Path, dst: Path) -> bytes:
    """Copy a small regular file (never a symlink or anything else); returns its sha256."""
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return b""
        data = fh.read()
    dst.write_bytes(data)
    return hashlib.sha256(data).digest()


def _copy_memory(source: Path, tmp: Path) -> dict[str, bytes]:
    """The checkpoints this ledger remembers and the fork evidence beside them. Read without the origins'
    locks: a sync or pull holds its origin's lock for its whole run (up to its --deadline), and a backup must
    not wait on it; a memory file is only ever replaced by a rename (witness.write_atomic), so a read sees
    the old file or the new one, never half of one."""
    memory = source / CHECKPOINTS_DIR
    if not memory.is_dir() or memory.is_symlink():
        return {}
    copied: dict[str, bytes] = {}
    (tmp / CHECKPOINTS_DIR).mkdir()
    for path in sorted(memory.iterdir()):
        if _MEMORY_NAME.fullmatch(path.name) and path.is_file() and not path.is_symlink():
            copied[f"{CHECKPOINTS_DIR}/{path.name}"] = _copy_file(path, tmp / CHECKPOINTS_DIR / path.name)
    evidence = memory / _EVIDENCE
    if evidence.is_dir() and not evidence.is_symlink():
        (tmp / CHECKPOINTS_DIR / _EVIDENCE).mkdir()
        for path in sorted(evidence.iterdir()):
            if (
                not path.name.startswith(".") and path.is_file() and not path.is_symlink()
            ):  # a dot file: a write under way
                rel = f"{CHECKPOINTS_DIR}/{_EVIDENCE}/{path.name}"
                copied[rel] = _copy_file(path, tmp / rel)
    return copied


def _verify(tmp: Path, facts: _Facts, memory: dict[str, bytes], tuning: StoreTuning | None) -> list[str]:
    """What is wrong with the copy: it must open under this layout, pass fsck (its pending derivation
    aside, which the copy holds as the source did), and hold the source's snapshot: the same number of
    log entries, transparency log (size and root) and digest root; the memory files their bytes."""
    with Ledger(tmp, readonly=True, tuning=tuning) as copy:
        problems = copy.fsck()
        copy._tlog._open_tlog()
        copy._lookup._pending_dbs()
        with copy.snapshot():
            got = _facts(copy)
    if facts.pending:  # fsck names it; the next writer of the restored ledger finishes it
        problems = [
            p
            for p in problems
            if p != f"{facts.pending:,} records have derivation pending; finish() (the next apply or sync) derives them"
        ]
    for name, mine, theirs in zip(_Facts._fields, got, facts):
        if mine != theirs:
            problems.append(f"the copy's {name.replace('_', ' ')} differs from the ledger's at the snapshot")
    for rel, digest in memory.items():
        if digest and hashlib.sha256((tmp / rel).read_bytes()).digest() != digest:
            problems.append(f"the copy of {rel} differs from what was read")
    return problems


def backup(source: Path, dest: Path, *, tuning: StoreTuning | None = None) -> dict[str, Any]:
    """Copy the ledger at ``source`` to ``dest`` (which must not exist), consistent while other processes
    write: its LMDB environment as one snapshot (compacted), its sidecars, its remembered checkpoints;
    verified (:func:`_verify`), made durable, then renamed into place. On any failure (a full disk) no
    ``dest`` exists and the temporary directory beside it is removed. Never takes the writer lock."""
    source, dest = Path(source), Path(dest)
    if os.path.lexists(dest):
        raise BackupExists(f"{dest} exists")
    parent = dest.parent if str(dest.parent) else Path(".")
    home, there = Path(os.path.realpath(source)), Path(os.path.realpath(parent))
    if there == home or home in there.parents:  # its temporary directory would be copied as a sidecar of itself
        raise BackupFailed(
            f"{dest} is inside the ledger {source}",
            hint="give a destination outside the ledger's directory: nothing was written",
        )
    with Ledger(source, readonly=True, tuning=tuning) as ledger:
        cleared = _clear_stale(parent)
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.backup-{os.getpid()}-", dir=parent))
        except OSError as exc:
            raise disk_full(exc, parent, f"the backup of {source} to {dest} failed") or CannotWrite(
                f"cannot create a directory in {parent}: {exc.strerror}"
            ) from None
        held = _hold(tmp)  # until it is renamed or removed: a later backup never clears it as stale
        try:  # after the lock: a directory marked as ours is one whose lock was taken first
            os.close(os.open(tmp / _MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644))
        except OSError as exc:
            os.close(held)
            shutil.rmtree(tmp, ignore_errors=True)
            raise disk_full(exc, parent, f"the backup of {source} to {dest} failed") or CannotWrite(
                f"cannot write in {tmp}: {exc.strerror}"
            ) from None
        with contextlib.suppress(OSError):  # the ledger directory's mode, not mkdtemp's 0700
            os.chmod(tmp, stat.S_IMODE(os.stat(source).st_mode))
        try:
            try:
                ledger._tlog._open_tlog()  # both before the snapshot's transaction begins (LMDB)
                ledger._lookup._pending_dbs()
                with ledger.snapshot():
                    facts = _facts(ledger)
                    ledger.env.copy(str(tmp), compact=True, txn=ledger._core._pinned.txn)
                sidecars = _copy_sidecars(source, tmp)
                memory = _copy_memory(source, tmp)
                _fsync_tree(tmp)
                problems = _verify(tmp, facts, memory, tuning)
            except (lmdb.Error, OSError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                need = _size_of(source / "data.mdb")  # about what the compacted copy takes, at most
                raise disk_full(exc, parent, f"the backup of {source} to {dest} failed", need=need) or BackupFailed(
                    f"the backup of {source} to {dest} failed: {reason}"
                ) from None
            if problems:
                raise BackupFailed(
                    f"the copy of {source} did not verify: " + "; ".join(problems[:5]),
                    hint="nothing was left at the destination; run `pithledger fsck` on the ledger, "
                    "and check the destination's disk",
                )
            with contextlib.suppress(FileNotFoundError):
                (tmp / "lock.mdb").unlink()  # made by the verifying reader: a restored ledger makes its own
            (tmp / _MARK).unlink()
            if os.path.lexists(dest):  # (a rename could only replace an empty directory: never a ledger)
                raise BackupExists(f"{dest} was created while the backup ran")
            try:
                os.rename(tmp, dest)
            except OSError as exc:
                raise BackupFailed(f"the backup of {source} could not be renamed to {dest}: {exc.strerror}") from None
            with contextlib.suppress(OSError):  # the rename durable too (some file systems refuse a directory fsync)
                _fsync(parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            os.close(held)
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    return {
        "backup": str(dest),
        "events": facts.events,
        "pending": facts.pending,
        "tlog_size": facts.tlog_size,
        "sidecars": sidecars,
        "checkpoint_files": len(memory),
        "bytes": size,
        "verified": True,
        "cleared": cleared,
    }


#: A backup's temporary directory: ``.<DEST name>.backup-<pid>-<random>`` (spec/storage.md §9), holding
#: the file _MARK from its first moment (after its lock is taken) until just before its rename: only a
#: directory with that name and that file is ever cleared (a user's ``.photos.backup-2023-jan`` has the name).
_STAGING = re.compile(r"\..+\.backup-([0-9]+)-[A-Za-z0-9_]+")
_MARK = ".pithledger-backup-staging"


def _hold(tmp: Path) -> int:
    """Lock the temporary directory (flock on it, held by the open descriptor returned) for as long as
    the backup runs: the lock, not the pid in its name, is what says it is in use (a pid is reused, and a
    backup in another pid namespace has a pid this one cannot see)."""
    fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    with contextlib.suppress(OSError):  # no flock here: only the pid tells
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def _clear_stale(parent: Path) -> list[str]:
    """Remove what killed backups left in ``parent`` (their temporary directories, which no one else
    removes): each whose process is gone and whose lock no one holds; the names removed. A directory of a
    running backup (its process alive, or its lock held) is left, and so is anything not named as ours or
    not holding the mark a backup leaves in its own (a user's directory of the same form of name)."""
    cleared: list[str] = []
    try:
        names = [entry.name for entry in os.scandir(parent) if entry.name.startswith(".") and ".backup-" in entry.name]
    except OSError:
        return cleared
    for name in sorted(names):
        found = _STAGING.fullmatch(name)
        path = parent / name
        if found is None or not path.is_dir() or path.is_symlink() or _alive(int(found.group(1))):
            continue
        try:  # made by a backup, not only named like one (not through a symlink)
            if not stat.S_ISREG(os.lstat(path / _MARK).st_mode):
                continue
        except OSError:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a backup is writing it
            os.close(fd)
            continue
        try:
            shutil.rmtree(path)
            cleared.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return cleared


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
