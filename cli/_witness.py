"""Witness commands (``witness SOURCE``, ``check-evidence FILE``) and the checkpoint check that ``sync``,
``pull`` and ``audit`` run before they read a source (spec/transparency.md §6)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pithledger.cli._base import Command, settings
from pithledger.cli._output import emit_json, say

if TYPE_CHECKING:
    from pithledger.mirror.checkpoints import Check
    from pithledger.mirror.transport import Deadline

from pithledger.cli._options import (
    Commands,
    JsonOption,
    KeyDirOption,
    TimeoutOption,
    _deadline_option,
    _json,
    _note,
    _store,
)

command = Commands()  # added to the app by cli/app.py


def log_check(
    ctx: typer.Context,
    ledger_path: Path | None,
    source: str,
    log_key: Optional[str],
    witness_keys: Optional[list[str]],
    timeout: float,
    deadline: Deadline | float,
    observer: str,
    manifest: bytes | None = None,
) -> Check:
    """The source's checkpoint against what this ledger saw of its log (before anything is read or written),
    remembered at once: whatever the run then commits — all of it, some batches before a deadline, an
    error, Ctrl-C or a kill — came with a checkpoint the ledger remembers, so a later run is checked against
    it (spec/transparency.md §6.4). The check holds the origin's lock until the caller's ``release()``:
    another run of the same origin on this ledger waits, then checks against what this one remembered."""
    from pithledger.mirror.checkpoints import check_source, commit

    def waiting(origin: str) -> None:
        _note(
            ctx,
            f"waiting: another pithledger run is checking the log {origin[:200]} for this ledger; "
            "this one goes on when it ends",
        )

    check = check_source(
        ledger_path,
        source,
        log_key=log_key,
        witness_keys=list(witness_keys or []),
        timeout=timeout,
        deadline=deadline or None,
        observer=observer,
        manifest=manifest,
        hold=ledger_path is not None,
        on_wait=waiting,
    )
    if ledger_path is not None:
        try:
            commit(ledger_path, check)
        except BaseException:
            check.release()
            raise
    return check


@command("witness", cls=Command)
def witness(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE", help="A published mirror (directory or http(s) base URL) whose log to witness."
        ),
    ],
    config: Annotated[
        Path,
        typer.Option(
            "--config", metavar="CONFIG", help="The witness config (JSON: name, key, logs; spec/transparency.md §6.1)."
        ),
    ],
    key_dir: KeyDirOption = None,
    as_json: JsonOption = False,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 600.0,
) -> None:
    """Witness a log by pulling: read SOURCE's checkpoint and tiles, build the consistency proof from the
    size last cosigned, and cosign (C2SP tlog-witness add-checkpoint, run locally). Prints the cosignature
    line. An inconsistent checkpoint is refused (exit 1) and its evidence written."""
    from pithledger.mirror.checkpoints import witness_source
    from pithledger.tlog.witness import Witness, load_config

    cfg = load_config(config)
    wit = Witness.from_config(cfg, _store(key_dir or settings(ctx).key_dir))
    cp, line = witness_source(wit, source, timeout=timeout, deadline=deadline or None)
    if _json(ctx, as_json):
        emit_json(
            {"origin": cp.origin, "size": cp.size, "root": cp.root.hex(), "witness": wit.name, "cosignature": line}
        )
    else:
        sys_out = line if line.endswith("\n") else line + "\n"
        typer.echo(sys_out, nl=False)
        _note(ctx, f"cosigned {cp.origin} size {cp.size} as {wit.name}")


@command("check-evidence", cls=Command)
def check_evidence(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="An evidence file a witness or a sync wrote.")],
    log_key: Annotated[
        Optional[str],
        typer.Option("--log-key", metavar="VKEY", help="The log key you trust (default: the file's log_key)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check, offline, an evidence file of a log that showed two histories: both checkpoints must verify
    under the log's key. Exit 0 when the file proves a fork (two roots for one size, or a proof that
    reaches the new root from another old root), 1 otherwise (an observation that proves nothing by
    itself, a consistent pair, or a damaged file)."""
    from pithledger.errors import BadEvidence, ForkNotProven
    from pithledger.tlog.witness import MAX_FILE
    from pithledger.tlog.witness import check_evidence as check

    try:
        with open(file, "rb") as fh:
            data = fh.read(MAX_FILE + 1)  # bounded: a file of any size (/dev/zero) is refused, not read whole
    except OSError as exc:
        raise BadEvidence(f"cannot read {file}: {exc.strerror}") from None
    verdict = check(data, log_key)
    if _json(ctx, as_json):
        emit_json(
            {
                "file": str(file),
                "proven": verdict.proven,
                "kind": verdict.kind,
                "origin": verdict.origin,
                "old_size": verdict.old_size,
                "new_size": verdict.new_size,
                "message": verdict.message,
            }
        )
        if not verdict.proven:
            raise typer.Exit(1)
        return
    if not verdict.proven:
        raise ForkNotProven(f"{file}: {verdict.origin}: {verdict.message}")
    say(f"fork proven: {verdict.origin}: {verdict.message}")
