"""Sync and audit that cannot be censored (issue #20 §1): records of several bundle parts, located by the
part index; junk ids; memory bounded part by part; a source's bundles read against its own digests."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.common import LMDB_EXAMPLES, PITH_RECORDS
from helpers.eventpool import ALICE, BOB, EVE, P, bundles_of, pool
from helpers.ledgers import ledger_with
from pithledger.audit import LISTED_IDS, compare
from pithledger.errors import SourceError
from pithledger.mirror.publish import PART_INDEX_FILE, Published, publish, record_dir, sync
from pithledger.records import keys
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.model import record_ids
from pithledger.store import Ledger, StoreTuning, tuned

#: Parts of a few kB instead of 4 MiB: the same splitting code (Ledger.export_parts), scaled down.
SMALL_PART = 3600
PAD = 1100  # each flood event is ~1.7 kB canonical: two per part


def small_parts() -> AbstractContextManager[StoreTuning]:
    """Within it, ledgers opened without a tuning of their own export in parts of SMALL_PART."""
    return tuned(StoreTuning(part_bytes=SMALL_PART))


@lru_cache(maxsize=1)
def flood() -> list[dict[str, Any]]:
    """Valid self-signed snapshots of P[0] (anyone can write them): what makes a record multi-part."""
    return [
        make_event(
            "graph_snapshot",
            P[0],
            {"graph_snapshot": {"n": i, "pad": "x" * PAD}},
            [BOB, EVE][i % 2],
            created_at=f"2026-07-{1 + i % 28:02d}T00:{i // 60:02d}:{i % 60:02d}Z",
        )
        for i in range(40)
    ]


def part_of(ledger: Ledger, number: str, event_id: str) -> int:
    """Which exported part of ``number`` carries the valid event ``event_id`` (by position: parts hold
    the valid events in id order)."""
    ids = ledger.record_events(number)
    position = ids.index(event_id)
    seen = 0
    for n, part in enumerate(ledger.export_parts(number)):
        seen += len(part["events"])
        if position < seen:
            return n
    raise AssertionError("not exported")


def same(a: Ledger, b: Ledger) -> None:
    assert a.root() == b.root()
    assert sorted(a.subjects()) == sorted(b.subjects())
    for subject in a.subjects():
        assert a.state_bytes(subject) == b.state_bytes(subject), subject


# --- 1. a new event in a later part arrives -----------------------------------------------------------


def late_event(ledger: Ledger, base: list[dict[str, Any]]) -> dict[str, Any]:
    """A new valid event on P[0] whose id sorts into part 2 or later once added."""
    for i in range(200):
        e = make_event(
            "graph_snapshot", P[0], {"graph_snapshot": {"late": i}}, ALICE, created_at=f"2026-08-01T00:00:{i % 60:02d}Z"
        )
        ids = sorted([*ledger.record_events(P[0]), e["event_id"]])
        # parts of two flood events each: an id past the first ~5 sorts into part >= 2
        if ids.index(e["event_id"]) >= len(ids) // 2:
            return e
    raise AssertionError("no late id found")


def test_incremental_sync_gets_a_new_event_that_sorts_into_a_later_part(tmp_path: Path) -> None:
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:12]) as a:
        publish(a, tmp_path / "pub")
        with Ledger(tmp_path / "c", create=True) as c:
            first = sync(c, str(tmp_path / "pub"))
            assert first["lying"] == [] and first["skipped"] == []
            new = late_event(a, [])
            a.apply_batch(bundles_of([new]))
            assert part_of(a, P[0], new["event_id"]) >= 2 and len(a.export_parts(P[0])) >= 4
            publish(a, tmp_path / "pub")
            again = sync(c, str(tmp_path / "pub"))
            assert again["lying"] == [] and again["skipped"] == [] and again["new"] == 1
            same(a, c)


def test_only_the_parts_holding_lacking_ids_are_read(tmp_path: Path) -> None:
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:12]) as a:
        publish(a, tmp_path / "pub")
        with Ledger(tmp_path / "c", create=True) as c:
            sync(c, str(tmp_path / "pub"))
            new = late_event(a, [])
            a.apply_batch(bundles_of([new]))
            publish(a, tmp_path / "pub")
            where = part_of(a, P[0], new["event_id"])
            read: list[int] = []
            original = Published.bundle_bytes

            def spy(self: Published, number: str, part: int = 0) -> bytes:
                read.append(part)
                return original(self, number, part)

            Published.bundle_bytes = spy  # type: ignore[method-assign]
            try:
                assert sync(c, str(tmp_path / "pub"))["new"] == 1
            finally:
                Published.bundle_bytes = original  # type: ignore[method-assign]
            assert read == [where]


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> keys.LocalKey:
    """We hold no Pith private key: a stand-in registry key signs receipts (as in test_consensus)."""
    stand_in = keys.LocalKey(name="stand-in registry", seed=b"\x07" * 32)
    monkeypatch.setitem(
        keys.PITH_REGISTRY_KEYS,
        "pith-v1-2026-05",
        keys.RegistryKey(key_id="pith-v1-2026-05", public_key=stand_in.public_key),
    )
    return stand_in


def pith_record_created(record: dict[str, Any], key: keys.LocalKey, signed_at: str) -> dict[str, Any]:
    """A record_created event in Pith's own envelope: its ledger id is what its receipt authenticates
    (events.pith_record_event_id), not its declared event_id."""
    rid = record_ids(record)
    return {
        "event_type": "record_created",
        "subject_pith_number": rid.pith_number,
        "target": "record",
        "created_at": "2026-05-18T01:47:41Z",
        "event_id": "sha256:" + "74" * 32,
        "signer": {
            "key_id": "pith-v1-2026-05",
            "public_key_fingerprint": keys.fingerprint_hex(key.public_key),
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "payload": {
            "canonical_record": record,
            "canonical_sha256": rid.canonical_sha256,
            "receipt": {
                "kind": "pith_receipt",
                "key_id": "pith-v1-2026-05",
                "algorithm": "ed25519",
                "signed_at": signed_at,
                "signature_b64": keys.b64encode(key.sign(bytes.fromhex(rid.canonical_sha256))),
            },
        },
    }


def test_a_pith_envelope_event_in_a_later_part_is_located_by_its_ledger_id(
    tmp_path: Path, registry: keys.LocalKey
) -> None:
    record = PITH_RECORDS[5]["canonical_record"]
    number = record_ids(record).pith_number
    pith = pith_record_created(record, registry, "2026-05-18T01:47:41.701845Z")
    with Ledger(tmp_path / "probe", create=True) as probe:
        probe.apply_batch(bundles_of([pith]))
        [pith_id] = probe.record_events(number)
    assert pith_id != pith["event_id"]
    own = make_event(
        "record_created",
        number,
        {"canonical_record": record, "canonical_sha256": record_ids(record).canonical_sha256},
        ALICE,
        created_at="2026-06-01T00:00:00Z",
    )
    snaps = [
        make_event(
            "graph_snapshot",
            number,
            {"graph_snapshot": {"n": i, "pad": "y" * PAD}},
            BOB,
            created_at=f"2026-07-01T00:00:{i:02d}Z",
        )
        for i in range(60)
    ]
    below = [e for e in snaps if e["event_id"] < pith_id]
    assert len(below) >= 6  # deterministic keys and times: enough ids sort before the Pith event's
    with small_parts(), ledger_with(tmp_path / "a", [own, *below[:6]]) as a:
        publish(a, tmp_path / "pub")
        with Ledger(tmp_path / "c", create=True) as c:
            assert sync(c, str(tmp_path / "pub"))["lying"] == []
            a.apply_batch(bundles_of([pith]))
            assert part_of(a, number, pith_id) >= 2
            publish(a, tmp_path / "pub")
            again = sync(c, str(tmp_path / "pub"))
            assert again["lying"] == [] and again["new"] == 1
            same(a, c)


def test_a_tree_published_without_part_index_is_still_read_whole(tmp_path: Path) -> None:
    """Trees published before the part index existed: every part is read, in order, until the lacking ids are seen."""
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:12]) as a:
        publish(a, tmp_path / "pub")
        with Ledger(tmp_path / "c", create=True) as c:
            sync(c, str(tmp_path / "pub"))
            new = late_event(a, [])
            a.apply_batch(bundles_of([new]))
            publish(a, tmp_path / "pub")
            for index in (tmp_path / "pub" / "pithledger" / "records").rglob(PART_INDEX_FILE):
                index.unlink()
            again = sync(c, str(tmp_path / "pub"))
            assert again["lying"] == [] and again["new"] == 1
            same(a, c)


def test_a_part_index_that_lies_or_is_malformed_is_named_never_trusted(tmp_path: Path) -> None:
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:12]) as a:
        publish(a, tmp_path / "pub")
        index_path = tmp_path / "pub" / record_dir(P[0]) / PART_INDEX_FILE
        index = json.loads(index_path.read_text())
        assert len(index["parts"]) >= 4 and all(p is not None for p in index["parts"])
        # every range moved onto part 0: the ids it does not carry are advertised and not delivered
        lying = dict(index, parts=[[index["parts"][0][0], index["parts"][-1][1]]] + [None] * (len(index["parts"]) - 1))
        index_path.write_bytes(canonical_bytes(lying) + b"\n")
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"))
            [lie] = counts["lying"]
            assert lie["pith_number"] == P[0] and lie["missing_count"] == len(a.record_events(P[0])) - len(
                a.export_parts(P[0])[0]["events"]
            )
        for bad in (
            {**index, "parts": list(reversed(index["parts"]))},
            {**index, "parts": [["sha256:x", 1]]},
            {**index, "event_root": "00" * 32},
            {**index, "pith_number": P[1]},
            [1, 2],
        ):
            index_path.write_bytes(canonical_bytes(bad) + b"\n")
            with Ledger(tmp_path / "d", create=True) as d:
                counts = sync(d, str(tmp_path / "pub"))
                assert [s["pith_number"] for s in counts["skipped"]] == [P[0]] and counts["lying"] == []
                assert set(d.subjects()) == set(a.subjects()) - {P[0]}  # the others arrive
            for path in (tmp_path / "d").iterdir():
                path.unlink()
            (tmp_path / "d").rmdir()


# --- 2. junk event ids --------------------------------------------------------------------------------


def test_a_source_event_whose_event_id_is_not_a_string_is_junk_and_the_walk_goes_on(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        want = set(a.subjects())
        for index in (tmp_path / "pub" / "pithledger" / "records").rglob(PART_INDEX_FILE):
            index.unlink()  # both readers: by index, and the whole-record walk of older trees
    path = tmp_path / "pub" / record_dir(P[0]) / "bundle.json"
    bundle = json.loads(path.read_text())
    junk = [dict(bundle["events"][0], event_id=value) for value in (["sha256:" + "1" * 64], {"a": 1}, 7, None)]
    bundle["events"] = junk + bundle["events"]
    path.write_bytes(canonical_bytes(bundle) + b"\n")
    with Ledger(tmp_path / "c", create=True) as c:
        counts = sync(c, str(tmp_path / "pub"))
        assert counts["skipped"] == [] and counts["lying"] == []
        assert counts["invalid"] == len(junk)
        assert set(c.subjects()) == want
        with Ledger(tmp_path / "a") as a:
            assert compare(a, c).consistent


# --- 3. memory: part by part; capped listings ---------------------------------------------------------


def test_a_record_is_applied_part_by_part_not_held_whole(tmp_path: Path) -> None:
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:12]) as a:
        publish(a, tmp_path / "pub")
        n_parts = len(a.export_parts(P[0]))
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"), batch_bytes=1)  # every part closes a batch
            assert counts["lying"] == [] and counts["skipped"] == []
            assert counts["batches"] >= n_parts
            same(a, c)


def test_audit_lists_a_bounded_number_of_ids_per_record_with_whole_counts(tmp_path: Path) -> None:
    many = [
        make_event(
            "graph_snapshot",
            P[0],
            {"graph_snapshot": {"n": i}},
            BOB,
            created_at=f"2026-07-01T00:{i // 60:02d}:{i % 60:02d}Z",
        )
        for i in range(LISTED_IDS + 30)
    ]
    with ledger_with(tmp_path / "a", pool() + many) as a, Ledger(tmp_path / "c", create=True) as c:
        c.apply_batch(bundles_of([e for e in pool() if e["subject_pith_number"] != P[0]]))
        total = len(a.record_events(P[0]))
        [d] = [d for d in compare(c, a).divergent if d.pith_number == P[0]]
        assert d.kind == "missing-on-a" and d.a_lacks_count == total and len(d.a_lacks) == LISTED_IDS
        assert d.a_lacks == a.record_events(P[0])[:LISTED_IDS]
        [whole] = [d for d in compare(c, a, max_ids=None).divergent if d.pith_number == P[0]]
        assert whole.a_lacks == a.record_events(P[0])


# --- 4. a source's bundles against its own digests ----------------------------------------------------


# --- 5. the property ----------------------------------------------------------------------------------


@settings(max_examples=max(8, LMDB_EXAMPLES // 4))
@given(
    base=st.integers(min_value=0, max_value=11),
    new=st.sets(st.integers(min_value=0, max_value=39), max_size=6),
    also=st.booleans(),
)
def test_incremental_sync_equals_fresh_sync_equals_apply(
    tmp_path_factory: pytest.TempPathFactory, base: int, new: set[int], also: bool
) -> None:
    """Records of 1-6 parts (0-11 flood events on P[0], two per part), new events landing in any part:
    the ledger that synced before and syncs again, a fresh one, and one that applied the events all agree."""
    tmp = tmp_path_factory.mktemp("prop")
    events = flood()
    # P[0] keeps one record_created (1.2 kB) of its pool events: with 0-11 floods, 1-6 parts of 3.6 kB
    first = [e for e in pool() if e["subject_pith_number"] != P[0]] + [pool()[0]] + events[:base]
    extra = [events[i] for i in sorted(new) if i >= base]
    if also:  # a new event on another, single-part record too
        extra.append(
            make_event(
                "graph_snapshot", P[1], {"graph_snapshot": {"also": 1}}, ALICE, created_at="2026-09-01T00:00:00Z"
            )
        )
    with small_parts():
        with ledger_with(tmp / "a", first) as a:
            assert 1 <= len(a.export_parts(P[0])) <= 6
            publish(a, tmp / "pub")
            with Ledger(tmp / "inc", create=True) as inc:
                assert sync(inc, str(tmp / "pub"))["lying"] == []
                if extra:
                    a.apply_batch(bundles_of(extra))
                    publish(a, tmp / "pub")
                counts = sync(inc, str(tmp / "pub"))
                assert counts["lying"] == [] and counts["skipped"] == []
                with (
                    Ledger(tmp / "fresh", create=True) as fresh,
                    ledger_with(tmp / "applied", first + extra) as applied,
                ):
                    assert sync(fresh, str(tmp / "pub"))["lying"] == []
                    same(applied, inc)
                    same(applied, fresh)
                    same(applied, a)


def test_published_reader_refuses_a_part_index_for_a_record_it_does_not_advertise(tmp_path: Path) -> None:
    with small_parts(), ledger_with(tmp_path / "a", pool() + flood()[:4]) as a:
        publish(a, tmp_path / "pub")
    source = Published(str(tmp_path / "pub"))
    assert source.part_index(P[0]) is not None
    ghost = "pith:2026:" + P[0].rsplit(":", 1)[1][:3] + "A" * 23
    target = tmp_path / "pub" / record_dir(ghost)
    target.mkdir(parents=True)
    (target / PART_INDEX_FILE).write_bytes((tmp_path / "pub" / record_dir(P[0]) / PART_INDEX_FILE).read_bytes())
    with pytest.raises(SourceError):
        source.part_index(ghost)
