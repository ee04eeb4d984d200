"""Commands about mirrors and serving: digest, publish, sync, pull, audit, serve, submit, metadata, latex.
Moved whole from cli/app.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

from pithledger.errors import PithledgerError

from ._base import EXIT_INTERRUPTED, Command, UsageProblem, settings
from ._options import (
    Commands,
    JsonOption,
    KeyDirOption,
    LogKeyOption,
    SchedulerOption,
    TimeoutOption,
    WitnessKeyOption,
    WorkersOption,
    _deadline_option,
    _fanout,
    _json,
    _note,
    _now,
    _open,
    _plural,
    _rejection_doc,
    _store,
    rejection_line,
)
from ._output import emit_json, iter_documents, report, say, write_file_atomically

if TYPE_CHECKING:
    from pithledger.mirror.checkpoints import Check
    from pithledger.store import Ledger

command = Commands()


# --- mirrors ---------------------------------------------------------------------------------------


@command(cls=Command)
def digest(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print this mirror's order-independent roots (event sets and states)."""
    with _open(ctx, settled=True) as ledger:
        root = ledger.root()
        counts = ledger.counts()
    doc = {
        "events_root": root.events.hex(),
        "states_root": root.states.hex(),
        "records": counts["records"],
        "events": counts["events"],
        "digest_version": "pithledger-digest-v1",
    }
    if _json(ctx, as_json):
        emit_json(doc)
    else:
        typer.echo(
            f"events_root {doc['events_root']}\nstates_root {doc['states_root']}\n"
            f"{_plural(counts['records'], 'record')}, {_plural(counts['events'], 'event')}"
        )


