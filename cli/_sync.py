"""Commands that fill the ledger from other mirrors: sync, pull (and their --every follow loop).
Moved whole from cli/_mirrors.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

from pithledger.cli._base import EXIT_INTERRUPTED, Command, UsageProblem, settings
from pithledger.cli._options import (
    Commands,
    JsonOption,
    LogKeyOption,
    SchedulerOption,
    TimeoutOption,
    WitnessKeyOption,
    WorkersOption,
    _deadline_option,
    _fanout,
    _json,
    _note,
    _open,
    _plural,
    _rejection_doc,
    rejection_line,
)
from pithledger.cli._output import emit_json, say

if TYPE_CHECKING:
    from pithledger.mirror.checkpoints import Check
    from pithledger.store import Ledger


command = Commands()


def _interrupted(ledger: Ledger, before: dict[str, int], source: str) -> NoReturn:
    """Ctrl-C during a run that commits batch by batch (sync, pull): what was committed, and exit 130;
    SIGTERM ending a follow loop's run (``--every``): the same, and exit 0 (a clean stop, issue #33)."""
    from pithledger.cli._signals import terminated

    after = ledger.counts()
    done = (
        f"{_plural(after['events'] - before['events'], 'new event')} "
        f"({_plural(after['records'] - before['records'], 'new record')}) committed from {source}; the ledger is consistent"
    )
    if terminated():
        typer.echo(f"stopped (SIGTERM): {done}", err=True)
        raise typer.Exit(0) from None
    typer.echo(f"interrupted: {done} — run the same command again to finish", err=True)
    raise typer.Exit(EXIT_INTERRUPTED) from None


EveryOption = Annotated[
    Optional[float],
    typer.Option(
        "--every",
        metavar="SECONDS",
        min=0.1,
        help="Follow mode: run again every SECONDS (start to start) until SIGTERM (exit 0) or Ctrl-C (exit 130); "
        "a failing source is retried with jittered exponential backoff; one summary line per run (--json: one JSON line).",
    ),
]


@command(cls=Command)
def sync(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="SOURCE", help="A published mirror: a directory or an http(s) base URL.")
    ],
    as_json: JsonOption = False,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 3600.0,
    log_key: LogKeyOption = None,
    witness_keys: WitnessKeyOption = None,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    every: EveryOption = None,
) -> None:
    """Fetch from a published mirror what this ledger lacks, walking only where digests differ.

    Every record either arrives or is named: skipped (unreadable, too large, about another record) or
    lying (its bundle lacks events the source's digests advertise). Exit 1 if any, or if any event was invalid.
    A source that publishes a signed checkpoint is first checked against the one this ledger last saw of
    its log: a fork is named (exit 1, evidence written) and nothing is synced.
    """
    from pithledger.mirror.checkpoints import check_vkeys

    check_vkeys(log_key, witness_keys or [])  # a mistyped key is named before anything is opened or fetched
    json_out = _json(ctx, as_json)

    def once() -> dict[str, Any]:
        return _sync_once(ctx, source, timeout, deadline, log_key, witness_keys, workers, scheduler)

    if every is not None:
        from pithledger.cli._follow import run_following

        run_following(every, once, lambda c: _sync_report(c, json_out, summary_only=True), json_out, _sync_failed)
    counts = once()
    _sync_report(counts, json_out)
    if _sync_failed(counts):
        raise typer.Exit(1)


def _sync_once(
    ctx: typer.Context,
    source: str,
    timeout: float,
    deadline: float,
    log_key: Optional[str],
    witness_keys: Optional[list[str]],
    workers: Optional[int],
    scheduler: Optional[str],
) -> dict[str, Any]:
    """One sync run: the ledger is opened for it and closed after it (a follow loop holds nothing between runs)."""
    from pithledger.cli._witness import log_check
    from pithledger.mirror.publish import sync as sync_mirror
    from pithledger.mirror.transport import Deadline

    run = Deadline(deadline or None)  # one budget for the whole run: a wait for another run of the origin spends it too
    with _fanout(workers, scheduler), _open(ctx, write=True) as ledger:
        check = log_check(ctx, ledger.path, source, log_key, witness_keys, timeout, run, "pithledger sync")
        try:
            before = ledger.counts()
            try:
                counts = sync_mirror(ledger, source, timeout=timeout, deadline=run)
            except KeyboardInterrupt:
                _interrupted(ledger, before, source)
        finally:
            check.release()
    return counts | {"source": source, "checkpoint": check.document(), "_line": check.line()}


