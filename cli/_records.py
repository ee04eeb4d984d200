"""Commands about records and events: ids, mint, verify, keys, event.
Moved whole from cli/app.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pithledger.cli._base import Command, Group, UsageProblem, settings
from pithledger.cli._options import Commands, JsonOption, KeyDirOption, _json, _note, _now, _open, _plural, _store
from pithledger.cli._output import (
    emit_json,
    expand_inputs,
    iter_documents,
    read_bytes,
    report,
    say,
    write_file_atomically,
)
from pithledger.errors import EventInvalid, MalformedId, NoLedger, OtsError, PithledgerError, SchemaError

command = Commands()


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
    json_out = _json(ctx, as_json)
    if digest is not None or signature is not None:
        if files:
            raise UsageProblem("give either FILE... or --digest/--signature, not both")
        if digest is None or signature is None:
            raise UsageProblem("--digest and --signature go together")
        _verify_receipt(digest, signature, key_id, json_out)
        return
    if not files:
        raise UsageProblem("name at least one FILE, or give --digest and --signature")
    if _verify_files(files, json_out):
        raise typer.Exit(1)


def _verify_receipt(digest: str, signature: str, key_id: str | None, json_out: bool) -> None:
    """`verify --digest --signature`: one receipt signature checked against the registry keys."""
    from pithledger.records import keys as keys_

    raw_digest = keys_.digest_from_hex(digest)
    raw_sig = keys_.b64decode_strict(signature, length=keys_.SIGNATURE_LEN, what="--signature")
    key = keys_.verify_receipt_signature(raw_digest, raw_sig, key_id)
    if json_out:
        emit_json({"status": "valid", "key_id": key.key_id, "fingerprint": key.fingerprint})
    else:
        typer.echo(f"valid: signed by {key.key_id} (fingerprint {key.fingerprint})")


def _verify_files(files: list[str], json_out: bool) -> int:
    """`verify FILE...`: each bundle or signed audit report checked offline, a line (or JSON line) per result;
    how many were bad (invalid events, unreadable inputs and documents)."""
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
    return bad


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
    "bad-headers": "give the attested block's header first, then the blocks after it, one per line, as "
    "`bitcoin-cli getblockheader HASH false` prints them (spec/events.md §3.1.3)",
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
    headers: Annotated[
        Optional[Path],
        typer.Option(
            "--headers",
            metavar="FILE",
            help="With --ots: Bitcoin block headers to carry beside the proof, 160 hex digits each (as `bitcoin-cli getblockheader HASH false` prints them), the attested block's first, then the blocks after it in order; enough work makes the anchor checked (spec/events.md §3.1.3).",
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
    if headers is not None and ots is None:
        raise UsageProblem("--headers goes with --ots (the proof whose Bitcoin attestation they show)")
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
    value = _payload_value(kind, payload, ots, headers)
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
    bundle = _sign_and_write(
        ctx, kind, number, value, record, key, key_dir, created_at, signer_id, output, quiet_stdout=post is not None
    )
    ev = bundle["events"][0]
    if post is not None:
        from pithledger.cli._serve import _post_events

        # Not accepted (a kind with no action URL, a refusal, no answer): exit 1, and without -o the signed
        # bundle is printed then, not lost (issue #41 item 5).
        _post_events(ctx, [ev], post, 30.0, settings(ctx).json, signed=bundle, kept_in=output)
    elif output is not None and settings(ctx).json:  # without -o, stdout already is the bundle (JSON)
        emit_json({"written": str(output), "event_id": ev["event_id"], "kind": kind, "subject": number})


def _print_example(ctx: typer.Context, kind: str) -> None:
    import json

    from pithledger.cli._examples import EXAMPLES, SUBJECT

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


def _payload_value(kind: str, payload: Optional[str], ots: Optional[Path], headers: Optional[Path]) -> dict[str, Any]:
    from pithledger.records.canonical import strict_decode

    if ots is not None:
        import base64

        from pithledger.records import ots as _ots

        raw = read_bytes(str(ots), max_bytes=1024 * 1024)
        try:
            _ots.parse(raw, strict=True)  # as event validity reads it (spec/events.md §3.1.1)
        except OtsError as exc:
            raise SchemaError(
                f"{ots} is not an OpenTimestamps proof: {exc}",
                hint="give the detached .ots file that `ots stamp FILE` wrote beside FILE",
            ) from None
        value = {"ots_proof_b64": base64.b64encode(raw).decode("ascii")}
        if headers is not None:
            value["bitcoin_headers_b64"] = base64.b64encode(_headers_run(headers)).decode("ascii")
        return value
    assert payload is not None
    raw = read_bytes(payload[1:]) if payload.startswith("@") else payload.encode("utf-8")
    value = strict_decode(raw, what="--payload")
    if not isinstance(value, dict):
        raise SchemaError("--payload must be a JSON object", hint=f"`pithledger event {kind} --example` prints one")
    return value


def _note_unchecked_anchor(ctx: typer.Context, ev: dict[str, Any]) -> None:
    """Headers that check but whose attested block carries too little work sign a claimed anchor: say so."""
    from pithledger.records import bitcoin
    from pithledger.records.events import verify_event

    if verify_event(ev).facts.get("bitcoin_block") is None:
        _note(
            ctx,
            f"the headers check, but the attested block's own work is under the minimum of 2^"
            f"{bitcoin.CONSENSUS_CHAIN.min_work.bit_length() - 1} hashes: the anchor will show as claimed, not checked "
            "(spec/events.md §3.1.3)",
        )


def _headers_run(path: Path) -> bytes:
    """The headers of ``--headers``: hex, one per line (blank lines and white space ignored), concatenated."""
    from pithledger.errors import OtsBadHeader
    from pithledger.ingest.inputs import read_headers

    try:
        return read_headers(str(path))
    except OtsBadHeader as exc:
        raise SchemaError(
            exc.message,
            hint="one header per line, the attested block's first, as `bitcoin-cli getblockheader HASH false` prints it",
        ) from None


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
    """Sign the event, write its bundle to ``output`` (or stdout unless ``quiet_stdout``); the bundle."""
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
    if kind == "timestamp_anchor" and value.get("bitcoin_headers_b64") is not None:
        _note_unchecked_anchor(ctx, ev)
    bundle = write_bundle(number, [ev], canonical_record=record)
    data = canonical_bytes(bundle) + b"\n"
    if output is not None:
        write_file_atomically(output, data)
        _note(ctx, f"wrote {output}: {kind} {ev['event_id']}")
    elif not quiet_stdout:  # with --post and no -o, stdout carries the verdict line instead
        sys.stdout.buffer.write(data)
    return bundle
