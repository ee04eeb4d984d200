"""The transparency-log commands (issue #22; spec/transparency.md §4-§5): ``checkpoint``, ``prove``,
``verify-proof``, ``consistency`` and ``verify-log``. Registered on the app by cli/app.py; thin like
every command: parse, call ledger/tlog/proofs.py and ledger/mirror/logsite.py, render.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pithledger.cli._base import Command, UsageProblem, settings
from pithledger.cli._options import (
    Commands,
    JsonOption,
    KeyDirOption,
    TimeoutOption,
    _deadline_option,
    _json,
    _note,
    _open,
    _store,
)
from pithledger.cli._output import emit_json, read_bytes, say, write_file_atomically

if TYPE_CHECKING:
    from pithledger.tlog.note import Checkpoint, NoteVerifier
    from pithledger.tlog.signing import LogSigner

command = Commands()  # added to the app by cli/app.py

LogKeyOption = Annotated[
    Optional[str],
    typer.Option(
        "--key",
        metavar="NAME",
        envvar="PITHLEDGER_LOG_KEY",
        show_envvar=True,
        help="The local key that signs this mirror's checkpoints (its log key).",
    ),
]
OriginOption = Annotated[
    Optional[str],
    typer.Option(
        "--origin",
        metavar="ORIGIN",
        help="The log's origin (its name in every checkpoint) [default: from --base-url, else pithledger/<key fingerprint>; spec/transparency.md §4].",
    ),
]
BaseUrlOption = Annotated[
    str,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="The URL the mirror is published or served at: the default origin is derived from it.",
    ),
]
VkeyOption = Annotated[
    Optional[str],
    typer.Option(
        "--log-key",
        metavar="VKEY",
        help="The mirror's verifier key in signed-note form, name+hash+key (its manifest's log_key).",
    ),
]


def log_signer(key: Optional[str], origin: Optional[str], base_url: str, key_dir: Optional[Path]) -> LogSigner:
    """The signer of this mirror's checkpoints, or the named error saying how to name one."""
    from pithledger.errors import NoLogKey
    from pithledger.tlog.proofs import choose_origin
    from pithledger.tlog.proofs import log_signer as signer_of

    if not key:
        raise NoLogKey("signing a checkpoint needs the mirror's log key, and none was named")
    store = _store(key_dir)
    local = store.load(key)
    return signer_of(local, choose_origin(local, origin, base_url.rstrip("/")), store.directory)


def _verifier(vkey: Optional[str], why: str) -> NoteVerifier:
    from pithledger.tlog.proofs import verifier_of

    if not vkey:
        raise UsageProblem(
            f"{why} needs the mirror's verifier key: --log-key VKEY",
            hint="the mirror's pith-mirrors.json names it as log_key (name+hash+key)",
        )
    return verifier_of(vkey)


@command(cls=Command)
def checkpoint(
    ctx: typer.Context,
    key: LogKeyOption = None,
    origin: OriginOption = None,
    base_url: BaseUrlOption = "",
    key_dir: KeyDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the current signed checkpoint of this ledger's log (a C2SP signed note)."""
    from pithledger.tlog.proofs import ledger_checkpoint

    signer = log_signer(key, origin, base_url, key_dir)
    with _open(ctx) as ledger:
        cp, note = ledger_checkpoint(ledger, signer)
    if _json(ctx, as_json):
        emit_json(
            {
                "origin": cp.origin,
                "size": cp.size,
                "root": cp.root.hex(),
                "log_key": signer.vkey,
                "checkpoint": note.decode("utf-8"),
            }
        )
    else:
        sys.stdout.buffer.write(note)
        sys.stdout.flush()


@command(cls=Command)
def prove(
    ctx: typer.Context,
    event_id: Annotated[
        str, typer.Argument(metavar="EVENT_ID", help="The event's id (sha256:<64 hex>, as `pithledger log` prints it).")
    ],
    key: LogKeyOption = None,
    origin: OriginOption = None,
    base_url: BaseUrlOption = "",
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="Write the proof here instead of stdout.")
    ] = None,
    key_dir: KeyDirOption = None,
) -> None:
    """Print an inclusion proof of an event in this mirror's log: its signed checkpoint, the entry, the proof hashes.

    Anyone can check it offline with `pithledger verify-proof FILE --log-key VKEY`
    (the document's format: spec/transparency.md §5).
    """
    from pithledger.records.canonical import canonical_bytes
    from pithledger.tlog.proofs import inclusion_document

    signer = log_signer(key, origin, base_url, key_dir)
    with _open(ctx) as ledger:
        doc = inclusion_document(ledger, signer, event_id)
    data = canonical_bytes(doc) + b"\n"
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    write_file_atomically(output, data)
    _note(
        ctx,
        f"wrote the proof that {event_id} is entry {doc['index']:,} of {signer.name}'s log to {output}; "
        f"check it with: pithledger verify-proof {output} --log-key {signer.vkey}",
    )


