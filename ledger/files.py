"""Shared file helpers (DESIGN.md: the root layer's IO helpers): what is at a path, refusing anything but a
regular file; bounded reads that never block on a FIFO; write-then-rename writes that replace only a
regular file. Used by publish and the published log (ledger/mirror/publish.py, logsite.py) and by the
hostile transport's directory reads (ledger/mirror/transport.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

import lmdb

from pithledger.errors import DiskFull, LedgerDamaged, LedgerError, ReadOnlyLedger

#: Opening a file to read: never following a symlink, never blocking on a FIFO.
READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


#: Modes of what publish creates, less the umask, which the kernel applies (spec/serve.md §7): readable
#: by a web server running as another user (mkstemp's 0600 made every file 404 under nginx, Apache or
#: http.server, and sync from it fail).
FILE_MODE = 0o666
DIR_MODE = 0o777
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_temp(path: Path, mode: int = FILE_MODE) -> tuple[int, Path]:
    """A new file beside ``path`` to write and then rename over it: created exclusively (never a file or
    link already there), ``mode`` less the umask; its descriptor and name. ``error[cannot-write]`` if the
    directory refuses it."""
    from pithledger.errors import CannotWrite

    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, _CREATE, mode), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None


def replace_atomically(
    path: Path, chunks: Iterable[bytes], *, mode: int = FILE_MODE, chmod: int | None = None, durable: bool = False
) -> None:
    """The one write-then-rename: ``chunks`` into a new file beside ``path`` (:func:`open_temp`, ``mode`` less
    the umask, or exactly ``chmod``), fsynced and renamed over it, so a reader or a crash sees the old file or
    the new one, never a mixture; the temporary file is removed whatever fails, the chunks' producer too.
    ``durable``: the directory is fsynced as well, so the rename itself survives a crash (where the spec
    promises the file is kept: the witness's checkpoint memory). ``error[cannot-write]`` where the directory
    refuses the temporary file; any other OSError is raised for the caller to name."""
    fd, tmp = open_temp(path, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            if chmod is not None:
                os.fchmod(fh.fileno(), chmod)
            for chunk in chunks:  # streamed: memory holds one chunk at a time
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        dfd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def existing(path: Path) -> os.stat_result | None:
    """What is at ``path`` (not following a symlink), refusing anything publish may not replace: only a
    regular file (or nothing) is ever replaced, and nothing is opened before it is known to be one."""
    from pithledger.errors import CannotWrite

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise CannotWrite(
            f"{path}: a part of this path is a file, where publish needs a directory",
            hint="remove it, or publish into a new directory",
        ) from None
    except OSError as exc:
        raise CannotWrite(f"cannot use {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CannotWrite(
            f"{path} is {kind(st.st_mode)}, where publish writes a regular file",
            hint="publish never opens or replaces anything but its own regular files: remove it, "
            "or publish into a new directory",
        )
    return st


def read_regular(path: Path, size: int) -> bytes | None:
    """The bytes of the regular file at ``path`` when it holds exactly ``size`` bytes, else None; opened
    with O_NOFOLLOW | O_NONBLOCK and checked with fstat, so a FIFO swapped in never blocks the run."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def make_parent(path: Path) -> None:
    from pithledger.errors import CannotWrite

    try:
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise CannotWrite(
            f"{path.parent}: a part of this path is a file, where publish needs a directory",
            hint="remove it, or publish into a new directory",
        ) from None
    except OSError as exc:
        raise CannotWrite(f"cannot create {path.parent}: {exc.strerror}") from None


def write_if_changed(root: Path, rel: str, data: bytes) -> bool:
    """Write-then-rename, mode 0666 less the umask; skip when the file already holds these bytes. True
    when written. What is there must be a regular file or nothing (:func:`existing`): a directory, FIFO,
    device, socket or symlink is a named error, never opened, never replaced."""
    from pithledger.errors import CannotWrite

    path = root / rel
    st = existing(path)
    if st is not None and read_regular(path, len(data)) == data:
        return False
    make_parent(path)
    try:
        replace_atomically(path, (data,))
    except OSError as exc:  # (CannotWrite, the directory refusing the temporary file, is no OSError: it passes)
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
    return True


def write_linked(root: Path, rels: list[str], data: bytes) -> None:
    """The same bytes at every path of ``rels``: written once at the first, hard links at the others (one
    copy on disk, spec/serve.md §7); a copy where the file system refuses links."""
    from pithledger.errors import CannotWrite

    first = root / rels[0]
    write_if_changed(root, rels[0], data)
    for rel in rels[1:]:
        path = root / rel
        st = existing(path)
        if st is not None and os.path.samestat(st, os.stat(first)):
            continue
        make_parent(path)
        tmp = path.parent / f".{path.name}.{os.getpid()}.link"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            os.link(first, tmp)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
            write_if_changed(root, rel, data)


# --- room on the disk for an LMDB environment (spec/storage.md §7.3) ---------------------------------

#: LMDB's lock file for py-lmdb's default 126 readers: 125 reader slots of 64 bytes and the 192-byte header.
LMDB_LOCK_BYTES = 8192
#: What a new environment writes before its first commit: its two meta pages.
LMDB_NEW_BYTES = 2 * 4096
#: LMDB reports a write that a full disk cut short as EIO ("short write"): an EIO with less than this
#: free on the disk is taken for a full disk (a real device error leaves the free space as it was).
_LOW_SPACE = 4 * 1024 * 1024


def free_bytes(path: Path) -> int | None:
    """Bytes this process may still write on the disk holding ``path`` (or its nearest existing parent);
    None where that cannot be asked. Root writes into the blocks reserved for it too."""
    for place in (path, *path.parents):
        try:
            st = os.statvfs(place)
        except OSError:
            continue
        return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
    return None


def size_text(n: int) -> str:
    """A byte count as a person reads it (KiB and up)."""
    if n < 1024 * 1024:
        return f"{(n + 1023) // 1024} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def says_errno(exc: BaseException, code: int) -> bool:
    if isinstance(exc, OSError):
        return exc.errno == code
    return os.strerror(code) in str(exc)  # py-lmdb keeps only the message (its class only for some codes)


def disk_full(exc: BaseException, path: Path, what: str, *, need: int | None = None) -> DiskFull | None:
    """The named error for what a full disk made fail (``exc``: an OSError or an lmdb.Error), else None.
    ``what``: the environment and step, as a user reads it; ``need``: the free space the step needs, where known."""
    free = free_bytes(path)
    full = says_errno(exc, errno.ENOSPC) or says_errno(exc, errno.EDQUOT)
    if not full and not (says_errno(exc, errno.EIO) and free is not None and free < _LOW_SPACE):
        return None
    has = "an unknown amount" if free is None else size_text(free)
    needs = f", it needs about {size_text(need)}" if need else ""
    return DiskFull(f"{what}: the disk holding {path} is full ({has} free{needs})")


def room_for_lmdb(path: Path, what: str, *, lock: bool = True, readonly: bool = False) -> None:
    """Make sure the LMDB environment in directory ``path`` opens without LMDB writing, through a shared
    map, to a page of a file the disk has no room for: LMDB ftruncates its lock file (a sparse file) and
    writes its reader table through a map, so on a full disk (a full tmpfs above all) that first write was
    a SIGBUS that killed the process. A new lock file is allocated here whole first (posix_fallocate), which
    turns that into ``error[disk-full]``; a new environment's data file needs room for its two meta pages
    (LMDB writes those, and every commit, with write(): a full disk is an error there, not a signal).
    Nothing is done where the directory refuses writes (LMDB opens a read-only environment there without a lock)."""
    need = LMDB_NEW_BYTES if not readonly and not (path / "data.mdb").exists() else 0
    if lock:
        lock_file = path / "lock.mdb"
        if os.path.lexists(lock_file):
            need += _count_lock_page(lock_file)
        else:
            _new_lock_file(path, lock_file, what, need)
    if need:
        free = free_bytes(path)
        if free is not None and free < need:
            has = size_text(free)
            raise DiskFull(f"{what}: the disk holding {path} is full ({has} free, it needs {size_text(need)})")


def _count_lock_page(lock_file: Path) -> int:
    """What an existing lock file needs (another opener's, perhaps in use: never written here): one with no
    page allocated (a SIGBUS left it so) needs one, which its opener writes. A hole further in is a reader
    slot past the 61st."""
    with contextlib.suppress(OSError):
        if os.stat(lock_file).st_blocks == 0:
            return 4096
    return 0


def _new_lock_file(path: Path, lock_file: Path, what: str, need: int) -> None:
    """A new lock file, allocated whole under a name of its own and only then linked into place: a lock.mdb
    another opener can see is always whole, and one it may have opened is never unlinked (when it was created
    in place, an opener that came between its creation and a failed allocation kept a lock file the next opener
    no longer saw: two lock tables, two writers at once). Where another opener's link came first, theirs is used."""
    tmp = path / f".lock.mdb.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:  # a read-only directory, say: LMDB opens it so, or names why it cannot
        if full := disk_full(exc, path, what, need=LMDB_LOCK_BYTES + need):
            raise full from None
        return
    try:
        try:
            os.posix_fallocate(fd, 0, LMDB_LOCK_BYTES)
        except OSError as exc:  # no room; else (no fallocate here) LMDB makes it as it always did
            if full := disk_full(exc, path, what, need=LMDB_LOCK_BYTES + need):
                raise full from None
        try:
            os.link(tmp, lock_file)
        except FileExistsError:  # another opener's came first: it is the one
            pass
        except OSError:  # no hard links here (EPERM, ENOTSUP): LMDB makes it as it always did
            pass
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


#: read-only-ledger's hint where a reading command was refused: LMDB's readers write their slot in lock.mdb
#: (only a read-only file system spares them that), so "reading commands work as they are" is not so here.
READER_REFUSED_HINT = (
    "a reading command writes its reader slot in the ledger's lock.mdb (LMDB): run it as the ledger's owner, or "
    "give this user write access to lock.mdb (and to the directory where there is none); a read-only mount needs neither"
)


def write_failed(
    exc: Exception, path: Path, what: str, *, hint: str | None = None, readonly: bool = False
) -> LedgerError:
    """The error for an LMDB environment at ``path`` that could not be opened or written: ``disk-full`` where
    its disk is full, ``read-only-ledger`` where the directory or disk refuses writes (``readonly``: the open
    of a reading command, refused its lock file), else ``what`` as a ledger-error (with ``hint``)."""
    if full := disk_full(exc, path, what):
        return full
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, (lmdb.InvalidError, lmdb.CorruptedError)):  # its meta pages, say
        return LedgerDamaged(f"{what}: its file is damaged ({reason})")
    if any(says_errno(exc, code) for code in (errno.EROFS, errno.EACCES, errno.EPERM)):
        return ReadOnlyLedger(f"{what}: {reason}", hint=READER_REFUSED_HINT if readonly else None)
    return LedgerError(f"{what}: {reason}", hint=hint)
