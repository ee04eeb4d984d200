"""The mirror's transparency log as stored (ledger/store/tlog_tables.py, spec/storage.md §2.2): the tree
arithmetic on a raw LMDB environment, then the ledger's write path, upgrade, fsck and rebuild."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pithledger.store.tlog_tables as T
from helpers.common import ROOT
from helpers.translog import (
    NUMBER,
    REMEDY,
    assert_tlog_is_the_log,
    attestations,
    raw_put,
    record_created,
    served,
    small_ledger,
)
from pithledger.errors import TlogDamaged, TlogOutOfRange
from pithledger.tlog import merkle


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[tuple[lmdb.Environment, T.TlogDbs]]:
    env = lmdb.open(str(tmp_path / "raw"), max_dbs=4, map_size=1 << 28)
    try:
        yield env, T.TlogDbs(env.open_db(T.ENTRIES_DB), env.open_db(T.HASHES_DB))
    finally:
        env.close()


def _entries(n: int, salt: str = "") -> list[bytes]:
    return [
        T.entry_bytes(
            "sha256:" + hashlib.sha256(f"{salt}{i}".encode()).hexdigest(),
            "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L",
            hashlib.sha256(f"event {salt}{i}".encode()).hexdigest(),
        )
        for i in range(n)
    ]


def _append(
    env: lmdb.Environment, dbs: T.TlogDbs, entries: list[bytes], batches: list[int], *, extend: bool = False
) -> None:
    """``extend``: each batch in one Appender.extend call (the writer's path), else entry by entry."""
    done = 0
    for b in batches:
        with env.begin(write=True) as txn:
            appender = T.Appender(txn, dbs, expected_size=done)
            if extend:
                appender.extend(entries[done : done + b])
            else:
                for e in entries[done : done + b]:
                    appender.append(e)
        done += b


def test_entry_bytes_are_the_contract_json() -> None:
    e = T.entry_bytes("sha256:" + "ab" * 32, "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L", "cd" * 32)
    assert e == (
        b'{"event_id":"'
        + b"ab" * 32
        + b'","record":"pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L","sha256":"'
        + b"cd" * 32
        + b'"}'
    )


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
            assert got == [merkle.root(leaves[i * width : (i + 1) * width]) for i in range(1100 // width)]
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
        with pytest.raises(TlogOutOfRange):
            T.read_entries(txn, dbs, 9, 11)
        with pytest.raises(TlogOutOfRange):
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
    assert _check(env, dbs, entries) == [f"transparency log entry 5 differs from its log entry{REMEDY}"]


def test_checker_names_a_tampered_hash(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(77)
    _append(env, dbs, entries, [77])
    with env.begin(write=True) as txn:
        txn.put(T.position(3, 4).to_bytes(8, "big"), b"\0" * 32, db=dbs.hashes)
    assert _check(env, dbs, entries) == [
        f"transparency log hash at level 3, index 4 differs from its recomputation{REMEDY}"
    ]


def test_checker_names_a_log_longer_than_the_tlog(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    entries = _entries(30)
    _append(env, dbs, entries[:20], [20])
    faults = _check(env, dbs, entries)
    assert faults == [
        "transparency log entry 20 is missing (the log holds it), and every one after it",
        "transparency log hash at level 0, index 20 is missing, and every one after it",
        "the transparency log holds 20 entries for 30 log entries",
        f"the transparency log holds {T.stored_hashes(20)} hashes; a tree of 30 entries has {T.stored_hashes(30)}"
        + REMEDY,
    ]


def test_checker_caps_what_it_names(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    _append(env, dbs, _entries(50), [50])
    faults = _check(env, dbs, _entries(50, salt="other"))
    assert len([f for f in faults if f.startswith("transparency log ")]) == T.NAMED_FAULTS
    assert faults[-1].startswith("... and ") and faults[-1].endswith(REMEDY)


def test_appender_refuses_a_tlog_out_of_step(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    env, dbs = raw
    _append(env, dbs, _entries(5), [5])
    with env.begin(write=True) as txn, pytest.raises(TlogDamaged, match="5 entries for 6 log entries"):
        T.Appender(txn, dbs, expected_size=6)
    with env.begin(write=True) as txn:
        txn.delete(T.position(0, 4).to_bytes(8, "big"), db=dbs.hashes)
    with env.begin(write=True) as txn, pytest.raises(TlogDamaged, match="hashes"):
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
            assert T.rebuilt_extends(old, dbs[0], ext, dbs[1]) == {
                "old_size": 30,
                "size": 40,
                "extends_old": True,
                "first_difference": None,
            }
            assert T.rebuilt_extends(old, dbs[0], other, dbs[2])["first_difference"] == 12
            assert T.rebuilt_extends(ext, dbs[1], old, dbs[0]) == {
                "old_size": 40,
                "size": 30,
                "extends_old": False,
                "first_difference": 30,
            }
    finally:
        for e in envs:
            e.close()


def test_extend_refuses_a_tlog_holding_an_entry_beyond_its_size(raw: tuple[lmdb.Environment, T.TlogDbs]) -> None:
    """An entry stored past the tree's end (a damaged ledger): the batch's append is refused, not
    silently short."""
    env, dbs = raw
    _append(env, dbs, _entries(5), [5])
    with env.begin(write=True) as txn:
        appender = T.Appender(txn, dbs, expected_size=5)
        txn.put((7).to_bytes(8, "big"), b"stray", db=dbs.entries)
        with pytest.raises(TlogDamaged, match="already holds an entry"):
            appender.extend(_entries(4, salt="y"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=70), max_size=12), st.booleans())
def test_any_batching_gives_the_same_tree(batches: list[int], extend: bool) -> None:
    """Appending in any batches, entry by entry or a batch at a time, stores exactly the hashes
    all_hashes streams for the same leaves."""
    import tempfile

    total = sum(batches)
    entries = _entries(total)
    with tempfile.TemporaryDirectory() as d:
        env = lmdb.open(d, max_dbs=4, map_size=1 << 26)
        try:
            dbs = T.TlogDbs(env.open_db(T.ENTRIES_DB), env.open_db(T.HASHES_DB))
            _append(env, dbs, entries, batches, extend=extend)
            with env.begin() as txn:
                stored = [bytes(v) for v in txn.cursor(db=dbs.hashes).iternext(keys=False)]
                assert [bytes(v) for v in txn.cursor(db=dbs.entries).iternext(keys=False)] == entries
                assert T.tree_hash(txn, dbs) == merkle.root([merkle.leaf_hash(e) for e in entries])
        finally:
            env.close()
    assert stored == list(T.all_hashes(merkle.leaf_hash(e) for e in entries))


def _fake_log(env: lmdb.Environment, n: int) -> tuple[object, list[bytes]]:
    """A log of ``n`` entries in the stored form (msgpack [seq, event, facts, event_id]) and their entries."""
    import msgspec

    from pithledger.records.canonical import canonical_bytes

    log = env.open_db(b"log")
    expected = []
    with env.begin(write=True) as txn:
        for i in range(n):
            event = canonical_bytes(
                {
                    "event_id": "sha256:" + hashlib.sha256(b"%d" % i).hexdigest(),
                    "event_type": "x",
                    "subject_pith_number": f"pith:2025:{i:026d}",
                    "payload": {"n": i},
                }
            )
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
    with env.begin(write=True) as txn, pytest.raises(TlogDamaged, match="under sequence 3 where 2"):
        T.build(txn, log, dbs, 100)


# --- the ledger: the tlog is the log's, batch by batch ---------------------------------------------------------------

import copy as copy_  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

from helpers.common import FIXTURES, LMDB_EXAMPLES, derive_on_workers  # noqa: E402
from helpers.eventpool import bundles_of, pool  # noqa: E402
from pithledger.errors import LedgerFull  # noqa: E402
from pithledger.records.bundle import Bundle, read_bundle  # noqa: E402
from pithledger.records.canonical import strict_decode  # noqa: E402
from pithledger.store import BatchWithdrawn, Ledger  # noqa: E402


def junk() -> list[dict[str, Any]]:
    """Invalid copies: a tampered payload under its old id, a wrong declared id, the fixtures' forgeries."""
    events = []
    for name in (
        "altered-created-at.json",
        "altered-payload-under-old-event-id.json",
        "pith-record-created-receipt-forged.json",
    ):
        events += read_bundle(strict_decode((FIXTURES / "bundles" / name).read_bytes())).events
    bad = copy_.deepcopy(attestations(1, 900)[0])
    bad["payload"]["author_name"] = "someone else"
    return events + [bad]


def example_bundles() -> list[Bundle]:
    out = []
    for path in sorted((ROOT / "bundles").glob("*.json")) + [ROOT / "bundles" / "demo-50-records.jsonl"]:
        for line in path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]:
            if line.strip():
                out.append(read_bundle(strict_decode(line)))
    return out


def test_the_tlog_holds_every_logged_event_across_batches_duplicates_and_junk(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l", create=True) as ledger:
        assert ledger.tlog_size() == 0 and ledger.tlog_root() == merkle.EMPTY_ROOT
        bundles = example_bundles()
        for i in range(0, len(bundles), 7):
            ledger.apply_batch(bundles[i : i + 7], defer=True)
        events = [record_created()] + attestations(300)
        for i in range(0, len(events), 37):
            chunk = events[i : i + 37]
            ledger.apply_batch([Bundle(pith_number=NUMBER, events=chunk + junk() + chunk[:3])], defer=i % 2 == 0)
        logged = ledger.counts()["events"]
        ledger.apply_batch(bundles + [Bundle(pith_number=NUMBER, events=events)])  # every one a duplicate
        assert ledger.counts()["events"] == logged
        entries = assert_tlog_is_the_log(ledger)
        assert all(len(e) < 300 for e in entries)  # far below tlog-tiles' 65,535 bytes
        assert ledger.evidence_usage().entries > 0  # the junk is evidence, not in the tlog
        ledger.finish()
        assert ledger.fsck() == []


def test_a_failed_batch_leaves_the_tlog_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger(tmp_path / "l", create=True, map_size=256 * 1024) as ledger:
        ledger.apply_batch([Bundle(pith_number=NUMBER, events=[record_created()] + attestations(20))])
        before = ledger.tlog_size(), ledger.tlog_root(), ledger.counts()
        batch = ledger.batch()
        batch.add(Bundle(pith_number=NUMBER, events=attestations(5, 100)))
        with pytest.raises(BatchWithdrawn):
            batch.commit(admit=lambda txn: False)
        assert (ledger.tlog_size(), ledger.tlog_root(), ledger.counts()) == before

        def cannot_grow() -> None:
            raise LedgerFull("the ledger cannot grow (test)")

        monkeypatch.setattr(ledger._core, "_grow", cannot_grow)
        with pytest.raises(LedgerFull):
            ledger.apply_batch([Bundle(pith_number=NUMBER, events=attestations(400, 200))])  # more than 256 KiB holds
        assert (ledger.tlog_size(), ledger.tlog_root(), ledger.counts()) == before
        assert_tlog_is_the_log(ledger)


def test_the_tlog_index_is_the_log_sequence(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        entries = assert_tlog_is_the_log(ledger)
        for n, entry in enumerate(entries):
            assert ledger.tlog_index(json.loads(entry)["event_id"]) == n  # the entry's bare hex works too
        assert ledger.tlog_index("sha256:" + "00" * 32) is None
        assert ledger.tlog_index("not an id") is None
        with ledger.snapshot():  # one snapshot: size, root and hashes agree
            size = ledger.tlog_size()
            assert ledger.tlog_root() == ledger.tlog_root(size)
        with pytest.raises(LookupError):
            ledger.tlog_hashes(0, 0, size + 1)
        with pytest.raises(LookupError):
            ledger.tlog_entries(size - 1, size + 1)


# --- processes: a killed apply, two writers ------------------------------------------------------------------------


# --- fsck and rebuild ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [False, True])
def test_fsck_names_a_tampered_entry(tmp_path: Path, workers: bool) -> None:
    path = tmp_path / "l"
    small_ledger(path)
    with Ledger(path, readonly=True) as ledger:
        entries = ledger.tlog_entries(0, ledger.tlog_size())
    raw_put(path, T.ENTRIES_DB, (7).to_bytes(8, "big"), entries[7].replace(b'"record":"pith:', b'"record":"pith:X'))
    with Ledger(path, readonly=True, tuning=derive_on_workers(workers)) as ledger:
        problems = ledger.fsck()
    assert problems == [f"transparency log entry 7 differs from its log entry{REMEDY}"]


def test_a_write_on_a_tlog_out_of_step_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l"
    small_ledger(path)
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:  # the last entry lost: the tlog is one short of the log
        db = env.open_db(T.ENTRIES_DB, txn=txn, create=False)
        last = txn.stat(db)["entries"] - 1
        txn.delete(last.to_bytes(8, "big"), db=db)
    env.close()
    with Ledger(path) as ledger:
        before = ledger.counts()
        with pytest.raises(TlogDamaged, match="entries for"):
            ledger.apply_batch([Bundle(pith_number=NUMBER, events=attestations(2, 500))])
        assert ledger.counts() == before  # nothing written


# --- layout 4: read as it is, upgraded in place by the first writer -----------------------------------------------


# --- the property -------------------------------------------------------------------------------------------------


@settings(max_examples=LMDB_EXAMPLES, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=len(pool()) - 1), max_size=12), st.booleans(), st.booleans()
        ),
        min_size=1,
        max_size=8,
    )
)
def test_for_any_batches_the_tlog_is_the_log_in_order(batches: list[tuple[list[int], bool, bool]]) -> None:
    """Whatever the batches (duplicates, invalid and unverified copies of the pool among them, some
    deferred), the tlog's entries are the log's in order and its root is merkle.root of them."""
    import tempfile

    events = pool()
    bad = junk()
    with tempfile.TemporaryDirectory() as d, Ledger(Path(d) / "l", create=True) as ledger:
        for picks, with_junk, defer in batches:
            chosen = [events[i] for i in picks] + (bad if with_junk else [])
            ledger.apply_batch(bundles_of(chosen), defer=defer)
        assert_tlog_is_the_log(ledger)


# --- the ledger as tlog.py's HashReader (tlog-formats' contract) ------------------------------------------------


def test_the_ledger_serves_tlog_py_roots_proofs_and_tiles(tmp_path: Path) -> None:
    """tlog.tree_hash over the ledger equals merkle.root of the entries at every size; inclusion and
    consistency proofs read from it verify with ledger.merkle; its tiles, read back by a TileClient
    that trusts only the checkpoint, give the same entries and root; every entry is tlog.log_entry's."""
    from pithledger.tlog import tiles as tlog
    from pithledger.tlog.note import Checkpoint

    with Ledger(tmp_path / "l", create=True) as ledger:
        events = [record_created()] + attestations(599)
        for i in range(0, len(events), 97):
            ledger.apply_batch([Bundle(pith_number=NUMBER, events=events[i : i + 97])], defer=True)
        entries = assert_tlog_is_the_log(ledger)
        for e, entry in zip(ledger.log(), entries, strict=True):
            assert (
                tlog.log_entry(e.verdict.event_id.removeprefix("sha256:"), e.verdict.subject, served(e.event)) == entry
            )
        leaves = [merkle.leaf_hash(e) for e in entries]
        roots = [merkle.root(leaves[:n]) for n in range(len(leaves) + 1)]
        for n, want in enumerate(roots):
            assert tlog.tree_hash(ledger, n) == want == ledger.tlog_root(n), n
        size = len(entries)
        for index, at in [(0, 1), (0, size), (5, 6), (255, 256), (256, 600), (511, 513), (599, 600), (300, 431)]:
            merkle.verify_inclusion(index, at, leaves[index], tlog.inclusion_proof(ledger, index, at), roots[at])
        for old, new in [(1, 600), (255, 256), (256, 600), (100, 513), (599, 600), (7, 8)]:
            merkle.verify_consistency(old, new, roots[old], roots[new], tlog.consistency_proof(ledger, old, new))
        tiles = dict(tlog.tiles_for(ledger, ledger.tlog_entries, size))
        client = tlog.TileClient(tiles.__getitem__, Checkpoint("example.org/tlog-store-test", size, roots[size]))
        assert client.entries(0, size) == entries
        assert tlog.tree_hash(client, size) == roots[size]
