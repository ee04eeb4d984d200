"""Deferred derivation (spec/storage.md §3.1): batches mark records pending, finishing derives each once,
what is pending survives the process and is finished by the next writer or whole-view reader."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from helpers.common import derive_on_workers
from helpers.eventpool import ALICE, RECS, P, bundles_of, entries, pool, t
from helpers.ledgers import make_layout_3
from helpers.pending import reference, states
from pithledger.audit import DEPTH, record_event_root
from pithledger.errors import DerivationPending, NotFound
from pithledger.fanout import Fanout
from pithledger.merge import reduce, reduce_all
from pithledger.mirror.publish import node_doc
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.store import Ledger, StoreTuning, open_settled
from pithledger.store.views import _derive_part


def test_deferred_batches_derive_each_record_once_into_the_states_of_one_batch(tmp_path: Path) -> None:
    events = pool()
    derived: list[str] = []

    def counting(part: Any) -> Any:  # the writer derives these small steps itself: a closure will do
        derived.extend(inputs.subject for inputs in part)
        return _derive_part(part)

    with Ledger(tmp_path / "l", create=True, tuning=StoreTuning(derive=counting)) as ledger:
        for i in range(0, len(events), 4):  # many batches touching the same records
            ledger.apply_batch(bundles_of(events[i : i + 4]), defer=True)
        assert derived == []  # a batch derives nothing
        assert ledger.pending() > 0
        assert ledger.finish() == len(derived)
        assert sorted(derived) == sorted(set(derived))  # each record once
        assert ledger.pending() == 0 and ledger.fsck() == []
        got = states(ledger), ledger.root()
    with reference(tmp_path) as ref:
        assert got == (states(ref), ref.root())


def test_a_pending_record_is_read_from_its_events_and_found_by_its_long_number(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()), defer=True)
        assert list(ledger.subjects()) == []  # nothing derived yet
        for number in P:
            assert ledger.resolve(number) == number
            # its own events as held; citations by records still pending count once they are finished
            own = [e for e in entries(pool()) if e.verdict.subject == number]
            assert ledger.state_bytes(number) == canonical_bytes(reduce(number, own, []))
        problems = ledger.fsck()
        assert len(problems) == 1 and "derivation pending" in problems[0]


def test_layout_3_is_read_as_it_is_and_upgraded_in_place_by_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        before = states(ledger)
    make_layout_3(path)
    with Ledger(path, readonly=True) as reader:
        assert states(reader) == before and reader.pending() == 0
    with Ledger(path, readonly=True) as reader:
        assert bytes(reader.env.begin(db=reader.db[b"meta"]).get(b"layout_version")) == b"3"  # a reader writes nothing
    with Ledger(path) as writer:
        assert states(writer) == before and writer.fsck() == []
    with Ledger(path, readonly=True) as reader:
        assert bytes(reader.env.begin(db=reader.db[b"meta"]).get(b"layout_version")) == b"5"
        assert reader.tlog_size() == reader.counts()["events"]  # the upgrade built the transparency log too


def test_states_derived_on_worker_processes_equal_states_derived_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = pool()
    got = []
    handed_over: list[int] = []
    original = Fanout.map

    def counting(self: Fanout, func: Any, parts: Any, *, parallel: Any = True, ahead: int | None = None) -> Any:
        for results in original(self, func, parts, parallel=parallel, ahead=ahead):
            if func is _derive_part and parallel is True:  # (a callable: only big parts of a small step)
                assert self._procs is not None  # the parts went to processes
                handed_over.append(len(results))
            yield results

    monkeypatch.setattr(Fanout, "map", counting)
    for on_workers in (False, True):
        handed_over.clear()
        with Ledger(tmp_path / f"l{on_workers}", create=True, tuning=derive_on_workers(on_workers)) as ledger:
            for i in range(0, len(events), 5):
                ledger.apply_batch(bundles_of(events[i : i + 5]), defer=True)
            ledger.finish()
            assert (
                (sum(handed_over) == len(list(ledger.subjects()))) if on_workers else not handed_over
            )  # the path under test
            assert ledger.fsck() == []
            got.append((states(ledger), ledger.root()))
    assert got[0] == got[1]
    assert got[0][0] == {s: canonical_bytes(d) for s, d in reduce_all(entries(events)).items()}


def _dies_in_a_worker(part: Any) -> Any:
    if os.getpid() != _PARENT:
        os._exit(3)  # a worker killed mid-task (out of memory, a signal)
    return _ORIGINAL_PART(part)


_PARENT = os.getpid()
_ORIGINAL_PART = _derive_part


def test_a_worker_that_dies_while_deriving_changes_nothing(tmp_path: Path) -> None:
    events = pool()
    with Ledger(tmp_path / "ref", create=True) as ledger:
        ledger.apply_batch(bundles_of(events))
        want = states(ledger), ledger.root()
    # sent to the workers by reference (a module-level function); they die in it
    with Ledger(tmp_path / "l", create=True, tuning=derive_on_workers(derive=_dies_in_a_worker)) as ledger:
        ledger.apply_batch(bundles_of(events), defer=True)
        ledger.finish()
        assert ledger._workers.fanout.lost  # the handle works in place from then on
        assert (states(ledger), ledger.root()) == want and ledger.fsck() == []


def test_a_big_record_of_a_small_step_is_derived_on_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step too small to hand over whole still hands over a part that is big work (a hot record's
    fold: thousands of events, a state of megabytes; here, with the threshold lowered, a few events)
    when the run's workers are running: the writer's thread does not derive it, and the states are
    those derived in place. Workers are not started for it alone (that costs more than it saves)."""
    events = pool()
    mine = [e for e in events if e["subject_pith_number"] == P[0]]
    later = next(e for e in mine if e["event_type"] == "author_attestation")  # valid, and changes the state
    mine = [e for e in mine if e is not later] + [later]
    tuning = StoreTuning(derive_part_entries=2)
    got = []
    for workers in (0, 2):
        with (
            Fanout.processes(workers) as fan,
            Ledger(tmp_path / f"l{workers}", create=True, fanout=fan, tuning=tuning) as ledger,
        ):
            ledger.apply_batch(bundles_of(mine[:-1]), defer=True)
            ledger.finish()
            assert not fan.worker_pids()  # not started for one part (verification of a few copies: on threads)
            fan.start()
            ledger.apply_batch(bundles_of(mine[-1:]), defer=True)
            sent: list[Any] = []
            with monkeypatch.context() as m:
                m.setattr(
                    fan, "_start", lambda func, part, **kw: sent.append(func) or Fanout._start(fan, func, part, **kw)
                )
                ledger.finish()
            assert (_derive_part in sent) == (workers > 0)  # the one record's derivation went to a worker
            got.append(states(ledger))
    assert got[0] == got[1] and P[0] in got[0]


