"""Typer commands. Each one: parse, call the library, render.

The library is imported inside each command, so that a command loads only what it uses (``state``
never loads the mirror, audit, mint or key code): start-up time is most of a query's time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pithledger.cli._base import Group, Settings, UsageProblem

app = typer.Typer(
    name="pithledger",
    cls=Group,
    help="A mirror for Pith records: verify signed bundles, keep an append-only ledger, merge, audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: "[default: ...]" stays visible, no boxes
)


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


from pithledger.cli import _backup, _ledger, _mirrors, _ots, _records, _serve, _sync, _tlog, _witness  # noqa: E402 - after app and root

_records.command.register(app)  # ids, mint, verify, event
app.add_typer(_records.keys_app, name="keys")
_ledger.command.register(app)  # apply, evidence, rebuild, state, export, log, fsck
_mirrors.command.register(app, "digest", "publish")
_sync.command.register(app)  # sync, pull
_mirrors.command.register(app, "audit")
_serve.command.register(app)  # serve, submit
_mirrors.command.register(app, "metadata", "latex")
_tlog.command.register(app)  # checkpoint, prove, verify-proof, consistency, verify-log, restore-log
_witness.command.register(app)  # witness, check-evidence
_backup.command.register(app)  # backup
_ots.register(app)  # ots verify