def _report_opening(counts: dict[str, Any], json_out: bool, summary_only: bool) -> bool:
    """What a sync's and a pull's reports open with: with --json the whole report as one document (none when
    the follow loop prints its own line) and nothing more (False); else the run's checkpoint line and each
    rejected event, and the caller goes on with its own lines (True)."""
    line = counts.pop("_line")
    if json_out:
        counts["rejected"] = [_rejection_doc(r) for r in counts["rejected"]]
        if not summary_only:
            emit_json(counts)
        return False
    say(line)
    for r in counts["rejected"]:
        say(rejection_line(r))
    return True


def _sync_failed(counts: dict[str, Any]) -> bool:
    return bool(counts["invalid"] or counts["skipped"] or counts["lying"])


def _sync_report(counts: dict[str, Any], json_out: bool, *, summary_only: bool = False) -> str:
    """Print a sync run's report (``summary_only``: all but its summary line, which is returned for the
    follow loop's run line)."""
    source = counts["source"]
    if not _report_opening(counts, json_out, summary_only):
        return ""
    for skip in counts["skipped"]:
        say(f"skipped    {skip['pith_number']} [{skip['reason']}] {skip['message']}")
    for lie in counts["lying"]:
        say(
            f"lying      {lie['pith_number']}: the source advertises {_plural(len(lie['missing_event_ids']), 'event')} "
            f"its bundle does not carry as valid events: {', '.join(lie['missing_event_ids'])}"
        )
    summary = (
        f"synced from {source}: {_plural(counts['records_fetched'], 'record')} fetched, {counts['new']:,} new events, "
        f"{counts['duplicate']:,} duplicate, {counts['invalid']:,} invalid, {counts['unverified']:,} unverified, "
        f"{len(counts['skipped']):,} skipped, {len(counts['lying']):,} lying "
        f"({_plural(counts['batches'], 'batch', 'batches')}, {_plural(counts['digests_read'], 'digest')} read)"
    )
    if not summary_only:
        typer.echo(summary)
    return summary


