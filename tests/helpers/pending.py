"""What tests/unit/store/test_pending.py and tests/e2e/store/test_pending.py share: A ledger of the whole event pool
derived in one batch (`reference`) and every state of a ledger (`states`)."""

from __future__ import annotations

from pathlib import Path

from helpers.eventpool import bundles_of, pool
from pithledger.store import Ledger


def states(ledger: Ledger) -> dict[str, bytes]:
    return {s: ledger.state_bytes(s) for s in ledger.subjects()}


def reference(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "reference", create=True)
    ledger.apply_batch(bundles_of(pool()))
    return ledger
