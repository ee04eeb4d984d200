"""Digests, publish, sync and audit — over directories and a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest

from helpers.eventpool import bundles_of, pool
from helpers.ledgers import example_bundles, ledger_with
from pithledger.audit import compare
from pithledger.errors import SourceError
from pithledger.mirror.publish import Published, publish, record_dir, sync
from pithledger.records.events import verify_event
from pithledger.store import Ledger

NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


def test_two_ledgers_built_in_different_orders_audit_consistent(tmp_path: Path) -> None:
    events = pool()
    with ledger_with(tmp_path / "a", events) as a, ledger_with(tmp_path / "b", list(reversed(events))) as b:
        result = compare(a, b)
        assert result.consistent and result.divergent == [] and result.digests_read == 2
        assert a.root() == b.root()


def test_one_missing_event_is_named_with_its_record(tmp_path: Path) -> None:
    events = pool()
    dropped = events[7]
    with (
        ledger_with(tmp_path / "a", events) as a,
        ledger_with(tmp_path / "b", [e for e in events if e is not dropped]) as b,
    ):
        result = compare(a, b)
    assert not result.consistent
    own = [d for d in result.divergent if d.pith_number == dropped["subject_pith_number"]]
    assert own[0].kind == "events-differ" and own[0].b_lacks == [dropped["event_id"]] and own[0].a_lacks == []


def test_one_extra_event_is_named(tmp_path: Path) -> None:
    events = pool()
    extra = next(e for e in events if e["event_type"] == "storage_attestation")
    with (
        ledger_with(tmp_path / "a", [e for e in events if e is not extra]) as a,
        ledger_with(tmp_path / "b", events) as b,
    ):
        result = compare(a, b)
    assert [(d.pith_number, d.kind, d.a_lacks, d.b_lacks) for d in result.divergent] == [
        (extra["subject_pith_number"], "events-differ", [extra["event_id"]], [])
    ]


def test_inputs_that_are_not_valid_events_never_make_mirrors_diverge(tmp_path: Path) -> None:
    events = pool()
    junk = [e for e in events if verify_event(e).status != "valid"]
    assert junk  # the pool carries invalid and unverified inputs
    with (
        ledger_with(tmp_path / "a", [e for e in events if e not in junk]) as a,
        ledger_with(tmp_path / "b", events) as b,
    ):
        result = compare(a, b)
        assert b.evidence_usage().entries == len(junk)
    assert result.consistent and result.divergent == []


def test_a_tampered_state_is_a_suspected_merge_bug(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a, ledger_with(tmp_path / "b", pool()) as b:
        from pithledger.audit import bucket_of, record_pair

        with b.env.begin(write=True) as txn:  # what a buggy merge on B would have stored
            state = json.loads(zlib.decompress(txn.get(NUMBER.encode(), db=b.db[b"state"])))
            state["state_sha256"] = "00" * 32
            txn.put(NUMBER.encode(), zlib.compress(json.dumps(state).encode()), db=b.db[b"state"])
            ids_ = [e.event_id for e in b._views._entries(txn, NUMBER)]
            from pithledger.store.env import _rec_key
            from pithledger.store.views import _pair_encoder

            txn.put(_rec_key(NUMBER), _pair_encoder.encode(record_pair(ids_, "00" * 32)), db=b.db[b"rec"])
            b._views._update_tree(txn, {bucket_of(NUMBER)})
        result = compare(a, b)
        assert [(d.pith_number, d.kind) for d in result.divergent] == [(NUMBER, "state-differs-with-equal-events")]
        assert result.merge_bug_suspected
        assert any(NUMBER in p for p in b.fsck())


def test_publish_then_sync_into_an_empty_ledger_gives_an_identical_mirror(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        a.apply_batch(example_bundles())
        publish(a, tmp_path / "pub")
        assert compare(a, Published(str(tmp_path / "pub"))).consistent
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"))
            assert counts["new"] == a.counts()["events"]
            assert compare(a, c).consistent
            assert {s: c.state_bytes(s) for s in c.subjects()} == {s: a.state_bytes(s) for s in a.subjects()}
            assert c.fsck() == []


def test_republish_is_incremental_and_keeps_no_stale_nodes(tmp_path: Path) -> None:
    events = pool()
    late = [e for e in events if e["event_type"] in ("storage_attestation", "replication_record")]
    with ledger_with(tmp_path / "a", [e for e in events if e not in late]) as a:
        first = publish(a, tmp_path / "pub")
        assert publish(a, tmp_path / "pub") == {
            "records_written": 0,
            "nodes_written": 0,
            "nodes_removed": 0,
            "resolve_shards_written": 0,  # nothing changed: no shard of the resolve index is rebuilt
            "resolve_shards_removed": 0,
        }
        a.apply_batch(bundles_of(late))
        second = publish(a, tmp_path / "pub")
        assert 0 < second["records_written"] < first["records_written"]
        files = {p.name for p in (tmp_path / "pub" / "pithledger" / "nodes").iterdir()}
        assert len(files) == first["nodes_written"] - second["nodes_removed"] + second["nodes_written"]
        assert compare(a, Published(str(tmp_path / "pub"))).consistent


def test_a_dropped_event_is_repaired_by_sync(tmp_path: Path) -> None:
    events = pool()
    with ledger_with(tmp_path / "a", events) as a, ledger_with(tmp_path / "b", events[:5] + events[6:]) as b:
        publish(a, tmp_path / "pub")
        result = compare(a, b)
        assert any(d.b_lacks == [events[5]["event_id"]] for d in result.divergent)
        counts = sync(b, str(tmp_path / "pub"))
        assert counts["new"] == 1 and compare(a, b).consistent


def test_hostile_source_is_named_and_cannot_corrupt_the_ledger(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
    nodes = sorted((tmp_path / "pub" / "pithledger" / "nodes").glob("*.json"))
    bucket = next(p for p in nodes if len(p.name.split("-")[0]) == 3)
    value = json.loads(bucket.read_text())
    number = next(iter(value["records"]))
    value["records"][number]["event_ids"].append("sha256:" + "ab" * 32)  # claims an event that is not there
    bucket.write_text(json.dumps(value))
    with ledger_with(tmp_path / "b", pool()[:3]) as b:
        before = {s: b.state_bytes(s) for s in b.subjects()}
        with pytest.raises(SourceError):
            sync(b, str(tmp_path / "pub"))
        assert {s: b.state_bytes(s) for s in b.subjects()} == before and b.fsck() == []


def test_bundle_swapped_for_another_records_is_refused(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        subjects = list(a.subjects())
    first, second = (tmp_path / "pub" / record_dir(s) / "bundle.json" for s in subjects[:2])
    shutil.copy(second, first)
    with Ledger(tmp_path / "c", create=True) as c:
        for _ in range(2):  # named on every run, and every other record still arrives
            counts = sync(c, str(tmp_path / "pub"))
            assert [(s["pith_number"], s["reason"]) for s in counts["skipped"]] == [(subjects[0], "bad-source")]
            assert "is about" in counts["skipped"][0]["message"]
        assert set(c.subjects()) == set(subjects[1:])


def test_not_a_mirror(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        Published(str(tmp_path))
