"""The ``pithledger`` command line: parse arguments, call the library, render. Nothing else."""

from __future__ import annotations

import sys

from pithledger.errors import PithledgerError

from ._base import EXIT_PIPE, is_click_error, quiet_closed_pipe, report_usage_error
from ._output import report
from .app import app


def main() -> None:
    """Console entry point. Exit codes: 0 ok, 1 invalid input or failed verification (a named error
    with a hint), 2 usage error, 130 interrupted, 141 the reader closed the pipe. Never a traceback."""
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
    except Exception as exc:
        if not is_click_error(exc):
            raise
        code = report_usage_error(exc)
    sys.exit(code)


__all__ = ["app", "main"]
