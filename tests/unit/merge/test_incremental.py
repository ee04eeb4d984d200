"""Incremental derivation (spec/merge.md §10) is the full derivation: for any record's events split into any
sequence of arrival batches, with junk, duplicates, revocations, citations in and out, ties and
out-of-order created_at, the state after each fold is byte for byte ``reduce()`` over every valid event so
far, and so is the digest leaf; where the fold says "fall back", deriving in full gives the same again.

The events are built as the reducer sees them (an event and its verdict, as verification makes them), so
Hypothesis can draw hostile shapes freely: registry and self-signed signers, equal times, revocations of
anything (revocations, other signers' events, events of other records, events not held yet), anchors bound
to another digest, unknown kinds, and junk — invalid and unverified copies, some carrying the id of a valid
event. tests/unit/merge/test_merge_properties.py runs the same through really signed events and the ledger.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import msgspec
from hypothesis import event, given, settings
from hypothesis import strategies as st

from helpers.eventpool import IDS, ORPHAN, RECS, P
from pithledger.audit import record_pair
from pithledger.merge import Entry, Fold, FoldCitations, fold, fold_all, fold_outbound, outbound_citations, reduce
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import OUTCOMES, RELATIONS, REPLICATION_TYPES, TARGETS, Verdict

SUBJECT, CITERS = P[0], [P[1], P[2], ORPHAN]
DIGEST = IDS[0].canonical_sha256
SIGNERS = [
    ("self_signed", "ed25519:" + "a1" * 32),
    ("self_signed", "ed25519:" + "b2" * 32),
    ("registry", "registry:pith-test-1"),
    ("registry", "registry:pith-test-2"),
]
KINDS = sorted(TARGETS) + ["peer_review_v9"]
_codec = (msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Fold))


def _eid(n: int) -> str:
    return "sha256:" + hashlib.sha256(f"incremental test event {n}".encode()).hexdigest()


def make(n: int, kind: str, subject: str, signer: int, hour: int, param: int, ids_so_far: list[str]) -> Entry:
    """Event number ``n`` (its id is a function of n) as verification would hand it to the reducer."""
    trust, signer_key = SIGNERS[signer]
    payload: dict[str, Any] = {"n": n}
    facts: dict[str, Any] = {}
    if kind == "record_created":
        payload = {"canonical_record": RECS[0], "canonical_sha256": DIGEST}
        facts = {"canonical_sha256": DIGEST, "receipt_key": signer_key.split(":", 1)[1] if trust == "registry" else ""}
    elif kind == "timestamp_anchor":
        facts = {
            "digest": DIGEST if param % 3 else "ab" * 32,
            "bitcoin_heights": [800_000 + param] if param % 2 else [],
            "pending_calendars": ["https://a.example"] if param % 4 < 2 else [],
            # checked (merge v3) on some of the Bitcoin-claiming ones: the fold must count checked and claimed apart
            "bitcoin_block": (
                {
                    "block_hash": "00" * 32,
                    "headers": 1,
                    "height": 800_000 + param,
                    "time": "2026-01-01T00:00:00Z",
                    "work": "1",
                }
                if param % 4 == 1
                else None
            ),
        }
    elif kind == "author_attestation":
        facts = {"strength": "strong" if trust == "registry" and param % 2 else "weak"}
    elif kind == "citation_signature":
        cited = [SUBJECT, *CITERS][param % 4] if subject == SUBJECT else (SUBJECT if param % 3 else P[1])
        payload = {"cited_pith_number": cited, "relation": RELATIONS[param % len(RELATIONS)]}
        facts = {"cited": cited, "relation": payload["relation"]}
    elif kind == "revocation":  # of an event drawn before (any kind, any record), or of one never drawn
        target = ids_so_far[param % len(ids_so_far)] if ids_so_far and param % 5 else _eid(10_000 + param)
        payload, facts = {"revoked_event_id": target}, {"revokes": target}
    elif kind == "replication_record":
        payload = {
            "replication_type": REPLICATION_TYPES[param % 3],
            "outcome": OUTCOMES[(param // 3) % 4],
            "artifact_url": "https://x.example",
        }
    elif kind == "peer_review_v9":
        facts = {"unknown_kind": True}
    eid = _eid(n)
    signer_doc = {"signer_type": "self_signed" if trust == "self_signed" else "pith_registry", "key": signer_key}
    ev = {
        "created_at": f"2026-06-01T0{hour}:00:00Z",
        "event_id": eid,
        "event_type": kind,
        "payload": payload,
        "signer": signer_doc,
        "subject_pith_number": subject,
        "target": TARGETS.get(kind, "record"),
    }
    return Entry(ev, Verdict(eid, kind, subject, "valid", trust=trust, signer_key=signer_key, facts=facts))


def junk(n: int, like: Entry | None, status: str, subject: str) -> Entry:
    """Something verification refused: any shape, possibly claiming a valid event's id (a garbled copy)."""
    eid = like.event_id if like is not None else _eid(20_000 + n)
    ev = {
        "event_id": eid,
        "event_type": "revocation" if n % 2 else "record_created",
        "subject_pith_number": subject,
        "garbage": n,
    }
    return Entry(
        ev, Verdict(eid, ev["event_type"], subject, status, "bad-signature" if status == "invalid" else "unknown-key")
    )


