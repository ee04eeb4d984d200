"""Review of fsck's scratch table (issue #36): the rewritten fsck names the same problems, in the same order,
as the one that held the whole ledger's expectations in Python sets and dicts (77be274)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import pytest

from helpers.ledgers import example_bundles
from pithledger.audit import DEPTH, bucket_of
from pithledger.errors import LedgerError
from pithledger.store import Ledger, scratch


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


def test_a_full_disk_beside_the_ledger_is_no_fault_of_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old fsck wrote nothing: on a ledger whose disk is full it ran as on any other. The scratch beside
    such a ledger cannot be made (LMDB writes its first pages as it opens: `lmdb.DiskError: ... No space left
    on device`, seen on a full tmpfs); fsck makes it in the system's temporary directory instead, not a
    traceback and exit 1."""
    real_open = lmdb.open

    def full_beside(path: str, **kw: object) -> lmdb.Environment:
        if Path(path).parent == tmp_path:
            raise lmdb.DiskError(f"{path}: No space left on device")
        return real_open(path, **kw)

    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(example_bundles())
        monkeypatch.setattr(scratch.lmdb, "open", full_beside)
        assert ledger.fsck() == []
    assert [p.name for p in tmp_path.iterdir()] == ["l"]


def test_a_scratch_that_cannot_be_written_is_named_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while fsck runs: a LedgerError with a hint (the CLI's exit and --json error), not an
    lmdb.DiskError traceback."""
    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(example_bundles())
        real_put = scratch.Scratch.add

        def full(self: scratch.Scratch, table: bytes, key: bytes, value: bytes) -> bool:
            monkeypatch.setattr(self, "env", _NoRoom(self.env))
            return real_put(self, table, key, value)

        monkeypatch.setattr(scratch.Scratch, "add", full)
        with pytest.raises(LedgerError, match="scratch table could not be written"):
            ledger.fsck()


class _NoRoom:
    def __init__(self, env: lmdb.Environment) -> None:
        self._env = env

    def begin(self, **kw: object) -> object:
        raise lmdb.DiskError("No space left on device")

    def __getattr__(self, name: str) -> object:
        return getattr(self._env, name)


def test_an_address_space_limit_is_no_fault_of_the_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `ulimit -v 8000000` (8 GB, as on many shared hosts) the old fsck ran; the scratch's 1 TiB map
    cannot be reserved (lmdb.MemoryError: Cannot allocate memory) and fsck stopped. It takes the largest
    map it may."""
    real_open = lmdb.open

    def limited(path: str, **kw: Any) -> lmdb.Environment:
        if kw.get("map_size", 0) > 1 << 32:
            raise lmdb.MemoryError(f"{path}: Cannot allocate memory")
        return real_open(path, **kw)

    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(example_bundles())
        monkeypatch.setattr(scratch.lmdb, "open", limited)
        assert ledger.fsck() == []