def _bundle_events(path: str) -> list[Any]:
    from pithledger.records.canonical import strict_decode

    value = strict_decode(read_bytes(path), what=path)
    if isinstance(value, dict) and isinstance(value.get("events"), list):
        return list(value["events"])
    return [value]


@command(name="verify-proof", cls=Command)
def verify_proof(
    ctx: typer.Context,
    proof: Annotated[
        str, typer.Argument(metavar="FILE", help="A proof document `pithledger prove` wrote ('-' for stdin).")
    ],
    log_key: VkeyOption = None,
    event: Annotated[
        Optional[str],
        typer.Option(
            "--event",
            metavar="FILE",
            help="The event itself (an event or a bundle holding it): also check that it is the one logged, and valid.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check an inclusion proof offline: the checkpoint's signature, then the entry's inclusion in the signed tree.

    Exit 0 when it holds; 1 (a named error) when anything in it was changed. The tree size and root are
    the signed checkpoint's, never the document's.
    """
    from pithledger.errors import BadProof
    from pithledger.mirror.published import ledger_id
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import is_pithledger_envelope, verify_event
    from pithledger.store.tlog_tables import served_bytes
    from pithledger.tlog.proofs import verify_inclusion_document

    verifier = _verifier(log_key, "verify-proof")
    got = verify_inclusion_document(read_bytes(proof), verifier)
    e = got.entry
    event_check: Optional[str] = None
    if event is not None:
        held = [ev for ev in _bundle_events(event) if isinstance(ev, dict) and ledger_id(ev) == e.ledger_id]
        if not held:
            raise BadProof(
                f"{event} holds no event with the entry's id {e.ledger_id}",
                hint="give the event the proof is about (or a bundle holding it)",
            )
        verdict = verify_event(held[0])
        if verdict.status != "valid" or verdict.event_id != e.ledger_id:
            raise BadProof(f"the event in {event} is not valid: {verdict.reason} {verdict.message}".strip())
        if verdict.subject != e.record:
            raise BadProof(f"the event in {event} is about {verdict.subject}, not the entry's record {e.record}")
        served = hashlib.sha256(served_bytes(held[0], canonical_bytes(held[0]))).hexdigest()
        if served != e.sha256:
            raise BadProof(
                f"the event in {event} has the entry's id but not its bytes (served, sha256 {served}; "
                f"the entry names {e.sha256})"
            )
        event_check = (
            "the given event is the one logged (its bytes, as the mirror serves them, hash to the entry's sha256) "
            "and valid (signature checked)"
        )
        if not is_pithledger_envelope(held[0]):
            event_check += "; a Pith record_created, compared in its served form (spec/bundle.md §6)"
    not_proven = (
        "that the event is valid under the merge rules"
        + ("" if event_check else " (give --event FILE to check the event itself)")
        + "; that the mirror still serves it; that the mirror shows every reader this same log "
        "(compare its checkpoints over time: pithledger consistency OLD NEW; witnesses)"
    )
    if _json(ctx, as_json):
        emit_json(
            {
                "valid": True,
                "origin": got.origin,
                "size": got.size,
                "root": got.root.hex(),
                "index": got.index,
                "event_id": e.ledger_id,
                "record": e.record,
                "sha256": e.sha256,
                "event_checked": event_check,
                "not_proven": not_proven,
            }
        )
        return
    say(
        f"proof holds: event {e.ledger_id} (record {e.record}) is entry {got.index:,} of the log {got.origin} "
        f"at size {got.size:,} (root {got.root.hex()}), signed by {verifier.name}+{verifier.key_id.hex()}"
    )
    say(f"the log names the event's bytes by sha256 {e.sha256}")
    if event_check:
        say(event_check)
    say(f"not proven: {not_proven}")


_SIZE = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


def _signed_checkpoint(path: str, verifier: NoteVerifier) -> tuple[Checkpoint, bytes]:
    from pithledger.tlog.note import open_checkpoint

    data = read_bytes(path)
    checkpoint, _ = open_checkpoint(data, [verifier], origin=verifier.name)
    return checkpoint, data


@command(cls=Command)
def consistency(
    ctx: typer.Context,
    old: Annotated[
        str,
        typer.Argument(
            metavar="OLD", help="The older signed checkpoint (a file), or a tree size of this ledger's log."
        ),
    ],
    new: Annotated[
        str,
        typer.Argument(
            metavar="NEW", help="The newer signed checkpoint (a file), or a tree size of this ledger's log."
        ),
    ],
    log_key: VkeyOption = None,
    source: Annotated[
        Optional[str],
        typer.Option(
            "--source",
            metavar="DIR|URL",
            help="Prove from a published mirror's tiles (C2SP tlog-tiles) instead of this ledger.",
        ),
    ] = None,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 600.0,
    as_json: JsonOption = False,
) -> None:
    """Prove and verify that the log at NEW extends the log at OLD (RFC 9162 consistency).

    Exit 0 when it does; 1 with error[inconsistent-log] when it does not (a fork: keep both checkpoints).
    """
    from pithledger.records.keys import b64encode
    from pithledger.tlog.note import Checkpoint
    from pithledger.tlog.proofs import check_consistency
    from pithledger.tlog.tiles import consistency_proof, tree_hash

    sizes = [bool(_SIZE.match(x)) for x in (old, new)]
    if any(sizes) and not all(sizes):
        raise UsageProblem(
            "give two checkpoint files or two sizes",
            hint="e.g. consistency old.checkpoint new.checkpoint --log-key VKEY",
        )
    if all(sizes) and source is not None:
        raise UsageProblem(
            "sizes name trees of this ledger's log; a published source is read against signed checkpoints",
            hint="give two checkpoint files with --source, or leave --source out",
        )
    if all(sizes):
        with _open(ctx) as ledger, ledger.snapshot():
            a, b, have = int(old), int(new), ledger.tlog_size()
            if b > have or a > b:
                raise UsageProblem(f"sizes must satisfy OLD <= NEW <= {have:,}, the size of this ledger's log")
            origin = "(this ledger)"
            cp_old, cp_new = Checkpoint(origin, a, tree_hash(ledger, a)), Checkpoint(origin, b, tree_hash(ledger, b))
            hashes = consistency_proof(ledger, a, b) if a else []
        where = settings(ctx).ledger.as_posix()
    else:
        verifier = _verifier(log_key, "checking signed checkpoints")
        cp_old, _ = _signed_checkpoint(old, verifier)
        cp_new, _ = _signed_checkpoint(new, verifier)
        if cp_old.size > cp_new.size:
            cp_old, cp_new = cp_new, cp_old  # the order of the files does not matter: the sizes say which is older
        if source is None:
            from pithledger.errors import InconsistentLog

            with _open(ctx) as ledger, ledger.snapshot():
                have = ledger.tlog_size()
                if cp_new.size > have:
                    raise UsageProblem(
                        f"the newer checkpoint's tree ({cp_new.size:,}) is larger than this ledger's log ({have:,})",
                        hint="prove from the mirror that signed it: --source DIR|URL",
                    )
                if tree_hash(ledger, cp_new.size) != cp_new.root:
                    raise InconsistentLog(
                        f"this ledger's log at size {cp_new.size:,} is not the tree {new} signs",
                        hint="prove from the mirror that signed it: --source DIR|URL",
                    )
                hashes = consistency_proof(ledger, cp_old.size, cp_new.size) if cp_old.size else []
            where = settings(ctx).ledger.as_posix()
        else:
            from pithledger.mirror.checkpoints import source_tiles
            from pithledger.tlog.tiles import TileClient

            # checkpoint + tiles are all the proof needs: any C2SP tlog-tiles log (spec/transparency.md §6.5)
            client = TileClient(source_tiles(source, timeout=timeout, deadline=deadline or None), cp_new)
            hashes = consistency_proof(client, cp_old.size, cp_new.size) if cp_old.size else []
            where = source
        origin = cp_new.origin
    check_consistency(cp_old, cp_new, hashes)
    if _json(ctx, as_json):
        emit_json(
            {
                "consistent": True,
                "origin": origin,
                "old": {"size": cp_old.size, "root": cp_old.root.hex()},
                "new": {"size": cp_new.size, "root": cp_new.root.hex()},
                "proof": [b64encode(h) for h in hashes],
                "source": where,
            }
        )
        return
    say(
        f"consistent: the tree of size {cp_new.size:,} (root {cp_new.root.hex()}) extends the tree of size "
        f"{cp_old.size:,} (root {cp_old.root.hex()}) of {origin}; {len(hashes)} proof hash(es) from {where}"
    )


@command(name="verify-log", cls=Command)
def verify_log(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="SOURCE", help="A published mirror: a directory or an http(s) base URL.")
    ],
    log_key: VkeyOption = None,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 600.0,
    as_json: JsonOption = False,
) -> None:
    """Check a published mirror's log end to end, knowing only what it publishes.

    Verifies its checkpoint, recomputes the signed root from the entry tiles, fetches every event the log
    names from the record's bundle and checks it against its entry and its signature. Exit 1 when any
    entry's event is missing or does not match; a tampered checkpoint or tile is a named error.
    """
    from pithledger.mirror.logsite import check_published_log

    if log_key is None:
        _note(
            ctx,
            "note: no --log-key: the key is taken from the mirror's own manifest, so this checks the published log "
            "against itself, not that it is the log you trust",
        )
    report = check_published_log(source, log_key, timeout=timeout, deadline=deadline or None)
    if _json(ctx, as_json):
        emit_json(report.document())
    else:
        for f in report.faults:
            where = f"entry {f['index']:,}" if "index" in f else f"record {f['record']}"
            say(f"BAD-ENTRY {where} {f.get('event_id', '')} [{f['reason']}] {f['message']}".replace("  ", " "))
        if report.faults_omitted:
            say(
                f"BAD-ENTRY ... and {report.faults_omitted:,} more fault(s), not listed (the first {len(report.faults):,} are)"
            )
        faults = len(report.faults) + report.faults_omitted
        verdict = "every entry's event is published and matches" if not faults else f"{faults:,} fault(s)"
        say(
            f"log {report.origin} at {source}: size {report.size:,}, root {report.root} recomputed from the entry tiles; "
            f"{report.events_matched:,} event(s) matched across {report.records:,} record(s): {verdict}"
        )
    if report.faults:
        raise typer.Exit(1)


@command(name="restore-log", cls=Command)
def restore_log(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE", help="This mirror's own published log: the publish directory or its http(s) base URL."
        ),
    ],
    log_key: VkeyOption = None,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 3600.0,
    as_json: JsonOption = False,
) -> None:
    """Bring a restored ledger's log back to the log this mirror published, before its key signs again.

    Verifies SOURCE's checkpoint under --log-key (default: the log_key SOURCE's manifest names; the key
    still signs only a tree that extends what it signed, spec/transparency.md §4.1), checks that this
    ledger's log is a prefix of it, then appends the events it lacks in exactly the published log's order
    (fetched from SOURCE's bundles), so its tree at the published size has the published root. SOURCE's tree
    must extend the one the key directory records the log key last signed (an older copy or another log is
    not-the-signed-log, nothing written); without --log-key, a key it holds no record of is refused. Run it after
    restoring a backup, before anything else writes the ledger (docs/operating.md §6); a ledger that
    diverged is refused (log-diverged), nothing written.
    """
    from pithledger.mirror.checkpoints import check_vkeys
    from pithledger.mirror.restore import restore_log as restore

    check_vkeys(log_key, [])  # a mistyped key is named before the ledger is opened
    key_dir = _store(None).directory  # its record of what the log key signed: SOURCE must extend it
    with _open(ctx, write=True) as ledger:
        report = restore(ledger, source, log_key, timeout=timeout, deadline=deadline or None, key_dir=key_dir)
    if _json(ctx, as_json):
        emit_json(report)
        return
    how = {
        "restored": f"{report['appended']:,} event(s) appended in log order",
        "same": "this ledger already holds exactly the published log",
        "extends": f"this ledger's log ({report['before']:,} entries) already extends the published log",
    }[report["status"]]
    say(f"log {report['origin']} at {source}: size {report['size']:,}, root {report['root']}: {how}")
