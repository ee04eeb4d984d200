"""Rendering and reading for the command line: the only place that prints or reads files."""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import typer

from pithledger.errors import CannotRead, CannotWrite, DocumentTooLarge, PithledgerError, TrailingData
from pithledger.files import replace_atomically
from pithledger.ingest.inputs import Input as Input  # the reading of inputs is the library's (ledger/ingest/inputs.py)
from pithledger.ingest.inputs import cannot_read as cannot_read
from pithledger.ingest.inputs import expand_inputs as expand_inputs
from pithledger.ingest.inputs import lines_framed as lines_framed
from pithledger.ingest.inputs import located as located
from pithledger.ingest.inputs import read_bytes as read_bytes
from pithledger.ingest.inputs import spool_streams as spool_streams
from pithledger.records.canonical import MAX_DOCUMENT_BYTES, canonical_bytes, strict_decode

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


def write_file_atomically(path: Path, data: bytes) -> None:
    """:func:`write_chunks_atomically` of one chunk."""
    write_chunks_atomically(path, [data])


def write_chunks_atomically(path: Path, chunks: Iterable[bytes]) -> None:
    """Write ``-o PATH`` as a shell's ``>`` would, without ever leaving half a file:

    - a regular file (or nothing yet): written to a temporary file beside it and renamed over it, so
      readers never see half a file; it gets the mode ``open()`` would give it: a file it replaces keeps
      its mode, a new one gets 0666 less the umask (spec/serve.md §7);
    - a character or block device, or a FIFO: opened and written through, as ``>`` does (a rename
      would replace ``/dev/null`` with a regular file, and a FIFO's reader would get nothing);
    - a symlink is followed, as ``>`` follows it: its target is what is written (the link stays);
    - a directory or a socket: ``error[cannot-write]`` naming what is there.
    """
    path = Path(path)
    target = Path(os.path.realpath(path))  # a symlink's target, as `>` writes it (a dangling link: created there)
    try:
        existing: os.stat_result | None = os.stat(target)
    except OSError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_through(path, target, existing, chunks)
        return
    try:  # a file it replaces keeps its mode, a new one gets OUTPUT_MODE less the umask
        chmod = stat.S_IMODE(existing.st_mode) if existing is not None else None
        replace_atomically(target, chunks, mode=OUTPUT_MODE, chmod=chmod)
    except CannotWrite as exc:  # named as the user wrote it, not as its resolved path
        exc.message = exc.message.replace(str(target), str(path), 1)
        raise
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None


def _write_through(path: Path, target: Path, existing: os.stat_result, chunks: Iterable[bytes]) -> None:
    """``-o`` naming a device or a FIFO: open it and write (no rename, no fsync: neither has a meaning there)."""
    from pithledger.files import kind

    mode = existing.st_mode
    if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)):
        hint = "name a file in it, e.g. -o DIR/out.json" if stat.S_ISDIR(mode) else "name a file, a device or a FIFO"
        raise CannotWrite(f"cannot write {path}: it is {kind(mode)}, not a file", hint=hint)
    try:
        # No O_CREAT (it exists), no O_TRUNC (meaningless on a device or FIFO); a FIFO's open waits for its reader.
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
