"""The ledger: an append-only LMDB log of valid events as received, indexes, materialised states,
and a bounded evidence area for what was received but cannot be folded.

IO lives here and nowhere else in the library. One write transaction per batch (group commit): a
crash leaves the ledger exactly as before or after a batch. Layout and rules: spec/storage.md.

One ``Ledger`` class, composed of one part per concern, each in its own module, from the bottom up:

- ``env``      the LMDB environment: tables, layout check, transactions, map growth, page release, keys
- ``workers``  how the pure work (signature checks, derivation, fsck) is cut into parts, for ledger/fanout.py
- ``log``      the append-only log and evidence: Batch and ``_write``, the single writer's serial path
- ``views``    derived views: derivation inputs and results, citation and lookup indexes, digest tree
- ``reads``    queries: log, states, evidence, the audit Source interface, identifier resolution, exports
- ``pending``  pending derivation and ``finish``
- ``snapshot`` finishing's inputs read on the worker processes from the last committed snapshot
- ``translog`` the transparency log's methods (tlog_size, tlog_hashes, ...) and the in-place upgrade
               that builds it (its storage and tree: ledger/translog.py)
- ``fsck``     checking a ledger against its log
- ``ledger``   the ``Ledger`` class itself (opening and closing), and ``open_settled``
- ``rebuild``  rebuilding a ledger from its log

Every name the package held before it was split is importable from here, but the pool code, which
ledger/fanout.py replaced (``ignore_interrupts`` is there).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .env import (DEFAULT_MAP_SIZE, LAYOUT_VERSION, _DBS, _NEW_LEDGER_MAY_HOLD, _PENDING, _Pinned, _RELEASE_ENTRIES,
                  _RELEASE_EVERY, _RESIZE_TRIES, _TLOG, _U64, _UPGRADABLE_IN_PLACE, _check_new_ledger_dir, _event_key,
                  _json_decoder, _rec_key, _release_mapped_pages, _u64, default_ledger_path)
from .entries import (BatchResult, Copy, EvidenceEntry, EvidenceLimits, LogEntry, Prepared, Rejection, Usage, _Checked,
                      _entry_decoder, _entry_encoder, _evidence_decoder, _log_value, _usage_decoder, prepare)
from .workers import (_DERIVE_PART, _DERIVE_PART_ENTRIES, _PARALLEL_STATES, _PROCESS_AFTER_CHUNKS, _SNAPSHOT_PART, _VERIFY_CHUNK,
                      _verify_offers)
from .views import (_CurrentView, _Derived, _IndexView, _Inputs, _derive, _derive_part, _index_keys,
                    _index_view_decoder, _pack_state, _pair_decoder, _pair_encoder, _stored_index_keys,
                    _unpack_state)
from .pending import FINISH_CHUNK
from .translog import UPGRADE_CHUNK
from .reads import PART_BYTES, _Candidate, _choose
from .log import Batch, BatchWithdrawn, MAX_EXTRA_BYTES, MAX_EXTRA_PER_RECORD, _rejection
from .fsck import _FSCK_PART, _NAMED_MISCOUNTS, _fsck_log_part, _fsck_state_part, _usage_text, _verdict_key
from .ledger import Ledger, open_settled
from .rebuild import _REBUILT_MARK, _copy_db, _copy_sidecars, _old_events, _tally, rebuild

__all__ = [
    "Batch", "BatchResult", "BatchWithdrawn", "Copy", "DEFAULT_MAP_SIZE", "EvidenceEntry", "EvidenceLimits", "FINISH_CHUNK",
    "LAYOUT_VERSION", "Ledger", "UPGRADE_CHUNK", "LogEntry", "MAX_EXTRA_BYTES", "MAX_EXTRA_PER_RECORD", "PART_BYTES", "Rejection",
    "Usage", "_Candidate", "_CurrentView", "_DBS", "_DERIVE_PART", "_DERIVE_PART_ENTRIES",
    "_Derived", "_FSCK_PART", "_IndexView", "_Inputs", "_NAMED_MISCOUNTS", "_NEW_LEDGER_MAY_HOLD",
    "Prepared", "_Checked", "_PARALLEL_STATES", "_PENDING", "_PROCESS_AFTER_CHUNKS", "_Pinned", "_REBUILT_MARK",
    "_RELEASE_ENTRIES", "_RELEASE_EVERY", "_RESIZE_TRIES", "_SNAPSHOT_PART", "_TLOG", "_U64", "_UPGRADABLE_IN_PLACE", "_VERIFY_CHUNK",
    "_check_new_ledger_dir", "_choose", "_copy_db", "_copy_sidecars", "_derive",
    "_derive_part", "_entry_decoder", "_entry_encoder", "_event_key", "_evidence_decoder",
    "_fsck_log_part", "_fsck_state_part", "_log_value", "_index_keys", "_index_view_decoder", "_json_decoder", "_old_events",
    "_pack_state", "_pair_decoder", "_pair_encoder", "_rec_key", "_rejection", "_release_mapped_pages",
    "_stored_index_keys", "_tally", "_u64", "_unpack_state", "_usage_decoder", "_usage_text", "_verdict_key",
    "_verify_offers", "default_ledger_path", "open_settled", "prepare", "rebuild"
]


class _Package(types.ModuleType):
    """Tests tune the store's knobs and swap its pure functions on the package itself
    (``monkeypatch.setattr(store, "_DERIVE_PART", 2)``, ``store.PART_BYTES = ...``): a name set here is
    set as well in each module of the package that holds it, where the code reads it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("__"):
            for part in _PARTS:
                if name in vars(part):
                    setattr(part, name, value)
        super().__setattr__(name, value)


_PARTS = tuple(sys.modules[f"{__name__}.{part}"]
               for part in ("env", "entries", "workers", "views", "pending", "translog", "reads", "log", "fsck", "ledger",
                             "rebuild", "snapshot"))
sys.modules[__name__].__class__ = _Package
