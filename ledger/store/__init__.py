"""The ledger: an append-only LMDB log of valid events as received, indexes, materialised states,
and a bounded evidence area for what was received but cannot be folded.

IO lives here and nowhere else in the library. One write transaction per batch (group commit): a
crash leaves the ledger exactly as before or after a batch. Layout and rules: spec/storage.md.

One ``Ledger`` class holding its parts, one object per concern, each in its own module and each built
over the shared core and the parts it calls (no part inherits another), from the bottom up:

- ``env``      the core: the LMDB environment, tables, layout check, transactions, map growth, page
               release, keys (``_Environment``, which every part and handle holds)
- ``lookup``   finding a record and reading its state (and ``StateReader``, a handle for that alone)
- ``workers``  the pure work handed to ledger/fanout.py (signature checks), and the handle's fan-out
- ``tuning``   ``StoreTuning``: every knob of a handle (chunk and part sizes, when work goes to the workers),
               and the derivation hook tests use; handed to the parts, never a module global
- ``views``    derived views: derivation inputs and results, citation and lookup indexes, digest tree
- ``pending``  pending derivation and ``finish``
- ``log``      the append-only log and evidence: Batch and ``_write``, the single writer's serial path
- ``reads``    queries: log, states, evidence, the audit Source interface, identifier resolution, exports
- ``snapshot`` finishing's inputs read on the worker processes from the last committed snapshot (a views
               part over a read-only core)
- ``translog`` the transparency log's methods (tlog_size, tlog_hashes, ...) and the in-place upgrade
               that builds it (its storage and tree: ledger/store/tlog_tables.py)
- ``fsck``     checking a ledger against its log
- ``ledger``   the ``Ledger`` class itself (opening, assembling its parts, closing; its public methods,
               listed in its docstring, hand over to them), and ``open_settled``
- ``rebuild``  rebuilding a ledger from its log (``pithledger.store.rebuild.rebuild``)
- ``backup``   a verified copy of a ledger (``pithledger.store.backup.backup``)
- ``sidecars`` the LMDB environments beside a ledger's, outside consensus: the display metadata
               (``MetadataStore``) and the pull cache's, each opened by ``open_sidecar``

The package offers the names of ``__all__`` (what code outside the store uses); everything else is
imported from the module that defines it. They are loaded the first time one is asked for, not when a
part is imported: ``pithledger state`` imports ``lookup`` (and what it needs) alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pithledger.store.entries import LogEntry as LogEntry
    from pithledger.store.entries import Prepared as Prepared
    from pithledger.store.entries import Rejection as Rejection
    from pithledger.store.entries import prepare as prepare
    from pithledger.store.entries import prepare_line as prepare_line
    from pithledger.store.env import LAYOUT_VERSION as LAYOUT_VERSION
    from pithledger.store.env import default_ledger_path as default_ledger_path
    from pithledger.store.ledger import Ledger as Ledger
    from pithledger.store.ledger import open_settled as open_settled
    from pithledger.store.log import MAX_EXTRA_BYTES as MAX_EXTRA_BYTES
    from pithledger.store.log import MAX_EXTRA_PER_RECORD as MAX_EXTRA_PER_RECORD
    from pithledger.store.log import Batch as Batch
    from pithledger.store.log import BatchWithdrawn as BatchWithdrawn
    from pithledger.store.lookup import Usage as Usage
    from pithledger.store.tuning import StoreTuning as StoreTuning
    from pithledger.store.tuning import tuned as tuned

#: each name the package offers, and the part that defines it
_FROM = {
    "Batch": "log",
    "BatchWithdrawn": "log",
    "LAYOUT_VERSION": "env",
    "Ledger": "ledger",
    "LogEntry": "entries",
    "MAX_EXTRA_BYTES": "log",
    "MAX_EXTRA_PER_RECORD": "log",
    "Prepared": "entries",
    "Rejection": "entries",
    "StoreTuning": "tuning",
    "Usage": "lookup",
    "default_ledger_path": "env",
    "open_settled": "ledger",
    "prepare": "entries",
    "prepare_line": "entries",
    "tuned": "tuning",
}
__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    """A name of the package, from the part that defines it, loaded the first time it is asked for."""
    part = _FROM.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{part}"), name)
    globals()[name] = value
    return value
