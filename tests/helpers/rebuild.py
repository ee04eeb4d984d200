"""What tests/unit/store/test_rebuild.py and tests/e2e/store/test_rebuild.py share: `write_v1_ledger`: what pithledger
0.1 (layout 1, merge v1) left on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import msgspec

from helpers.eventpool import pool
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import verify_event


def write_v1_ledger(path: Path, extra_events: tuple[tuple[dict[str, Any], str], ...] = ()) -> None:
    """What pithledger 0.1 (layout 1, merge v1) left on disk: every received event in its log, with
    the status its verdict had (``extra_events``: more (event, status) pairs)."""
    env = lmdb.open(str(path), max_dbs=16, subdir=True)
    meta, log, extra = (env.open_db(n) for n in (b"meta", b"log", b"extra"))
    enc = msgspec.msgpack.Encoder()
    with env.begin(write=True) as txn:
        txn.put(b"layout_version", b"1", db=meta)
        txn.put(b"merge_version", b"pithledger-merge-v1", db=meta)
        held = [(e, verify_event(e).status) for e in pool()] + list(extra_events)
        for seq, (event, status) in enumerate(held):
            entry = {"seq": seq, "event": canonical_bytes(event), "verdict": {"event_id": "v1", "status": status}}
            txn.put(seq.to_bytes(8, "big"), enc.encode(entry), db=log)
        txn.put(pool()[0]["subject_pith_number"].encode() + b"\0" + b"ab" * 32, b'{"note":"kept"}', db=extra)
    env.close()
