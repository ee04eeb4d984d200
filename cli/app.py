"""Typer commands. Each one: parse, call the library, render.

The library is imported inside each command, so that a command loads only what it uses (``state``
never loads the mirror, audit, mint or key code): start-up time is most of a query's time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pithledger.errors import EventInvalid, InputChanged, MalformedId, NoLedger, OtsError, PithledgerError, SchemaError

from ._base import EXIT_INTERRUPTED, Command, Group, Settings, UsageProblem, settings
from ._options import (
    JsonOption,
    KeyDirOption,
    SchedulerOption,
    WorkersOption,
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
from ._output import emit_json, expand_inputs, iter_documents, printable, read_bytes, report, say, write_file_atomically

if TYPE_CHECKING:
    from pithledger.store import Ledger

app = typer.Typer(
    name="pithledger",
    cls=Group,
    help="A mirror for Pith records: verify signed bundles, keep an append-only ledger, merge, audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: "[default: ...]" stays visible, no boxes
)
command = app.command


def _version(value: bool) -> None:
    if value:
        import pithledger

        typer.echo(f"pithledger {pithledger.__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    ctx: typer.Context,
    ledger: Annotated[
        Optional[str],
        typer.Option(
            "--ledger",
            envvar="PITHLEDGER_LEDGER",
            metavar="PATH",
            show_envvar=True,
            help="Ledger directory [default: $XDG_DATA_HOME/pithledger, i.e. ~/.local/share/pithledger].",
        ),
    ] = None,
    key_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--key-dir",
            envvar="PITHLEDGER_KEYS",
            metavar="DIR",
            show_envvar=True,
            help="Key directory [default: $XDG_CONFIG_HOME/pithledger/keys, i.e. ~/.config/pithledger/keys].",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output (JSON) from commands that report, errors included.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display and no notes on stderr.")] = False,
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """pithledger: verify, store, merge and audit Pith records and their signed events.

    Global options may be written before or after the command.
    """
    if ledger is not None and not ledger.strip():
        raise UsageProblem(
            "--ledger is empty", hint="give the ledger's directory, e.g. --ledger ./ledger, or leave --ledger out"
        )
    ctx.obj = Settings(
        ledger_option=Path(ledger) if ledger is not None else None, json=as_json, quiet=quiet, key_dir=key_dir
    )


def _per_document(path: str, render: Callable[[Any], bytes]) -> None:
    """Render every document of a file on its own line; a bad document is reported, the rest go on,
    and the exit code is 1 if any failed."""
    failed = 0
    for where, value in iter_documents(path, tolerant=True):
        try:
            if isinstance(value, PithledgerError):
                raise value
            sys.stdout.buffer.write(render(value) + b"\n")
        except PithledgerError as exc:
            report(exc, where)
            failed += 1
    sys.stdout.flush()
    if failed:
        raise typer.Exit(1)


@command(cls=Command)
def ids(
    record: Annotated[
        str,
        typer.Argument(
            metavar="RECORD",
            help="A canonical record, or a bundle or state document holding one; '-' for stdin; JSON lines allowed.",
        ),
    ],
    canonical: Annotated[
        bool,
        typer.Option(
            "--canonical",
            help="Print the record's canonical bytes instead (no newline; one record only): what canonical_sha256 hashes, and what `ots stamp` must stamp.",
        ),
    ] = False,
) -> None:
    """Print canonical_sha256, the long and short Pith Number and the six aliases of a record."""
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.model import record_ids

    def record_of(value: Any) -> Any:
        if (
            isinstance(value, dict)
            and isinstance(value.get("current"), dict)
            and "canonical_record" in value["current"]
        ):
            value = value["current"]  # a state document
        if isinstance(value, dict) and "canonical_record" in value:  # a bundle, an event payload, a vector line
            value = value["canonical_record"]
        return value

    if canonical:
        docs = list(iter_documents(record))
        if len(docs) != 1:
            raise UsageProblem(f"--canonical prints one record; {record} holds {len(docs)}")
        value = record_of(docs[0][1])
        record_ids(value)  # a named error unless it is a canonical record
        sys.stdout.buffer.write(canonical_bytes(value))
        return
    _per_document(record, lambda value: canonical_bytes(record_ids(record_of(value))))


@command(cls=Command)
def mint(
    meta: Annotated[
        str,
        typer.Argument(
            metavar="META", help="arXiv metadata: one object, or JSON lines as in arXiv's bulk snapshot; '-' for stdin."
        ),
    ],
) -> None:
    """Turn arXiv metadata into canonical records (canonical bytes, one record per line)."""
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.mint import mint as mint_record

    _per_document(meta, lambda value: canonical_bytes(mint_record(value)))


@command(cls=Command)
def verify(
    ctx: typer.Context,
    files: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="FILE",
            help="Bundles (or signed audit reports) to check offline, directories of them, or '-' for stdin; nothing is written.",
        ),
    ] = None,
    digest: Annotated[
        Optional[str], typer.Option(metavar="HEX", help="A SHA-256 digest, 64 lowercase hex characters.")
    ] = None,
    signature: Annotated[
        Optional[str], typer.Option(metavar="BASE64", help="An Ed25519 signature over the raw digest, standard base64.")
    ] = None,
    key_id: Annotated[
        Optional[str], typer.Option(metavar="KEY_ID", help="Check against this registry key only.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check bundles offline, or one receipt signature (--digest --signature) against the registry keys."""
    from pithledger.records import keys as keys_

    json_out = _json(ctx, as_json)
    if digest is not None or signature is not None:
        if files:
            raise UsageProblem("give either FILE... or --digest/--signature, not both")
        if digest is None or signature is None:
            raise UsageProblem("--digest and --signature go together")
        raw_digest = keys_.digest_from_hex(digest)
        raw_sig = keys_.b64decode_strict(signature, length=keys_.SIGNATURE_LEN, what="--signature")
        key = keys_.verify_receipt_signature(raw_digest, raw_sig, key_id)
        if json_out:
            emit_json({"status": "valid", "key_id": key.key_id, "fingerprint": key.fingerprint})
        else:
            typer.echo(f"valid: signed by {key.key_id} (fingerprint {key.fingerprint})")
        return
    if not files:
        raise UsageProblem("name at least one FILE, or give --digest and --signature")
    bad = 0

    def skipped(exc: PithledgerError) -> None:
        nonlocal bad
        report(exc)
        if json_out:
            emit_json({"where": "", "status": "error", "code": exc.code, "message": exc.message})
        bad += 1

    inputs = expand_inputs(files, on_error=skipped)
    for item in inputs:
        for where, value in iter_documents(item.path, label=item.label, tolerant=True):
            try:
                if isinstance(value, PithledgerError):
                    raise value
                results, invalid = _check_document(value)
            except PithledgerError as exc:
                report(exc, where)
                if json_out:
                    emit_json({"where": where, "status": "error", "code": exc.code, "message": exc.message})
                bad += 1
                continue
            for result in results:
                if json_out:
                    emit_json({"where": where} | result)
                else:  # each line names its file (file:line in JSON lines) unless one file holds one document
                    named = len(inputs) > 1 or where != item.label
                    say((f"{where}: " if named else "") + _verify_line(result))
            bad += invalid
    if bad:
        raise typer.Exit(1)


