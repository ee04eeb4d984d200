"""Review of fsck's scratch table (issue #36): the rewritten fsck names the same problems, in the same order,
as the one that held the whole ledger's expectations in Python sets and dicts (77be274)."""

from __future__ import annotations

from pathlib import Path

from helpers.ledgers import example_bundles
from pithledger.audit import DEPTH, bucket_of
from pithledger.store import Ledger


def _old_tree_order(subjects: list[str]) -> list[str]:
    """The digest nodes in the order the old fsck named them: each level's prefixes in the order their first
    record comes in the state table (records are keyed pith:YEAR:SUFFIX, so this is not bucket order)."""
    level = list(dict.fromkeys(bucket_of(s) for s in sorted(subjects)))
    out = list(level)
    for _ in range(DEPTH):
        level = list(dict.fromkeys(p[:-1] for p in level))
        out += level
    return [f"digest node {p or '(root)'} differs from its recomputation" for p in out]


def test_the_digest_nodes_are_named_in_the_order_the_old_fsck_named_them(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(example_bundles())
        assert ledger.fsck() == []
        with ledger.env.begin(write=True) as txn:
            subjects = [bytes(k).decode() for k in txn.cursor(db=ledger.db[b"state"]).iternext(values=False)]
            nodes = [bytes(k) for k in txn.cursor(db=ledger.db[b"node"]).iternext(values=False)]
            for key in nodes:
                txn.delete(key, db=ledger.db[b"node"])
        expected = _old_tree_order(subjects)
        buckets = len(set(map(bucket_of, subjects)))
        assert expected[:buckets] != sorted(expected[:buckets])  # the ledger spans years: the two orders differ
        assert ledger.fsck() == expected
