"""fsck's scratch table (ledger/store/scratch.py, spec/storage.md §6): sorted sets on disk, and the walk that
compares one with a stored table."""

from __future__ import annotations

from pathlib import Path

import lmdb
from hypothesis import given, settings
from hypothesis import strategies as st

from pithledger.store.scratch import Scratch, diff

pairs = st.sets(st.tuples(st.binary(min_size=1, max_size=8), st.binary(max_size=8)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(want=pairs, have=pairs)
def test_diff_names_exactly_what_one_side_lacks(want: set[tuple[bytes, bytes]], have: set[tuple[bytes, bytes]]) -> None:
    got = list(diff(iter(sorted(want)), iter(sorted(have))))
    assert [p for missing, p in got if missing] == sorted(want - have)
    assert [p for missing, p in got if not missing] == sorted(have - want)


def test_scratch_reads_back_in_the_order_of_a_stored_dupsort_table(tmp_path: Path) -> None:
    """Pairs added in any order, twice over, with more than one commit's worth, come back once each in the
    order an LMDB cursor walks a dupsort table holding them: the two walks can be compared."""
    added = [(b"k%d" % (i % 97), b"v%d" % (i % 13)) for i in range(3000)]
    env = lmdb.open(str(tmp_path / "stored"), max_dbs=1)
    table = env.open_db(b"t", dupsort=True)
    with env.begin(write=True) as txn:
        for k, v in added:
            txn.put(k, v, db=table)
    with Scratch([b"t"], near=tmp_path / "ledger") as scratch:
        assert scratch._dir.parent == tmp_path  # beside the ledger, on its disk
        assert not scratch._dir.exists()  # removed once open: nothing is left behind, whatever ends the check
        assert scratch._map_ranges and scratch._map_ranges[1]  # its map found first: its pages can be released
        for k, v in reversed(added + added):
            assert scratch.add(b"t", k, v)
        with env.begin() as txn:
            stored = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=table).iternext()]
        assert list(scratch.pairs(b"t")) == stored == sorted(set(added))
        assert list(diff(scratch.pairs(b"t"), iter(stored))) == []
    assert list(tmp_path.iterdir()) == [tmp_path / "stored"]


def test_a_pair_no_table_can_hold_is_refused_not_raised() -> None:
    with Scratch([b"t"]) as scratch:
        longest = scratch.env.max_key_size()
        assert not scratch.add(b"t", b"", b"v")
        assert not scratch.add(b"t", b"k" * (longest + 1), b"v")
        assert not scratch.add(b"t", b"k", b"v" * (longest + 1))
        assert scratch.add(b"t", b"k" * longest, b"v")
        assert list(scratch.pairs(b"t")) == [(b"k" * longest, b"v")]