def _verify_line(r: dict[str, Any]) -> str:
    if r.get("document") == "audit_report":
        outcome = "consistent" if r["consistent"] else _plural(r["divergent"], "divergent record")
        return f"valid      audit report signed by {r['signed_by']}: {outcome}"
    line = f"{r['status']:<10} {r['event_id']} {r['event_type']} {r['subject']}"
    return line + (f" ({r['trust']})" if r["status"] == "valid" else f" [{r['reason']}] {r['message']}")


def _check_document(value: Any) -> tuple[list[dict[str, Any]], int]:
    """What `verify` reports for one bundle or signed audit report, and how many were invalid.
    A document that is neither raises its named error."""
    from pithledger.audit import verify_report
    from pithledger.records.bundle import read_bundle
    from pithledger.records.events import verify_event

    if isinstance(value, dict) and value.get("report_type") == "pithledger_audit_report":
        who = verify_report(value)
        divergent = value.get("divergent", [])
        if not isinstance(divergent, list) or not isinstance(value.get("consistent", False), bool):
            raise SchemaError(
                "the audit report is signed, but its 'divergent' is not a list or its 'consistent' not true/false",
                hint="the report was built wrongly; ask its signer for a report made by `pithledger audit --sign`",
            )
        return [
            {
                "document": "audit_report",
                "status": "valid",
                "signed_by": who,
                "consistent": bool(value.get("consistent")),
                "divergent": len(divergent),
            }
        ], 0
    results, invalid = [], 0
    for verdict in map(verify_event, read_bundle(value).events):
        results.append(
            {
                "status": verdict.status,
                "event_id": verdict.event_id,
                "event_type": verdict.event_type,
                "subject": verdict.subject,
                "trust": verdict.trust,
                "reason": verdict.reason,
                "message": verdict.message,
            }
        )
        invalid += verdict.status == "invalid"
    return results, invalid


