"""What the command modules share: option types, the small helpers every command calls (open the
ledger, the key store, --json, notes), and :class:`Commands`, which lets a module define commands that
cli/app.py adds to the app. app.py and the command modules (_records.py, _ledger.py, _mirrors.py, _sync.py,
_serve.py, _tlog.py, _witness.py ...) import from here, so no command module imports app.py (and app.py imports them: no circle).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer

from pithledger.cli._base import UsageProblem, settings

if TYPE_CHECKING:
    from pithledger.records.keys import KeyStore
    from pithledger.store import Ledger, Rejection

_F = TypeVar("_F", bound=Callable[..., Any])


class Commands:
    """The commands a module defines with ``@command(...)`` (the arguments of ``typer.Typer.command``),
    added to an app in the order they were defined by :meth:`register` (cli/app.py calls it)."""

    def __init__(self) -> None:
        self._defined: list[tuple[tuple[Any, ...], dict[str, Any], Callable[..., Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Callable[[_F], _F]:
        def define(function: _F) -> _F:
            self._defined.append((args, kwargs, function))
            return function

        return define

    def register(self, app: typer.Typer, *names: str) -> None:
        """Add the commands, or only those of the functions named (in the order they were defined), so that
        cli/app.py can interleave the commands of several modules in --help's order."""
        for args, kwargs, function in self._defined:
            if not names or function.__name__ in names:
                app.command(*args, **kwargs)(function)


def _open(ctx: typer.Context, *, write: bool = False, settled: bool = False) -> Ledger:
    """Queries open the ledger read-only (they never wait for a writer); apply and sync write.
    ``settled``: for readers of the derived views as a whole (digest, publish, fsck): pending
    derivation is finished first (spec/storage.md §3.1)."""
    from pithledger.store import Ledger, open_settled

    if settled:
        return open_settled(settings(ctx).ledger)
    return Ledger(settings(ctx).ledger, create=write, readonly=not write)


def _json(ctx: typer.Context, as_json: bool) -> bool:
    return as_json or settings(ctx).json


def _note(ctx: typer.Context, text: str) -> None:
    """A note for a person on stderr; --quiet silences it."""
    if not settings(ctx).quiet:
        typer.echo(text, err=True)


JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]

# A global option (the root's, which also reads $PITHLEDGER_KEYS), declared again by the commands that
# use keys so that their help lists it; given to the command it wins over the global one.
KeyDirOption = Annotated[
    Optional[Path],
    typer.Option(
        "--key-dir",
        metavar="DIR",
        help="Key directory [default: $XDG_CONFIG_HOME/pithledger/keys, i.e. ~/.config/pithledger/keys]; "
        "here or before the command, it wins over $PITHLEDGER_KEYS.",
    ),
]


def _store(key_dir: Optional[Path]) -> KeyStore:
    from pithledger.cli._base import current_settings
    from pithledger.records import keys as keys_

    return keys_.KeyStore(key_dir or current_settings().key_dir or keys_.default_key_dir())


TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        min=0.001,
        help="Wall-clock seconds for one whole HTTP request, redirects included.",
    ),
]


def _deadline_option() -> Any:
    return typer.Option(
        "--deadline", metavar="SECONDS", min=0, help="Wall-clock seconds for all the reads of the run; 0 for no limit."
    )


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


#: Where the parallel work of a command runs (ledger/fanout.py, spec/storage.md §7): one definition
#: for every command that fans out.
WorkersOption = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        metavar="N",
        min=0,
        show_default=False,
        help="Worker processes for the pure parallel work (checking inputs, verifying, deriving states); 0 works in place "
        "[default: all cores].",
    ),
]
SchedulerOption = Annotated[
    Optional[str],
    typer.Option(
        "--scheduler",
        metavar="ADDRESS",
        show_default=False,
        help="Run that work on the Dask distributed cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786; needs "
        "pip install 'pithledger[dask]', and pithledger on its workers); the ledger is still written here.",
    ),
]


def _fanout(workers: Optional[int], scheduler: Optional[str]) -> Any:
    """The context in which a command's ledger handles share the chosen executor (closed at the end)."""
    from pithledger.fanout import Fanout, using

    if workers is not None and scheduler:
        raise UsageProblem(
            "--workers and --scheduler both given",
            hint="give --scheduler to use a Dask cluster, or --workers N for this machine",
        )
    fan = Fanout.choose(workers, scheduler)
    if scheduler:  # a lost worker or scheduler is handled (its parts redone here): Dask's logs of it are noise
        import logging

        for name in [n for n in logging.root.manager.loggerDict if n.split(".")[0] in ("distributed", "tornado")] + [
            "distributed"
        ]:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    return using(fan)


# sync, pull and audit: the source's log (spec/transparency.md §6.4).
LogKeyOption = Annotated[
    Optional[str],
    typer.Option(
        "--log-key",
        metavar="VKEY",
        help=(
            "The source log's verifier key (name+hex8+base64, C2SP signed-note): its checkpoint must verify under it. "
            "Default: the key this ledger pinned for the log's origin, else the one the source's manifest names (pinned from then on)."
        ),
    ),
]
WitnessKeyOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--witness-key",
        metavar="VKEY",
        help=(
            "A witness's cosignature key (a type 0x04 vkey): the source's checkpoint must carry its valid cosignature. Repeatable."
        ),
    ),
]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rejection_line(r: Rejection) -> str:
    """One line per rejected offer: what it was, why, and where it went."""
    where = f"copy sha256:{r.copy_sha256}" + ("" if r.kept else ", not kept: the evidence cap is reached")
    return f"{r.status:<10} {r.subject} {r.event_type} [{r.reason}] {r.message} ({where})"


def _rejection_doc(r: Rejection) -> dict[str, Any]:
    return {
        "copy_sha256": r.copy_sha256,
        "subject": r.subject,
        "event_type": r.event_type,
        "declared_event_id": r.declared_event_id,
        "status": r.status,
        "reason": r.reason,
        "message": r.message,
        "kept": r.kept,
    }