def _pull_targets(values: list[str], ids_file: Optional[str], timeout: float = 30.0) -> Any:
    """The IDs named on the command line, then those of ``--ids`` (a file, stdin, or an http(s) URL read
    through the hostile transport; a line at a time, bounded): a malformed one stops the run before
    anything is fetched."""
    import io

    from pithledger.cli._output import cannot_read
    from pithledger.mirror.pull import MAX_ID_LINE, fetch_id_list, target_of_line, targets_of_args

    targets = targets_of_args(values)
    if ids_file is None:
        return targets
    name = "stdin" if ids_file == "-" else ids_file
    try:
        if ids_file.startswith(("http://", "https://")):
            fh: Any = io.BytesIO(fetch_id_list(ids_file, timeout=timeout))
        else:
            fh = sys.stdin.buffer if ids_file == "-" else open(ids_file, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise cannot_read(exc, name) from None
    try:
        n = 0
        while line := fh.readline(MAX_ID_LINE + 1):
            n += 1
            if (target := target_of_line(line, f"{name}:{n}")) is not None:
                targets.append(target)
    except OSError as exc:
        raise cannot_read(exc, name) from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    return targets


@command(cls=Command)
def pull(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A pith-mirrors.json (URL or file), or a mirror's base URL (SOURCE/pith-mirrors.json is read).",
        ),
    ],
    ids_given: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[ID]...",
            help="Records to pull, in any ID form (Pith Number, suffix, arXiv id, DOI).",
            show_default=False,
        ),
    ] = None,
    ids_file: Annotated[
        Optional[str],
        typer.Option(
            "--ids",
            "--ids-from",
            metavar="FILE|URL",
            help="More IDs, one a line, from a file ('-' for stdin) or an http(s) URL (at most 64 MiB; blank lines and # comments skipped); a line holding a JSON object is an arXiv metadata snapshot entry, minted offline into its Pith Number.",
        ),
    ] = None,
    connections: Annotated[
        int,
        typer.Option(
            "--connections",
            metavar="N",
            min=1,
            max=64,
            help="Keep-alive HTTP connections (one per worker) fetching at once.",
        ),
    ] = 4,
    rate: Annotated[
        float,
        typer.Option(
            "--rate", metavar="R", min=0, help="At most R requests per second over all connections; 0 for no limit."
        ),
    ] = 50.0,
    as_json: JsonOption = False,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 3600.0,
    log_key: LogKeyOption = None,
    witness_keys: WitnessKeyOption = None,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    every: EveryOption = None,
    digests: Annotated[
        bool,
        typer.Option(
            "--digests/--no-digests",
            help="When the source is also a published pithledger tree, skip the held records whose leaf there equals ours (spec/pull.md §4.1); --no-digests: a conditional GET for each.",
        ),
    ] = True,
) -> None:
    """Fill the ledger from any Pith-shaped mirror, by the patterns of its pith-mirrors.json.

    Each record's bundle is fetched by bundle_pattern, then well_known_pattern, then from the manifest's
    other mirrors; IDs that are not Pith Numbers and that this ledger does not resolve are resolved by the
    mirror's resolver, or a published tree's resolve index (any static host), and the bundle must then be the
    record the ID names. With no IDs, every record the
    ledger holds is refreshed. Re-runs fetch only what changed: records whose leaf in a pithledger source's digests
    differs from ours, else by ETag / body hash. Every record not pulled
    is named: not published, unresolved, skipped or lying. Exit 1 if any was unresolved, skipped or lying, an ID named
    on the command line was not published, or any event was invalid.
    """
    from pithledger.mirror.checkpoints import check_vkeys

    check_vkeys(log_key, witness_keys or [])  # a mistyped key is named before anything is opened or fetched
    if every is not None and ids_file == "-":
        raise UsageProblem(
            "--every re-reads the IDs of --ids at every run; stdin can be read only once",
            hint="give the IDs in a file or at a URL (--ids-from FILE|URL)",
        )
    given = bool(ids_given) or ids_file is not None  # an --ids file of comments only pulls nothing, not everything
    named = frozenset(ids_given or [])
    json_out = _json(ctx, as_json)

    def once() -> dict[str, Any]:
        targets = _pull_targets(list(ids_given or []), ids_file, timeout)  # read at each run: a listing grows
        return _pull_once(
            ctx,
            source,
            targets if given else None,
            connections,
            rate,
            timeout,
            deadline,
            log_key,
            witness_keys,
            workers,
            scheduler,
            progress=every is None,
            digests=digests,
        )

    if every is not None:
        from pithledger.cli._follow import run_following

        run_following(
            every,
            once,
            lambda c: _pull_report(ctx, c, json_out, summary_only=True),
            json_out,
            lambda c: _pull_failed(c, named),
        )
    counts = once()
    _pull_report(ctx, counts, json_out)
    if _pull_failed(counts, named):
        raise typer.Exit(1)


