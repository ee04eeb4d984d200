"""The LMDB ledger: append-only log, exact dedup, atomic batches, any-ID lookup, export, fsck."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import lmdb
import pytest

from helpers.adversary import unsigned_pith_event
from helpers.clikit import _pith
from helpers.common import derive_on_workers
from helpers.eventpool import ORPHAN, P, bundles_of, entries, pool
from helpers.ledgers import EXAMPLES, example_bundles
from pithledger.errors import LayoutMismatch, NoLedger, NotFound, PithledgerError
from pithledger.merge import reduce_all
from pithledger.records.bundle import Bundle, read_bundle, write_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import verify_event
from pithledger.store import Ledger


def all_states(ledger: Ledger) -> dict[str, bytes]:
    return {s: ledger.state_bytes(s) for s in ledger.subjects()}


def test_applying_twice_changes_nothing(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l", create=True) as ledger:
        first = ledger.apply_batch(example_bundles())
        before = all_states(ledger), ledger.counts()
        again = ledger.apply_batch(example_bundles())
        assert (all_states(ledger), ledger.counts()) == before
    assert first.new == 64 and first.duplicate == 0
    assert again.new == 0 and again.duplicate == 64 and again.touched == []


def test_log_keeps_valid_events_exactly_as_received_and_in_append_order(tmp_path: Path) -> None:
    valid = [e for e in pool() if verify_event(e).status == "valid"]
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        log = list(ledger.log())
    assert [e.seq for e in log] == list(range(len(valid)))
    assert [e.event for e in log] == [canonical_bytes(e) for e in valid]
    assert {e.verdict.status for e in log} == {"valid"}


def test_invalid_events_are_kept_as_evidence_outside_the_state(tmp_path: Path) -> None:
    junk = [e for e in pool() if verify_event(e).status != "valid"]
    with Ledger(tmp_path, create=True) as ledger:
        result = ledger.apply_batch(bundles_of(pool()))
        state = ledger.state_bytes(P[0])
        held = ledger.evidence(P[0])
        again = ledger.apply_batch(bundles_of(junk))
        assert ledger.state_bytes(P[0]) == state
    with Ledger(tmp_path / "clean", create=True) as clean:
        clean.apply_batch(bundles_of([e for e in pool() if e not in junk]))
        assert clean.state_bytes(P[0]) == state  # the junk changed nothing in the consensus bytes
    assert result.invalid == 2 and result.unverified == 1
    assert sorted(h.verdict.reason for _, h in held) == ["id-mismatch", "id-mismatch"]
    assert [r.reason for r in again.rejected] == [r.reason for r in result.rejected]  # reported every time
    assert (again.new, again.invalid, again.unverified) == (0, 2, 1)


def test_states_equal_the_pure_reducer(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert all_states(ledger) == {s: canonical_bytes(d) for s, d in reduce_all(entries(pool())).items()}


def test_every_id_form_resolves(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(example_bundles())
        number = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"
        for form in [
            number,
            "pith:FZ7AO632",
            "FZ7AO632",
            "fz7ao632hbv3",
            "FZ7AO632HBV3FATA",
            "FZ7AO632HBV3FATAUUZ6Y44Y3P",
            "2605.00424",
            "2605.00424v2",
            "arXiv:2605.00424",
            "10.48550/arxiv.2605.00424",
            "https://doi.org/10.48550/arXiv.2605.00424",
            "https://pith.science/pith/FZ7AO632HBV3FATAUUZ6Y44Y3P",
        ]:
            assert ledger.resolve(form) == number, form


def test_not_found_and_wrong_version_are_named(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(example_bundles())
        with pytest.raises(NotFound, match="it holds v2"):
            ledger.resolve("2605.00424v1")
        with pytest.raises(NotFound):
            ledger.resolve("2999.00001")
        with pytest.raises(NotFound):
            ledger.resolve("pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3Q")


def test_a_forged_year_sharing_a_real_suffix_cannot_take_the_short_form(tmp_path: Path) -> None:
    # pith:1999:<suffix of a real record> is another subject; no record can hash to it, so it stays
    # pending, and only present records answer short forms.
    from helpers.eventpool import ALICE
    from pithledger.records.events import make_event

    real = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"
    fake = "pith:1999:FZ7AO632HBV3FATAUUZ6Y44Y3P"
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(example_bundles())
        event = make_event("author_attestation", fake, {"author_name": "x"}, ALICE, created_at="2026-01-01T00:00:00Z")
        ledger.apply_batch(bundles_of([event]))
        assert ledger.resolve("FZ7AO632") == real
        assert ledger.resolve(fake) == fake  # the long form names it exactly
        assert json.loads(ledger.state_bytes(fake))["record_status"] == "pending"


def test_pending_events_become_folded_when_the_record_arrives(tmp_path: Path) -> None:
    events = pool()
    record_0 = [e for e in events if e["event_type"] == "record_created" and e["subject_pith_number"] == P[0]]
    rest = [e for e in events if e not in record_0]
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(rest))
        pending = json.loads(ledger.state_bytes(P[0]))
        ledger.apply_batch(bundles_of(record_0))
        present = json.loads(ledger.state_bytes(P[0]))
    assert pending["record_status"] == "pending" and pending["pending_event_ids"]
    assert present["record_status"] == "present" and present["pending_event_ids"] == []
    assert json.loads(json.dumps(reduce_all(entries(events))[P[0]])) == present


def test_orphan_subject_stays_pending(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert json.loads(ledger.state_bytes(ORPHAN))["record_status"] == "pending"


def test_export_into_an_empty_ledger_reproduces_state_bytes(tmp_path: Path) -> None:
    with Ledger(tmp_path / "a", create=True) as a:
        a.apply_batch(bundles_of(pool()))
        a.apply_batch(example_bundles())
        exported = {s: a.export(s) for s in a.subjects()}
        states = all_states(a)
    with Ledger(tmp_path / "b", create=True) as b:
        b.apply_batch([read_bundle(strict_decode(canonical_bytes(x))) for x in exported.values()])
        assert all_states(b) == states


def test_unknown_bundle_fields_survive_apply_and_export(tmp_path: Path) -> None:
    value = strict_decode((EXAMPLES / "demo-1905.08204.json").read_bytes())
    value["mirror_hints"] = {"from": "pith.science"}
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch([read_bundle(value)])
        exported = ledger.export(value["pith_number"])
    assert exported["mirror_hints"] == {"from": "pith.science"}
    assert exported["events"] == sorted(value["events"], key=lambda e: e["event_id"])


@pytest.mark.parametrize("on_workers", [False, True], ids=["in-place", "on-workers"])
def test_fsck_names_a_tampered_state(tmp_path: Path, on_workers: bool) -> None:
    with Ledger(tmp_path, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        ledger.apply_batch(example_bundles())
        assert ledger.fsck() == []
        subject = "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"
        with ledger.env.begin(write=True) as txn:
            raw = zlib.decompress(txn.get(subject.encode(), db=ledger.db[b"state"]))  # states are stored compressed
            txn.put(
                subject.encode(),
                zlib.compress(raw.replace(b'"valid_event_count":3', b'"valid_event_count":4')),
                db=ledger.db[b"state"],
            )
        assert ledger.fsck() == [f"state of {subject} differs from its recomputation from the log"]
        assert bool(ledger._workers.fanout.worker_pids()) is on_workers


@pytest.mark.parametrize("on_workers", [False, True], ids=["in-place", "on-workers"])
def test_fsck_names_a_tampered_log_entry(tmp_path: Path, on_workers: bool) -> None:
    import msgspec

    from pithledger.store import LogEntry

    with Ledger(tmp_path, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        ledger.apply_batch(example_bundles())
        seq = next(e.seq for e in ledger.log() if b"Carberry" in e.event)
        with ledger.env.begin(write=True) as txn:
            key = seq.to_bytes(8, "big")
            entry = msgspec.msgpack.decode(bytes(txn.get(key, db=ledger.db[b"log"])), type=LogEntry)
            forged = msgspec.structs.replace(entry, event=entry.event.replace(b"Carberry", b"Carbery"))
            txn.put(key, msgspec.msgpack.encode(forged), db=ledger.db[b"log"])
        problems = ledger.fsck()
    assert any(f"log entry {seq} " in p and "verifies as invalid/id-mismatch" in p for p in problems), problems


def test_missing_ledger_is_named_not_created(tmp_path: Path) -> None:
    with pytest.raises(NoLedger):
        Ledger(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_other_layout_version_is_refused(tmp_path: Path) -> None:
    Ledger(tmp_path, create=True).close()
    env = lmdb.open(str(tmp_path), max_dbs=16)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"layout_version", b"99")
    env.close()
    with pytest.raises(LayoutMismatch, match="has layout '99'"):
        Ledger(tmp_path)


def _creating(path: Path, *, layout: bool) -> lmdb.Environment:
    """A ledger as its creating writer leaves it after two commits: the meta table (1), then the layout (2),
    or another write that lost it (damage)."""
    env = lmdb.open(str(path), max_dbs=16)
    env.open_db(b"meta")
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"layout_version" if layout else b"other", b"5")
    return env


def test_a_ledger_whose_layout_was_written_after_the_readers_snapshot_is_not_damaged(tmp_path: Path) -> None:
    # A reader of a ledger being created read the layout before the writer's second commit, then counted the
    # commits made since (found by CI: a reader racing apply's creation got ledger-damaged).
    from pithledger.store.env import lost_layout

    env = _creating(tmp_path, layout=True)
    try:
        assert env.info()["last_txnid"] == 2
        assert lost_layout(env, tmp_path) is None
    finally:
        env.close()


def test_a_ledger_that_lost_its_layout_record_is_damaged(tmp_path: Path) -> None:
    from pithledger.store.env import lost_layout

    env = _creating(tmp_path, layout=False)
    try:
        lost = lost_layout(env, tmp_path)
    finally:
        env.close()
    assert lost is not None and "has no layout record, though it committed 2 transactions" in lost.message


def test_a_ledger_with_its_layout_but_without_its_tables_after_its_creation_is_damaged(tmp_path: Path) -> None:
    from pithledger.store.env import lost_layout

    env = _creating(tmp_path, layout=True)
    try:
        with env.begin(write=True, db=env.open_db(b"meta")) as txn:  # a third commit: creation made the tables
            txn.put(b"other", b"")
        assert lost_layout(env, tmp_path) is not None
    finally:
        env.close()


def test_map_grows_when_full(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True, map_size=64 * 1024) as ledger:
        ledger.apply_batch(example_bundles())
        assert ledger.env.info()["map_size"] > 64 * 1024
        assert ledger.fsck() == []


def test_fsck_names_a_tampered_inbound_citation_index(tmp_path: Path) -> None:
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert ledger.fsck() == []
        with ledger.env.begin(write=True) as txn:
            cursor = txn.cursor(db=ledger.db[b"inbound"])
            assert cursor.first()
            cursor.delete()
        problems = ledger.fsck()
    assert any("inbound citation index differs" in p for p in problems)
    assert any(p.startswith("state of") for p in problems)  # the state read from the index now differs too


def test_unknown_bundle_fields_are_kept_within_caps_and_only_for_records_with_events(tmp_path: Path) -> None:
    from pithledger.records.bundle import Bundle
    from pithledger.store import MAX_EXTRA_BYTES, MAX_EXTRA_PER_RECORD

    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(
            [Bundle(pith_number=ORPHAN, events=[], extra={"junk": "x" * 1000})]
        )  # no events: nothing kept
        ledger.apply_batch(bundles_of(pool()))
        ledger.apply_batch([Bundle(pith_number=P[0], events=[], extra={"huge": "x" * MAX_EXTRA_BYTES})])
        ledger.apply_batch(
            [Bundle(pith_number=P[0], events=[], extra={f"note{i}": i}) for i in range(MAX_EXTRA_PER_RECORD + 5)]
        )
        with ledger.env.begin() as txn:
            keys = [bytes(k) for k in txn.cursor(db=ledger.db[b"extra"]).iternext(values=False)]
    assert len(keys) == MAX_EXTRA_PER_RECORD and all(k.startswith(P[0].encode()) for k in keys)


def test_a_handle_is_tuned_by_its_store_tuning_and_by_nothing_set_on_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's knobs are fields of the StoreTuning a handle opens with (or that ``tuned`` sets for
    the handles opened within it), not module globals: a name set on the package reaches no handle
    (issue #32: compiled modules cannot have their globals patched). The knob here: export's part size."""
    from pithledger import store
    from pithledger.store import StoreTuning, tuned

    def parts(ledger: Ledger) -> int:
        return len(ledger.export_parts(P[0]))

    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert parts(ledger) == 1
    small = StoreTuning(part_bytes=1)  # one event a part
    monkeypatch.setattr(store, "PART_BYTES", 1, raising=False)  # what tests did before
    with Ledger(tmp_path / "l") as ledger:
        assert parts(ledger) == 1
    with Ledger(tmp_path / "l", tuning=small) as ledger:
        many = parts(ledger)
        assert many > 1
    with tuned(small) as t:
        assert t is small
        with Ledger(tmp_path / "l") as ledger:
            assert parts(ledger) == many
    with Ledger(tmp_path / "l") as ledger:  # tuned's ends with it
        assert parts(ledger) == 1
    assert type(store) is type(zlib)  # a plain module: nothing relays a name set on it to the parts


