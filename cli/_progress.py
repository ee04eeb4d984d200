"""Progress on stderr while ``apply`` runs: only on a terminal, never with --quiet.

One line that fits the terminal (80 columns included): the phase, a short bar, then what was done,
most telling first (counts, rate, time left, then the rest), cut with an ellipsis where the line
would wrap. Checking counts bytes, so a single big input moves too.

rich (which typer ships with) is imported only when a bar is actually drawn.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from pithledger.cli._output import Input

#: Cells of the bar; the rest of the line is words.
BAR_WIDTH = 16
_PHASE_WIDTH = 8  # "checking", "applying", "deriving"


def wanted(quiet: bool) -> bool:
    try:
        return not quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):  # pragma: no cover - stderr closed or replaced
        return False


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"  # pragma: no cover - unreachable


def _eta(done: float, total: float, elapsed: float) -> str:
    if done <= 0 or total <= done or elapsed <= 0:
        return ""
    return f"eta {_duration((total - done) * elapsed / done)}"


def _join(*parts: str) -> str:
    return "  ".join(p for p in parts if p)


def fit(detail: str, room: int) -> str:
    """``detail`` within ``room`` cells: whole fields from the left (they come most telling first),
    else the first field cut with an ellipsis."""
    if len(detail) <= room:
        return detail
    fields = detail.split("  ")
    while len(fields) > 1:
        fields.pop()
        if len(line := "  ".join(fields)) <= room:
            return line
    return detail[: max(room - 1, 0)] + "…" if room > 0 else ""


def checking_detail(done_bytes: int, total_bytes: int, files_done: int, files: int, elapsed: float) -> str:
    """What the checking line says after the bar (a pure function)."""
    return _join(
        f"{_size(done_bytes)}/{_size(total_bytes)}",
        _eta(done_bytes, total_bytes, elapsed),
        f"file {min(files_done + 1, files)}/{files}" if files > 1 else "",
    )


def applying_detail(events: int, total: int, records: int, batches: int, total_batches: int, elapsed: float) -> str:
    rate = f"{events / elapsed:,.0f} events/s" if elapsed > 0 and events else ""
    return _join(
        f"{events:,}/{total:,} events",
        rate,
        _eta(events, total, elapsed),
        f"{records:,} record{'' if records == 1 else 's'}",
        f"batch {batches}/{total_batches}",
    )


def deriving_detail(done: int, total: int, elapsed: float) -> str:
    return _join(f"{done:,}/{total:,} states", _eta(done, total, elapsed))


class ApplyProgress:
    """Three phases: checking the inputs (bytes read), applying (events, rate, time left, records,
    batches), deriving (states)."""

    def __init__(self, enabled: bool, console: Any = None) -> None:
        self.enabled = enabled
        self._console = console  # tests render to a console of a given width
        self._progress: Any = None
        self._task: Any = None
        self._started = 0.0
        self._drawn = 0.0
        self._sizes: list[int] = []
        self._files_done = 0
        self._bytes = 0
        self._total = 0
        self._events_total = 0
        self._states_total = 0
        self._room = 80

    def __enter__(self) -> ApplyProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn
            from rich.table import Column

            console = self._console or Console(stderr=True)
            self._progress = Progress(
                TextColumn("{task.description}", table_column=Column(no_wrap=True, width=_PHASE_WIDTH)),
                BarColumn(bar_width=BAR_WIDTH),
                TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
                console=console,
                transient=True,
            )
            # the phase, the bar, two gaps between columns and one spare cell (a full line wraps on some terminals)
            self._room = console.width - _PHASE_WIDTH - BAR_WIDTH - 3
            self._progress.start()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _phase(self, name: str, total: int | None) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(name, total=total, detail="")
        self._started = time.monotonic()

    def _show(self, completed: int, detail: str, *, force: bool = False) -> None:
        self._progress.update(self._task, completed=completed, detail=fit(detail, self._room))
        now = time.monotonic()
        if force or now - self._drawn >= 0.1:  # draw from here too: a busy machine can starve the refresh thread
            self._progress.refresh()
            self._drawn = now

    def checking(self, files: int | Sequence[Input]) -> None:
        """The checking phase of ``files`` (the inputs, or only how many there are)."""
        if self._progress is None:
            return
        if isinstance(files, int):
            self._sizes = [0] * files
        else:
            self._sizes = []
            for item in files:
                try:
                    self._sizes.append(os.stat(item.path).st_size)
                except OSError:
                    self._sizes.append(0)
        self._total, self._bytes, self._files_done = sum(self._sizes), 0, 0
        self._phase("checking", max(self._total, 1))
        self._show(0, self._checking_detail(), force=True)

    def _checking_detail(self) -> str:
        if not self._total:
            return f"file {min(self._files_done + 1, len(self._sizes))}/{len(self._sizes)}"
        return checking_detail(
            self._bytes, self._total, self._files_done, len(self._sizes), time.monotonic() - self._started
        )

    def checked(self, nbytes: int) -> None:
        """A document of ``nbytes`` was checked (its line's newline counted too)."""
        if self._progress is not None and self._task is not None:
            self._bytes = min(self._bytes + nbytes + 1, self._total)
            self._show(self._bytes, self._checking_detail())

    def checked_file(self) -> None:
        """One more input is wholly checked (what is done is then known exactly)."""
        if self._progress is not None and self._task is not None:
            self._files_done += 1
            self._bytes = sum(self._sizes[: self._files_done])
            self._show(self._bytes, self._checking_detail())

    def applying(self, events: int) -> None:
        if self._progress is not None:
            self._phase("applying", events)
            self._events_total = events

    def applied(self, events: int, records: int, batches: int, total_batches: int) -> None:
        if self._progress is not None and self._task is not None:
            detail = applying_detail(
                events, self._events_total, records, batches, total_batches, time.monotonic() - self._started
            )
            # the first batch is drawn at once (the rate and time left appear however fast the batches come),
            # the last so the line ends on what was done
            self._show(events, detail, force=batches in (1, total_batches))

    def deriving(self, records: int) -> None:
        """Third phase: the states of the records the run touched (and of those they cite) are derived once."""
        if self._progress is not None:
            self._phase("deriving", records or None)
            self._states_total = records

    def derived(self, records: int) -> None:
        if self._progress is not None and self._task is not None:
            self._show(
                records, deriving_detail(records, self._states_total, time.monotonic() - self._started), force=True
            )


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
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("pulling"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("records"),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
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
        detail = (
            f"{counts['records_fetched']:,} fetched  {counts['unchanged']:,} unchanged  {counts['new']:,} new events  "
            f"{counts['done'] / elapsed:,.0f} records/s"
        )
        self._progress.update(self._task, completed=counts["done"], detail=detail)
        now = time.monotonic()
        if now - self._drawn >= 0.1 or counts["done"] == counts["total"]:
            self._progress.refresh()
            self._drawn = now
