"""Rendering and reading for the command line: the only place that prints or reads files."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import msgspec
import typer

from pithledger.records.canonical import MAX_DOCUMENT_BYTES, canonical_bytes, strict_decode
from pithledger.errors import CannotRead, CannotWrite, DocumentTooLarge, PithledgerError, TrailingData


#: What never reaches a terminal as itself (spec/serve.md §5, hostile strings): C0 controls (newline and tab included),
#: DEL, C1 controls, the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), the
#: marks U+200E, U+200F, U+061C and the separators U+2028, U+2029. A newline in an event's string would
#: otherwise forge an output line ("... VERIFIED"), an escape sequence drive the terminal, an override
#: reorder what is read.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` as one line a terminal shows literally: each unsafe character as ``\\xNN`` / ``\\uNNNN``."""
    return _UNSAFE.sub(_escaped, text)


def say(text: str) -> None:
    """One line of human output on stdout, with every unsafe character escaped (:func:`printable`)."""
    typer.echo(printable(text))


def emit_json(value: Any) -> None:
    """Canonical JSON on stdout, one document per line."""
    sys.stdout.buffer.write(canonical_bytes(value) + b"\n")
    sys.stdout.flush()


def fail(message: str, *, code: str = "error", hint: str = "", exit_code: int = 1) -> NoReturn:
    typer.echo(f"error[{code}]: {printable(message)}", err=True)
    if hint:
        typer.echo(f"hint: {printable(hint)}", err=True)
    raise typer.Exit(exit_code)


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
                problem = CannotRead(f"{item} holds no .json or .jsonl files",
                                     hint="name .json files (one bundle each) or .jsonl files (one bundle per line), "
                                          "or a directory that holds some")
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
    if not ends or not data[min(ends) + 1:].strip():
        return False
    try:
        msgspec.json.decode(data[: min(ends)])
    except (msgspec.DecodeError, ValueError):
        return False
    return True


def iter_documents(path: str, *, label: str | None = None, tolerant: bool = False) -> Iterator[tuple[str, Any]]:
    """Yield (where, value) for a file holding one JSON document or JSON lines.

    A single document (pretty-printed or not) is tried first; a file that has data after its first
    document is read as JSON lines, one document per non-blank line, streamed so that a file of any
    size runs in bounded memory. Errors name the file (and line) as ``label`` (default: the path).
    ``tolerant``: a line that cannot be decoded is yielded as its error and the next lines go on; a
    file that cannot be read at all is yielded as one error.
    """
    name = label or path
    try:
        big = path != "-" and Path(path).is_file() and Path(path).stat().st_size > MAX_DOCUMENT_BYTES
        if big:
            yield from _iter_lines(path, name, tolerant)
            return
        data = read_bytes(path, label=name)
        try:
            yield name, _decode(data, name)
            return
        except TrailingData:
            pass
        except PithledgerError:
            if not lines_framed(data):
                raise
    except PithledgerError as exc:
        if not tolerant:
            raise
        yield name, exc
        return
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield from _line(line, f"{name}:{lineno}", tolerant)


def _line(line: bytes, where: str, tolerant: bool) -> Iterator[tuple[str, Any]]:
    try:
        value = _decode(line, where)
    except PithledgerError as exc:
        if not tolerant:
            raise
        yield where, exc
    else:
        yield where, value


def _iter_lines(path: str, name: str, tolerant: bool) -> Iterator[tuple[str, Any]]:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise CannotRead(f"cannot read {name}: {exc.strerror}") from None
    with fh:
        lineno = 0
        while line := fh.readline(MAX_DOCUMENT_BYTES + 1):  # a line never costs more than one document
            lineno += 1
            if len(line) > MAX_DOCUMENT_BYTES:
                raise DocumentTooLarge(f"{name}:{lineno}: a line is larger than {MAX_DOCUMENT_BYTES:,} bytes")
            if line.strip():
                yield from _line(line, f"{name}:{lineno}", tolerant)


def _decode(data: bytes, where: str) -> Any:
    try:
        return strict_decode(data, what=where)
    except TrailingData:
        raise
    except PithledgerError as exc:
        raise located(exc, where) from None


def report(exc: PithledgerError, where: str = "") -> None:
    """``error[code]: where: message`` and ``hint: ...`` on stderr (``where`` once, even when the
    message already names it)."""
    prefix = f"{where}: " if where and where not in exc.message else ""
    typer.echo(f"error[{exc.code}]: {printable(prefix + exc.message)}", err=True)
    if exc.hint:
        typer.echo(f"hint: {printable(exc.hint)}", err=True)


#: A new output file's mode, less the umask the kernel applies: what ``open(path, "w")`` gives (0644 under
#: the usual 022). mkstemp's 0600 made a bundle, export, proof or pith.sty unreadable to a web server or a
#: co-author's account; nothing written here is a secret (keys are written by pithledger.records.keys, 0600).
OUTPUT_MODE = 0o666
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def write_file_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it: readers never see half a file. The file
    gets the mode ``open()`` would give it: a file it replaces keeps its mode, a new one gets 0666 less
    the umask (spec/serve.md §7)."""
    path = Path(path)
    try:
        existing: os.stat_result | None = os.stat(path)
    except OSError:
        existing = None
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, _CREATE, OUTPUT_MODE)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if existing is not None and stat.S_ISREG(existing.st_mode):
                os.fchmod(fh.fileno(), stat.S_IMODE(existing.st_mode))
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
