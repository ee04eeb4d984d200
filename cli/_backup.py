"""``backup DEST`` (a consistent, verified copy of the ledger directory while others write) and the
streaming whole-ledger export behind ``export --all`` (spec/storage.md §5, §9)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from pithledger.cli._base import Command, settings
from pithledger.cli._options import Commands, JsonOption, _json, _plural
from pithledger.cli._output import emit_json, say, write_chunks_atomically

command = Commands()  # added to the app by cli/app.py


@command(cls=Command)
def backup(
    ctx: typer.Context,
    dest: Annotated[
        Path,
        typer.Argument(
            metavar="DEST", help="Where the copy goes: a path that does not exist yet (on the same or another disk)."
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Copy the ledger to DEST: one consistent snapshot while others write, verified before it returns.

    The copy (compacted; its display metadata, pull cache and remembered checkpoints with it) is checked
    as fsck checks a ledger and against the snapshot, then renamed into place: DEST never holds half a
    backup. Restore: use DEST as the ledger directory (`--ledger DEST`, or copy it back). spec/storage.md §9.
    """
    from pithledger.api import backup as backup_ledger

    done = backup_ledger(settings(ctx).ledger, dest)
    if _json(ctx, as_json):
        emit_json(done)
        return
    pending = (
        f", {_plural(done['pending'], 'record')} with derivation pending (the next writer finishes it)"
        if done["pending"]
        else ""
    )
    say(f"backup: {done['backup']} verified ({_plural(done['events'], 'event')}, {done['bytes']:,} bytes{pending})")
    if done["cleared"]:  # what killed backups left beside DEST (spec/storage.md §9)
        say(f"backup: removed {', '.join(done['cleared'])}, left by killed backups")


def export_all(ctx: typer.Context, output: Optional[Path]) -> None:
    """``export --all``: every record's bundle as JSON lines, streamed to ``output`` (atomically) or stdout."""
    from pithledger.api import export_all as export_lines

    lines = export_lines(settings(ctx).ledger)
    if output is not None:
        write_chunks_atomically(output, lines)
        return
    out = sys.stdout.buffer
    for line in lines:
        out.write(line)
    out.flush()
