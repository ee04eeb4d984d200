"""The mirror's transparency log as stored (ledger/translog.py, spec/storage.md §2.2): the tree
arithmetic on a raw LMDB environment, then the ledger's write path, upgrade, fsck and rebuild."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pithledger import merkle
from pithledger import translog as T


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[tuple[lmdb.Environment, T.TlogDbs]]:
    env = lmdb.open(str(tmp_path / "raw"), max_dbs=4, map_size=1 << 28)
    try:
        yield env, T.TlogDbs(env.open_db(T.ENTRIES_DB), env.open_db(T.HASHES_DB))
    finally:
        env.close()


def _entries(n: int, salt: str = "") -> list[bytes]:
    return [T.entry_bytes("sha256:" + hashlib.sha256(f"{salt}{i}".encode()).hexdigest(), "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L",
                          hashlib.sha256(f"event {salt}{i}".encode()).hexdigest()) for i in range(n)]


def _append(env: lmdb.Environment, dbs: T.TlogDbs, entries: list[bytes], batches: list[int]) -> None:
    done = 0
    for b in batches:
        with env.begin(write=True) as txn:
            appender = T.Appender(txn, dbs, expected_size=done)
            for e in entries[done:done + b]:
                appender.append(e)
        done += b


def test_entry_bytes_are_the_contract_json() -> None:
    e = T.entry_bytes("sha256:" + "ab" * 32, "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L", "cd" * 32)
    assert e == (b'{"event_id":"' + b"ab" * 32 + b'","record":"pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L","sha256":"'
                 + b"cd" * 32 + b'"}')


def test_positions_are_the_append_order() -> None:
    """Every complete subtree has one position, and appends complete them in position order."""
    seen = []
    frontier: list[bytes] = []
    for n in range(600):
        for level, _ in enumerate(T.append_leaf(frontier, n, merkle.leaf_hash(b"%d" % n))):
            seen.append(T.position(level, ((n + 1) >> level) - 1))
    assert seen == list(range(len(seen)))
    assert len(seen) == T.stored_hashes(600)


def test_edge_covers_the_leaves_left_to_right() -> None:
    for n in range(1, 300):
        covered = 0
        for level, index in T.edge(n):
            assert index << level == covered
            covered += 1 << level
        assert covered == n


def test_roots_at_every_size_equal_merkle_root(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(1100)
    _append(env, dbs, entries, [1, 2, 3, 7, 100, 250, 1, 736])
    leaves = [merkle.leaf_hash(e) for e in entries]
    with env.begin() as txn:
        assert T.size(txn, dbs) == 1100
        assert T.read_entries(txn, dbs, 0, 1100) == entries
        for n in range(1101):
            assert T.tree_hash(txn, dbs, n) == merkle.root(leaves[:n]), n
        # every stored hash is the root of its subtree
        for level in range(11):
            width = 1 << level
            got = T.read_hashes(txn, dbs, level, 0, 1100 // width)
            assert got == [merkle.root(leaves[i * width:(i + 1) * width]) for i in range(1100 // width)]
        assert txn.stat(dbs.hashes)["entries"] == T.stored_hashes(1100)


def test_ranges_beyond_the_tree_are_lookup_errors(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    _append(env, dbs, _entries(10), [10])
    with env.begin() as txn:
        assert len(T.read_hashes(txn, dbs, 1, 0, 5)) == 5
        assert len(T.read_hashes(txn, dbs, 3, 0, 1)) == 1
        for level, start, end in [(0, 0, 11), (1, 0, 6), (2, 2, 3), (4, 0, 1), (0, 5, 4), (-1, 0, 1)]:
            with pytest.raises(LookupError):
                T.read_hashes(txn, dbs, level, start, end)
        with pytest.raises(T.TlogOutOfRange):
            T.read_entries(txn, dbs, 9, 11)
        with pytest.raises(T.TlogOutOfRange):
            T.tree_hash(txn, dbs, 11)
        assert T.read_entries(txn, dbs, 3, 3) == []


def _check(env: lmdb.Environment, dbs: T.TlogDbs, implied: list[bytes]) -> list[str]:
    with env.begin() as txn:
        checker = T.Checker(txn, dbs)
        for e in implied:
            checker.feed(e)
        return checker.finish()


def test_checker_passes_a_sound_log(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(77)
    _append(env, dbs, entries, [40, 37])
    assert _check(env, dbs, entries) == []


def test_checker_names_a_tampered_entry_once(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(77)
    _append(env, dbs, entries, [77])
    with env.begin(write=True) as txn:
        txn.put((5).to_bytes(8, "big"), entries[6], db=dbs.entries)
    faults = _check(env, dbs, entries)
    assert faults[0] == "transparency log entry 5 differs from its log entry"
    assert len(faults) == 2 and "rebuild --force" in faults[1]


def test_checker_names_a_tampered_hash(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(77)
    _append(env, dbs, entries, [77])
    with env.begin(write=True) as txn:
        txn.put(T.position(3, 4).to_bytes(8, "big"), b"\0" * 32, db=dbs.hashes)
    assert _check(env, dbs, entries)[0] == "transparency log hash at level 3, index 4 differs from its recomputation"


def test_checker_names_a_log_longer_than_the_tlog(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(30)
    _append(env, dbs, entries[:20], [20])
    faults = _check(env, dbs, entries)
    assert faults == ["transparency log entry 20 is missing (the log holds it), and every one after it",
                      "transparency log hash at level 0, index 20 is missing, and every one after it",
                      "the transparency log holds 20 entries for 30 log entries",
                      f"the transparency log holds {T.stored_hashes(20)} hashes; a tree of 30 entries has {T.stored_hashes(30)}",
                      "the transparency log is derived from the log: `pithledger rebuild --force` rebuilds it"]


def test_checker_caps_what_it_names(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    _append(env, dbs, _entries(50), [50])
    faults = _check(env, dbs, _entries(50, salt="other"))
    assert len([f for f in faults if f.startswith("transparency log ")]) == T.NAMED_FAULTS
    assert any(f.startswith("... and ") for f in faults)


def test_appender_refuses_a_tlog_out_of_step(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    _append(env, dbs, _entries(5), [5])
    with env.begin(write=True) as txn, pytest.raises(T.TlogDamaged, match="5 entries for 6 log entries"):
        T.Appender(txn, dbs, expected_size=6)
    with env.begin(write=True) as txn:
        txn.delete(T.position(0, 4).to_bytes(8, "big"), db=dbs.hashes)
    with env.begin(write=True) as txn, pytest.raises(T.TlogDamaged, match="hashes"):
        T.Appender(txn, dbs, expected_size=5)


def test_compare_finds_the_first_difference(tmp_path: Path) -> None:
    envs = [lmdb.open(str(tmp_path / name), max_dbs=4, map_size=1 << 26) for name in ("a", "b", "c")]
    try:
        dbs = [T.TlogDbs(e.open_db(T.ENTRIES_DB), e.open_db(T.HASHES_DB)) for e in envs]
        base = _entries(40)
        _append(envs[0], dbs[0], base[:30], [30])
        _append(envs[1], dbs[1], base, [40])  # an extension
        changed = base[:12] + _entries(28, salt="x")
        _append(envs[2], dbs[2], changed, [40])
        with envs[0].begin() as old, envs[1].begin() as ext, envs[2].begin() as other:
            assert T.compare(old, dbs[0], ext, dbs[1]) == {"old_size": 30, "size": 40, "extends_old": True, "first_difference": None}
            assert T.compare(old, dbs[0], other, dbs[2])["first_difference"] == 12
            assert T.compare(ext, dbs[1], old, dbs[0]) == {"old_size": 40, "size": 30, "extends_old": False, "first_difference": 30}
    finally:
        for e in envs:
            e.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=70), max_size=12))
def test_any_batching_gives_the_same_tree(batches: list[int]) -> None:
    """Appending in any batches stores exactly the hashes all_hashes streams for the same leaves."""
    import tempfile

    total = sum(batches)
    entries = _entries(total)
    with tempfile.TemporaryDirectory() as d:
        env = lmdb.open(d, max_dbs=4, map_size=1 << 26)
        try:
            dbs = T.TlogDbs(env.open_db(T.ENTRIES_DB), env.open_db(T.HASHES_DB))
            _append(env, dbs, entries, batches)
            with env.begin() as txn:
                stored = [bytes(v) for v in txn.cursor(db=dbs.hashes).iternext(keys=False)]
                assert T.tree_hash(txn, dbs) == merkle.root([merkle.leaf_hash(e) for e in entries])
        finally:
            env.close()
    assert stored == list(T.all_hashes(merkle.leaf_hash(e) for e in entries))


def _fake_log(env: lmdb.Environment, n: int) -> tuple[object, list[bytes]]:
    """A log of ``n`` entries in the stored form (msgpack [seq, event, facts, event_id]) and their entries."""
    import msgspec

    from pithledger.canonical import canonical_bytes

    log = env.open_db(b"log")
    expected = []
    with env.begin(write=True) as txn:
        for i in range(n):
            event = canonical_bytes({"event_id": "sha256:" + hashlib.sha256(b"%d" % i).hexdigest(), "event_type": "x",
                                     "subject_pith_number": f"pith:2025:{i:026d}", "payload": {"n": i}})
            pith_id = "sha256:" + "ee" * 32 if i % 7 == 3 else ""  # a Pith-envelope event: its ledger id beside it
            txn.put(i.to_bytes(8, "big"), msgspec.msgpack.encode([i, event, {"f": 1}, pith_id]), db=log)
            eid = pith_id or "sha256:" + hashlib.sha256(b"%d" % i).hexdigest()
            expected.append(T.entry_bytes(eid, f"pith:2025:{i:026d}", hashlib.sha256(event).hexdigest()))
    return log, expected


def test_build_from_the_log_in_bounded_steps(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    log, expected = _fake_log(env, 45)
    steps = 0
    while True:
        with env.begin(write=True) as txn:
            steps += 1
            if T.build(txn, log, dbs, 10):
                break
    assert steps == 5
    with env.begin() as txn:
        assert T.read_entries(txn, dbs, 0, 45) == expected
        assert T.tree_hash(txn, dbs) == merkle.root([merkle.leaf_hash(e) for e in expected])
        assert T.build(txn, log, dbs, 10)  # nothing left: a no-op that says so


def test_build_refuses_a_log_with_a_gap(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    log, _ = _fake_log(env, 5)
    with env.begin(write=True) as txn:
        txn.delete((2).to_bytes(8, "big"), db=log)
    with env.begin(write=True) as txn, pytest.raises(T.TlogDamaged, match="under sequence 3 where 2"):
        T.build(txn, log, dbs, 100)
