"""``pithledger [--ledger L] [--json] [-q] state ID``, answered without building the typer app.

`state` is the read people and scripts run most; typer (with pydantic) costs ~4x the rest of the
start. This path accepts exactly that shape and gives byte-identical output, errors and exit codes
(tests/e2e/cli/test_fast_state.py compares it with the full parser); any other argument list returns None and
goes to the full command line. Imports nothing beyond the standard library and the ledger.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Options that belong to the whole program and may be written before or after the command.
GLOBAL_VALUE_OPTIONS = frozenset({"--ledger"})
GLOBAL_FLAGS = frozenset({"--json", "--quiet", "-q"})


def _parse(argv: list[str]) -> tuple[Path | None, str] | None:
    ledger: Path | None = None
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ledger" and i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        elif arg.startswith("--ledger="):
            value, i = arg.split("=", 1)[1], i + 1
        elif arg in GLOBAL_FLAGS:
            i += 1
            continue
        elif arg.startswith("-"):
            return None  # --help, --view, --version, "--", anything else: the full parser decides
        else:
            words.append(arg)
            i += 1
            continue
        if not value.strip():
            return None  # the full parser names the usage error
        ledger = Path(value)
    if len(words) != 2 or words[0] != "state":
        return None
    return ledger, words[1]


def try_state(argv: list[str]) -> int | None:
    """The exit code of a ``state`` run, or None when ``argv`` is not one this path answers."""
    parsed = _parse(argv)
    if parsed is None:
        return None
    option, ident = parsed
    from pithledger.errors import PithledgerError
    from pithledger.store.env import default_ledger_path
    from pithledger.store.lookup import StatePending, StateReader

    ledger_path = option if option is not None else default_ledger_path()
    try:
        from pithledger.cli._signals import interruptible

        interruptible()  # as a command's _run does (cli/_base.py)
        try:  # a handle that reads stored states alone: no import of the merge algorithm or the writer's code
            with StateReader(ledger_path) as reader:
                data = reader.state_bytes(reader.resolve(ident))
        except StatePending:  # derivation pending (an apply is running, or was killed): from the events held
            from pithledger.store import Ledger

            with Ledger(ledger_path, readonly=True) as ledger:
                data = ledger.state_bytes(ledger.resolve(ident))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except PithledgerError as exc:
        sys.stderr.write(exc.describe() + "\n")
        if "--json" in argv:  # as every command with --json: the error on stdout too (cli/_base.py)
            from pithledger.cli._stdout import error_line

            sys.stdout.write(error_line(exc.document()))
            sys.stdout.flush()
        return 1
    try:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_closed_pipe()
        return EXIT_PIPE
    return 0


#: Exit code after a closed pipe (``| head``): 128 + SIGPIPE, what a shell reports for a tool killed by
#: SIGPIPE (so `set -o pipefail` still tells a cut-short listing from a complete one).
EXIT_PIPE = 141


def quiet_closed_pipe() -> None:
    """The reader went away: nothing more can be said on stdout, and Python's flush at exit must not
    complain either. (Here, not in _base, so the typer-free path can use it.)"""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout already gone
        pass