SUBJECT = "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"


# A finding of the adversarial review of session 4 (apply's two readings, finishing/fsck/verification
# on worker processes); failed at 6581123, before the fix it guards.
@pytest.mark.parametrize("on_workers", [False, True], ids=["in-place", "on-workers"])
@pytest.mark.parametrize(
    "tamper",
    [(b'"record_status":"present"', b'"record_status":1'), (b'"record_status":"present"', b'"record_status":null')],
    ids=["int", "null"],
)
def test_fsck_names_a_state_tampered_to_the_wrong_type_instead_of_stopping(
    tmp_path: Path, on_workers: bool, tamper: tuple[bytes, bytes]
) -> None:
    """store.py _stored_index_keys (typed _IndexView, record_status: str) raises LedgerError 'not
    readable (damaged ledger)' from _fsck_indexes for a state whose JSON is fine but whose
    record_status is not a string: fsck reports no list at all, though _fsck_state_part has already
    found the mismatch (before 867f64f, fsck listed it). The same raise stops every later finishing
    step that re-derives this record (_derive reads the old state's index keys), so re-deriving can
    no longer overwrite the damage."""
    old, new = tamper
    with Ledger(tmp_path, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        ledger.apply_batch(example_bundles())
        with ledger.env.begin(write=True) as txn:
            raw = zlib.decompress(txn.get(SUBJECT.encode(), db=ledger.db[b"state"]))
            assert old in raw
            txn.put(SUBJECT.encode(), zlib.compress(raw.replace(old, new, 1)), db=ledger.db[b"state"])
        try:
            problems = ledger.fsck()
        except PithledgerError as exc:
            pytest.fail(f"fsck raised instead of listing the mismatch: {exc}")
    assert f"state of {SUBJECT} differs from its recomputation from the log" in problems


def _usage(ledger: Ledger) -> tuple[Any, dict[str, Any]]:
    return ledger.evidence_usage(), dict(ledger.evidence_subjects())


# Issue #20 §4/§6 (hardening), as a user meets it.
def test_two_writers_offering_the_same_junk_count_it_once(tmp_path: Path) -> None:
    """Both writers look the copies up before either writes (as two processes do when one waits for
    the other's lock): the second finds them held in its write transaction and counts nothing."""
    junk = [unsigned_pith_event(_pith(1), n=i) for i in range(40)]
    bundle = write_bundle(_pith(1), junk)
    from pithledger.records.bundle import read_bundle

    with Ledger(tmp_path / "L", create=True) as ledger:
        first, second = ledger.batch(), ledger.batch()
        first.add(read_bundle(bundle))
        second.add(read_bundle(bundle))  # looked up before the first commits: nothing held yet
        a, b = first.commit(), second.commit()
        assert a.unverified == b.unverified == 40 and all(r.kept for r in a.rejected + b.rejected)
        total, per_record = _usage(ledger)
        held = ledger.evidence(_pith(1))
        assert (total.entries, per_record[_pith(1)].entries) == (len(held), len(held)) == (40, 40)
        assert total.bytes == sum(len(e.event) for _, e in held)
        assert ledger.fsck() == []


@pytest.mark.parametrize(
    ("mutation", "value", "code"),
    [
        ("integer-2^53", 2**53, "integer-out-of-range"),
        ("object-nested-65-deep", "nest", "nesting-too-deep"),
        ("lone-surrogate", "\ud800", "lone-surrogate"),
    ],
)
def test_a_bundle_built_in_python_is_held_to_the_value_space(
    tmp_path: Path, mutation: str, value: Any, code: str
) -> None:
    """Ledger.apply_batch takes bundles built in Python, which never met strict decoding: an event
    carrying a value no JSON document admitted by another mirror could carry (2^53, 65 levels, a lone
    surrogate), signed and otherwise valid, was logged as valid (issue #42's review). Now the batch is
    refused with strict decoding's own code and nothing is written."""
    from helpers.eventpool import ALICE
    from pithledger.records.events import compute_event_id, make_event, signing_message
    from pithledger.records.keys import b64encode

    event = make_event(
        "integrity_finding", P[0], {"finding_type": "x", "severity": "info", "description": "d"}, ALICE,
        created_at="2026-06-01T00:00:00Z",
    )  # fmt: skip
    deep: Any = {}
    for _ in range(64):
        deep = {"k": deep}
    event["payload"]["extra"] = deep if value == "nest" else value
    if mutation != "lone-surrogate":  # signed as it is (a lone surrogate has no UTF-8: no message to sign; it crashed)
        del event["event_id"]
        event["signature_b64"] = b64encode(ALICE.sign(signing_message(event)))
        event["event_id"] = compute_event_id(event)
    bundle = Bundle(pith_number=P[0], events=[event])  # as an embedder builds one (read_bundle wants strict values)
    with Ledger(tmp_path / "l", create=True) as ledger:
        with pytest.raises(PithledgerError) as caught:
            ledger.apply_batch([bundle])
        assert caught.value.code == code, mutation
        assert ledger.counts()["events"] == 0 and ledger.evidence(P[0]) == []
