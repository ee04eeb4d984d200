"""pithledger: a mirror-side ledger for Pith records.

The declared Python API is ``__all__`` below: each entry is documented, and does what the command line
command it names does, with the same checks, limits and counts (the command line is a shell over it).
Every other module and name is internal and may change without notice, whatever its name (renaming the
internal modules with a leading ``_`` is a later step of issue #32).

    import pithledger
    report = pithledger.apply("ledger", "bundles")
    print(pithledger.state_document("ledger", "2502.21231")["current"]["verification_status"])

The names are loaded on first use (module ``__getattr__``): ``import pithledger`` stays cheap, because
``pithledger state`` imports this package and its start-up time is most of a query's time.
"""

from __future__ import annotations

import os as _os
import sys as _sys

# Before anything else of this package: a Ctrl-C while the command line starts (this package is the
# first thing its console script imports) ends it quietly, exit 130, `interrupted` (issue #41). Only
# when this process is the command (its argv[0], as cli/_signals.py reads it), never in a program that
# imports the library, whose signals are its own. Only modules Python has loaded before any script
# runs (os, sys, _signal): until this handler is set, each import is a moment a SIGINT printed a
# KeyboardInterrupt traceback (typing's, here, took 5-20 ms under load). cli/_signals.py takes over.
if _sys.argv and (
    _sys.argv[0] == "-m" or _os.path.basename(_sys.argv[0]).split(".")[0] in ("pithledger", "pithledger-script")
):
    import _signal  # type: ignore[import-not-found]  # signal's C core: `signal` itself builds enums first (~1 ms)

    def _interrupted_while_starting(signum: int, frame: object) -> None:
        _os.write(2, b"interrupted\n")
        _os._exit(130)

    if _signal.getsignal(_signal.SIGINT) != _signal.SIG_IGN:  # nohup, `cmd &`: an ignored Ctrl-C stays ignored
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)

import importlib  # noqa: E402 - after the Ctrl-C handler above
from typing import TYPE_CHECKING, Any  # noqa: E402

#: Kept equal to pyproject.toml's version by tests/unit/test_packaging.py; a literal, because asking
#: importlib.metadata costs ~40 ms on every command's start.
__version__ = "0.2.0"

#: Each public name and the module it is loaded from.
_WHERE = {
    "open_ledger": "pithledger.api",
    "Ledger": "pithledger.store",
    "apply": "pithledger.api",
    "apply_bytes": "pithledger.api",
    "ApplyReport": "pithledger.ingest.apply",
    "ApplyProgress": "pithledger.ingest.apply",
    "resolve": "pithledger.api",
    "state": "pithledger.api",
    "state_document": "pithledger.api",
    "export": "pithledger.api",
    "export_all": "pithledger.api",
    "digest": "pithledger.api",
    "Digest": "pithledger.api",
    "backup": "pithledger.api",
    "verify_bundle": "pithledger.api",
    "Verdict": "pithledger.records.events",
    "publish": "pithledger.api",
    "sync": "pithledger.api",
    "pull": "pithledger.api",
    "restore_log": "pithledger.api",
    "audit_mirrors": "pithledger.api",
    "AuditResult": "pithledger.audit",
    "verify_proof": "pithledger.api",
    "Inclusion": "pithledger.tlog.proofs",
    "verify_timestamp": "pithledger.api",
    "TimestampCheck": "pithledger.records.bitcoin",
    "parse_id": "pithledger.records.ids",
    "ParsedId": "pithledger.records.ids",
    "record_ids": "pithledger.records.model",
    "RecordIds": "pithledger.records.model",
    "PithledgerError": "pithledger.errors",
    "errors": "",
}

__all__ = ["__version__", *_WHERE]

if TYPE_CHECKING:
    from pithledger import errors as errors
    from pithledger.api import apply as apply
    from pithledger.api import apply_bytes as apply_bytes
    from pithledger.api import audit_mirrors as audit_mirrors
    from pithledger.api import backup as backup
    from pithledger.api import export as export
    from pithledger.api import export_all as export_all
    from pithledger.api import open_ledger as open_ledger
    from pithledger.api import publish as publish
    from pithledger.api import pull as pull
    from pithledger.api import resolve as resolve
    from pithledger.api import restore_log as restore_log
    from pithledger.api import state as state
    from pithledger.api import state_document as state_document
    from pithledger.api import sync as sync
    from pithledger.api import verify_bundle as verify_bundle
    from pithledger.api import verify_proof as verify_proof
    from pithledger.api import verify_timestamp as verify_timestamp
    from pithledger.audit import AuditResult as AuditResult
    from pithledger.errors import PithledgerError as PithledgerError
    from pithledger.ingest.apply import ApplyProgress as ApplyProgress
    from pithledger.ingest.apply import ApplyReport as ApplyReport
    from pithledger.records.bitcoin import TimestampCheck as TimestampCheck
    from pithledger.records.events import Verdict as Verdict
    from pithledger.records.ids import ParsedId as ParsedId
    from pithledger.records.ids import parse_id as parse_id
    from pithledger.records.model import RecordIds as RecordIds
    from pithledger.records.model import record_ids as record_ids
    from pithledger.store import Ledger as Ledger
    from pithledger.tlog.proofs import Inclusion as Inclusion


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'pithledger' has no attribute {name!r}")
    value = (
        importlib.import_module(f"pithledger.{name}") if not where else getattr(importlib.import_module(where), name)
    )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
