"""Ledgers the tests build: of the example bundles, of a pool of events, of an older layout
(cut from tests/unit/store/test_store.py, tests/unit/audit/test_mirror_audit.py, tests/unit/mirror/test_sync.py and tests/unit/store/test_pending.py)."""

from __future__ import annotations

from pathlib import Path

import lmdb

from helpers.common import ROOT
from helpers.eventpool import bundles_of
from pithledger.records.bundle import read_bundle
from pithledger.records.canonical import strict_decode
from pithledger.store import Ledger

EXAMPLES = ROOT / "bundles"


def example_bundles() -> list:
    out = []
    for path in sorted(EXAMPLES.glob("demo-*")):
        lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
        out += [read_bundle(strict_decode(line)) for line in lines]
    return out


def ledger_with(path: Path, events: list) -> Ledger:  # type: ignore[type-arg]
    ledger = Ledger(path, create=True)
    ledger.apply_batch(bundles_of(events))
    return ledger


def make_layout_3(path: Path) -> None:
    """Turn a (fully derived) ledger into what a layout-3 ledger is: layout 4 without the pending sets
    (layout 4: layout 5 without the transparency log)."""
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        for name in (b"pendcite", b"pendstate", b"tlog", b"tlogh"):
            txn.drop(env.open_db(name, txn=txn), delete=True)
        txn.put(b"layout_version", b"3", db=env.open_db(b"meta", txn=txn))
    env.close()
