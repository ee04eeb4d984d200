"""stdout that names its failures: a full disk or /dev/full behind ``>`` is ``error[cannot-write-output]``
(exit 1), never an ``OSError`` traceback, on every command and on the typer-free ``state`` path.

Standard library only (the ``state`` path imports this before anything else).
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any


class OutputFailed(OSError):
    """A write to stdout failed (other than a closed pipe, which is EXIT_PIPE's)."""


class _Raw(io.FileIO):
    """fd 1, whose write failures are :class:`OutputFailed`: only they, so an OSError of anything
    else is never mistaken for one."""

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputFailed(exc.errno, exc.strerror) from None


def guard_stdout() -> None:
    """Put stdout on :class:`_Raw`, keeping its encoding and buffering (a real process only: the
    entry point calls it; in-process callers keep their own stdout)."""
    old = sys.stdout
    try:
        fd = old.fileno()
        raw = _Raw(fd, "wb", closefd=False)
    except (OSError, ValueError, AttributeError):  # no fd 1, or a replaced stdout: left as it is
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw), encoding=old.encoding, errors=old.errors, line_buffering=bool(old.line_buffering)
    )


def output_failed(exc: BaseException) -> bool:
    return isinstance(exc, OutputFailed)


def report_output_failure(exc: OSError) -> int:
    """Name the failure on stderr, make the exit-time flush quiet, and return the exit code (1)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered goes nowhere, quietly
    except (OSError, ValueError):  # pragma: no cover - stdout already gone
        pass
    from pithledger.errors import CannotWriteOutput

    error = CannotWriteOutput(f"cannot write the output to stdout: {exc.strerror or exc}")
    try:
        sys.stderr.write(error.describe() + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr is gone too: the exit code says it
        pass
    return 1


def error_line(doc: dict[str, str]) -> str:
    """An error as ``--json`` prints it on stdout, one line (the same bytes on both paths)."""
    return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
