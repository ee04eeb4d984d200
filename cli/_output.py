"""Rendering and reading for the command line: the only place that prints or reads files."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import typer

from pithledger.canonical import MAX_DOCUMENT_BYTES, canonical_bytes, strict_decode
from pithledger.errors import CannotRead, CannotWrite, DocumentTooLarge, PithledgerError, TrailingData


def emit_json(value: Any) -> None:
    """Canonical JSON on stdout, one document per line."""
    sys.stdout.buffer.write(canonical_bytes(value) + b"\n")
    sys.stdout.flush()


def fail(message: str, *, code: str = "error", hint: str = "", exit_code: int = 1) -> NoReturn:
    typer.echo(f"error[{code}]: {message}", err=True)
    if hint:
        typer.echo(f"hint: {hint}", err=True)
    raise typer.Exit(exit_code)


def read_bytes(path: str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """Read a whole file (or stdin for ``-``), refusing anything over ``max_bytes``."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise CannotRead(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CannotRead(f"{path} is a directory, not a file", hint="name a file") from None
    except OSError as exc:
        raise CannotRead(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise DocumentTooLarge(f"{path} is larger than {max_bytes:,} bytes")
    return data


def iter_documents(path: str) -> Iterator[tuple[str, Any]]:
    """Yield (where, value) for a file holding one JSON document or JSON lines.

    A single document (pretty-printed or not) is tried first; a file that has data after its first
    document is read as JSON lines, one document per non-blank line, streamed so that a file of any
    size runs in bounded memory. Errors name the file (and line).
    """
    if path != "-" and Path(path).is_file() and Path(path).stat().st_size > MAX_DOCUMENT_BYTES:
        yield from _iter_lines(path)
        return
    data = read_bytes(path)
    try:
        yield path, _decode(data, path)
        return
    except TrailingData:
        pass
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield f"{path}:{lineno}", _decode(line, f"{path}:{lineno}")


def _iter_lines(path: str) -> Iterator[tuple[str, Any]]:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise CannotRead(f"cannot read {path}: {exc.strerror}") from None
    with fh:
        lineno = 0
        while line := fh.readline(MAX_DOCUMENT_BYTES + 1):  # a line never costs more than one document
            lineno += 1
            if len(line) > MAX_DOCUMENT_BYTES:
                raise DocumentTooLarge(f"{path}:{lineno}: a line is larger than {MAX_DOCUMENT_BYTES:,} bytes")
            if line.strip():
                yield f"{path}:{lineno}", _decode(line, f"{path}:{lineno}")


def _decode(data: bytes, where: str) -> Any:
    try:
        return strict_decode(data, what=where)
    except TrailingData:
        raise
    except PithledgerError as exc:
        if not exc.message.startswith(where):
            exc.message = f"{where}: {exc.message}"
        raise


def report(exc: PithledgerError, where: str = "") -> None:
    prefix = f"{where}: " if where else ""
    typer.echo(f"error[{exc.code}]: {prefix}{exc.message}", err=True)
    if exc.hint:
        typer.echo(f"hint: {exc.hint}", err=True)


def write_file_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it: readers never see half a file."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None