@command(cls=Command)
def publish(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Where to write the static mirror tree.")],
    key: Annotated[
        Optional[str],
        typer.Option(
            "--key",
            metavar="NAME",
            help="Local key whose public part the manifest names; it also signs the log's checkpoint (spec/transparency.md §4).",
        ),
    ] = None,
    base_url: Annotated[
        str, typer.Option("--base-url", metavar="URL", help="The URL the tree will be served at (for the manifest).")
    ] = "",
    origin: Annotated[
        Optional[str],
        typer.Option(
            "--origin",
            metavar="ORIGIN",
            help="With --key: the log's origin [default: from --base-url, else pithledger/<key fingerprint>].",
        ),
    ] = None,
    witnesses: Annotated[
        Optional[list[str]],
        typer.Option(
            "--witness",
            metavar="URL",
            help="With --key: ask this witness (C2SP tlog-witness, URL/add-checkpoint) to cosign the checkpoint; its cosignature is added to the published one. Repeatable.",
        ),
    ] = None,
    key_dir: KeyDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write (or update) a static mirror tree any web server can host; with --key, its log too (checkpoint and tiles).

    With --witness URL, each witness is asked to cosign the new checkpoint; a witness that refuses is
    named (exit 1) and the checkpoint stays published without its cosignature."""
    from pithledger.mirror.publish import publish as publish_mirror

    from ._tlog import log_signer

    if origin is not None and not key:
        raise UsageProblem("--origin names the log a --key signs", hint="add --key NAME, or leave --origin out")
    if witnesses and not key:
        raise UsageProblem(
            "--witness cosigns the checkpoint a --key signs", hint="add --key NAME, or leave --witness out"
        )
    for url in witnesses or []:
        if not url.startswith(("http://", "https://")):
            raise UsageProblem(
                f"--witness {url!r} is not an http(s) URL",
                hint="give the witness's submission prefix, e.g. https://witness.example",
            )
    signing = _store(key_dir).load(key) if key else None
    log = log_signer(key, origin, base_url, key_dir) if key else None
    with _open(ctx, settled=True) as ledger:
        counts = publish_mirror(ledger, directory, signing, base_url.rstrip("/"), log=log)
    asked = []
    if witnesses:
        from pithledger.mirror.checkpoints import ask_witnesses

        asked = ask_witnesses(directory, witnesses)
    if _json(ctx, as_json):
        emit_json(
            counts
            | {
                "directory": str(directory),
                "origin": log.name if log else None,
                "log_key": log.vkey if log else None,
                "witnesses": [{"url": a.url, "cosigned": not a.refused, "refused": a.refused} for a in asked],
            }
        )
    else:
        for a in asked:
            say(
                f"witness {a.url}: cosigned"
                if not a.refused
                else f"witness {a.url} refused: {a.refused}; the checkpoint is published without its cosignature"
            )
        typer.echo(
            f"published to {directory}: {_plural(counts['records_written'], 'record')} written, "
            f"{_plural(counts['nodes_written'], 'digest node')} written, {counts['nodes_removed']:,} removed"
        )
        if log is not None:
            typer.echo(
                f"log {log.name}: checkpoint at size {counts['log_size']:,}, {_plural(counts['tiles_written'], 'tile')} written; "
                f"log key {log.vkey}"
            )
        else:
            typer.echo("no checkpoint signed: publish --key NAME also writes the log (checkpoint and tiles)")
    if any(a.refused for a in asked):
        raise typer.Exit(1)


def _interrupted(ledger: Ledger, before: dict[str, int], source: str) -> NoReturn:
    """Ctrl-C during a run that commits batch by batch (sync, pull): what was committed, and exit 130;
    SIGTERM ending a follow loop's run (``--every``): the same, and exit 0 (a clean stop, issue #33)."""
    from ._signals import terminated

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
        from ._follow import run_following

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
    from pithledger.mirror.publish import sync as sync_mirror
    from pithledger.mirror.transport import Deadline

    from ._witness import log_check

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


def _sync_failed(counts: dict[str, Any]) -> bool:
    return bool(counts["invalid"] or counts["skipped"] or counts["lying"])


def _sync_report(counts: dict[str, Any], json_out: bool, *, summary_only: bool = False) -> str:
    """Print a sync run's report (``summary_only``: all but its summary line, which is returned for the
    follow loop's run line)."""
    line = counts.pop("_line")
    source = counts["source"]
    if json_out:
        counts["rejected"] = [_rejection_doc(r) for r in counts["rejected"]]
        if not summary_only:
            emit_json(counts)
        return ""
    say(line)
    for r in counts["rejected"]:
        say(rejection_line(r))
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

    from pithledger.mirror.pull import MAX_ID_LINE, fetch_id_list, target_of_line, targets_of_args

    from ._output import cannot_read

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
    mirror's resolver, and the bundle must then be the record the ID names. With no IDs, every record the
    ledger holds is refreshed. Re-runs fetch only what changed: records whose leaf in a pithledger source's digests
    differs from ours, else by ETag / body hash. Every record not pulled
    is named: not published, unresolved, skipped or lying. Exit 1 if any was skipped or lying, or if any event was invalid.
    """
    from pithledger.mirror.checkpoints import check_vkeys

    check_vkeys(log_key, witness_keys or [])  # a mistyped key is named before anything is opened or fetched
    if every is not None and ids_file == "-":
        raise UsageProblem(
            "--every re-reads the IDs of --ids at every run; stdin can be read only once",
            hint="give the IDs in a file or at a URL (--ids-from FILE|URL)",
        )
    given = bool(ids_given) or ids_file is not None  # an --ids file of comments only pulls nothing, not everything
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
        from ._follow import run_following

        run_following(every, once, lambda c: _pull_report(ctx, c, json_out, summary_only=True), json_out, _pull_failed)
    counts = once()
    _pull_report(ctx, counts, json_out)
    if _pull_failed(counts):
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
    from pithledger.mirror.pull import pull as pull_records

    from ._progress import PullProgress, wanted
    from ._witness import log_check

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


def _pull_failed(counts: dict[str, Any]) -> bool:
    return bool(counts["invalid"] or counts["skipped"] or counts["lying"] or counts["stopped"])


def _pull_report(ctx: typer.Context, counts: dict[str, Any], json_out: bool, *, summary_only: bool = False) -> str:
    """Print a pull run's report (``summary_only``: all but its summary line, which is returned)."""
    line = counts.pop("_line")
    if json_out:
        counts["rejected"] = [_rejection_doc(r) for r in counts["rejected"]]
        if not summary_only:
            emit_json(counts)
        return ""
    say(line)
    for r in counts["rejected"]:
        say(rejection_line(r))
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


@command(cls=Command)
def audit(
    ctx: typer.Context,
    a: Annotated[
        str, typer.Argument(metavar="A", help="A ledger directory, a published directory, or an http(s) URL.")
    ],
    b: Annotated[Optional[str], typer.Argument(metavar="[B]", help="The other side (not with --bundles).")] = None,
    as_json: JsonOption = False,
    sign: Annotated[
        Optional[str], typer.Option("--sign", metavar="KEY", help="Sign the report with this local key (JSON output).")
    ] = None,
    key_dir: KeyDirOption = None,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 600.0,
    bundles: Annotated[
        bool,
        typer.Option(
            "--bundles",
            help="Read the published mirror A's bundles against its own digests: "
            "name every record whose bundle does not carry, as valid events, "
            "what its digests advertise.",
        ),
    ] = False,
    sample: Annotated[
        Optional[int],
        typer.Option("--sample", metavar="N", min=1, help="With --bundles: check a random sample of N records."),
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option("--seed", metavar="S", help="With --sample: the seed of the sample (printed when not given)."),
    ] = None,
    witness_keys: WitnessKeyOption = None,
) -> None:
    """Compare two mirrors: exit 0 when consistent, else name every divergent record and the event ids each side lacks.

    With --bundles, check one published mirror's bundles against its own digests instead (every record,
    or --sample N with --seed S): exit 1 when any record's bundle does not deliver what is advertised.
    """
    from pithledger.audit import compare, report_value, sign_report
    from pithledger.mirror.publish import open_source
    from pithledger.store import Ledger

    if bundles:
        _audit_bundles(ctx, a, b, as_json, sign, timeout, deadline, sample, seed)
        return
    if sample is not None or seed is not None:
        raise UsageProblem(
            "--sample and --seed choose the records --bundles checks", hint="add --bundles, or leave them out"
        )
    if b is None:
        raise UsageProblem(
            "audit compares two mirrors: give A and B",
            hint="or check one published mirror's bundles: audit A --bundles",
        )
    from pithledger.mirror.checkpoints import check_pair, check_vkeys

    check_vkeys(None, witness_keys or [])
    ledger_path = settings(ctx).ledger
    # published sides' checkpoints: against this ledger's memory, and against each other for one origin
    checks = check_pair(
        ledger_path if (ledger_path / "data.mdb").is_file() else None,
        a,
        b,
        witness_keys=list(witness_keys or []),
        timeout=timeout,
        deadline=deadline or None,
    )
    side_a = open_source(a, timeout=timeout, deadline=deadline or None)
    # LMDB allows one handle per environment and process: a ledger audited against itself is shared.
    side_b = (
        side_a if Path(a).resolve() == Path(b).resolve() else open_source(b, timeout=timeout, deadline=deadline or None)
    )
    try:
        result = compare(side_a, side_b)
    finally:
        for side in {id(side_a): side_a, id(side_b): side_b}.values():
            if isinstance(side, Ledger):
                side.close()
    doc = report_value(result, a, b)
    if sign:
        emit_json(sign_report(doc, _store(key_dir).load(sign), _now()))
    elif _json(ctx, as_json):
        emit_json(
            doc
            | {
                "digests_read": result.digests_read,
                "checkpoints": [c.document() | {"source": c.source} for c in checks],
            }
        )
    else:
        for c in checks:
            say(c.line())
        if result.consistent:
            typer.echo(f"consistent: events_root {result.a_root['events']} states_root {result.a_root['states']}")
        for d in result.divergent:
            line = f"DIVERGENT {d.pith_number} {d.kind}"
            for label, listed, count in (("A", d.a_lacks, d.a_lacks_count), ("B", d.b_lacks, d.b_lacks_count)):
                if count:
                    more = f" and {count - len(listed):,} more" if count > len(listed) else ""
                    line += f"; {label} lacks {', '.join(listed)}{more}"
            say(line)
        if result.merge_bug_suspected:
            typer.echo(
                "both mirrors hold the same events yet states differ: a merge bug or a tampered stored state "
                "(run `pithledger fsck` on each ledger)"
            )
        if not result.consistent:
            typer.echo(
                f"{_plural(len(result.divergent), 'divergent record')} ({_plural(result.digests_read, 'digest')} read)"
            )
    if not result.consistent:
        raise typer.Exit(1)


def _audit_bundles(
    ctx: typer.Context,
    a: str,
    b: Optional[str],
    as_json: bool,
    sign: Optional[str],
    timeout: float,
    deadline: float,
    sample: Optional[int],
    seed: Optional[int],
) -> None:
    """``audit A --bundles``: spec/audit.md §5.1."""
    import secrets

    from pithledger.mirror.publish import DIGEST_FILE, Published, check_bundles

    if b is not None:
        raise UsageProblem(
            "--bundles checks one published mirror against its own digests: give only A",
            hint="compare two mirrors without --bundles",
        )
    if sign:
        raise UsageProblem("--sign signs a comparison report, not a bundle check")
    if seed is not None and sample is None:
        raise UsageProblem("--seed chooses the records of a --sample", hint="add --sample N")
    if not a.startswith(("http://", "https://")) and not Path(a, DIGEST_FILE).is_file():
        raise UsageProblem(
            f"{a} is not a published mirror (no {DIGEST_FILE}); --bundles reads a published tree or URL",
            hint="a ledger's bundles are its own exports: check a ledger with `pithledger fsck`",
        )
    if sample is not None and seed is None:
        seed = secrets.randbelow(2**32)
    result = check_bundles(Published(a, timeout=timeout, deadline=deadline or None), sample=sample, seed=seed)
    if _json(ctx, as_json):
        emit_json(
            {
                "source": a,
                "records": result.records,
                "checked": result.checked,
                "sample": sample,
                "seed": seed,
                "consistent": not result.faults,
                "faults": result.faults,
            }
        )
    else:
        for f in result.faults:
            line = f"BAD-BUNDLE {f['pith_number']} [{f['reason']}] {f['message']}"
            if f.get("missing_event_ids"):
                more = (
                    f" and {f['missing_count'] - len(f['missing_event_ids']):,} more"
                    if f["missing_count"] > len(f["missing_event_ids"])
                    else ""
                )
                line += f": {', '.join(f['missing_event_ids'])}{more}"
            say(line)
        drawn = f" (a sample drawn with --seed {seed})" if sample is not None else ""
        verdict = (
            "every bundle carries what its digests advertise"
            if not result.faults
            else _plural(len(result.faults), "bad bundle")
        )
        typer.echo(
            f"bundles of {a}: {result.checked:,} of {_plural(result.records, 'record')} checked{drawn}: {verdict}"
        )
    if result.faults:
        raise typer.Exit(1)


# --- serving -----------------------------------------------------------------------------------------


def _wildcard(host: str) -> bool:
    """An address that binds every interface (0.0.0.0, ::, or an empty host)."""
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host.strip() == ""


@command(cls=Command)
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", metavar="ADDR", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port to listen on (0: any free port).")
    ] = 8080,
    base_url: Annotated[
        str,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="The public URL of this mirror, for the manifest, the record JSON and the page's commands [default: the bound address].",
        ),
    ] = "",
    name: Annotated[
        str, typer.Option("--name", metavar="NAME", help="This mirror's name in its manifest.")
    ] = "pithledger mirror",
    key: Annotated[
        Optional[str],
        typer.Option(
            "--key", metavar="NAME", help="Local key whose public part the manifest names; it also signs /checkpoint."
        ),
    ] = None,
    origin: Annotated[
        Optional[str],
        typer.Option(
            "--origin",
            metavar="ORIGIN",
            help="With --key: the log's origin [default: from --base-url, else pithledger/<key fingerprint>].",
        ),
    ] = None,
    key_dir: KeyDirOption = None,
    accept_events: Annotated[
        bool,
        typer.Option(
            "--accept-events",
            help="Also accept signed events at POST /pith/<suffix>/action/<kind> (spec/serve.md §8); off: every POST is 405.",
        ),
    ] = False,
    post_rate: Annotated[
        float,
        typer.Option(
            "--post-rate", metavar="N", min=0.001, help="--accept-events: POSTs per second per client address."
        ),
    ] = 5.0,
    post_burst: Annotated[
        int, typer.Option("--post-burst", metavar="N", min=1, help="--accept-events: POSTs a client may send at once.")
    ] = 20,
    post_total_rate: Annotated[
        float,
        typer.Option(
            "--post-total-rate",
            metavar="N",
            min=0.001,
            help="--accept-events: POSTs per second from all clients (burst: twice that).",
        ),
    ] = 200.0,
    post_wait: Annotated[
        float,
        typer.Option(
            "--post-wait",
            metavar="SECONDS",
            min=0.05,
            max=600,
            help="--accept-events: how long a POST waits for the ledger's write lock (another process's apply) before 503.",
        ),
    ] = 5.0,
    witness_config: Annotated[
        Optional[Path],
        typer.Option(
            "--witness",
            metavar="CONFIG",
            help="Also be a witness (C2SP tlog-witness) of the logs of CONFIG at POST /add-checkpoint (spec/transparency.md §6).",
        ),
    ] = None,
    access_log: Annotated[
        str,
        typer.Option(
            "--access-log",
            metavar="FILE",
            help="Append one line per request (and per POSTed event) to FILE; '-': stderr (spec/serve.md §9.3).",
        ),
    ] = "-",
    forwarded_allow_ips: Annotated[
        str,
        typer.Option(
            "--forwarded-allow-ips",
            metavar="IPS",
            help="Comma-separated proxy addresses or networks (CIDR) whose X-Forwarded-For / Forwarded names the client, for the rate limits and the log (spec/serve.md §9.1); '*' trusts every peer.",
        ),
    ] = "",
) -> None:
    """Serve the ledger over HTTP: record pages, Pith's JSON paths, a resolver for any ID form.

    Paths (spec/serve.md): /pith/<suffix> (HTML, or the record JSON for Accept: application/ld+json),
    /pith/<suffix>/bundle.json, /pith/<suffix>/state.json, /pith/<suffix>/events.json,
    /.well-known/pith/<suffix>/bundle.json, /resolve?id=ID, /pith-mirrors.json, /pith-signing-key.json,
    /digest.json, /events.json, /healthz, /metrics. It reads while `apply` writes in another process.
    One access-log line per request on stderr (or --access-log FILE).
    """
    from pithledger.records.keys import public_key_doc
    from pithledger.web.ops import Proxies
    from pithledger.web.serve import run

    try:
        Proxies(forwarded_allow_ips)
    except ValueError as exc:
        raise UsageProblem(
            f"--forwarded-allow-ips: {exc}", hint="e.g. --forwarded-allow-ips 127.0.0.1,10.0.0.0/8"
        ) from None

    if base_url and not base_url.startswith(("http://", "https://")):
        raise UsageProblem(
            f"--base-url {base_url!r} is not an http(s) URL", hint="e.g. --base-url https://mirror.example.org"
        )
    if not base_url and _wildcard(host):
        # every link, the manifest and the record documents name the base URL: http://0.0.0.0:PORT reaches nobody
        raise UsageProblem(
            f"--host {host} listens on every interface, so the bound address is no URL a client can use",
            hint=f"say where clients reach this mirror: --base-url http://HOSTNAME:{port} (or https://... behind a proxy)",
        )
    from ._tlog import log_signer

    if origin is not None and not key:
        raise UsageProblem("--origin names the log a --key signs", hint="add --key NAME, or leave --origin out")
    mirror_key = None
    log = None
    if key:
        local = _store(key_dir).load(key)
        mirror_key = public_key_doc(local.name, local.public_key)
        log = log_signer(key, origin, base_url, key_dir)  # the origin from --base-url as given, never the bound address
    limits = None
    if accept_events:
        from pithledger.web.actions import Limits

        limits = Limits(
            client_rate=post_rate,
            client_burst=post_burst,
            total_rate=post_total_rate,
            total_burst=max(1, int(post_total_rate * 2)),
            lock_wait=post_wait,
        )
    witness = None
    if witness_config is not None:
        from pithledger.tlog.witness import Witness, load_config

        witness = Witness.from_config(load_config(witness_config), _store(key_dir))
    run(
        settings(ctx).ledger,
        host=host,
        port=port,
        base_url=base_url,
        name=name,
        mirror_key=mirror_key,
        quiet=settings(ctx).quiet,
        accept_events=limits,
        log=log,
        witness=witness,
        access_log=access_log,
        forwarded_allow_ips=forwarded_allow_ips,
    )


