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
from pathlib import Path

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
    fd, tmp = open_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
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
