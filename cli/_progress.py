"""Progress on stderr while ``apply`` runs: only on a terminal, never with --quiet.

rich (which typer ships with) is imported only when a bar is actually drawn.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


def wanted(quiet: bool) -> bool:
    try:
        return not quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):  # pragma: no cover - stderr closed or replaced
        return False


class ApplyProgress:
    """Two phases: checking the inputs (files read), then applying (events, records, rate, ETA)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        self._started = 0.0
        self._drawn = 0.0

    def __enter__(self) -> ApplyProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def checking(self, files: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("checking", total=files, unit="files", detail="")

    def checked_file(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)

    def applying(self, events: int) -> None:
        if self._progress is not None:
            if self._task is not None:
                self._progress.remove_task(self._task)
            self._task = self._progress.add_task("applying", total=events, unit="events", detail="")
            self._started = time.monotonic()

    def applied(self, events: int, records: int, batches: int, total_batches: int) -> None:
        if self._progress is not None and self._task is not None:
            elapsed = max(time.monotonic() - self._started, 1e-6)
            detail = (f"{records:,} record{'' if records == 1 else 's'}  batch {batches}/{total_batches}  "
                      f"{events / elapsed:,.0f} events/s")
            self._progress.update(self._task, completed=events, detail=detail)
            now = time.monotonic()
            if now - self._drawn >= 0.1 or batches == total_batches:  # draw from here too: a busy machine can starve the refresh thread
                self._progress.refresh()
                self._drawn = now

    def deriving(self, records: int) -> None:
        """Third phase: the states of the records the run touched (and of those they cite) are derived once."""
        if self._progress is not None:
            if self._task is not None:
                self._progress.remove_task(self._task)
            self._task = self._progress.add_task("deriving", total=records or None, unit="states", detail="")

    def derived(self, records: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=records)
            self._progress.refresh()


class PullProgress:
    """``pull``: records done of the IDs given, with what arrived, the rate and an ETA."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        self._started = 0.0
        self._drawn = 0.0

    def __enter__(self) -> PullProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn("pulling"), BarColumn(), MofNCompleteColumn(), TextColumn("records"),
                                      TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), TextColumn("eta"),
                                      TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self._progress.start()
            self._started = time.monotonic()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def update(self, counts: dict[str, Any]) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task("pulling", total=counts["total"] or None, detail="")
        elapsed = max(time.monotonic() - self._started, 1e-6)
        detail = (f"{counts['records_fetched']:,} fetched  {counts['unchanged']:,} unchanged  {counts['new']:,} new events  "
                  f"{counts['done'] / elapsed:,.0f} records/s")
        self._progress.update(self._task, completed=counts["done"], detail=detail)
        now = time.monotonic()
        if now - self._drawn >= 0.1 or counts["done"] == counts["total"]:
            self._progress.refresh()
            self._drawn = now