@command(cls=Command)
def submit(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="A bundle (or JSON lines of bundles) of signed events, e.g. what `pithledger event` wrote; '-' for stdin.",
        ),
    ],
    url: Annotated[
        str,
        typer.Argument(
            metavar="URL",
            help="A mirror's base URL (events go to URL/pith/<suffix>/action/<kind>), or a URL pattern holding {suffix} and/or {kind}.",
        ),
    ],
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", min=0.1, help="Wall clock for one request.")
    ] = 30.0,
    as_json: JsonOption = False,
) -> None:
    """Post each event of a bundle to the action URL of its record on a mirror (`serve --accept-events`).

    One line per event: new, duplicate, invalid, unverified or refused, with the mirror's reason.
    Exit 1 if any event was refused (or could not be posted).
    """
    from pithledger.records.bundle import read_bundle

    events: list[dict[str, Any]] = []
    for where, value in iter_documents(source):
        try:
            events.extend(read_bundle(value).events)
        except PithledgerError as exc:
            exc.message = f"{where}: {exc.message}"
            raise
    _post_events(ctx, events, url, timeout, _json(ctx, as_json))


def _post_events(ctx: typer.Context, events: list[dict[str, Any]], url: str, timeout: float, json_out: bool) -> None:
    from pithledger.errors import SourceError
    from pithledger.mirror.http11 import Client
    from pithledger.mirror.transport import Deadline, check_url
    from pithledger.web.actions import ACTION_KINDS, action_url, post_event

    if "{suffix}" not in url and "{kind}" not in url:
        check_url(url)  # a bad base URL is one error, before anything is posted
    results: list[dict[str, Any]] = []
    client = Client()
    deadline = Deadline(None)
    try:
        for event in events:
            kind, number = event.get("event_type"), str(event.get("subject_pith_number"))
            if kind not in ACTION_KINDS:
                results.append(
                    {
                        "event_id": event.get("event_id", ""),
                        "event_type": kind,
                        "subject": number,
                        "url": "",
                        "http_status": 0,
                        "status": "skipped",
                        "reason": "no-action",
                        "message": f"a mirror takes no {kind} events by POST (actions: {', '.join(sorted(ACTION_KINDS))}); apply it instead",
                    }
                )
                continue
            target = action_url(url, number, str(kind))
            try:
                results.append(post_event(client, target, event, timeout=timeout, deadline=deadline))
            except SourceError as exc:
                results.append(
                    {
                        "event_id": event.get("event_id", ""),
                        "event_type": kind,
                        "subject": number,
                        "url": target,
                        "http_status": 0,
                        "status": "refused",
                        "reason": exc.code,
                        "message": exc.message,
                    }
                )
    finally:
        client.close()
    refused = [r for r in results if r["status"] not in ("new", "duplicate", "skipped")]
    if json_out:
        emit_json(
            {"posted": sum(r["status"] != "skipped" for r in results), "refused": len(refused), "events": results}
        )
    else:
        for r in results:
            why = f" [{r['reason']}] {r['message']}" if r["reason"] else ""
            http = f" (HTTP {r['http_status']})" if r["http_status"] else ""
            typer.echo(f"{r['status']:<10} {r['subject']} {r['event_type']} {r['event_id']}{why}{http}")
    if refused:
        raise typer.Exit(1)


