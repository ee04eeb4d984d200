"""Reading the inputs a user names (the library's, so that a Python caller reads them as ``apply`` does):
files, directories of them, ``-`` (stdin) and pipes (spooled to temporary files so that they can be read
twice), each whole file bounded by the document size limit, and the named errors for what cannot be read.
Moved whole from cli/_output.py (issue #32); cli/_output.py re-exports them.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import msgspec

from pithledger.errors import CannotRead, DocumentTooLarge, PithledgerError
from pithledger.records.canonical import MAX_DOCUMENT_BYTES


def read_bytes(path: str, *, max_bytes: int = MAX_DOCUMENT_BYTES, label: str | None = None) -> bytes:
    """Read a whole file (or stdin for ``-``), refusing anything over ``max_bytes``."""
    name = label or path
    try:
        if path == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise cannot_read(exc, name) from None
    if len(data) > max_bytes:
        raise DocumentTooLarge(f"{name} is larger than {max_bytes:,} bytes")
    return data


def read_headers(path: str) -> bytes:
    """A file of Bitcoin block headers (``--headers FILE``: hex, one per line), read within its bound and
    concatenated; :class:`~pithledger.errors.OtsBadHeader` names the line that is not a header."""
    from pithledger.records import bitcoin

    text = read_bytes(path, max_bytes=bitcoin.MAX_HEADERS_TEXT).decode("ascii", "replace")
    return bitcoin.parse_headers_text(text, path)


def located(exc: PithledgerError, where: str) -> PithledgerError:
    """``exc`` with its message starting with ``where`` (the file, or file:line, it is about)."""
    if not exc.message.startswith(where):
        exc.message = f"{where}: {exc.message}"
    return exc


def cannot_read(exc: OSError, name: str) -> CannotRead:
    """The named error for a file that cannot be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return CannotRead(f"no such file: {name}")
    if isinstance(exc, IsADirectoryError):
        return CannotRead(f"{name} is a directory, not a file", hint="name a file")
    return CannotRead(f"cannot read {name}: {exc.strerror}")


class Input(NamedTuple):
    """A file to read (``path``) and the name a user gave it (``label``): stdin and pipes are spooled."""

    path: str
    label: str


def expand_inputs(items: list[str], on_error: Callable[[PithledgerError], None] | None = None) -> list[Input]:
    """Files named, and the .json/.jsonl files of directories named, in order. A directory without
    any raises (or goes to ``on_error`` and is left out)."""
    files: list[Input] = []
    for item in items:
        path = Path(item)
        if item != "-" and path.is_dir():
            try:
                found = sorted(str(p) for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
            except OSError as exc:
                found, problem = [], CannotRead(f"cannot list {item}: {exc.strerror}")
            else:
                problem = CannotRead(
                    f"{item} holds no .json or .jsonl files",
                    hint="name .json files (one bundle each) or .jsonl files (one bundle per line), "
                    "or a directory that holds some",
                )
            if not found:
                if on_error is None:
                    raise problem
                on_error(problem)
            files += [Input(f, f) for f in found]
        else:
            files.append(Input(item, "stdin" if item == "-" else item))
    return files


def spool_streams(files: list[Input], stack: ExitStack) -> list[Input]:
    """Copy stdin, pipes (``<(cmd)``, /dev/stdin) and other non-regular files to temporary files, so
    that they can be read twice; a regular file is read where it is."""
    out: list[Input] = []
    for item in files:
        if item.path != "-":
            try:
                regular = stat.S_ISREG(os.stat(item.path).st_mode)
            except OSError:
                regular = True  # let the reader name the problem
            if regular:
                out.append(item)
                continue
        spool = stack.enter_context(tempfile.NamedTemporaryFile(prefix="pithledger-spool-", suffix=".jsonl"))
        try:
            if item.path == "-":
                shutil.copyfileobj(sys.stdin.buffer, spool)
            else:
                with open(item.path, "rb") as src:
                    shutil.copyfileobj(src, spool)
        except OSError as exc:
            raise CannotRead(f"cannot read {item.label}: {exc.strerror}") from None
        spool.flush()
        out.append(Input(spool.name, item.label))
    return out


def lines_framed(data: bytes) -> bool:
    """Whether a file whose decoding as one document failed (with a fault other than trailing data) is
    JSON lines all the same: its first line alone is a complete JSON text and non-blank content follows
    it. The fault is then that line's, and the later lines are read (spec/bundle.md §2). A pretty-printed
    document's first line is never a complete text, so its fault still refuses the whole file."""
    ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    if not ends or not data[min(ends) + 1 :].strip():
        return False
    try:
        msgspec.json.decode(data[: min(ends)])
    except (msgspec.DecodeError, ValueError):
        return False
    return True
