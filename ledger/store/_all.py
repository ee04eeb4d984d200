"""Every name ``pithledger.store`` offers, imported from the parts that define them: what the package
loads the first time one of them is asked for (see ledger/store/__init__.py)."""

from __future__ import annotations

from .env import (DEFAULT_MAP_SIZE, LAYOUT_VERSION, _DBS, _NEW_LEDGER_MAY_HOLD, _PENDING, _Pinned, _RELEASE_ENTRIES,
                  _RELEASE_EVERY, _RESIZE_TRIES, _TLOG, _U64, _UPGRADABLE_IN_PLACE, _check_new_ledger_dir, _event_key,
                  _json_decoder, _rec_key, _release_mapped_pages, _u64, default_ledger_path)
from .entries import (BatchResult, Copy, EvidenceEntry, EvidenceLimits, LogEntry, Prepared, Rejection, Usage, _Checked,
                      _entry_decoder, _entry_encoder, _evidence_decoder, _log_value, _usage_decoder, prepare)
from .workers import _verify_offers
from .views import (_CurrentView, _Derived, _IndexView, _Inputs, _derive, _derive_part, _index_keys,
                    _index_view_decoder, _pack_state, _pair_decoder, _pair_encoder, _stored_index_keys,
                    _unpack_state)
from .tuning import StoreTuning, default_tuning, tuned
from .lookup import StatePending, StateReader, _Candidate, _choose
from .log import Batch, BatchWithdrawn, MAX_EXTRA_BYTES, MAX_EXTRA_PER_RECORD, _rejection
from .fsck import _NAMED_MISCOUNTS, _fsck_log_part, _fsck_state_part, _usage_text, _verdict_key
from .ledger import Ledger, open_settled
from .backup import backup
from .rebuild import _REBUILT_MARK, _copy_db, _copy_sidecars, _old_events, _tally, rebuild

__all__ = [
    "Batch", "BatchResult", "backup", "StatePending", "StateReader", "BatchWithdrawn", "Copy", "DEFAULT_MAP_SIZE", "EvidenceEntry", "EvidenceLimits",
    "LAYOUT_VERSION", "Ledger", "LogEntry", "MAX_EXTRA_BYTES", "MAX_EXTRA_PER_RECORD", "Rejection", "StoreTuning",
    "Usage", "_Candidate", "_CurrentView", "_DBS",
    "_Derived", "_IndexView", "_Inputs", "_NAMED_MISCOUNTS", "_NEW_LEDGER_MAY_HOLD",
    "Prepared", "_Checked", "_PENDING", "_Pinned", "_REBUILT_MARK",
    "_RELEASE_ENTRIES", "_RELEASE_EVERY", "_RESIZE_TRIES", "_TLOG", "_U64", "_UPGRADABLE_IN_PLACE",
    "_check_new_ledger_dir", "_choose", "_copy_db", "_copy_sidecars", "_derive",
    "_derive_part", "_entry_decoder", "_entry_encoder", "_event_key", "_evidence_decoder",
    "_fsck_log_part", "_fsck_state_part", "_log_value", "_index_keys", "_index_view_decoder", "_json_decoder", "_old_events",
    "_pack_state", "_pair_decoder", "_pair_encoder", "_rec_key", "_rejection", "_release_mapped_pages",
    "_stored_index_keys", "_tally", "_u64", "_unpack_state", "_usage_decoder", "_usage_text", "_verdict_key",
    "_verify_offers", "default_ledger_path", "default_tuning", "open_settled", "prepare", "rebuild", "tuned"
]