spec = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from([SUBJECT] * 3 + CITERS),
    st.integers(0, len(SIGNERS) - 1),
    st.integers(0, 3),
    st.integers(0, 60),
)
# the citers' events are mostly citations (of SUBJECT) and revocations of them: inbound citations come and go
citer_spec = st.tuples(
    st.sampled_from(["citation_signature"] * 3 + ["revocation"]),
    st.sampled_from(CITERS),
    st.integers(0, len(SIGNERS) - 1),
    st.integers(0, 3),
    st.integers(0, 60),
)


@st.composite
def arrivals(draw: st.DrawFn) -> list[list[Entry]]:
    specs = draw(st.lists(st.one_of(spec, citer_spec), max_size=45))
    if draw(st.booleans()):  # most records have their record_created somewhere in the stream
        specs.insert(
            draw(st.integers(0, len(specs))),
            ("record_created", SUBJECT, draw(st.integers(0, 3)), draw(st.integers(0, 3)), 0),
        )
    made: list[Entry] = []
    for n, (kind, subject, signer, hour, param) in enumerate(specs):
        made.append(make(n, kind, subject, signer, hour, param, [e.event_id for e in made]))
    stream = list(made)
    for pick in draw(st.lists(st.integers(0, 10**6), max_size=8)):  # duplicates
        if made:
            stream.append(made[pick % len(made)])
    for n, (pick, status, subject) in enumerate(
        draw(
            st.lists(
                st.tuples(
                    st.integers(0, 10**6),
                    st.sampled_from(["invalid", "unverified"]),
                    st.sampled_from([SUBJECT, *CITERS]),
                ),
                max_size=6,
            )
        )
    ):
        stream.append(junk(n, made[pick % len(made)] if made and pick % 2 else None, status, subject))
    stream = draw(st.permutations(stream))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]


def inbound_of(seen: list[Entry]) -> dict[str, Entry]:
    """SUBJECT's inbound citations: the standing outbound citations of every other record naming it."""
    out = {}
    for citer in CITERS:
        for e in outbound_citations([e for e in seen if e.verdict.subject == citer]):
            if e.verdict.facts["cited"] == SUBJECT:
                out[e.event_id] = e
    return out


def own(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if e.verdict.subject == SUBJECT]


def leaf(entries: list[Entry], state_sha256: str) -> Any:
    return record_pair({e.event_id for e in entries if e.verdict.status == "valid"}, state_sha256)


@settings(max_examples=400 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 5000)
@given(arrivals())
def test_a_fold_after_every_batch_equals_the_full_derivation(batches: list[list[Entry]]) -> None:
    seen: list[Entry] = []
    stored: tuple[bytes, Fold] | None = None
    inbound: dict[str, Entry] = {}
    for batch in batches:
        seen += batch
        now = inbound_of(seen)
        want = reduce(SUBJECT, own(seen), now.values())
        got = None
        if stored is not None:
            got = fold(
                SUBJECT,
                stored[0],
                stored[1],
                own(batch),
                [now[i] for i in sorted(set(now) - set(inbound))],
                sorted(set(inbound) - set(now)),
            )
            event("folded" if got is not None else "fell back")
            if got is not None:
                light = msgspec.msgpack.decode(
                    _codec[0].encode(stored[1]), type=FoldCitations
                )  # as the ledger reads it
                outbound = fold_outbound(SUBJECT, light, own(batch))
                if outbound is not None:
                    assert outbound == sorted(
                        (e.verdict.facts["cited"], e.event_id) for e in outbound_citations(own(seen))
                    )
        if got is None:
            got = fold_all(SUBJECT, own(seen), now.values())
        if want["record_status"] == "pending":
            assert got is None
            stored = None
        else:
            assert got is not None
            assert got[0] == canonical_bytes(want)
            assert (
                got[1].pair() == record_pair(got[1].ids, want["state_sha256"]) == leaf(own(seen), want["state_sha256"])
            )
            stored = (got[0], _codec[1].decode(_codec[0].encode(got[1])))  # as the ledger stores it
        inbound = now


