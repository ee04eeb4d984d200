"""What the in-process and the end-to-end tests of sync parts share (cut from tests/unit/mirror/test_sync_parts.py,
now split between tests/unit/ and tests/e2e/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.eventpool import bundles_of
from pithledger.store import Ledger


def ledger_with(path: Path, events: list[dict[str, Any]]) -> Ledger:
    ledger = Ledger(path, create=True)
    ledger.apply_batch(bundles_of(events))
    return ledger
