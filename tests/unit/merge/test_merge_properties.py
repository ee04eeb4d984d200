"""Order-independence and replay stability of merge v1, over really signed event sets.

The pool (tests/helpers/eventpool.py) holds valid, invalid, unverified, duplicate-able, revoking,
equivocating, unknown-kind and record-missing events; Hypothesis draws subsets, orders, duplications
and bundle splits of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.common import LMDB_EXAMPLES, derive_on_workers
from helpers.eventpool import bundles_of, entries, pool
from pithledger.merge import reduce, reduce_all
from pithledger.records.canonical import canonical_bytes
from pithledger.store import Ledger

POOL = pool()
subsets = st.lists(st.sampled_from(range(len(POOL))), unique=True).map(lambda ix: [POOL[i] for i in sorted(ix)])


def state_bytes(events: list[dict[str, Any]]) -> dict[str, bytes]:
    return {s: canonical_bytes(d) for s, d in reduce_all(entries(events)).items()}


@given(subsets, st.randoms(use_true_random=False), st.lists(st.integers(0, 100), max_size=10))
def test_any_permutation_and_duplication_gives_identical_state_bytes(events, rnd, dup_picks) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(events)
    rnd.shuffle(shuffled)
    if events:
        shuffled += [events[i % len(events)] for i in dup_picks]
    assert state_bytes(shuffled) == state_bytes(events)


@given(subsets, subsets)
def test_union_is_commutative(a, b) -> None:  # type: ignore[no-untyped-def]
    assert state_bytes(a + b) == state_bytes(b + a)


@given(subsets)
def test_inputs_that_are_not_valid_never_change_a_state(events) -> None:  # type: ignore[no-untyped-def]
    ents = entries(events)
    valid_only = [e for e in ents if e.verdict.status == "valid"]
    assert reduce_all(ents) == reduce_all(valid_only)


@given(subsets)
def test_state_sha256_covers_the_document(events) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    for state in reduce_all(entries(events)).values():
        body = {k: v for k, v in state.items() if k != "state_sha256"}
        assert state["state_sha256"] == hashlib.sha256(canonical_bytes(body)).hexdigest()


def test_pool_exercises_every_rule() -> None:
    states = reduce_all(entries(POOL))
    assert any(s["record_status"] == "pending" for s in states.values())
    assert sum(s["equivocation_count"] for s in states.values()) >= 1
    statuses = [e.verdict.status for e in entries(POOL)]
    assert statuses.count("invalid") >= 2 and statuses.count("unverified") >= 1
    assert any(s["revoked_event_ids"] for s in states.values())
    assert any(s["unknown_kinds"] for s in states.values())
    assert {r["reason"] for s in states.values() for r in s["ineffective_revocations"]} >= {
        "not-the-signer",
        "target-not-held",
    }
    assert any(s["current"].get("inbound_citations") for s in states.values())


def test_revoking_wins_whichever_arrives_first() -> None:
    revocations = [e for e in POOL if e["event_type"] == "revocation"]
    target_id = revocations[0]["payload"]["revoked_event_id"]
    target = next(e for e in POOL if e.get("event_id") == target_id)
    subject = target["subject_pith_number"]
    one = reduce(subject, entries([target, revocations[0]]))
    two = reduce(subject, entries([revocations[0], target]))
    assert one == two and one["revoked_event_ids"] == [target_id]


@settings(max_examples=LMDB_EXAMPLES)
@given(subsets, st.randoms(use_true_random=False), st.integers(1, 6), st.booleans(), st.booleans())
def test_incremental_lmdb_apply_equals_batch_replay_equals_pure_reducer(
    tmp_path_factory,
    events,
    rnd,
    batches,
    defer,  # type: ignore[no-untyped-def]
    on_workers,
) -> None:
    order = list(events)
    rnd.shuffle(order)
    incremental = tmp_path_factory.mktemp("inc")
    with Ledger(incremental, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        step = max(1, len(order) // batches)
        for i in range(0, len(order), step):
            # deferred derivation (spec/storage.md §3.1), finished at any moment or only at the end
            ledger.apply_batch(bundles_of(order[i : i + step]), defer=defer)
            if defer and rnd.random() < 0.3:
                ledger.finish()
        ledger.finish()
        assert ledger.pending() == 0
        got = {s: ledger.state_bytes(s) for s in ledger.subjects()}
        assert ledger.fsck() == []
    replay = tmp_path_factory.mktemp("replay")
    with Ledger(replay, create=True) as ledger:
        ledger.apply_batch(bundles_of(events))
        assert {s: ledger.state_bytes(s) for s in ledger.subjects()} == got
    assert got == state_bytes(events)


@settings(max_examples=LMDB_EXAMPLES)
@given(subsets, subsets)
def test_apply_a_then_b_equals_b_then_a_equals_both_at_once(tmp_path_factory, a, b) -> None:  # type: ignore[no-untyped-def]
    results = []
    for parts in ([a, b], [b, a], [a + b]):
        path: Path = tmp_path_factory.mktemp("ab")
        with Ledger(path, create=True) as ledger:
            for part in parts:
                ledger.apply_batch(bundles_of(part))
            results.append({s: ledger.state_bytes(s) for s in ledger.subjects()})
    assert results[0] == results[1] == results[2]


# --- garbage independence (spec/merge.md §0, §8) ----------------------------------------------------

from helpers.adversary import GARBLINGS, garble, replay_under, unsigned_pith_event  # noqa: E402
from helpers.eventpool import FAKE, ORPHAN, P  # noqa: E402
from pithledger.errors import AmbiguousId, NotFound  # noqa: E402
from pithledger.records.events import verify_event  # noqa: E402

VALID = [e for e in POOL if verify_event(e).status == "valid"]
SIGNED = [e for e in VALID if "signature_b64" in e]
valid_sets = st.lists(st.sampled_from(range(len(VALID))), unique=True).map(lambda ix: [VALID[i] for i in sorted(ix)])
# Junk: every named garbling of any signed pool event, replays under other subjects, unsigned Pith events,
# and the pool's own invalid and unverified events.
junk_item = st.one_of(
    st.tuples(st.sampled_from(range(len(SIGNED))), st.sampled_from(sorted(GARBLINGS))).map(
        lambda t: garble(SIGNED[t[0]], t[1])
    ),
    st.tuples(st.sampled_from(range(len(SIGNED))), st.sampled_from(P + [ORPHAN])).map(
        lambda t: replay_under(SIGNED[t[0]], t[1])
    ),
    st.tuples(st.sampled_from(P + [ORPHAN, FAKE]), st.integers(0, 3)).map(lambda t: unsigned_pith_event(*t)),
    st.sampled_from([e for e in POOL if verify_event(e).status != "valid"]),
)
junk_sets = st.lists(junk_item, max_size=12)


def _not_a_replay_of_itself(junk: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # replay_under(e, e's own subject) recomputes e itself: a valid event, not junk.
    return [j for j in junk if verify_event(j).status != "valid"]


@given(valid_sets, junk_sets, st.randoms(use_true_random=False))
def test_garbage_independence_pure(valid, junk, rnd) -> None:  # type: ignore[no-untyped-def]
    junk = _not_a_replay_of_itself(junk)
    mixed = valid + junk
    rnd.shuffle(mixed)
    assert state_bytes(mixed) == state_bytes(valid)


def _answers(ledger: Ledger) -> dict[str, str]:
    out = {}
    for query in ["2605.00424", "1905.08204", "FZ7AO632", P[0], FAKE, ORPHAN] + [p.rsplit(":", 1)[1][:8] for p in P]:
        try:
            out[query] = ledger.resolve(query)
        except (NotFound, AmbiguousId) as exc:  # a note on local evidence is not part of the answer
            out[query] = f"{exc.code}: " + "; ".join(p for p in exc.message.split("; ") if "held as evidence" not in p)
    return out


@settings(max_examples=LMDB_EXAMPLES)
@given(valid_sets, junk_sets, st.randoms(use_true_random=False), st.integers(1, 5), st.booleans())
def test_garbage_independence_on_ledgers_whatever_the_order_and_batching(
    tmp_path_factory, valid, junk, rnd, batches, defer
) -> None:  # type: ignore[no-untyped-def]
    junk = _not_a_replay_of_itself(junk)
    mixed = valid + junk
    rnd.shuffle(mixed)
    with (
        Ledger(tmp_path_factory.mktemp("dirty"), create=True) as dirty,
        Ledger(tmp_path_factory.mktemp("clean"), create=True) as clean,
    ):
        step = max(1, len(mixed) // batches)
        for i in range(0, len(mixed), step):  # junk before, inside and after the valid events
            dirty.apply_batch(bundles_of(mixed[i : i + step]), defer=defer)
        dirty.finish()
        clean.apply_batch(bundles_of(valid))
        assert {s: dirty.state_bytes(s) for s in dirty.subjects()} == {
            s: clean.state_bytes(s) for s in clean.subjects()
        }
        assert dirty.root() == clean.root()
        # no squatting: every valid event is held, under its own id, and nothing else is
        assert sorted(e.verdict.event_id for e in dirty.log()) == sorted({verify_event(e).event_id for e in valid})
        assert _answers(dirty) == _answers(clean)  # resolution is a function of the valid set
        assert dirty.fsck() == []