def _revocation_of_record_1() -> dict:  # type: ignore[type-arg]
    created = [e for e in pool() if e["event_type"] == "record_created" and e["subject_pith_number"] == P[1]]
    assert len(created) == 1 and created[0]["signer"]["key_id"] == ALICE.name
    return make_event("revocation", P[1], {"revoked_event_id": created[0]["event_id"]}, ALICE, created_at=t(20))


# A finding of the adversarial review of session 3 (deferred derivation, split verification, signature
# reuse, page release); fails on 5098d9d.
@pytest.mark.parametrize("how", ["suffix", "arxiv", "arxiv-version"])
def test_record_revoked_away_in_a_pending_batch_crashes_resolve_by_suffix_or_alias(tmp_path: Path, how: str) -> None:
    """A record found by the suffix/alias index of the last finished run, whose record_created was revoked
    in a deferred batch: _candidate computes its pending state, whose `current` is {} -> KeyError
    'canonical_record' (resolve, state/export by any short form, serve's /resolve -> 500)."""
    source = RECS[1]["source"]
    text = {
        "suffix": "pith:" + P[1].rsplit(":", 1)[1][:8],
        "arxiv": f"arXiv:{source['id']}",
        "arxiv-version": f"arXiv:{source['id']}v{source['version']}",
    }[how]
    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert ledger.resolve(text) == P[1]
        ledger.apply_batch(bundles_of([_revocation_of_record_1()]), defer=True)  # an apply run, not finished yet
        try:
            ledger.resolve(text)  # the index of the last finished run still names it: found, or not-found
        except NotFound:
            pass
        ledger.finish()
        with pytest.raises(NotFound):
            ledger.resolve(text)


# A finding of the adversarial review of session 3 (deferred derivation, split verification, signature
# reuse, page release); fails on 5098d9d.
def test_pending_record_makes_the_live_node_document_refuse_until_finished(tmp_path: Path) -> None:
    """serve's /pithledger/nodes/<bucket>: node_doc would list event_ids from the log (pending events included)
    next to the stored, not-yet-derived event_root, which sync/audit rightly reject as a lie. A bucket holding a
    pending record is refused with derivation-pending (serve: 503, Retry-After) until the work is finished."""
    path = tmp_path / "l"
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        late = make_event("author_attestation", P[0], {"author_name": "Late Author"}, ALICE, created_at=t(20))
        ledger.apply_batch(bundles_of([late]), defer=True)  # apply/sync in progress (or killed): pending
    bucket = P[0].rsplit(":", 1)[1][:DEPTH]
    with Ledger(path, readonly=True) as served:  # serve's handle
        with pytest.raises(DerivationPending):
            node_doc(served, bucket)
    with open_settled(path) as settled:
        doc = node_doc(settled, bucket)
        assert doc is not None
        rec = doc["records"][P[0]]
        assert record_event_root(rec["event_ids"]).hex() == rec["event_root"]
