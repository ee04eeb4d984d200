"""The inbound update (spec/storage.md §3.5) is the full derivation: a record whose own events did not change
and whose standing inbound citations did is updated from its stored state, and the ledger is byte for byte
the one that derived everything in full, whatever the batching, for citations revoked, superseded and
equivocated, citers pending or going pending, a cited record pending, junk and copies offered again, and a
big record carried across the fold threshold by its inbound citations and back (tests/helpers/citepool.py).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers.citepool import A, B, C, cite_pool, dump
from helpers.common import LMDB_EXAMPLES, derive_on_workers
from helpers.eventpool import ORPHAN, bundles_of, entries, t
from pithledger.merge import fold, reduce, reduce_all
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.store import Ledger, StoreTuning, pending
from pithledger.store.views import _derive_part, _fold_decoder, _fold_entry_decoder, _Inputs, _unpack_state

BIG, REST, JUNK = cite_pool()


def _reference(events: list[dict[str, Any]]) -> dict[str, bytes]:
    return {s: canonical_bytes(d) for s, d in reduce_all(entries(events)).items()}


def _comparable(ledger: Ledger) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every database; of ``fold`` only which records keep an entry (its bytes may follow the history:
    spec/storage.md §3.3)."""
    out = dump(ledger)
    out[b"fold"] = [(k, b"") for k, _ in out.get(b"fold", [])]
    return out


def _stats() -> dict[str, int]:
    return dict(pending._inbound_stats)


