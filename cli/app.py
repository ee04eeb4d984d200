"""Typer commands. Each one: parse, call the library, render."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import msgspec
import typer

import pithledger
from pithledger import keys as keys_
from pithledger.canonical import canonical_bytes
from pithledger.bundle import Bundle, read_bundle, write_bundle
from pithledger.canonical import strict_decode
from pithledger.errors import CannotRead, MalformedId, NoLedger, PithledgerError, SchemaError
from pithledger.events import KNOWN_KINDS, make_event, verify_event
from pithledger.audit import compare, report_value, sign_report, verify_report
from pithledger.ids import parse_id
from pithledger.mirror import open_source, publish as publish_mirror, sync as sync_mirror
from pithledger.store import Ledger, Rejection, default_ledger_path
from pithledger.merge import MERGE_VERSION
from pithledger.mint import mint as mint_record
from pithledger.model import record_ids

from ._output import emit_json, iter_documents, read_bytes, report, write_file_atomically

app = typer.Typer(
    name="pithledger",
    help="A mirror for Pith records: verify signed bundles, keep an append-only ledger, merge, audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pithledger {pithledger.__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    ctx: typer.Context,
    ledger: Annotated[
        Optional[Path],
        typer.Option("--ledger", envvar="PITHLEDGER_LEDGER", help="Ledger directory [default: $XDG_DATA_HOME/pithledger]."),
    ] = None,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """pithledger: verify, store, merge and audit Pith records and their signed events."""
    ctx.obj = ledger or default_ledger_path()


def _open(ctx: typer.Context, *, write: bool = False) -> Ledger:
    """Queries open the ledger read-only (they never wait for a writer); apply and sync write."""
    return Ledger(ctx.obj, create=write, readonly=not write)


def _per_document(path: str, render: Callable[[Any], bytes]) -> None:
    """Render every document of a file on its own line; a bad document is reported, the rest go on,
    and the exit code is 1 if any failed."""
    failed = 0
    for where, value in iter_documents(path):
        try:
            sys.stdout.buffer.write(render(value) + b"\n")
        except PithledgerError as exc:
            report(exc, where)
            failed += 1
    sys.stdout.flush()
    if failed:
        raise typer.Exit(1)


@app.command()
def ids(
    record: Annotated[str, typer.Argument(help="A canonical record, or a bundle or state document holding one; '-' for stdin; JSON lines allowed.")],
) -> None:
    """Print canonical_sha256, the long and short Pith Number and the six aliases of a record."""

    def render(value: Any) -> bytes:
        if isinstance(value, dict) and isinstance(value.get("current"), dict) and "canonical_record" in value["current"]:
            value = value["current"]  # a state document
        if isinstance(value, dict) and "canonical_record" in value:  # a bundle, an event payload, a vector line
            value = value["canonical_record"]
        return canonical_bytes(record_ids(value))

    _per_document(record, render)


@app.command()
def mint(
    meta: Annotated[str, typer.Argument(help="arXiv metadata: one object, or JSON lines as in arXiv's bulk snapshot; '-' for stdin.")],
) -> None:
    """Turn arXiv metadata into canonical records (canonical bytes, one record per line)."""
    _per_document(meta, lambda value: canonical_bytes(mint_record(value)))


@app.command()
def verify(
    files: Annotated[Optional[list[str]], typer.Argument(help="Bundles to check offline; nothing is written.")] = None,
    digest: Annotated[Optional[str], typer.Option(help="A SHA-256 digest, 64 lowercase hex characters.")] = None,
    signature: Annotated[Optional[str], typer.Option(help="An Ed25519 signature over the raw digest, standard base64.")] = None,
    key_id: Annotated[Optional[str], typer.Option(help="Check against this registry key only.")] = None,
) -> None:
    """Check bundles offline, or one receipt signature (--digest --signature) against the registry keys."""
    if digest is not None or signature is not None:
        if files:
            raise typer.BadParameter("give either FILE... or --digest/--signature, not both")
        if digest is None or signature is None:
            raise typer.BadParameter("--digest and --signature go together")
        raw_digest = keys_.digest_from_hex(digest)
        raw_sig = keys_.b64decode_strict(signature, length=keys_.SIGNATURE_LEN, what="--signature")
        key = keys_.verify_receipt_signature(raw_digest, raw_sig, key_id)
        typer.echo(f"valid: signed by {key.key_id} (fingerprint {key.fingerprint})")
        return
    if not files:
        raise typer.BadParameter("name at least one FILE, or give --digest and --signature")
    bad = 0
    for path in files:
        for where, value in _documents_or_report(path):
            if value is _UNREADABLE:
                bad += 1
                continue
            try:
                lines, invalid = _check_document(value)
            except PithledgerError as exc:
                report(exc, where)
                bad += 1
                continue
            for line in lines:
                typer.echo(line)
            bad += invalid
    if bad:
        raise typer.Exit(1)


_UNREADABLE = object()


def _check_document(value: Any) -> tuple[list[str], int]:
    """Lines `verify` prints for one bundle or signed audit report, and how many were invalid.
    A document that is neither raises its named error."""
    if isinstance(value, dict) and value.get("report_type") == "pithledger_audit_report":
        who = verify_report(value)
        outcome = "consistent" if value.get("consistent") else f"{len(value.get('divergent', []))} divergent records"
        return [f"valid      audit report signed by {who}: {outcome}"], 0
    lines, invalid = [], 0
    for verdict in map(verify_event, read_bundle(value).events):
        line = f"{verdict.status:<10} {verdict.event_id} {verdict.event_type} {verdict.subject}"
        line += f" ({verdict.trust})" if verdict.status == "valid" else f" [{verdict.reason}] {verdict.message}"
        lines.append(line)
        invalid += verdict.status == "invalid"
    return lines, invalid


def _documents_or_report(path: str) -> Iterator[tuple[str, Any]]:
    """Documents of a file; a file that cannot be read or decoded is reported and yields a marker."""
    try:
        yield from iter_documents(path)
    except PithledgerError as exc:
        report(exc, path)
        yield path, _UNREADABLE


# --- keys and events -------------------------------------------------------------------------------

keys_app = typer.Typer(help="Local Ed25519 signing keys (owner-only key directory).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

KeyDirOption = Annotated[
    Optional[Path],
    typer.Option("--key-dir", envvar="PITHLEDGER_KEYS", help="Key directory [default: $XDG_CONFIG_HOME/pithledger/keys]."),
]


def _store(key_dir: Optional[Path]) -> keys_.KeyStore:
    return keys_.KeyStore(key_dir or keys_.default_key_dir())


@keys_app.command("new")
def keys_new(name: Annotated[str, typer.Argument(help="A name for the key.")], key_dir: KeyDirOption = None) -> None:
    """Create a new Ed25519 signing key."""
    store = _store(key_dir)
    key = store.new(name)
    typer.echo(f"created key {name!r} (fingerprint {keys_.fingerprint_hex(key.public_key)}) in {store.directory}")


@keys_app.command("list")
def keys_list(key_dir: KeyDirOption = None) -> None:
    """List local keys with their fingerprints."""
    store = _store(key_dir)
    names = store.names()
    if not names:
        typer.echo(f"no keys in {store.directory}; create one with `pithledger keys new NAME`")
    for name in names:
        typer.echo(f"{name}\t{keys_.fingerprint_hex(store.load(name).public_key)}")


@keys_app.command("export")
def keys_export(name: Annotated[str, typer.Argument(help="The key to export.")], key_dir: KeyDirOption = None) -> None:
    """Print the public part of a key (never the secret seed) as JSON."""
    key = _store(key_dir).load(name)
    emit_json(keys_.public_key_doc(name, key.public_key))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@app.command()
def event(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="Event kind: " + ", ".join(sorted(KNOWN_KINDS)) + ".")],
    key: Annotated[str, typer.Option("--key", help="Name of the local signing key.")],
    payload: Annotated[str, typer.Option("--payload", help="The payload as JSON, or @FILE to read it from a file.")],
    subject: Annotated[Optional[str], typer.Option("--subject", help="The record's long Pith Number (derived from the payload for record_created).")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the bundle here instead of stdout.")] = None,
    created_at: Annotated[Optional[str], typer.Option("--created-at", help="Whole-second UTC time [default: now].")] = None,
    signer_id: Annotated[Optional[str], typer.Option("--signer-id", help="Who signs, e.g. an e-mail or ORCID URL [default: the key's fingerprint].")] = None,
    key_dir: KeyDirOption = None,
) -> None:
    """Sign a new event and write a bundle holding it."""
    if kind not in KNOWN_KINDS:
        raise typer.BadParameter(f"unknown kind {kind!r}; use one of: {', '.join(sorted(KNOWN_KINDS))}")
    raw = read_bytes(payload[1:]) if payload.startswith("@") else payload.encode("utf-8")
    value = strict_decode(raw, what="--payload")
    if not isinstance(value, dict):
        raise SchemaError("--payload must be a JSON object")
    record = value.get("canonical_record") if kind == "record_created" else None
    if record is not None and "canonical_sha256" not in value:
        value["canonical_sha256"] = record_ids(record).canonical_sha256
    if subject is None:
        if record is None:
            raise typer.BadParameter("--subject is required (the record's long Pith Number)")
        subject = record_ids(record).pith_number
    parsed = parse_id(subject)
    if parsed.kind == "pith_number":
        number = parsed.value
    else:  # a short form or an arXiv id names a record only through a ledger that holds it
        try:
            with _open(ctx) as ledger:
                number = ledger.resolve(subject)
        except NoLedger:
            raise MalformedId(
                f"--subject {subject!r} is not a long Pith Number and there is no ledger to look it up in",
                hint="give the long form pith:YYYY:<26 chars>, or --ledger a ledger that holds the record",
            ) from None
    signing_key = _store(key_dir).load(key)
    when = created_at or _now()
    ev = make_event(kind, number, value, signing_key, created_at=when, signer_id=signer_id)
    bundle = write_bundle(number, [ev], canonical_record=record)
    data = canonical_bytes(bundle) + b"\n"
    if output is None:
        sys.stdout.buffer.write(data)
    else:
        write_file_atomically(output, data)
        typer.echo(f"wrote {output}: {kind} {ev['event_id']}", err=True)


# --- the ledger ------------------------------------------------------------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _input_files(inputs: list[str]) -> list[str]:
    files: list[str] = []
    for item in inputs:
        path = Path(item)
        if item != "-" and path.is_dir():
            found = sorted(str(p) for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
            if not found:
                raise CannotRead(f"{item} holds no .json or .jsonl files")
            files += found
        else:
            files.append(item)
    return files


def _bundles(files: list[str]) -> Iterator[tuple[str, Bundle]]:
    for path in files:
        for where, value in iter_documents(path):
            try:
                yield where, read_bundle(value)
            except PithledgerError as exc:
                exc.message = f"{where}: {exc.message}"
                raise


@app.command()
def apply(
    ctx: typer.Context,
    inputs: Annotated[list[str], typer.Argument(help="Bundle files (.json, or .jsonl with one bundle per line), directories of them, or '-' for stdin.")],
    batch_size: Annotated[int, typer.Option(help="Events per durable transaction.", min=1)] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Verify and ingest bundles, idempotently: new events are appended, duplicates skipped."""
    with ExitStack() as stack:
        if "-" in inputs:  # read twice below: once to check, once to apply
            spool = stack.enter_context(tempfile.NamedTemporaryFile(prefix="pithledger-stdin-", suffix=".jsonl"))
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            inputs = [spool.name if i == "-" else i for i in inputs]
        files = _input_files(inputs)
        total = bundles = 0
        for _, bundle in _bundles(files):  # pass 1: every structural fault before anything is written
            total += len(bundle.events)
            bundles += 1
        ledger = stack.enter_context(_open(ctx, write=True))
        summary = {"bundles": bundles, "events": total, "new": 0, "duplicate": 0, "invalid": 0, "unverified": 0, "batches": 0}
        touched: set[str] = set()
        rejected: list[Rejection] = []
        batch: list[Bundle] = []
        size = 0
        progress = sys.stderr.isatty() and not as_json and total > batch_size

        def flush() -> None:
            nonlocal batch, size
            if not batch:
                return
            result = ledger.apply_batch(batch)
            for key in ("new", "duplicate", "invalid", "unverified"):
                summary[key] += getattr(result, key)
            summary["batches"] += 1
            touched.update(result.touched)
            rejected.extend(result.rejected)
            batch, size = [], 0
            if progress:
                done = summary["new"] + summary["duplicate"]
                typer.echo(f"\r  applied {done:,}/{total:,} events", err=True, nl=False)

        for _, bundle in _bundles(files):  # pass 2: group commit, one transaction per batch
            batch.append(bundle)
            size += len(bundle.events)
            if size >= batch_size:
                flush()
        flush()
        if progress:
            typer.echo("", err=True)
    summary["records_touched"] = len(touched)
    if as_json:
        emit_json(summary | {"rejected": [msgspec.to_builtins(r) for r in rejected]})
    else:
        for r in rejected:
            typer.echo(rejection_line(r))
        typer.echo(
            f"applied {summary['events']} events from {bundles} bundles: {summary['new']} new, {summary['duplicate']} duplicate, "
            f"{summary['invalid']} invalid, {summary['unverified']} unverified; {len(touched)} records touched "
            f"({summary['batches']} batches) -> {ctx.obj}"
        )
    if summary["invalid"]:
        typer.echo("invalid events are kept as evidence (`pithledger evidence ID`), outside every state and digest", err=True)
        raise typer.Exit(1)


