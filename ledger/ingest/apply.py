"""``apply``'s pipeline in the library (issue #32: the CLI only parses and renders): name and spool the
inputs, pass 1 (every structural fault before anything is written, and the batches planned), pass 2 (one
durable transaction per batch, each region compared with what pass 1 read), then the derivation of the
touched records (ledger/ingest/bundles.py, spec/storage.md §3). Moved from cli/app.py's ``apply``.

Progress goes to an :class:`ApplyProgress` the caller passes (the command line draws a bar with it);
skipped inputs go to ``on_skip`` as they are found; the counts come back as an :class:`ApplyReport`.
An interruption (Ctrl-C) or an input that changed between the passes leaves the ledger consistent:
what was committed came from checked bytes, and is derived; the report says how far the run came.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pithledger.errors import InputChanged, PithledgerError
from pithledger.ingest.bundles import Plan, check_bundles, committed_display, reread_bundles
from pithledger.ingest.inputs import Input, expand_inputs, spool_streams

if TYPE_CHECKING:
    from pithledger.records.display import DisplayMetadata
    from pithledger.store import Batch, Ledger, Prepared, Rejection

#: A batch also closes at this many bytes of bundles, so memory is bounded by configuration, not input.
BATCH_BYTES = 64 * 1024 * 1024
#: Events per durable transaction unless the caller says otherwise (``apply --batch-size``).
BATCH_SIZE = 10_000


class ApplyProgress(Protocol):
    """What a run reports as it goes, phase by phase (cli/_progress.py's ApplyProgress draws it)."""

    def checking(self, files: Sequence[Input]) -> None: ...
    def checked_file(self) -> None: ...
    def checked(self, nbytes: int) -> None: ...
    def applying(self, events: int) -> None: ...
    def applied(self, events: int, records: int, batches: int, total_batches: int) -> None: ...
    def deriving(self, records: int) -> None: ...
    def derived(self, records: int) -> None: ...


class NoProgress:
    """An :class:`ApplyProgress` that shows nothing (the default)."""

    def checking(self, files: Sequence[Input]) -> None:
        pass

    def checked_file(self) -> None:
        pass

    def checked(self, nbytes: int) -> None:
        pass

    def applying(self, events: int) -> None:
        pass

    def applied(self, events: int, records: int, batches: int, total_batches: int) -> None:
        pass

    def deriving(self, records: int) -> None:
        pass

    def derived(self, records: int) -> None:
        pass


@dataclass
class ApplyReport:
    """What a run of ``apply`` did: the counts ``pithledger apply --json`` prints, and more.

    ``bundles``/``events``: the sound bundles pass 1 found and their events; ``new``, ``duplicate``,
    ``invalid``, ``unverified``: the events' fates as committed; ``batches``: the transactions committed;
    ``batches_total``: those planned; ``touched``: the records whose state the run touched; ``rejected``:
    each invalid or unverified offer (kept as evidence); ``skipped``: (where, error) of each input, line
    or bundle skipped under ``keep_going``. After an interruption, ``interrupted`` is true and
    ``committed_batches``/``committed_events`` say how far it came (a batch whose commit landed as the
    interruption did is counted there, found in the log, though not in ``batches``)."""

    bundles: int = 0
    events: int = 0
    new: int = 0
    duplicate: int = 0
    invalid: int = 0
    unverified: int = 0
    batches: int = 0
    batches_total: int = 0
    committed_batches: int = 0
    committed_events: int = 0
    touched: set[str] = field(default_factory=set)
    rejected: list[Rejection] = field(default_factory=list)
    skipped: list[tuple[str, PithledgerError]] = field(default_factory=list)
    interrupted: bool = False

    @property
    def records_touched(self) -> int:
        return len(self.touched)

    @property
    def ok(self) -> bool:
        """Whether ``pithledger apply`` exits 0 on this report: no invalid event, nothing skipped."""
        return not (self.invalid or self.skipped)

    def summary(self) -> dict[str, int]:
        """The counts of ``pithledger apply --json`` (without the rejections and skipped inputs)."""
        return {
            "bundles": self.bundles,
            "events": self.events,
            "new": self.new,
            "duplicate": self.duplicate,
            "invalid": self.invalid,
            "unverified": self.unverified,
            "batches": self.batches,
        }


class Apply:
    """One run of ``apply``, stage by stage (the command line prints between them):
    :meth:`inputs` (name and spool), :meth:`check` (pass 1: nothing written), :meth:`apply` (pass 2 into an
    open, writable ledger, and finish). :func:`apply_inputs` runs them all."""

    def __init__(
        self,
        *,
        batch_size: int = BATCH_SIZE,
        keep_going: bool = False,
        on_skip: Callable[[PithledgerError, str], None] | None = None,
    ) -> None:
        """``keep_going``: skip (and report through ``on_skip(error, where)``, and in the report) an input
        that cannot be read or decoded and a bundle with a structural fault, instead of raising it."""
        self.batch_size = batch_size
        self.keep_going = keep_going
        self.report = ApplyReport()
        self._on_skip = on_skip
        self._plan = Plan()
        self._files: list[Input] = []

    def _skip(self, exc: PithledgerError, where: str = "") -> None:
        if self._on_skip is not None:
            self._on_skip(exc, where)
        self.report.skipped.append((where or exc.message.split(": ", 1)[0], exc))

    def inputs(self, items: Sequence[str | Path], stack: ExitStack) -> list[Input]:
        """The files named, and the .json/.jsonl files of directories named, in order; ``-`` (stdin) and
        pipes copied to temporary files that ``stack`` removes, so that both passes read the same bytes."""
        self._files = spool_streams(
            expand_inputs([str(i) for i in items], on_error=self._skip if self.keep_going else None), stack
        )
        return self._files

    def check(self, files: list[Input] | None = None, progress: ApplyProgress | None = None) -> None:
        """Pass 1: every structural fault before anything is written (the first raised, unless
        ``keep_going``); plans the batches (ledger/ingest/bundles.py)."""
        if files is not None:
            self._files = files
        files, progress, summary = self._files, progress or NoProgress(), self.report
        batch_size = self.batch_size
        total = bundles = total_batches = size = nbytes = 0
        progress.checking(files)
        for where, item in check_bundles(files, self._plan, progress.checked_file):
            if isinstance(item, PithledgerError):
                if not self.keep_going:
                    raise item
                self._skip(item, where)
                continue
            progress.checked(item.size)
            total += item.events
            bundles += 1
            size += max(1, item.events)  # a bundle without events still fills a batch
            nbytes += item.size
            if size >= batch_size or nbytes >= BATCH_BYTES:
                total_batches, size, nbytes = total_batches + 1, 0, 0
        total_batches += size > 0
        summary.bundles, summary.events, summary.batches_total = bundles, total, total_batches

    def apply(self, ledger: Ledger, progress: ApplyProgress | None = None) -> ApplyReport:
        """Pass 2 into ``ledger`` (open for writing): group commit, one transaction per batch; each
        bundle's signatures are checked on the ledger's workers as soon as it is added, while the next
        ones are read and decoded. Then the touched records are derived, once each.

        Raises :class:`~pithledger.errors.InputChanged` (its message saying what was committed, all from
        checked bytes, and derived) if an input changed since :meth:`check`; on KeyboardInterrupt the
        batch in flight is abandoned, the report marked ``interrupted``, and the interruption re-raised."""
        files, plan, report, batch_size = self._files, self._plan, self.report, self.batch_size
        progress = progress or NoProgress()
        run = _Pass2(ledger, report, progress)
        progress.applying(report.events)
        try:
            for _, sound in reread_bundles(files, plan, run.precheck):
                if sound is None:
                    continue  # reported in pass 1 (keep_going)
                if run.batch is None:
                    run.batch = ledger.batch()
                run.batch.add(sound)
                if sound.display is not None:
                    run.documents.append(sound)
                if run.batch.fill >= batch_size or run.batch.bytes >= BATCH_BYTES:
                    run.flush()
            run.flush()
            progress.deriving(ledger.pending())
            ledger.finish(progress.derived)  # once per record however many batches touched it
        except InputChanged as changed:
            run.changed(changed)
            raise
        except KeyboardInterrupt:
            run.interrupted()
            raise
        report.committed_batches = report.batches
        return report


class _Pass2:
    """:meth:`Apply.apply`'s state: the batch being filled, the record documents in it (their paper blocks are
    kept once it commits), and what the committed batches held; each commit counted into the report."""

    def __init__(self, ledger: Ledger, report: ApplyReport, progress: ApplyProgress) -> None:
        self.ledger, self.report, self.progress = ledger, report, progress
        self.logged_before = ledger.counts()["events"]
        self.batch: Batch | None = None
        self.documents: list[Prepared] = []
        self.seen_events = 0  # of the committed batches: events,
        self.seen_new = 0  # and those that were neither held nor duplicates

    def precheck(self) -> bool:
        """Whether the reading workers verify the next region's events too (spec/storage.md §3.2):
        into an empty ledger, and later while most events were new (verifying what the ledger holds
        already would be wasted: a region's events are looked up only once it is read)."""
        batch = self.batch
        events = self.seen_events + (batch.events if batch else 0)
        new = self.seen_new + (batch.candidates if batch else 0)
        return 2 * new >= events if events else self.logged_before == 0

    def flush(self) -> None:
        batch, report = self.batch, self.report
        if batch is None:
            return
        self.seen_events += batch.events
        self.seen_new += batch.candidates
        result = batch.commit(defer=True)  # one durable transaction; states derived once, below
        if self.documents:
            keep_display(self.ledger.path, committed_display(self.documents, result.rejected))
            self.documents = []
        report.new += result.new
        report.duplicate += result.duplicate
        report.invalid += result.invalid
        report.unverified += result.unverified
        report.batches += 1
        report.committed_events += batch.events
        self.batch = None
        report.touched.update(result.touched)
        report.rejected.extend(result.rejected)
        self.progress.applied(report.committed_events, len(report.touched), report.batches, report.batches_total)

    def changed(self, changed: InputChanged) -> None:
        """An input changed since pass 1: the batch in flight is abandoned, the message says what was committed
        (and derived)."""
        report = self.report
        if self.batch is not None:
            self.batch.abandon()
        changed.message += (
            f"; {report.batches} of {_plural(report.batches_total, 'batch', 'batches')} committed "
            f"({_plural(report.committed_events, 'event')}), all from the bytes checked before"
        )
        if report.batches:  # what was committed is derived as usual
            self.ledger.finish()

    def interrupted(self) -> None:
        report = self.report
        report.interrupted = True
        report.committed_batches = report.batches
        # Ctrl-C can land after a batch's commit but before commit() returned: the log tells.
        if self.batch is not None:
            self.batch.abandon()
            if self.ledger.counts()["events"] - self.logged_before > report.new:
                report.committed_batches += 1
                report.committed_events += self.batch.events


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def keep_display(path: Path, items: list[tuple[dict[str, Any], DisplayMetadata]]) -> None:
    """Keep the paper blocks of committed record documents beside the ledger (outside consensus)."""
    if not items:
        return
    from pithledger.store.sidecars import MetadataStore

    store = MetadataStore(path, readonly=False)
    try:
        store.keep_documents(items)
    finally:
        store.close()


def apply_inputs(
    ledger: Ledger | str | Path,
    inputs: Sequence[str | Path],
    *,
    batch_size: int = BATCH_SIZE,
    keep_going: bool = False,
    progress: ApplyProgress | None = None,
    on_skip: Callable[[PithledgerError, str], None] | None = None,
) -> ApplyReport:
    """Check and apply bundle inputs as ``pithledger apply`` does: files, directories of them, ``-``.

    ``ledger``: an open, writable :class:`~pithledger.store.Ledger`, or the path of one (created if absent,
    only once pass 1 found nothing wrong). Raises the first structural fault (a
    :class:`~pithledger.errors.PithledgerError`) before anything is written, unless ``keep_going``."""
    from pithledger.store import Ledger

    run = Apply(batch_size=batch_size, keep_going=keep_going, on_skip=on_skip)
    with ExitStack() as stack:
        run.check(run.inputs(inputs, stack), progress)
        if isinstance(ledger, Ledger):
            return run.apply(ledger, progress)
        with Ledger(Path(ledger), create=True) as opened:
            return run.apply(opened, progress)