# --- keys and events -------------------------------------------------------------------------------

keys_app = typer.Typer(
    cls=Group,
    help="Local Ed25519 signing keys (owner-only key directory).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(keys_app, name="keys")


@keys_app.command("new", cls=Command)
def keys_new(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="A name for the key.")],
    key_dir: KeyDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a new Ed25519 signing key."""
    from pithledger.records import keys as keys_

    store = _store(key_dir)
    key = store.new(name)
    if _json(ctx, as_json):
        emit_json(keys_.public_key_doc(name, key.public_key) | {"key_dir": str(store.directory)})
    else:
        typer.echo(f"created key {name!r} (fingerprint {keys_.fingerprint_hex(key.public_key)}) in {store.directory}")


@keys_app.command("list", cls=Command)
def keys_list(ctx: typer.Context, key_dir: KeyDirOption = None, as_json: JsonOption = False) -> None:
    """List local keys with their fingerprints."""
    from pithledger.records import keys as keys_

    store = _store(key_dir)
    listed: list[tuple[str, str, PithledgerError | None]] = []
    for name in store.names():  # one damaged key file is named; the others are still listed
        try:
            listed.append((name, keys_.fingerprint_hex(store.load(name).public_key), None))
        except PithledgerError as exc:
            listed.append((name, "", exc))
    if _json(ctx, as_json):
        emit_json(
            {
                "key_dir": str(store.directory),
                "keys": [
                    {"name": n, "fingerprint_sha256_hex": f}
                    if e is None
                    else {"name": n, "error": e.code, "message": e.message}
                    for n, f, e in listed
                ],
            }
        )
    else:
        if not listed:
            typer.echo(f"no keys in {store.directory}; create one with `pithledger keys new NAME`")
        for name, fingerprint, damage in listed:
            if damage is None:
                typer.echo(f"{name}\t{fingerprint}")
            else:
                typer.echo(f"{name}\tDAMAGED [{damage.code}] {damage.message}")
    if any(e is not None for _, _, e in listed):
        report(next(e for _, _, e in listed if e is not None))
        raise typer.Exit(1)


@keys_app.command("export", cls=Command)
def keys_export(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The key to export.")], key_dir: KeyDirOption = None
) -> None:
    """Print the public part of a key (never the secret seed) as JSON."""
    from pithledger.records import keys as keys_

    key = _store(key_dir).load(name)
    emit_json(keys_.public_key_doc(name, key.public_key))


class EventCommand(Command):
    """`event --help` ends with each kind's payload fields, read from the library's payload types
    (loaded only when the help is shown)."""

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        import msgspec

        from pithledger.records.events import PAYLOAD_TYPES

        rows = []
        for kind, typ in sorted(PAYLOAD_TYPES.items()):
            fields = []
            for f in msgspec.structs.fields(typ):
                if kind == "record_created" and f.name == "canonical_sha256":
                    continue  # filled in from canonical_record
                fields.append(f.name + ("" if f.required else " (optional)"))
            rows.append((kind, ", ".join(fields)))
        with formatter.section("Payload fields by kind (`pithledger event KIND --example` prints a filled-in one)"):
            formatter.write_dl(rows)
        super().format_epilog(ctx, formatter)


def _long_number(ctx: typer.Context, text: str, what: str) -> str:
    """A long Pith Number for any ID form: a short form or an arXiv id names a record only through a
    ledger that holds it."""
    from pithledger.records.ids import parse_id

    try:
        parsed = parse_id(text)
    except MalformedId as exc:
        exc.message = f"{what}: {exc.message}"
        raise
    if parsed.kind == "pith_number":
        return parsed.value
    try:
        with _open(ctx) as ledger:
            return ledger.resolve(text)
    except NoLedger:
        raise MalformedId(
            f"{what} {text!r} is not a long Pith Number and there is no ledger to look it up in",
            hint="give the long form pith:YYYY:<26 chars>, or --ledger a ledger that holds the record",
        ) from None


_SIGNER_HINTS = {
    "proof-digest-mismatch": "the .ots proof must stamp the record's canonical bytes: "
    "`pithledger ids --canonical RECORD > record.canon; ots stamp record.canon`",
    "record-subject-mismatch": "leave --subject out for record_created: it is derived from canonical_record",
    "hash-mismatch": "leave canonical_sha256 out of the payload: it is computed from canonical_record",
}


@command(cls=EventCommand)
def event(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help="The event kind (listed below with its payload fields).")],
    key: Annotated[
        Optional[str],
        typer.Option("--key", metavar="NAME", help="Name of the local signing key (required unless --example)."),
    ] = None,
    payload: Annotated[
        Optional[str],
        typer.Option("--payload", metavar="JSON|@FILE", help="The payload as JSON, or @FILE to read it from a file."),
    ] = None,
    subject: Annotated[
        Optional[str],
        typer.Option(
            "--subject",
            metavar="ID",
            help="The record, in any ID form (a short form or arXiv id is looked up in the ledger); derived from the payload for record_created.",
        ),
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", metavar="FILE", help="Write the bundle here instead of stdout.")
    ] = None,
    created_at: Annotated[
        Optional[str],
        typer.Option(
            "--created-at", metavar="TIME", help="Whole-second UTC time, e.g. 2026-05-20T01:30:00Z [default: now]."
        ),
    ] = None,
    signer_id: Annotated[
        Optional[str],
        typer.Option(
            "--signer-id",
            metavar="SIGNER",
            help="Who signs, e.g. an e-mail or ORCID URL [default: the key's fingerprint].",
        ),
    ] = None,
    example: Annotated[
        bool, typer.Option("--example", help="Print a filled-in example payload for KIND and exit (no key needed).")
    ] = False,
    ots: Annotated[
        Optional[Path],
        typer.Option(
            "--ots",
            metavar="FILE",
            help="timestamp_anchor only: a detached OpenTimestamps proof (.ots) to carry as the payload.",
        ),
    ] = None,
    post: Annotated[
        Optional[str],
        typer.Option(
            "--post",
            metavar="URL",
            help="Also submit the signed event to a mirror (as `pithledger submit`): its base URL or a URL pattern with {suffix}/{kind}.",
        ),
    ] = None,
    key_dir: KeyDirOption = None,
) -> None:
    """Sign a new event and write a bundle holding it."""
    from pithledger.records.events import KNOWN_KINDS

    if kind not in KNOWN_KINDS:
        raise UsageProblem(
            f"unknown kind {kind!r}; use one of: {', '.join(sorted(KNOWN_KINDS))}",
            hint="run 'pithledger event --help' for each kind's payload fields",
        )
    if example:
        _print_example(ctx, kind)
        return
    if ots is not None and kind != "timestamp_anchor":
        raise UsageProblem("--ots is for timestamp_anchor events only")
    if ots is not None and payload is not None:
        raise UsageProblem("give either --payload or --ots, not both")
    if payload is None and ots is None:
        raise UsageProblem(
            "--payload is required" + (" (or --ots FILE)" if kind == "timestamp_anchor" else ""),
            hint=f"`pithledger event {kind} --example` prints a payload to start from",
        )
    if key is None:
        raise UsageProblem(
            "--key is required",
            hint="name a local key (`pithledger keys list`), or create one with `pithledger keys new NAME`",
        )
    value = _payload_value(kind, payload, ots)
    record = None
    if kind == "record_created":
        record = _record_of_payload(value)
        if subject is None:
            from pithledger.records.model import record_ids

            subject = record_ids(record).pith_number
    elif subject is None:
        raise UsageProblem(f"--subject is required for {kind} (the record the event is about, in any ID form)")
    number = _long_number(ctx, subject, "--subject")
    if kind == "citation_signature" and isinstance(value.get("cited_pith_number"), str):
        value["cited_pith_number"] = _long_number(ctx, value["cited_pith_number"], "cited_pith_number")
    ev = _sign_and_write(
        ctx, kind, number, value, record, key, key_dir, created_at, signer_id, output, quiet_stdout=post is not None
    )
    if post is not None:
        from ._mirrors import _post_events

        _post_events(ctx, [ev], post, 30.0, settings(ctx).json)
    elif output is not None and settings(ctx).json:  # without -o, stdout already is the bundle (JSON)
        emit_json({"written": str(output), "event_id": ev["event_id"], "kind": kind, "subject": number})


def _print_example(ctx: typer.Context, kind: str) -> None:
    import json

    from ._examples import EXAMPLES, SUBJECT

    value = EXAMPLES.get(kind)
    if value is None:  # a kind newer than these examples: its fields, to fill in
        import msgspec

        from pithledger.records.events import PAYLOAD_TYPES

        value = {
            f.name: f"<{getattr(f.type, '__name__', str(f.type))}>" for f in msgspec.structs.fields(PAYLOAD_TYPES[kind])
        }
    typer.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))
    how = (
        f"pithledger event {kind} --key NAME --payload @payload.json"
        if kind == "record_created"
        else f"pithledger event {kind} --subject ID --key NAME --payload @payload.json"
    )
    _note(
        ctx,
        f"# an example {kind} payload about {SUBJECT} (arXiv 2605.00424); edit it, save it as payload.json, then: {how}",
    )


def _payload_value(kind: str, payload: Optional[str], ots: Optional[Path]) -> dict[str, Any]:
    from pithledger.records.canonical import strict_decode

    if ots is not None:
        import base64

        from pithledger.records import ots as _ots

        raw = read_bytes(str(ots), max_bytes=1024 * 1024)
        try:
            _ots.parse(raw)
        except OtsError as exc:
            raise SchemaError(
                f"{ots} is not an OpenTimestamps proof: {exc}",
                hint="give the detached .ots file that `ots stamp FILE` wrote beside FILE",
            ) from None
        return {"ots_proof_b64": base64.b64encode(raw).decode("ascii")}
    assert payload is not None
    raw = read_bytes(payload[1:]) if payload.startswith("@") else payload.encode("utf-8")
    value = strict_decode(raw, what="--payload")
    if not isinstance(value, dict):
        raise SchemaError("--payload must be a JSON object", hint=f"`pithledger event {kind} --example` prints one")
    return value


def _record_of_payload(value: dict[str, Any]) -> dict[str, Any]:
    from pithledger.records.model import record_ids

    hint = (
        'the payload is {"canonical_record": {...}}: see `pithledger event record_created --example`; '
        "`pithledger mint META.json` makes a canonical record from arXiv metadata"
    )
    record = value.get("canonical_record")
    if not isinstance(record, dict):
        raise SchemaError(
            "a record_created payload needs canonical_record, the canonical record as a JSON object", hint=hint
        )
    try:
        computed = record_ids(record).canonical_sha256
    except PithledgerError as exc:
        exc.message = f"canonical_record: {exc.message}"
        exc.hint = hint
        raise
    value.setdefault("canonical_sha256", computed)
    return record


def _sign_and_write(
    ctx: typer.Context,
    kind: str,
    number: str,
    value: dict[str, Any],
    record: Optional[dict[str, Any]],
    key: str,
    key_dir: Optional[Path],
    created_at: Optional[str],
    signer_id: Optional[str],
    output: Optional[Path],
    *,
    quiet_stdout: bool = False,
) -> dict[str, Any]:
    from pithledger.records.bundle import write_bundle
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import make_event

    signing_key = _store(key_dir).load(key)
    try:
        ev = make_event(kind, number, value, signing_key, created_at=created_at or _now(), signer_id=signer_id)
    except EventInvalid as exc:  # written for the signer: the event was never valid, nothing was altered
        exc.hint = _SIGNER_HINTS.get(
            exc.code,
            f"fix the payload: `pithledger event {kind} --example` prints a valid one, "
            f"`pithledger event --help` lists each kind's fields",
        )
        raise
    bundle = write_bundle(number, [ev], canonical_record=record)
    data = canonical_bytes(bundle) + b"\n"
    if output is not None:
        write_file_atomically(output, data)
        _note(ctx, f"wrote {output}: {kind} {ev['event_id']}")
    elif not quiet_stdout:  # with --post and no -o, stdout carries the verdict line instead
        sys.stdout.buffer.write(data)
    return ev


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
    from pithledger.ingest.apply import Apply

    from ._progress import ApplyProgress, wanted

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
    from pithledger.store import rebuild as rebuild_ledger

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

        from ._view import render

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
        from ._backup import export_all

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
    """Re-verify every event and recompute every state from the log; exit 1 naming each mismatch."""
    from pithledger.store import Ledger

    path = settings(ctx).ledger
    repaired: list[str] = []
    with _fanout(workers, scheduler):
        if repair:
            with Ledger(path) as writer:
                repaired = writer.repair_evidence_usage()
        with _open(ctx, settled=True) as ledger:
            problems = ledger.fsck(reverify=reverify)
            counts = ledger.counts()
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


from . import _backup, _mirrors, _ots, _tlog, _witness  # noqa: E402 - their commands come last in --help, after this module's

_mirrors.command.register(app)  # digest, publish, sync, pull, audit, serve, submit, metadata, latex

_tlog.command.register(app)  # checkpoint, prove, verify-proof, consistency, verify-log
_witness.command.register(app)  # witness, check-evidence
_backup.command.register(app)  # backup
_ots.register(app)  # ots verify