def rejection_line(r: Rejection) -> str:
    """One line per rejected offer: what it was, why, and where it went."""
    where = f"copy sha256:{r.copy_sha256}" + ("" if r.kept else ", not kept: the evidence cap is reached")
    return f"{r.status:<10} {r.subject} {r.event_type} [{r.reason}] {r.message} ({where})"


@app.command()
def state(ctx: typer.Context, ident: Annotated[str, typer.Argument(metavar="ID", help="Any identifier form: long or short Pith Number, 8/12/16/26-char suffix, arXiv id (with or without vN), DOI.")]) -> None:
    """Print the merged state document of a record (canonical JSON)."""
    with _open(ctx) as ledger:
        subject = ledger.resolve(ident)
        sys.stdout.buffer.write(ledger.state_bytes(subject) + b"\n")


@app.command()
def evidence(
    ctx: typer.Context,
    ident: Annotated[Optional[str], typer.Argument(metavar="[ID]", help="A record, any identifier form; without it, a summary of all evidence held.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List what this mirror received about a record but cannot fold (invalid or unverified copies).

    Evidence lies outside consensus: it never changes a state or a digest. Its caps are in spec/storage.md."""
    with _open(ctx) as ledger:
        if ident is None:
            usage = ledger.evidence_usage()
            per_record = sorted(ledger.evidence_subjects())
            if as_json:
                emit_json({"entries": usage.entries, "bytes": usage.bytes,
                           "records": {s: {"entries": u.entries, "bytes": u.bytes} for s, u in per_record},
                           "limits": msgspec.to_builtins(ledger.evidence_limits)})
                return
            for subject, u in per_record:
                typer.echo(f"{u.entries:>6} {subject}")
            typer.echo(f"evidence held: {usage.entries} copies, {usage.bytes:,} bytes, about {len(per_record)} records")
            return
        subject = _evidence_subject(ledger, ident)
        held = ledger.evidence(subject)
    if as_json:
        for copy, entry in held:
            v = entry.verdict
            emit_json({"copy_sha256": copy, "subject": subject, "status": v.status, "reason": v.reason, "message": v.message,
                       "event_type": v.event_type, "declared_event_id": v.event_id, "event": msgspec.json.decode(entry.event)})
        return
    for copy, entry in held:
        v = entry.verdict
        typer.echo(f"{v.status:<10} {v.event_type} [{v.reason}] {v.message} (copy sha256:{copy})")
    typer.echo(f"{len(held)} rejected input{'' if len(held) == 1 else 's'} held about {subject}", err=True)


def _evidence_subject(ledger: Ledger, ident: str) -> str:
    """Evidence may concern a record no valid event names yet: a long Pith Number is taken as given."""
    parsed = parse_id(ident)
    if parsed.kind == "pith_number":
        return parsed.value
    return ledger.resolve(ident)


@app.command()
def rebuild(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Rebuild the ledger from its log under this pithledger's merge version (after an upgrade).

    Every received event is re-verified and re-applied into a new ledger beside the old one, which is
    then swapped in; the old ledger is kept as <name>.<version>-backup. Nothing is lost."""
    from pithledger.store import rebuild as rebuild_ledger

    counts = rebuild_ledger(ctx.obj)
    if as_json:
        emit_json(counts)
        return
    if counts.get("finished_interrupted_rebuild"):
        typer.echo(f"finished an interrupted rebuild of {ctx.obj}")
        return
    typer.echo(f"rebuilt {ctx.obj} from {counts['events_read']} received events ({counts['old_merge_version']} -> "
               f"{MERGE_VERSION}): {counts['new']} valid, {counts['duplicate']} duplicate, {counts['invalid']} invalid and "
               f"{counts['unverified']} unverified kept as evidence; the old ledger is at {counts['backup']}")


@app.command()
def export(
    ctx: typer.Context,
    ident: Annotated[str, typer.Argument(metavar="ID", help="Any identifier form.")],
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
) -> None:
    """Write a bundle holding the record and all its events as received."""
    with _open(ctx) as ledger:
        data = canonical_bytes(ledger.export(ledger.resolve(ident))) + b"\n"
    if output is None:
        sys.stdout.buffer.write(data)
    else:
        write_file_atomically(output, data)


@app.command()
def log(
    ctx: typer.Context,
    since: Annotated[int, typer.Option(help="Start at this sequence number.", min=0)] = 0,
    as_json: JsonOption = False,
) -> None:
    """List events in this mirror's append order."""
    with _open(ctx) as ledger:
        for entry in ledger.log(since):
            v = entry.verdict
            if as_json:
                emit_json({"seq": entry.seq, "event_id": v.event_id, "event_type": v.event_type, "subject": v.subject,
                           "status": v.status, "reason": v.reason})
            else:
                typer.echo(f"{entry.seq:>8} {v.event_id} {v.status:<10} {v.event_type:<20} {v.subject}" + (f" [{v.reason}]" if v.reason else ""))


@app.command()
def fsck(ctx: typer.Context) -> None:
    """Re-verify every event and recompute every state from the log; exit 1 naming each mismatch."""
    with _open(ctx) as ledger:
        problems = ledger.fsck()
        counts = ledger.counts()
    for problem in problems:
        typer.echo(f"MISMATCH {problem}")
    if problems:
        typer.echo(f"fsck: {len(problems)} problems in {ctx.obj}", err=True)
        raise typer.Exit(1)
    typer.echo(f"fsck: ok ({counts['events']} events, {counts['records']} records) {ctx.obj}")


# --- mirrors ---------------------------------------------------------------------------------------


@app.command()
def digest(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print this mirror's order-independent roots (event sets and states)."""
    with _open(ctx) as ledger:
        root = ledger.root()
        counts = ledger.counts()
    doc = {"events_root": root.events.hex(), "states_root": root.states.hex(), "records": counts["records"],
           "events": counts["events"], "digest_version": "pithledger-digest-v1"}
    if as_json:
        emit_json(doc)
    else:
        typer.echo(f"events_root {doc['events_root']}\nstates_root {doc['states_root']}\n{counts['records']} records, {counts['events']} events")


@app.command()
def publish(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="Where to write the static mirror tree.")],
    key: Annotated[Optional[str], typer.Option("--key", help="Local key whose public part the manifest names.")] = None,
    base_url: Annotated[str, typer.Option("--base-url", help="The URL the tree will be served at (for the manifest).")] = "",
    key_dir: KeyDirOption = None,
) -> None:
    """Write (or update) a static mirror tree any web server can host."""
    signing = _store(key_dir).load(key) if key else None
    with _open(ctx) as ledger:
        counts = publish_mirror(ledger, directory, signing, base_url.rstrip("/"))
    typer.echo(f"published to {directory}: {counts['records_written']} records written, "
               f"{counts['nodes_written']} digest nodes written, {counts['nodes_removed']} removed")


@app.command()
def sync(ctx: typer.Context, source: Annotated[str, typer.Argument(help="A published mirror: a directory or an http(s) base URL.")],
         as_json: JsonOption = False) -> None:
    """Fetch from a published mirror what this ledger lacks, walking only where digests differ."""
    with _open(ctx, write=True) as ledger:
        counts = sync_mirror(ledger, source)
    if as_json:
        emit_json(counts | {"rejected": [msgspec.to_builtins(r) for r in counts["rejected"]]})
    else:
        for r in counts["rejected"]:
            typer.echo(rejection_line(r))
        typer.echo(f"synced from {source}: {counts['records_fetched']} records fetched, {counts['new']} new events, "
                   f"{counts['duplicate']} duplicate, {counts['invalid']} invalid ({counts['digests_read']} digests read)")
    if counts["invalid"]:
        raise typer.Exit(1)


@app.command()
def audit(
    a: Annotated[str, typer.Argument(help="A ledger directory, a published directory, or an http(s) URL.")],
    b: Annotated[str, typer.Argument(help="The other side.")],
    as_json: JsonOption = False,
    sign: Annotated[Optional[str], typer.Option("--sign", help="Sign the report with this local key (JSON output).")] = None,
    key_dir: KeyDirOption = None,
) -> None:
    """Compare two mirrors: exit 0 when consistent, else name every divergent record and the event ids each side lacks."""
    side_a = open_source(a)
    # LMDB allows one handle per environment and process: a ledger audited against itself is shared.
    side_b = side_a if Path(a).resolve() == Path(b).resolve() else open_source(b)
    try:
        result = compare(side_a, side_b)
    finally:
        for side in {id(side_a): side_a, id(side_b): side_b}.values():
            if isinstance(side, Ledger):
                side.close()
    doc = report_value(result, a, b)
    if sign:
        emit_json(sign_report(doc, _store(key_dir).load(sign), _now()))
    elif as_json:
        emit_json(doc | {"digests_read": result.digests_read})
    else:
        if result.consistent:
            typer.echo(f"consistent: events_root {result.a_root['events']} states_root {result.a_root['states']}")
        for d in result.divergent:
            line = f"DIVERGENT {d.pith_number} {d.kind}"
            if d.a_lacks:
                line += f"; A lacks {', '.join(d.a_lacks)}"
            if d.b_lacks:
                line += f"; B lacks {', '.join(d.b_lacks)}"
            typer.echo(line)
        if result.merge_bug_suspected:
            typer.echo("both mirrors hold the same events yet states differ: a merge bug or a tampered stored state "
                       "(run `pithledger fsck` on each ledger)")
        if not result.consistent:
            typer.echo(f"{len(result.divergent)} divergent records ({result.digests_read} digests read)")
    if not result.consistent:
        raise typer.Exit(1)
