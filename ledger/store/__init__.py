"""The ledger: an append-only LMDB log of valid events as received, indexes, materialised states,
and a bounded evidence area for what was received but cannot be folded.

IO lives here and nowhere else in the library. One write transaction per batch (group commit): a
crash leaves the ledger exactly as before or after a batch. Layout and rules: spec/storage.md.

One ``Ledger`` class, composed of one part per concern, each in its own module, from the bottom up:

- ``env``      the LMDB environment: tables, layout check, transactions, map growth, page release, keys
- ``lookup``   finding a record and reading its state (and ``StateReader``, a handle for that alone)
- ``workers``  the pure work handed to ledger/fanout.py (signature checks)
- ``tuning``   ``StoreTuning``: every knob of a handle (chunk and part sizes, when work goes to the workers),
               and the derivation hook tests use; a field of the handle, never a module global
- ``log``      the append-only log and evidence: Batch and ``_write``, the single writer's serial path
- ``views``    derived views: derivation inputs and results, citation and lookup indexes, digest tree
- ``reads``    queries: log, states, evidence, the audit Source interface, identifier resolution, exports
- ``pending``  pending derivation and ``finish``
- ``snapshot`` finishing's inputs read on the worker processes from the last committed snapshot
- ``translog`` the transparency log's methods (tlog_size, tlog_hashes, ...) and the in-place upgrade
               that builds it (its storage and tree: ledger/store/tlog_tables.py)
- ``fsck``     checking a ledger against its log
- ``ledger``   the ``Ledger`` class itself (opening and closing), and ``open_settled``
- ``rebuild``  rebuilding a ledger from its log

Every name the package held before it was split is importable from here, but the pool code, which
ledger/fanout.py replaced (``ignore_interrupts`` is there). They are loaded (``_all``) the first time one is
asked for, not when a part is imported: ``pithledger state`` imports ``lookup`` (and what it needs) alone.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._all import *  # noqa: F403 - what type checkers see; at run time __getattr__ loads it
    from ._all import __all__ as __all__

#: parts named like a function the package offers: the name stays the function's (as before the split),
#: though the import system sets the part of that name on the package when it loads it
_SHADOWED = frozenset({"rebuild", "backup"})


def _load() -> types.ModuleType:
    """Every part loaded, and every name of ``__all__`` made an attribute of the package, as before the
    names were loaded lazily."""
    _all = importlib.import_module(f"{__name__}._all")  # (not `from . import`: that asks __getattr__ again)
    namespace = globals()
    if "__all__" not in namespace:
        for name in _all.__all__:
            namespace.setdefault(name, getattr(_all, name))
        for name in _SHADOWED:
            namespace[name] = getattr(_all, name)
        namespace["__all__"] = _all.__all__
    return _all


def __getattr__(name: str) -> Any:
    """A name of the package, from its parts, all loaded the first time one is asked for."""
    if (name.startswith("__") and name != "__all__") or name == "_all":
        raise AttributeError(name)
    try:
        return getattr(_load(), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
