"""``sync --every`` and ``pull --every``: the follow loop of the command line (spec/pull.md §7).

The loop itself is the library's (:func:`pithledger.mirror.follow.follow`); here are what the command
line adds: SIGTERM ends it cleanly (the run in progress commits its batch, exit 0), Ctrl-C as in any
command (exit 130), and one summary line per run (``--json``: one JSON line)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, NoReturn

import typer

from pithledger.cli._base import EXIT_INTERRUPTED
from pithledger.cli._output import emit_json, say
from pithledger.cli._signals import stop_on_sigterm, terminated

#: What one run gives back: its report, rendered by ``show`` (which returns the summary line).
Once = Callable[[], dict[str, Any]]


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_following(
    every: float,
    once: Once,
    show: Callable[[dict[str, Any]], str],
    as_json: bool,
    failed: Callable[[dict[str, Any]], bool],
) -> NoReturn:
    """Run ``once`` every ``every`` seconds until SIGTERM (exit 0) or Ctrl-C (exit 130)."""
    from pithledger.mirror.follow import Run, follow

    stop = threading.Event()
    busy = [False]

    def run() -> dict[str, Any]:
        busy[0] = True
        try:
            return once()
        finally:
            busy[0] = False

    def on_run(r: Run[dict[str, Any]]) -> None:
        doc: dict[str, Any] = {
            "number": r.number,
            "started_at": _when(r.started_at),
            "seconds": round(r.seconds, 3),
            "ok": r.error is None and r.result is not None and not failed(r.result),
            "failures_in_a_row": r.failures,
            "next_in": round(r.next_in, 3),
        }
        summary = show(r.result) if r.result is not None else ""  # in text: the run's per-record lines first
        if as_json:
            emit_json((r.result or {}) | {"run": doc} | ({"error": r.error.document()} if r.error is not None else {}))
            return
        head = f"run {r.number} at {doc['started_at']}"
        if r.error is not None:
            say(
                f"{head}: failed: error[{r.error.code}]: {r.error.message}; retry in {r.next_in:.1f} s "
                f"({r.failures} failed run{'s' if r.failures != 1 else ''} in a row)"
            )
        else:
            say(f"{head}: {summary}; next run in {r.next_in:.1f} s")

    restore = stop_on_sigterm(stop, lambda: busy[0])
    try:
        runs = follow(run, every, stop, on_run)
    except KeyboardInterrupt:  # Ctrl-C between runs (one during a run exits in the run's own handler)
        if terminated():
            raise typer.Exit(0) from None
        typer.echo("interrupted between runs; the ledger is consistent", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        restore()
    typer.echo(f"stopped after {runs} run{'s' if runs != 1 else ''} (SIGTERM); the ledger is consistent", err=True)
    raise typer.Exit(0)
