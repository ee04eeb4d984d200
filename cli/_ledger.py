"""Commands about the ledger: apply, evidence, rebuild, state, export, log, fsck.
Moved whole from cli/app.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pithledger.cli._base import (
    EXIT_INTERRUPTED,
    EXIT_UNCHECKED,
    Command,
    UsageProblem,
    emit_error,
    settings,
    wants_json,
)
from pithledger.cli._options import (
    Commands,
    JsonOption,
    SchedulerOption,
    WorkersOption,
    _fanout,
    _json,
    _note,
    _open,
    _plural,
    _rejection_doc,
    rejection_line,
)
from pithledger.cli._output import emit_json, printable, report, say, write_file_atomically
from pithledger.errors import InputChanged, LedgerDamaged, PithledgerError

if TYPE_CHECKING:
    from pithledger.store import Ledger


command = Commands()


# --- the ledger ------------------------------------------------------------------------------------


@command(cls=Command)
def apply(
    ctx: typer.Context,
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT",
            help="Bundle files (.json, or .jsonl with one bundle per line), directories of them, or '-' for stdin.",
        ),
    ],
    batch_size: Annotated[int, typer.Option(metavar="EVENTS", help="Events per durable transaction.", min=1)] = 10_000,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going",
            help="Skip (and name) a file that cannot be read or decoded and a bundle with a structural fault, apply the rest, exit 1 at the end.",
        ),
    ] = False,
    as_json: JsonOption = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Verify and ingest bundles, idempotently: new events are appended, duplicates skipped.

    Without --keep-going a structural fault anywhere stops before anything is written.
    """
    from pithledger.cli._progress import ApplyProgress, wanted
    from pithledger.ingest.apply import Apply

    json_out = _json(ctx, as_json)
    run = Apply(batch_size=batch_size, keep_going=keep_going, on_skip=lambda exc, where: report(exc, where))
    summary = run.report
    with ExitStack() as stack:
        stack.enter_context(_fanout(workers, scheduler))
        try:
            files = run.inputs(inputs, stack)
        except KeyboardInterrupt:
            typer.echo("interrupted while reading the inputs: nothing was written", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        progress = stack.enter_context(ApplyProgress(wanted(settings(ctx).quiet)))
        try:  # pass 1: every structural fault before anything is written (ledger/ingest/apply.py)
            run.check(files, progress)
        except KeyboardInterrupt:
            progress.__exit__(None, None, None)
            typer.echo("interrupted while checking the inputs: nothing was written", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        ledger = stack.enter_context(_open(ctx, write=True))
        try:  # pass 2: one transaction per batch, then the touched records derived
            run.apply(ledger, progress)
        except InputChanged as changed:
            progress.__exit__(None, None, None)
            report(changed)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            progress.__exit__(None, None, None)
            typer.echo(
                f"interrupted: {summary.committed_batches} of {_plural(summary.batches_total, 'batch', 'batches')} committed "
                f"({_plural(summary.committed_events, 'event')}); the ledger is consistent — run the same command again to finish",
                err=True,
            )
            if json_out:
                emit_json(
                    summary.summary()
                    | {
                        "records_touched": summary.records_touched,
                        "interrupted": True,
                        "batches_total": summary.batches_total,
                        "rejected": [_rejection_doc(r) for r in summary.rejected],
                    }
                )
            raise typer.Exit(EXIT_INTERRUPTED) from None
    skipped = summary.skipped
    if json_out:
        doc: dict[str, Any] = summary.summary() | {
            "records_touched": summary.records_touched,
            "rejected": [_rejection_doc(r) for r in summary.rejected],
        }
        if keep_going:
            doc["skipped"] = [{"where": w, "code": e.code, "message": e.message} for w, e in skipped]
        emit_json(doc)
    else:
        for r in summary.rejected:
            say(rejection_line(r))
        typer.echo(
            f"applied {_plural(summary.events, 'event')} from {_plural(summary.bundles, 'bundle')}: {summary.new:,} new, "
            f"{summary.duplicate:,} duplicate, {summary.invalid:,} invalid, {summary.unverified:,} unverified; "
            f"{_plural(summary.records_touched, 'record')} touched ({_plural(summary.batches, 'batch', 'batches')}) -> {settings(ctx).ledger}"
        )
    if summary.invalid:
        _note(ctx, "invalid events are kept as evidence (`pithledger evidence ID`), outside every state and digest")
    if skipped:
        typer.echo(f"skipped {_plural(len(skipped), 'input')} (--keep-going):", err=True)
        for where, problem in skipped:
            typer.echo(f"  {where}: [{problem.code}]", err=True)
    if summary.invalid or skipped:
        raise typer.Exit(1)


@command(cls=Command)
def evidence(
    ctx: typer.Context,
    ident: Annotated[
        Optional[str],
        typer.Argument(metavar="ID", help="A record, any identifier form; without it, a summary of all evidence held."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List what this mirror received about a record but cannot fold (invalid or unverified copies).

    Evidence lies outside consensus: it never changes a state or a digest. Its caps are in spec/storage.md.
    """
    import msgspec

    json_out = _json(ctx, as_json)
    with _open(ctx) as ledger:
        if ident is None:
            usage = ledger.evidence_usage()
            per_record = sorted(ledger.evidence_subjects())
            if json_out:
                emit_json(
                    {
                        "entries": usage.entries,
                        "bytes": usage.bytes,
                        "records": {s: {"entries": u.entries, "bytes": u.bytes} for s, u in per_record},
                        "limits": msgspec.to_builtins(ledger.evidence_limits),
                    }
                )
                return
            for subject, u in per_record:
                say(f"{u.entries:>6} {subject}")
            typer.echo(
                f"evidence held: {_plural(usage.entries, 'copy', 'copies')}, {usage.bytes:,} bytes, "
                f"about {_plural(len(per_record), 'record')}"
            )
            return
        subject = _evidence_subject(ledger, ident)
        held = ledger.evidence(subject)
    if json_out:
        for copy, entry in held:
            v = entry.verdict
            emit_json(
                {
                    "copy_sha256": copy,
                    "subject": subject,
                    "status": v.status,
                    "reason": v.reason,
                    "message": v.message,
                    "event_type": v.event_type,
                    "declared_event_id": v.event_id,
                    "event": msgspec.json.decode(entry.event),
                }
            )
        return
    for copy, entry in held:
        v = entry.verdict
        say(f"{v.status:<10} {v.event_type} [{v.reason}] {v.message} (copy sha256:{copy})")
    _note(ctx, f"{_plural(len(held), 'rejected input')} held about {subject}")


def _evidence_subject(ledger: Ledger, ident: str) -> str:
    """Evidence may concern a record no valid event names yet: a long Pith Number is taken as given."""
    from pithledger.records.ids import parse_id

    parsed = parse_id(ident)
    if parsed.kind == "pith_number":
        return parsed.value
    return ledger.resolve(ident)


@command(cls=Command)
def rebuild(
    ctx: typer.Context,
    as_json: JsonOption = False,
    reverify: Annotated[
        bool,
        typer.Option(
            "--reverify",
            help="Check every Ed25519 signature again, also of events the old ledger held as valid (use it if the old ledger's files may have been altered).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rebuild a ledger already at this merge version too (e.g. after `fsck` found damage); each run keeps one more backup.",
        ),
    ] = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Rebuild the ledger from its log under this pithledger's merge version (after an upgrade).

    Every received event is checked again under this version's rules and re-applied into a new ledger
    beside the old one, which is then swapped in; the old ledger is kept as <name>.<version>-backup.
    Nothing is lost. The signatures of events the old ledger held as valid are not checked again
    unless --reverify. A ledger already at this version is left as it is, unless --force.
    """
    from pithledger.merge import MERGE_VERSION
    from pithledger.store.rebuild import rebuild as rebuild_ledger

    where = settings(ctx).ledger
    with _fanout(workers, scheduler):
        counts = rebuild_ledger(where, reverify=reverify, force=force)
    if _json(ctx, as_json):
        emit_json(counts)
        return
    if counts.get("already_current"):
        typer.echo(
            f"nothing to rebuild: {where} is already at {MERGE_VERSION}; no backup made "
            "(`pithledger fsck` checks it; --force rebuilds it anyway)"
        )
        return
    if counts.get("finished_interrupted_rebuild"):
        typer.echo(f"finished an interrupted rebuild of {where}")
        return
    typer.echo(
        f"rebuilt {where} from {_plural(counts['events_read'], 'received event')} ({counts['old_merge_version']} -> "
        f"{MERGE_VERSION}): {counts['new']:,} valid, {counts['duplicate']:,} duplicate, {counts['invalid']:,} invalid and "
        f"{counts['unverified']:,} unverified kept as evidence; the old ledger is at {counts['backup']}"
    )
    if counts.get("tlog_history_changed"):  # spec/storage.md §8: the mirror's published history changes
        t = counts["tlog"]
        typer.echo(
            f"WARNING: the rebuilt transparency log is not an extension of the old one: entry {t['first_difference']:,} "
            f"differs (old log {t['old_size']:,} entries, rebuilt {t['size']:,}); checkpoints published before "
            "cannot be proved consistent with the new ones, so publish the rebuilt mirror under a new origin "
            "(`publish --origin NEW`) and tell its readers and witnesses",
            err=True,
        )


@command(cls=Command)
def state(
    ctx: typer.Context,
    ident: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="Any identifier form: long or short Pith Number, 8/12/16/26-char suffix, arXiv id (with or without vN), DOI.",
        ),
    ],
    view: Annotated[
        bool,
        typer.Option(
            "--view",
            help="A summary for people: numbers, aliases, badges, each claim with its signer and what was checked, citations both ways.",
        ),
    ] = False,
) -> None:
    """Print the merged state document of a record (canonical JSON: the consensus bytes), or --view it."""
    with _open(ctx) as ledger:
        subject = ledger.resolve(ident)
        data = ledger.state_bytes(subject)
    if view and not settings(ctx).json:
        import msgspec

        from pithledger.cli._view import render

        typer.echo("\n".join(render(msgspec.json.decode(data))))
        return
    sys.stdout.buffer.write(data + b"\n")


@command(cls=Command)
def export(
    ctx: typer.Context,
    ident: Annotated[
        Optional[str], typer.Argument(metavar="ID", help="Any identifier form.", show_default=False)
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", metavar="FILE", help="Write here instead of stdout.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every record's bundle instead of one record's (the whole ledger, streamed).")
    ] = False,
) -> None:
    """Write the record's bundle (its events as received), then one bundle per record citing it.

    JSON lines: applied to an empty ledger, they reproduce the record's state exactly. The citing
    bundles carry only the standing citations of this record (spec/storage.md §5). With --all (no ID):
    every record's bundle, which applied to an empty ledger gives the same digest.
    """
    from pithledger.records.canonical import canonical_bytes

    if every == (ident is not None):
        raise UsageProblem("give an ID or --all, not both" if every else "give an ID, or --all for every record")
    if ident is None:
        from pithledger.cli._backup import export_all

        export_all(ctx, output)
        return

    with _open(ctx) as ledger:
        subject = ledger.resolve(ident)
        data = b"".join(
            canonical_bytes(b) + b"\n" for b in [*ledger.export_parts(subject), *ledger.inbound_bundles(subject)]
        )
    if output is None:
        sys.stdout.buffer.write(data)
    else:
        write_file_atomically(output, data)


MAX_SEQ = 2**64 - 1


@command(cls=Command)
def log(
    ctx: typer.Context,
    since: Annotated[int, typer.Option(metavar="SEQ", help="Start at this sequence number.", min=0, max=MAX_SEQ)] = 0,
    as_json: JsonOption = False,
) -> None:
    """List events in this mirror's append order."""
    from pithledger.records.canonical import canonical_bytes

    json_out = _json(ctx, as_json)
    out = sys.stdout.buffer
    with _open(ctx) as ledger:
        for entry in ledger.log(since):
            v = entry.verdict
            if json_out:
                out.write(
                    canonical_bytes(
                        {
                            "seq": entry.seq,
                            "event_id": v.event_id,
                            "event_type": v.event_type,
                            "subject": v.subject,
                            "status": v.status,
                            "reason": v.reason,
                        }
                    )
                    + b"\n"
                )
            else:
                line = f"{entry.seq:>8} {v.event_id} {v.status:<10} {v.event_type:<20} {v.subject}" + (
                    f" [{v.reason}]" if v.reason else ""
                )
                out.write(printable(line).encode() + b"\n")
    out.flush()


@command(cls=Command)
def fsck(
    ctx: typer.Context,
    as_json: JsonOption = False,
    reverify: Annotated[
        bool,
        typer.Option(
            "--reverify",
            help="Check every Ed25519 signature again too (the log holds only events whose signature verified on arrival; without it every other check runs).",
        ),
    ] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="First recount the evidence usage counters from the evidence held (the one thing fsck repairs: local bookkeeping of the caps, outside consensus), naming what was wrong.",
        ),
    ] = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Re-verify every event and recompute every state from the log; exit 1 naming each mismatch.

    Exit 3 when it could not check (no room for its scratch table anywhere, no ledger, one it cannot open)."""
    from pithledger.store import Ledger

    path = settings(ctx).ledger
    repaired: list[str] = []
    # where the work runs is settled first: an unreachable scheduler is exit 1, as for every command
    with _fanout(workers, scheduler):
        try:
            if repair:
                with Ledger(path) as writer:
                    repaired = writer.repair_evidence_usage()
            with _open(ctx, settled=True) as ledger:
                problems = ledger.fsck(reverify=reverify)
                counts = ledger.counts()
        except PithledgerError as exc:  # the check did not run to its end: not a verdict on the ledger (exit 1) ...
            typer.echo(exc.describe(), err=True)
            if wants_json(ctx):
                emit_error(exc.document())
            # ... unless what stopped it is the damage itself: a file LMDB refuses to open is a fault found
            raise typer.Exit(1 if isinstance(exc, LedgerDamaged) else EXIT_UNCHECKED) from None
    if _json(ctx, as_json):
        emit_json(
            {
                "ok": not problems,
                "problems": problems,
                "events": counts["events"],
                "records": counts["records"],
                "ledger": str(path),
            }
            | ({"repaired": repaired} if repair else {})
        )
    else:
        for fixed in repaired:
            typer.echo(f"REPAIRED {fixed}")
        for problem in problems:
            say(f"MISMATCH {problem}")
        if problems:
            typer.echo(f"fsck: {_plural(len(problems), 'problem')} in {path}", err=True)
            if any("evidence usage" in p for p in problems):
                typer.echo(
                    "hint: `pithledger fsck --repair` recounts the evidence usage from the evidence held", err=True
                )
        else:
            typer.echo(
                f"fsck: ok ({_plural(counts['events'], 'event')}, {_plural(counts['records'], 'record')}) {path}"
            )
    if problems:
        raise typer.Exit(1)