def _pull_once(
    ctx: typer.Context,
    source: str,
    targets: Any,
    connections: int,
    rate: float,
    timeout: float,
    deadline: float,
    log_key: Optional[str],
    witness_keys: Optional[list[str]],
    workers: Optional[int],
    scheduler: Optional[str],
    *,
    progress: bool,
    digests: bool = True,
) -> dict[str, Any]:
    """One pull run (targets None: refresh every record held); the ledger is opened for it and closed after it."""
    from pithledger.cli._progress import PullProgress, wanted
    from pithledger.cli._witness import log_check
    from pithledger.mirror.pull import pull as pull_records

    with _fanout(workers, scheduler), _open(ctx, write=True) as ledger:
        if targets is None and ledger.counts()["records"] == 0:
            raise UsageProblem(
                "no IDs to pull, and this ledger holds no records to refresh",
                hint="name IDs (pithledger pull SOURCE 2605.00424 ...) or give --ids FILE",
            )
        checks: list[Check] = []  # the manifest pull reads is checked before any record is fetched

        def check_log(manifest: bytes) -> None:
            checks.append(
                log_check(
                    ctx, ledger.path, source, log_key, witness_keys, timeout, deadline, "pithledger pull", manifest
                )
            )

        before = ledger.counts()
        try:
            try:
                with PullProgress(wanted(settings(ctx).quiet) and progress) as bar:
                    counts = pull_records(
                        ledger,
                        source,
                        targets,
                        connections=connections,
                        rate=rate,
                        timeout=timeout,
                        deadline=deadline or None,
                        progress=bar.update,
                        check=check_log,
                        digests=digests,
                    )
            except KeyboardInterrupt:
                _interrupted(ledger, before, source)
            check = checks[0]
        finally:
            for held in checks:
                held.release()
    return counts | {"checkpoint": check.document(), "_line": check.line()}


def _pull_failed(counts: dict[str, Any], named: frozenset[str] = frozenset()) -> bool:
    # An ID asked for and not pulled is a failure: unresolved, skipped, lying, and not published when it was named on
    # the command line. Not published for an ID of --ids-from (an arXiv snapshot lists far more than any mirror holds;
    # a follow run would back off for ever) or of a refresh is the source's fact: named and counted.
    missing = any(item["id"] in named for item in counts["not_published"])
    return bool(
        counts["invalid"]
        or counts["unresolved"]
        or counts["skipped"]
        or counts["lying"]
        or counts["stopped"]
        or missing
    )


def _pull_report(ctx: typer.Context, counts: dict[str, Any], json_out: bool, *, summary_only: bool = False) -> str:
    """Print a pull run's report (``summary_only``: all but its summary line, which is returned)."""
    if not _report_opening(counts, json_out, summary_only):
        return ""
    for item in counts["not_published"]:
        say(
            f"not published  {item['id']}"
            + (f" ({item['pith_number']})" if item["pith_number"] and item["pith_number"] != item["id"] else "")
        )
    for item in counts["unresolved"]:
        say(f"unresolved     {item['id']}: {item['message']}")
    for item in counts["skipped"]:
        say(f"skipped        {item['id']} [{item['reason']}] {item['message']}")
    for item in counts["lying"]:
        say(f"lying          {item['id']}: {item['message']} ({item['url']})")
    for note in counts["mirrors_ignored"]:
        _note(ctx, f"note: mirror not used: {note}")
    head = "nothing new" if counts["new"] == 0 else f"{counts['new']:,} new events"
    by_digest = (
        f" ({counts['unchanged_by_digest']:,} by the source's digests)" if counts.get("unchanged_by_digest") else ""
    )
    summary = (
        f"pulled from {counts['source']}: {head} ({_plural(counts['records_fetched'], 'record')} fetched, "
        f"{counts['duplicate']:,} duplicate, {counts['invalid']:,} invalid, {counts['unverified']:,} unverified events; "
        f"{counts['unchanged']:,} unchanged{by_digest}, {len(counts['not_published']):,} not published, "
        f"{len(counts['unresolved']):,} unresolved, {len(counts['skipped']):,} skipped, {len(counts['lying']):,} lying; "
        f"{_plural(counts['batches'], 'batch', 'batches')}, {_plural(counts['requests'], 'request')} over "
        f"{_plural(counts['connections_opened'], 'connection')})"
    )
    if not summary_only:
        typer.echo(summary)
    if counts["stopped"]:
        _note(
            ctx,
            f"stopped: {counts['stopped']}; {_plural(counts['not_tried'], 'record')} not tried — "
            "what was pulled is committed: run the same command again to continue",
        )
    return summary