# the pool is fixed and whole (the threshold needs A's 242 events): the smallest example is big by design (~25 s)
@pytest.mark.slow
@settings(max_examples=LMDB_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.large_base_example])
@given(
    st.sets(st.sampled_from([i for i, e in enumerate(REST) if e["event_type"] == "revocation"])),
    st.sets(st.integers(0, len(REST) - 1), max_size=4),
    st.integers(0, len(REST)),
    st.integers(0, len(REST)),
    st.integers(1, len(BIG)),
    st.lists(st.integers(0, len(BIG) + len(REST) - 1), max_size=6),
    st.lists(st.integers(1, 40), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_ledgers_updated_for_inbound_citations_equal_ledgers_derived_in_full(
    tmp_path_factory: Any,
    unrevoked: set[int],
    drop: set[int],
    big_at: int,
    tail_at: int,
    big_cut: int,
    again: list[int],
    sizes: list[int],
    rnd: Any,
    on_workers: bool,
) -> None:
    # A's own events in two runs anywhere among the rest (its record may arrive after its citations), then
    # copies offered again and junk anywhere
    # some events left out: revocations among them, so that A may end above the fold threshold or below it
    order: list[Any] = [e for i, e in enumerate(REST) if i not in drop | unrevoked]
    rnd.shuffle(order)
    order.insert(min(big_at, tail_at), BIG[:big_cut])
    order.insert(max(big_at, tail_at) + 1, BIG[big_cut:])
    flat: list[dict[str, Any]] = []
    for item in order:
        flat.extend(item if isinstance(item, list) else [item])
    valid = list(flat)
    for i in again:
        flat.insert(rnd.randrange(len(flat) + 1), valid[i % len(valid)])
    for junk in JUNK:
        flat.insert(rnd.randrange(len(flat) + 1), junk)
    before = _stats()
    batched = Ledger(tmp_path_factory.mktemp("batched"), create=True, tuning=derive_on_workers(on_workers))
    with batched:
        at, k = 0, 0
        while at < len(flat):
            size = sizes[k % len(sizes)]
            defer = rnd.random() < 0.8
            batched.apply_batch(bundles_of(flat[at : at + size]), defer=defer)
            if defer and rnd.random() < 0.6:  # finished after this batch, or with later ones
                batched.finish()
            at, k = at + size, k + 1
        batched.finish()
        assert batched.pending() == 0
        got = _comparable(batched)
        assert batched.fsck() == []
        states = {s: batched.state_bytes(s) for s in batched.subjects()}
    after = _stats()
    assert after["fell_back"] == before["fell_back"]  # nothing here is damaged: an update that gives up is a fault
    for name in after:
        if after[name] > before[name]:
            event(f"inbound {name}")
    event(f"a fold entry at the end: {bool(got[b'fold'])}")
    with Ledger(tmp_path_factory.mktemp("once"), create=True) as once:
        once.apply_batch(bundles_of(flat))  # the same inputs in the same order, one batch: all in full
        assert _comparable(once) == got
    assert states == _reference(valid)


def _small(tmp: Path, name: str, tuning: StoreTuning | None = None) -> Ledger:
    return Ledger(tmp / name, create=True, tuning=tuning)


def _cites(citer: str, cited: str, when: str) -> dict[str, Any]:
    from helpers.eventpool import EVE

    return make_event(
        "citation_signature", citer, {"cited_pith_number": cited, "relation": "cites"}, EVE, created_at=when
    )


def _records() -> list[dict[str, Any]]:
    return [e for e in REST if e["event_type"] == "record_created"] + BIG[:1]


def test_a_cited_record_is_updated_and_a_pending_cited_record_is_left_as_it_is(tmp_path: Path) -> None:
    """The update path is the one taken (not only the full one the property would pass through too): a
    present cited record is updated from its stored state, a pending one is found unchanged, and neither
    is handed to the full derivation."""
    handed: list[tuple[str, bool]] = []

    def counting(part: list[_Inputs]) -> Any:
        handed.extend((inputs.subject, inputs.pair is not None) for inputs in part)
        return _derive_part(part)

    orphan = make_event("author_attestation", ORPHAN, {"author_name": "Nobody"}, *_signer(), created_at=t(8))
    first = [*_records(), orphan]
    second = [_cites(C, B, t(9)), _cites(C, ORPHAN, t(9))]
    with _small(tmp_path, "l", StoreTuning(derive=counting)) as ledger:
        ledger.apply_batch(bundles_of(first))
        handed.clear()
        before = _stats()
        ledger.apply_batch(bundles_of(second))
        after = _stats()
        assert sorted(handed) == [(B, True), (ORPHAN, True), (C, False)]
        assert after["updated"] - before["updated"] == 1  # B
        assert after["unchanged"] - before["unchanged"] == 1  # ORPHAN: a pending state reads no inbound citation
        assert after["fell_back"] == before["fell_back"]
        got = {s: ledger.state_bytes(s) for s in ledger.subjects()}
        assert ledger.fsck() == []
    assert got == _reference(first + second)


def _signer() -> tuple[Any]:
    from helpers.eventpool import EVE

    return (EVE,)


def test_a_record_that_received_events_is_derived_in_full_even_if_also_cited(tmp_path: Path) -> None:
    """Own events win over the mark, whichever comes first in the step (b"" overwrites "i", never the
    reverse): B receives an event and a citation in one deferred batch, and again in two batches."""
    extra = make_event("author_attestation", B, {"author_name": "Late"}, *_signer(), created_at=t(9))
    for split in (False, True):
        handed: list[tuple[str, bool]] = []

        def counting(part: list[_Inputs]) -> Any:
            handed.extend((inputs.subject, inputs.pair is not None) for inputs in part)
            return _derive_part(part)

        with _small(tmp_path, f"l{split}", StoreTuning(derive=counting)) as ledger:
            ledger.apply_batch(bundles_of(_records()))
            handed.clear()
            news = [_cites(C, B, t(9)), extra]
            for part in [news[:1], news[1:]] if split else [news]:
                ledger.apply_batch(bundles_of(part), defer=True)
            ledger.finish()
            assert (B, False) in handed and (B, True) not in handed
            assert {s: ledger.state_bytes(s) for s in ledger.subjects()} == _reference(_records() + news)


def test_a_damaged_stored_state_is_derived_in_full_not_updated(tmp_path: Path) -> None:
    """A stored state that is JSON but not the canonical bytes whose state_sha256 it carries (here: spaces
    added) is not updated, it is derived again in full: the ledger is the reference one, fsck finds nothing."""
    with _small(tmp_path, "l") as ledger:
        ledger.apply_batch(bundles_of(_records()))
        state = msgspec.json.decode(ledger.state_bytes(B))
        with ledger._core._begin(write=True) as txn:
            txn.put(B.encode(), zlib.compress(msgspec.json.encode(state).replace(b",", b", ")), db=ledger.db[b"state"])
        before = _stats()
        ledger.apply_batch(bundles_of([_cites(C, B, t(9))]))
        assert _stats()["fell_back"] - before["fell_back"] == 1
        assert ledger.state_bytes(B) == _reference([*_records(), _cites(C, B, t(9))])[B]
        assert ledger.fsck() == []


def test_a_folded_record_offered_inbound_citations_it_holds_folds_each_once(tmp_path: Path) -> None:
    """merge.fold with inbound citations the stored state already lists (mutation run: ``have_in`` built
    from the views' created_at instead of their event ids survived): each stays once, as reduce has it."""
    events = BIG + [e for e in REST if e["event_type"] != "revocation"]  # A over the threshold: a fold entry
    with _small(tmp_path, "l") as ledger:
        ledger.apply_batch(bundles_of(events))
        with ledger._core._begin() as txn:
            entry = _fold_entry_decoder.decode(txn.get(A.encode(), db=ledger.db[b"fold"]))
            state = _unpack_state(bytes(txn.get(A.encode(), db=ledger.db[b"state"])))
            inbound = ledger._views._inbound(txn, A)
    assert len(inbound) >= 14
    own = [e for e in entries(events) if e.verdict.subject == A]
    got = fold(A, state, _fold_decoder.decode(entry.fold), [], inbound, [])
    assert got is not None and got[0] == state == canonical_bytes(reduce(A, own, inbound))
    # one held citation re-offered while another is withdrawn
    gone = inbound[0].event_id
    got = fold(A, state, _fold_decoder.decode(entry.fold), [], inbound[1:], [gone])
    assert got is not None and got[0] == canonical_bytes(reduce(A, own, inbound[1:]))
