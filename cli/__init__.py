"""The ``pithledger`` command line: parse arguments, call the library, render. Nothing else."""

from __future__ import annotations

import os  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

# First, before the other imports: its Ctrl-C handler is set as it loads (cli/_signals.py).
from pithledger.cli._signals import _launched_as_command, quiet_interrupts, take_interrupts  # noqa: I001


def main() -> None:
    """Console entry point. Exit codes: 0 ok, 1 invalid input or failed verification (a named error
    with a hint), 2 usage error, 130 interrupted, 141 the reader closed the pipe. Never a traceback."""
    take_interrupts()  # first: the imports below take most of a start's 0.1 s
    from pithledger.cli._stdout import guard_stdout, output_failed, report_output_failure

    guard_stdout()
    try:
        from pithledger.cli._fast import try_state

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
        from pithledger.cli.app import app

        return app
    raise AttributeError(name)


def full() -> None:
    """The whole command line (typer)."""
    from pithledger.cli._malloc import one_malloc_arena
    from pithledger.errors import PithledgerError

    one_malloc_arena()  # before the process pool's threads start (cli/_malloc.py)

    from pithledger.cli._base import is_click_error, report_usage_error
    from pithledger.cli._fast import EXIT_PIPE, quiet_closed_pipe
    from pithledger.cli._output import report
    from pithledger.cli._stdout import output_failed, report_output_failure
    from pithledger.cli.app import app

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
