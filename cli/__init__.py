"""The ``pithledger`` command line: parse arguments, call the library, render. Nothing else."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_quietly(signum: int, frame: object) -> None:
    """SIGINT while no command runs (its imports, or the exit after it): nothing is open and
    nothing is half-done, so the process ends at once, as a command interrupted does."""
    os.write(2, b"interrupted\n")
    os._exit(130)


def _launched_as_command() -> bool:
    """This package is being imported by the console script (``pithledger``, whose wrapper imports
    it, then calls :func:`main`) or by ``python -m pithledger.cli`` (argv[0] is "-m" while the module
    is looked up): not by a program that uses it in-process, whose signal handlers are its own."""
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or os.path.basename(first).split(".")[0] in ("pithledger", "pithledger-script")


# At once, before this module's other imports (take_interrupts() below does the rest): a Ctrl-C in
# them printed a KeyboardInterrupt traceback (bench/bench_interrupt.py, under load).
if _launched_as_command() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    signal.signal(signal.SIGINT, _interrupted_quietly)

import atexit  # noqa: E402
from typing import Any  # noqa: E402


#: This process is the command line (the console script, ``python -m pithledger.cli``, or main()):
#: its SIGINT handling is ours. Not so for a program that runs the typer app in-process.
_owns_sigint = False


def take_interrupts() -> None:
    """The command line owns Ctrl-C in this process; quiet until a command runs (issue #31).
    A Ctrl-C ignored by whoever started the process (``nohup``, ``cmd &`` in a script) stays ignored."""
    global _owns_sigint
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return
    except ValueError:  # pragma: no cover - off the main thread
        return
    if not _owns_sigint:
        _owns_sigint = True
        # Registered first, so it runs last of the exit handlers (after the pools' joins, which a
        # Ctrl-C still cuts short): from there Python's own teardown, which puts SIGINT back to its
        # default before it is done, would end silently killed by SIGINT instead of with the exit code.
        atexit.register(_set_sigint, signal.SIG_IGN)
    quiet_interrupts()


def quiet_interrupts() -> None:
    """Until a command runs, and again once it has finished, Ctrl-C ends the process quietly (exit
    130, `interrupted`), never with a KeyboardInterrupt traceback out of an import, out of argument
    parsing (typer turns it into a silent exit 130 there) or out of an exit handler (issue #31)."""
    _set_sigint(_interrupted_quietly)


def interruptible() -> None:
    """From here (cli/_base.py _run) a Ctrl-C is a KeyboardInterrupt, which the command in progress
    handles: it stops where it is consistent, names what it did, exits 130."""
    _set_sigint(signal.default_int_handler)


def _set_sigint(handler: Any) -> None:
    if not _owns_sigint:
        return
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # pragma: no cover - off the main thread: not ours to set
        pass


def main() -> None:
    """Console entry point. Exit codes: 0 ok, 1 invalid input or failed verification (a named error
    with a hint), 2 usage error, 130 interrupted, 141 the reader closed the pipe. Never a traceback."""
    take_interrupts()  # first: the imports below take most of a start's 0.1 s
    from ._stdout import guard_stdout, output_failed, report_output_failure

    guard_stdout()
    try:
        from ._fast import try_state

        env = os.environ.get("PITHLEDGER_LEDGER")
        code = None if (env is not None and not env.strip()) else try_state(sys.argv[1:])
        if code is None:
            full()
    except OSError as exc:  # stdout is full or failing (full() names it for the other commands)
        if not output_failed(exc):
            raise
        code = report_output_failure(exc)
    except KeyboardInterrupt:  # between the command's own handling and quiet_interrupts() again
        sys.stderr.write("interrupted\n")
        code = 130
    quiet_interrupts()
    sys.exit(code)


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app is built on first use: `state` answers without it (cli/_fast.py)
        from .app import app

        return app
    raise AttributeError(name)


def full() -> None:
    """The whole command line (typer)."""
    from pithledger.errors import PithledgerError

    from ._base import is_click_error, report_usage_error
    from ._fast import EXIT_PIPE, quiet_closed_pipe
    from ._output import report
    from ._stdout import output_failed, report_output_failure
    from .app import app

    try:
        rv = app(prog_name="pithledger", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        sys.stdout.flush()
    except PithledgerError as exc:
        report(exc)
        code = 1
    except BrokenPipeError:
        quiet_closed_pipe()
        code = EXIT_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except OSError as exc:  # raised outside a command (the final flush, help text)
        if not output_failed(exc):
            raise
        code = report_output_failure(exc)
    except Exception as exc:
        if not is_click_error(exc):
            raise
        code = report_usage_error(exc)
    quiet_interrupts()  # what was to be written is written: a Ctrl-C now only ends the exit
    sys.exit(code)


__all__ = ["app", "main"]


if _launched_as_command():  # as early as the command's own code runs (the wrapper's re.sub comes next)
    take_interrupts()
