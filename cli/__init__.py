"""The ``pithledger`` command line: parse arguments, call the library, render. Nothing else."""

from __future__ import annotations

import sys

from pithledger.errors import PithledgerError

from ._output import report
from .app import app


def main() -> None:
    """Console entry point: named errors exit 1 with a hint, usage errors exit 2, never a traceback.

    Typer's standalone mode already turns usage errors into exit 2 and ``typer.Exit`` into its code;
    what reaches here is a named pithledger error (exit 1) or an interruption.
    """
    try:
        app()
    except PithledgerError as exc:
        report(exc)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


__all__ = ["app", "main"]
