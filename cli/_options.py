"""What the command modules share: option types, the small helpers every command calls (open the
ledger, the key store, --json, notes), and :class:`Commands`, which lets a module define commands that
cli/app.py adds to the app. app.py, _tlog.py and _witness.py import from here, so no command module
imports app.py (and app.py imports them: no circle).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer

from ._base import settings

if TYPE_CHECKING:
    from pithledger.records.keys import KeyStore
    from pithledger.store import Ledger

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

    def register(self, app: typer.Typer) -> None:
        for args, kwargs, function in self._defined:
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
    typer.Option("--key-dir", metavar="DIR",
                 help="Key directory [default: $XDG_CONFIG_HOME/pithledger/keys, i.e. ~/.config/pithledger/keys]; "
                      "here or before the command, it wins over $PITHLEDGER_KEYS."),
]


def _store(key_dir: Optional[Path]) -> KeyStore:
    from pithledger.records import keys as keys_

    from ._base import current_settings

    return keys_.KeyStore(key_dir or current_settings().key_dir or keys_.default_key_dir())


TimeoutOption = Annotated[float, typer.Option("--timeout", metavar="SECONDS", min=0.001,
                                               help="Wall-clock seconds for one whole HTTP request, redirects included.")]


def _deadline_option() -> Any:
    return typer.Option("--deadline", metavar="SECONDS", min=0,
                        help="Wall-clock seconds for all the reads of the run; 0 for no limit.")