@command(cls=Command)
def metadata(
    ctx: typer.Context,
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...",
            help="arXiv snapshot lines (what `mint` reads) or Pith record documents (what a Pith record URL returns for JSON: its paper block); '-' for stdin.",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Keep display metadata (titles, authors, abstracts) beside the records, outside consensus.

    Pages show each field with its check against the record's title/abstract hash (match, mismatch,
    unchecked; Pith's abstract excerpt: "unchecked: excerpt"); nothing here changes a state, a digest
    or an export (spec/serve.md §6).
    """
    from pithledger.records.display import FROM_RECORD_DOCUMENT, MetadataStore, parse_any

    items = []
    documents = []  # a record document's paper block never replaces a field that matches with one that does not
    failed = 0
    for path in files:
        for where, value in iter_documents(path, tolerant=True):
            try:
                if isinstance(value, PithledgerError):
                    raise value
                key, meta = parse_any(value)
            except PithledgerError as exc:
                report(exc, where)
                if _json(ctx, as_json):  # the reason, not just a count (one line per failed document)
                    emit_json({**exc.document(), "where": where})
                failed += 1
                continue
            if meta.source == FROM_RECORD_DOCUMENT:
                documents.append((value["canonical_record"], meta))
            else:
                items.append((key, meta))
    store = MetadataStore(settings(ctx).ledger, readonly=False)
    try:
        kept = store.put_many(items) + store.keep_documents(documents)
        total = store.count()
    finally:
        store.close()
    if _json(ctx, as_json):
        emit_json({"kept": kept, "failed": failed, "records_with_metadata": total})
    else:
        typer.echo(
            f"kept display metadata of {_plural(kept, 'record')} ({failed:,} failed); {total:,} held beside {settings(ctx).ledger}"
        )
    if failed:
        raise typer.Exit(1)


# --- the `pith` LaTeX package ---------------------------------------------------------------------------


@command(cls=Command)
def latex(
    ctx: typer.Context,
    resolver: Annotated[
        str,
        typer.Option(
            "--resolver",
            metavar="URL",
            help="The package's default resolver: badges link to URL/pith/<suffix> (authors can still set \\usepackage[resolver=...]{pith}).",
        ),
    ] = "https://pith.science",
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="DIR", help="Write pith.sty into this directory.")
    ] = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Write the `pith` LaTeX package (pith.sty): \\usepackage{pith} and \\pithnumber{<26-char suffix>}
    print a linked badge after the title and put the Pith Number in the PDF's metadata
    (spec/badge-and-latex.md). Put pith.sty beside your .tex file (arXiv compiles it from there)."""
    from pithledger.render.latex import sty_bytes

    data = sty_bytes(resolver)
    if not output.is_dir():
        raise UsageProblem(
            f"-o {output}: not a directory", hint="give an existing directory, e.g. -o . (pith.sty is written into it)"
        )
    path = output / "pith.sty"
    write_file_atomically(path, data)
    if _json(ctx, as_json):
        emit_json({"written": str(path), "resolver": resolver.removesuffix("/"), "bytes": len(data)})
    else:
        typer.echo(
            f"wrote {path} (default resolver {resolver.removesuffix('/')}); use it with \\usepackage{{pith}} and \\pithnumber{{SUFFIX}}"
        )