@given(arrivals())
def test_fold_all_is_reduce(batches: list[list[Entry]]) -> None:
    everything = [e for b in batches for e in b]
    want = reduce(SUBJECT, own(everything), inbound_of(everything).values())
    got = fold_all(SUBJECT, own(everything), inbound_of(everything).values())
    assert (got is None) == (want["record_status"] == "pending")
    if got is not None:
        assert got[0] == canonical_bytes(want)


def _realistic(start: int, count: int) -> list[Entry]:
    """Events a hot record gets every day: no revocation, later times than what is held."""
    kinds = [
        "timestamp_anchor",
        "author_attestation",
        "storage_attestation",
        "replication_record",
        "integrity_finding",
        "challenge",
        "graph_snapshot",
        "citation_signature",
    ]
    out = [
        make(n, kinds[n % len(kinds)], SUBJECT, n % 4, min(3, start // 20), n, []) for n in range(start, start + count)
    ]
    out += [
        make(n, "citation_signature", CITERS[n % 3], n % 4, min(3, start // 20), 1, [])
        for n in range(5000 + start, 5000 + start + 5)
    ]
    return out


def test_a_hot_record_without_revocations_never_falls_back() -> None:
    seen = [make(0, "record_created", SUBJECT, 2, 0, 0, [])] + _realistic(1, 10)
    stored = fold_all(SUBJECT, own(seen), inbound_of(seen).values())
    assert stored is not None
    inbound = inbound_of(seen)
    for k in range(1, 6):
        batch = _realistic(20 * k, 10)
        seen += batch
        now = inbound_of(seen)
        got = fold(SUBJECT, *stored, own(batch), [now[i] for i in set(now) - set(inbound)], set(inbound) - set(now))
        assert got is not None and got[0] == canonical_bytes(reduce(SUBJECT, own(seen), now.values()))
        stored, inbound = got, now


def test_a_fold_of_another_state_falls_back() -> None:
    seen = [make(0, "record_created", SUBJECT, 2, 0, 0, [])] + _realistic(1, 10)
    stored = fold_all(SUBJECT, own(seen))
    other = fold_all(SUBJECT, own(seen[:5]))
    assert stored is not None and other is not None
    assert fold(SUBJECT, other[0], stored[1], _realistic(40, 3)) is None  # a state this Fold does not describe
    same_shape = stored[0].replace(stored[1].sha.encode(), b"0" * 64)  # another state_sha256, every list in place
    assert fold(SUBJECT, same_shape, stored[1], _realistic(40, 3)) is None
    assert fold(SUBJECT, stored[0], stored[1], _realistic(40, 3)) is not None
    assert fold(P[1], stored[0], stored[1], _realistic(40, 3)) is None  # another record's
    assert fold_outbound(P[1], stored[1], []) is None and fold_outbound(SUBJECT, stored[1], []) is not None
    assert fold(SUBJECT, stored[0], msgspec.structs.replace(stored[1], version=0), _realistic(40, 3)) is None


def test_each_arrival_that_can_undo_what_is_folded_falls_back() -> None:
    base = [
        make(0, "record_created", SUBJECT, 0, 0, 0, []),
        make(1, "author_attestation", SUBJECT, 0, 1, 0, []),
        make(2, "revocation", SUBJECT, 0, 1, 1, [_eid(99)]),
    ]  # waits for event 99
    stored = fold_all(SUBJECT, base)
    assert stored is not None
    shapes = {
        "revocation-of-a-held-event": make(3, "revocation", SUBJECT, 0, 2, 1, [_eid(1)]),
        "revocation-of-a-held-revocation": make(3, "revocation", SUBJECT, 1, 2, 1, [_eid(2)]),
        "revocation-of-another-signers-event": make(3, "revocation", SUBJECT, 1, 2, 1, [_eid(1)]),
        "the-event-a-held-revocation-waits-for": make(99, "integrity_finding", SUBJECT, 0, 2, 0, []),
        "another-record-created": make(3, "record_created", SUBJECT, 1, 2, 0, []),
    }
    for name, e in shapes.items():
        assert fold(SUBJECT, *stored, [e]) is None, name
        assert canonical_bytes(reduce(SUBJECT, base + [e])) == fold_all(SUBJECT, base + [e])[0], name  # type: ignore[index]
    # a revocation whose target is not held is folded (it waits), and so is anything else
    waits = make(4, "revocation", SUBJECT, 0, 2, 1, [_eid(98)])
    got = fold(SUBJECT, *stored, [waits, make(5, "graph_snapshot", SUBJECT, 0, 2, 0, [])])
    assert got is not None and got[0] == canonical_bytes(
        reduce(SUBJECT, base + [waits, make(5, "graph_snapshot", SUBJECT, 0, 2, 0, [])])
    )


# --- the ledger (spec/storage.md §3.3): real signed events, real LMDB --------------------------------------

from pathlib import Path  # noqa: E402

import lmdb  # noqa: E402
import pytest  # noqa: E402

from helpers.eventpool import bundles_of, pool  # noqa: E402
from pithledger.merge import fold as real_fold  # noqa: E402
from pithledger.store import (
    Ledger,  # noqa: E402
    views,  # noqa: E402
)


@pytest.fixture(autouse=True)
def fold_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger folds only records of _FOLD_FROM events or more; the pool's are small: fold them all."""
    monkeypatch.setattr(views, "_FOLD_FROM", 0)


def consensus(ledger: Ledger) -> tuple[Any, ...]:
    return {s: ledger.state_bytes(s) for s in ledger.subjects()}, ledger.root()


def reference(path: Path) -> tuple[Any, ...]:
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        return consensus(ledger)


def _batches() -> list[list[dict[str, Any]]]:
    # record_created events first (so later batches find present records), then the rest a few at a time
    events = sorted(pool(), key=lambda e: e["event_type"] != "record_created")
    return [events[:4]] + [events[i : i + 3] for i in range(4, len(events), 3)]


def test_a_ledger_folds_present_records_and_equals_one_batch_of_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[bool] = []

    def spy(*args: Any) -> Any:
        got = real_fold(*args)
        outcomes.append(got is not None)
        return got

    monkeypatch.setattr(views, "fold", spy)
    with Ledger(tmp_path / "l", create=True) as ledger:
        for batch in _batches():
            ledger.apply_batch(bundles_of(batch))
        assert outcomes.count(True) >= 5  # the incremental path was taken, again and again
        assert ledger.fsck() == []
        assert consensus(ledger) == reference(tmp_path / "ref")


def _fold_entries(path: Path) -> dict[bytes, bytes]:
    env = lmdb.open(str(path), max_dbs=32, readonly=True)
    with env.begin() as txn:
        out = {bytes(k): bytes(v) for k, v in txn.cursor(db=env.open_db(b"fold", txn=txn))}
    env.close()
    return out


def _put_fold_entries(path: Path, entries: dict[bytes, bytes]) -> None:
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        db = env.open_db(b"fold", txn=txn)
        for k, v in entries.items():
            txn.put(k, v, db=db)
    env.close()


@pytest.mark.parametrize(
    "mutation",
    [
        "garbage-bytes",
        "another-records-entry",
        "an-older-entry-of-the-same-record",
        "a-truncated-fold",
        "a-fold-without-a-list",
    ],
)
def test_a_damaged_or_stale_fold_entry_means_a_full_derivation(tmp_path: Path, mutation: str) -> None:
    path = tmp_path / "l"
    batches = _batches()
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(batches[0] + batches[1]))
    first = _fold_entries(path)
    assert first  # present records have entries
    with Ledger(path) as ledger:
        ledger.apply_batch(bundles_of(batches[2] + batches[3]))
    now = _fold_entries(path)
    keys = sorted(now)
    if mutation == "garbage-bytes":
        bad = {k: b"\x93garbage" for k in keys}
    elif mutation == "another-records-entry":
        bad = {k: now[keys[(i + 1) % len(keys)]] for i, k in enumerate(keys)}
    elif mutation == "an-older-entry-of-the-same-record":  # as if an older pithledger had derived since
        bad = {k: v for k, v in first.items() if k in now}
    elif mutation == "a-truncated-fold":
        bad = {k: v[: len(v) // 2] for k, v in now.items()}
    else:  # decodes, but a list it must describe is gone
        bad = {}
        for k, v in now.items():
            entry = msgspec.msgpack.decode(v, type=views._FoldEntry)
            loose = msgspec.msgpack.decode(entry.fold)
            del loose["lists"]["citations"], loose["members"]
            loose["members"] = {"citation\0x\0y": []}
            bad[k] = msgspec.msgpack.encode(msgspec.structs.replace(entry, fold=msgspec.msgpack.encode(loose)))
    _put_fold_entries(path, bad)
    with Ledger(path) as ledger:
        for batch in batches[4:]:
            ledger.apply_batch(bundles_of(batch))
        problems = ledger.fsck()
        if mutation == "an-older-entry-of-the-same-record":  # an earlier state's Fold: it only means a full derivation
            assert problems == []
        else:  # damaged: fsck names the entries of the records not derived since (rebuild --force repairs them)
            assert all(p.startswith("the fold entry of ") and p.endswith("rebuilds it") for p in problems), problems
        assert consensus(ledger) == reference(tmp_path / "ref")


def test_fsck_names_a_fold_that_gives_other_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(*args: Any) -> Any:  # an incremental bug: one view's time off by a second
        got = real_fold(*args)
        return None if got is None else (got[0].replace(b'T00:00:00Z"', b'T00:00:01Z"', 1), got[1])

    monkeypatch.setattr(views, "fold", wrong)
    with Ledger(tmp_path / "l", create=True) as ledger:
        for batch in _batches():
            ledger.apply_batch(bundles_of(batch))
        assert any("differs from its recomputation from the log" in p for p in ledger.fsck())


def test_a_ledger_without_the_fold_database_is_read_and_written_the_same(tmp_path: Path) -> None:
    path = tmp_path / "l"
    batches = _batches()
    with Ledger(path, create=True) as ledger:
        for batch in batches[:3]:
            ledger.apply_batch(bundles_of(batch))
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:  # as an older pithledger leaves it
        txn.drop(env.open_db(b"fold", txn=txn), delete=True)
    env.close()
    with Ledger(path, readonly=True) as reader:
        assert b"fold" not in reader.db
        assert reader.fsck() == []
    with Ledger(path) as ledger:
        for batch in batches[3:]:
            ledger.apply_batch(bundles_of(batch))
        assert ledger.fsck() == [] and consensus(ledger) == reference(tmp_path / "ref")
    assert _fold_entries(path)


def test_a_long_state_is_stored_as_segments_a_fold_reuses_and_any_reader_inflates() -> None:
    import zlib

    views_of = [
        b'{"created_at":"2026-06-01T00:00:00Z","event_id":"sha256:%02x%062d","payload":"%s"}'
        % (n % 256, n, b"x" * (n % 97))
        for n in range(3000)
    ]
    data = b'{"current":{"author_attestations":[' + b",".join(views_of) + b"]}}"
    assert len(data) >= views._SEGMENTED_FROM
    packed, segments = views._pack_state(data)
    assert len(segments) > 5 and zlib.decompress(packed) == data
    grown = data[:-3] + b',{"created_at":"2026-06-02T00:00:00Z","event_id":"sha256:' + b"01" * 32 + b'"}]}}'
    again, segments2 = views._pack_state(grown, packed, segments)
    assert zlib.decompress(again) == grown
    assert sum(s in segments for s in segments2) == len(segments2) - 1  # only the last segment was compressed again
    assert (
        again[: len(again) - len(views._FINAL_BLOCK) - 4 - segments2[-1][1]]
        == packed[: len(packed) - len(views._FINAL_BLOCK) - 4 - segments[-1][1]]
    )
    small = data[:1000]
    assert views._pack_state(small) == (zlib.compress(small, 1), [])  # short states: plain zlib, as before


@pytest.mark.parametrize("cut_every_view", [False, True])
def test_segmented_states_on_a_ledger_equal_one_batch_of_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_every_view: bool
) -> None:
    monkeypatch.setattr(views, "_SEGMENTED_FROM", 0)  # every state segmented (the pool's records are small)
    if cut_every_view:
        monkeypatch.setattr(views, "_CUT", b'","event_id":"sha256:')
    with Ledger(tmp_path / "l", create=True) as ledger:
        for batch in _batches():
            ledger.apply_batch(bundles_of(batch))
        assert ledger.fsck() == []
        assert consensus(ledger) == reference(tmp_path / "ref")
    entries = [msgspec.msgpack.decode(v, type=views._FoldEntry) for v in _fold_entries(tmp_path / "l").values()]
    assert entries and all(e.segments and e.packed_sha256 for e in entries)
