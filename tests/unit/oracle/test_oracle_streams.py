"""The oracle (tests/oracle/, written from spec/ alone) beside pithledger's own code on generated streams
(issue #42 item 3): really signed events of the project's pool, every merge vector's events, garbled copies,
replays and re-signed mutants, drawn by Hypothesis in subsets and orders. Both sides must give the same verdict
for every event and the same state bytes for every subject. This file may import pithledger (it runs the code's
public in-process path, the one tests/unit/merge/test_merge_properties.py uses); the oracle may not."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle.ots import MAGIC
from oracle.reduce import reduce_all as oracle_reduce_all
from oracle.verify import KINDS, Verifier

from helpers.adversary import GARBLINGS, garble, replay_under, unsigned_pith_event
from helpers.consensus import NUMBER, ODD_SPELLINGS, REC, created, signed
from helpers.eventpool import ALICE, BOB, MALLORY, P, pool
from helpers.statediff import difference
from pithledger.merge import Entry, reduce_all
from pithledger.records import bitcoin, keys
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import compute_event_id, signing_message, verify_event
from pithledger.records.keys import LocalKey

VECTORS = Path(__file__).resolve().parents[3] / "spec" / "vectors" / "merge"
ORACLE = Verifier()  # the built-in registry and mainnet: what the code uses unpatched
Event = dict[str, Any]

DIGEST = bytes.fromhex(REC["canonical_sha256"])
BITCOIN_900000 = b"\x00" + bytes.fromhex("0588960d73d71901") + b"\x03" + b"\xa0\xf7\x36"  # no spare byte


def anchor(body: bytes) -> Event:
    """A signed anchor on NUMBER whose proof of REC's digest has the timestamp `body`."""
    proof = base64.b64encode(MAGIC + b"\x01\x08" + DIGEST + body).decode()
    return signed({"event_type": "timestamp_anchor", "payload": {"ots_proof_b64": proof}})


# The allowed side of the depth and node bounds (spec/events.md §3.1.4), which the vectors ots-255-operations-deep
# and ots-10000-nodes miss (their attestation carries a spare byte, refused first), and the refused side.
BOUNDS = {
    "255-operations-deep": (anchor(b"\x08" * 255 + BITCOIN_900000), "valid", ""),
    "256-operations-deep": (anchor(b"\x08" * 256 + BITCOIN_900000), "invalid", "bad-proof"),
    "10000-nodes": (anchor((b"\xff" + BITCOIN_900000) * 9999 + BITCOIN_900000), "valid", ""),
    "10001-nodes": (anchor((b"\xff" + BITCOIN_900000) * 10000 + BITCOIN_900000), "invalid", "bad-proof"),
}


def edges() -> list[Event]:
    """Rules no vector and no pool event tells apart (found by changing the oracle's rules one at a time)."""
    other_digest = DIGEST[:-1] + bytes([DIGEST[-1] ^ 1])  # the same Pith suffix (130 bits), another digest
    url = "https://web.archive.org/web/20260601000000/https://arxiv.org/abs/x"

    def replication(kind: str, outcome: str, url: str = "https://example.org/lean") -> Event:
        payload = {"replication_type": kind, "outcome": outcome, "artifact_url": url}
        return signed({"event_type": "replication_record", "payload": payload})

    return [
        replication("formal_bridge", "failed"),
        replication("replication", "succeeded"),
        replication("replication", "partial", "http://a" + "b" * 2040),  # 2,048 characters: allowed
        replication("replication", "partial", "http://a" + "b" * 2041),  # 2,049: bad-payload
        signed(
            {
                "event_type": "storage_attestation",
                "payload": {"capture_url": url, "captured_at": "2026-06-01T00:00:01Z"},  # not the URL's 14 digits
            }
        ),
        {**unsigned_pith_event(NUMBER, "record_created", 3), "event_id": 7},  # Pith's envelope, id not a string
        {**unsigned_pith_event(NUMBER, "record_created", 4), "event_id": None},
        signed(  # valid, held, and shown nowhere: only the suffix is the record's (spec/merge.md §4)
            {
                "event_type": "timestamp_anchor",
                "payload": {
                    "ots_proof_b64": base64.b64encode(MAGIC + b"\x01\x08" + other_digest + BITCOIN_900000).decode()
                },
            }
        ),
    ]


def vector_events() -> list[Event]:
    out = []
    for path in sorted(VECTORS.glob("*.json")):
        out.extend(json.loads(path.read_text())["events"])
    return out


@lru_cache(maxsize=1)
def stream_pool() -> list[Event]:
    """Every event a stream may draw from, each distinct (by its canonical bytes)."""
    base = pool()
    events: list[Event] = list(base) + vector_events() + [e for e, _, _ in BOUNDS.values()]
    ours = [e for e in base if "signature_b64" in e]
    for i, e in enumerate(ours[:6]):
        events.extend(garble(e, how) for how in GARBLINGS)
        events.append(replay_under(e, P[(i + 1) % len(P)]))
    events.extend(unsigned_pith_event(NUMBER, n=n) for n in range(2))
    events.extend(signed(fields) for fields, _ in ODD_SPELLINGS.values())
    events.extend(edges())
    # the kinds no pool event or vector holds valid
    finding = {"finding_type": "duplicate", "severity": "warning", "description": ""}
    events.append(signed({"event_type": "integrity_finding", "payload": finding}))
    challenge = {"challenged_event_id": "sha256:" + "ab" * 32, "reason": "wrong year"}
    events.append(signed({"event_type": "challenge", "payload": challenge}, BOB))
    seen: dict[bytes, Event] = {}
    for e in events:
        seen.setdefault(canonical_bytes(e), e)
    return list(seen.values())


def code_verdict(e: Event) -> tuple[str, str, str | None]:
    v = verify_event(e)
    return v.status, v.reason, v.event_id if v.status == "valid" else None


def oracle_verdict(e: Event) -> tuple[str, str, str | None]:
    v = ORACLE(e)
    return v.status, v.reason, v.event_id


@lru_cache(maxsize=1)
def pool_verdicts() -> tuple[list[Any], list[Any]]:
    """Both sides' verdicts of every pool event, computed once (the 10,000-node proofs are slow to read)."""
    events = stream_pool()
    return [verify_event(e) for e in events], [ORACLE(e) for e in events]


def states_both(picks: list[int], more: list[Event] = []) -> tuple[dict[str, bytes], dict[str, bytes]]:  # noqa: B006
    """State bytes of the pool events `picks` (in that order) and `more`, by the code and by the oracle."""
    events, (code_v, oracle_v) = stream_pool(), pool_verdicts()
    code_in = [Entry(events[i], code_v[i]) for i in picks] + [Entry(e, verify_event(e)) for e in more]
    oracle_in = [(events[i], oracle_v[i]) for i in picks] + [(e, ORACLE(e)) for e in more]
    code = {s: canonical_bytes(d) for s, d in reduce_all(code_in).items()}
    return code, oracle_reduce_all(oracle_in)


def test_every_pool_event_gets_the_same_verdict_from_both() -> None:
    events = stream_pool()
    assert len(events) >= 250
    disagreements = [(i, code_verdict(e), oracle_verdict(e)) for i, e in enumerate(events)]  # uncached: both read
    assert [d for d in disagreements if d[1] != d[2]] == []
    statuses = {d[1][0] for d in disagreements}
    assert statuses == {"valid", "invalid", "unverified"}


def test_the_whole_pool_at_once_gives_the_same_state_bytes() -> None:
    code, oracle = states_both(list(range(len(stream_pool()))))
    assert len(code) >= 5
    assert not difference(code, oracle), difference(code, oracle)


def test_each_edge_beside_its_record_alone_gives_the_same_state_bytes() -> None:
    """Each edge case on its own with the record (in the whole pool another event may mask it)."""
    record = created(ALICE)
    for e in edges():
        code, oracle = states_both([], [record, e])
        assert not difference(code, oracle), (difference(code, oracle), e["payload"])


def test_depth_and_node_bounds_on_both_sides() -> None:
    for name, (event, status, reason) in BOUNDS.items():
        assert oracle_verdict(event)[:2] == (status, reason), name
        assert code_verdict(event) == oracle_verdict(event), name


# Re-signed mutants: a pool event changed in one place and signed again, so it reaches the payload rules.
SIGNERS = [ALICE, BOB, MALLORY]
FIELDS = sorted({name for _, fields in KINDS.values() for name, _, _ in fields} | {"extra"})
VALUES: list[Any] = [
    None, "", " \t", 0, 1, True, [], {}, {"a": 1}, "x", "supports", "uses_method", "Supports",
    "sha256:" + "ab" * 32, "sha256:" + "AB" * 32, "sha256:" + "a" * 63, P[1], P[1].lower(), NUMBER,
    "https://example.org/a", "http:///x", "https://web.archive.org/web/20260601000000/https://arxiv.org/abs/x",
    "2026-06-01T00:00:00Z", "2026-02-30T00:00:00Z", "0000-0002-1825-0097", "0000-0002-1825-0096",
    "info", "critical", "Critical", "formal_bridge", "replication", "succeeded", "partial",
    REC["canonical_sha256"], REC["canonical_sha256"].upper(), REC["canonical_record"],
    {**REC["canonical_record"], "extra": 1},
    {**REC["canonical_record"], "source": {**REC["canonical_record"]["source"], "version": 0}},
    {**REC["canonical_record"], "source": {**REC["canonical_record"]["source"], "version": True}},
    {**REC["canonical_record"], "metadata": {**REC["canonical_record"]["metadata"], "cross_cats_sorted": [1]}},
    base64.b64encode(MAGIC + b"\x01\x08" + DIGEST + BITCOIN_900000).decode(),
]  # fmt: skip
SIGNER_FIELDS = ["key_id", "public_key_b64", "public_key_fingerprint", "signer_id", "signer_type", "extra"]
SIGNER_VALUES: list[Any] = [
    None, "", " ", 1, "alice", "pith-v1-2026-05", "self_signed", "pith_registry", "registry",
    keys.b64encode(BOB.public_key), keys.b64encode(BOB.public_key).rstrip("="), keys.fingerprint_hex(BOB.public_key),
    "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM=", "8d4b5ee74e4693bcd1df2446408b0d54", "0" * 32,
]  # fmt: skip
mutations = st.one_of(
    st.tuples(st.just("own"), st.integers(0, 5), st.sampled_from(VALUES)),  # one of the base's own fields
    st.tuples(st.just("payload"), st.sampled_from(FIELDS), st.sampled_from(VALUES)),
    st.tuples(st.just("drop"), st.sampled_from(FIELDS), st.none()),
    st.tuples(st.just("event_type"), st.sampled_from([*KINDS, "peer_review_v9"]), st.none()),
    st.tuples(st.just("target"), st.sampled_from(["record", "graph", "event", "Record"]), st.none()),
    st.tuples(
        st.just("created_at"),
        st.sampled_from(["2026-06-07T00:00:00Z", "2026-06-09T00:00:00Z", "0000-01-01T00:00:00Z"]),
        st.none(),
    ),
    st.tuples(st.just("subject_pith_number"), st.sampled_from([*P, NUMBER]), st.none()),
    st.tuples(st.just("signer"), st.sampled_from(SIGNER_FIELDS), st.sampled_from(SIGNER_VALUES)),  # §2.2 step 6
)


def resign(base: Event, mutation: tuple[str, Any, Any], key: LocalKey, registry: bool = False) -> Event:
    event = {k: copy.deepcopy(v) for k, v in base.items() if k not in ("event_id", "signature_b64")}
    what, name, value = mutation
    if what == "own":
        own = sorted(event["payload"]) or ["extra"]
        event["payload"][own[int(name) % len(own)]] = copy.deepcopy(value)
    elif what == "payload":
        event["payload"][name] = copy.deepcopy(value)
    elif what == "drop":
        event["payload"].pop(name, None)
    elif what != "signer":
        event[what] = name
    event["signer"] = {
        "key_id": key.name,
        "public_key_b64": keys.b64encode(key.public_key),
        "public_key_fingerprint": keys.fingerprint_hex(key.public_key),
        "signer_id": f"ed25519:{keys.fingerprint_hex(key.public_key)}",
        "signer_type": "pith_registry" if registry else "self_signed",
    }
    if what == "signer":
        if value is None and name != "extra":
            event["signer"].pop(name)
        else:
            event["signer"][name] = value
    event["signature_b64"] = keys.b64encode(key.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


@lru_cache(maxsize=1)
def signed_bases() -> list[Event]:
    """Valid events in our envelope, small enough to re-sign often (not the 10,000-node proofs)."""
    events, (_, oracle_v) = stream_pool(), pool_verdicts()
    return [e for e, v in zip(events, oracle_v) if v.status == "valid" and v.ours and len(canonical_bytes(e)) < 20_000]


stream_subsets = st.lists(st.integers(0, 10**6), max_size=40)
mutants = st.lists(
    st.tuples(st.integers(0, 10**6), mutations, st.sampled_from(range(len(SIGNERS)))),
    max_size=4,
)


@given(stream_subsets, mutants, st.randoms(use_true_random=False))
def test_streams_with_resigned_mutants_give_the_same_verdicts_and_state_bytes(picks, muts, rnd) -> None:  # type: ignore[no-untyped-def]
    n, bases = len(stream_pool()), signed_bases()
    made = [resign(bases[i % len(bases)], m, SIGNERS[k]) for i, m, k in muts]
    for e in made:
        assert code_verdict(e) == oracle_verdict(e), e
    order = [i % n for i in picks]
    rnd.shuffle(order)
    code, oracle = states_both(order, made)  # the mutants after the pool's events: the set decides, not the order
    assert not difference(code, oracle), difference(code, oracle)


def test_every_one_field_change_of_one_event_per_kind_gets_the_same_verdict() -> None:
    """Exhaustive where Hypothesis samples: each payload field of one valid event of each kind set to each value
    of VALUES (or dropped), re-signed: the §3 rules and their codes, field by field."""
    firsts: dict[str, Event] = {}
    for e in signed_bases():
        firsts.setdefault(e["event_type"], e)
    assert set(firsts) >= set(KINDS)
    codes = set()
    for base in firsts.values():
        for name in [*base["payload"], "extra"]:
            for mutation in [("payload", name, v) for v in VALUES] + [("drop", name, None)]:
                e = resign(base, mutation, BOB)
                assert code_verdict(e) == oracle_verdict(e), (base["event_type"], mutation)
                codes.add(oracle_verdict(e)[1])
    assert codes >= {"", "bad-payload", "bad-relation", "bad-orcid", "bad-record", "hash-mismatch", "bad-proof"}


# Under a stand-in registry key and regtest's rules (as the vectors README allows, replaced on both sides alike):
# registry-signed events, Pith-envelope records with receipts, carried headers that check.
STAND_IN = LocalKey(name="pith-v1-2026-05", seed=hashlib.sha256(b"pithledger vectors: stand-in registry key").digest())
STAND_IN_REGISTRY = {STAND_IN.name: keys.b64encode(STAND_IN.public_key)}
ORACLE_STAND_IN = Verifier(STAND_IN_REGISTRY, "regtest")


@contextmanager
def code_under_stand_in() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
        registry = {
            k: keys.RegistryKey(key_id=k, public_key=keys.b64decode_strict(b)) for k, b in STAND_IN_REGISTRY.items()
        }
        mp.setattr(keys, "PITH_REGISTRY_KEYS", registry)
        yield


def pith_copies(event: Event) -> list[Event]:
    """Copies of a Pith-envelope record_created differing only in what its receipt does not authenticate."""
    out = []
    for change in (
        {"created_at": "2026-06-30T00:00:00Z"},
        {"event_id": "sha256:" + "cd" * 32},
        {"relayed_by": "mallory"},
        {"signer": {**event["signer"], "signer_id": "someone else"}},
        {"payload": {**event["payload"], "receipt": {**event["payload"]["receipt"], "signed_at": "yesterday"}}},
    ):
        out.append({**copy.deepcopy(event), **copy.deepcopy(change)})
    return out


@lru_cache(maxsize=1)
def stand_in_pool() -> tuple[list[Event], list[Any], list[Any]]:
    """The vectors' events, Pith-envelope copies, and registry-signed mutants; both sides' verdicts under the stand-in."""
    events = vector_events()
    with code_under_stand_in():
        pith = [
            e
            for e in events
            if "signature_b64" not in e and "event_version" not in e and verify_event(e).status == "valid"
        ]
        assert pith
        events += [c for e in pith for c in pith_copies(e)]
        events += [{**e, "target": "graph"} for e in pith]  # §2.4: wrong-target, after the registry key checks
        events += [resign(b, ("drop", "nothing", None), STAND_IN, registry=True) for b in signed_bases()[:40]]
        seen: dict[bytes, Event] = {}
        for e in events:
            seen.setdefault(canonical_bytes(e), e)
        unique = list(seen.values())
        return unique, [verify_event(e) for e in unique], [ORACLE_STAND_IN(e) for e in unique]


def test_under_a_stand_in_registry_and_regtest_every_event_gets_the_same_verdict() -> None:
    assert STAND_IN_REGISTRY == json.loads((VECTORS / "pith-record-with-receipt.json").read_text())["registry_keys"]
    events, code_v, oracle_v = stand_in_pool()
    got = [(v.status, v.reason, v.event_id if v.status == "valid" else None) for v in code_v]
    assert got == [(v.status, v.reason, v.event_id) for v in oracle_v]
    assert {v.trust for v in oracle_v if v.status == "valid"} == {"registry", "self_signed"}
    assert any(v.status == "valid" and not v.ours for v in oracle_v)  # Pith's envelope
    assert any(v.status == "valid" and v.facts.get("bitcoin_block") for v in oracle_v)  # headers that check
    assert any(v.reason == "wrong-target" for v in oracle_v)


@given(stream_subsets, mutants, st.randoms(use_true_random=False))
def test_streams_under_a_stand_in_registry_and_regtest_give_the_same_state_bytes(picks, muts, rnd) -> None:  # type: ignore[no-untyped-def]
    events, code_v, oracle_v = stand_in_pool()
    bases = signed_bases()
    order = [i % len(events) for i in picks]
    rnd.shuffle(order)  # Pith-envelope copies included: the first received is kept, and nothing unsigned is read
    with code_under_stand_in():
        made = [resign(bases[i % len(bases)], m, STAND_IN, registry=k == 0) for i, m, k in muts]
        made_code = [verify_event(e) for e in made]
        made_oracle = [ORACLE_STAND_IN(e) for e in made]
        for e, c, o in zip(made, made_code, made_oracle, strict=True):
            assert (c.status, c.reason, c.event_id if c.status == "valid" else None) == (
                o.status,
                o.reason,
                o.event_id,
            ), e
        code_in = [Entry(events[i], code_v[i]) for i in order] + [Entry(e, v) for e, v in zip(made, made_code)]
        code = {s: canonical_bytes(d) for s, d in reduce_all(code_in).items()}
    oracle_in = [(events[i], oracle_v[i]) for i in order] + list(zip(made, made_oracle))
    oracle = oracle_reduce_all(oracle_in)
    assert not difference(code, oracle), difference(code, oracle)


def test_event_size_bound_on_both_sides() -> None:
    """§2.2 step 1: canonical bytes at most 1,048,576 — the bound itself allowed, one byte more event-too-large."""
    finding = {"finding_type": "x", "severity": "info", "description": ""}
    empty = len(canonical_bytes(signed({"event_type": "integrity_finding", "payload": finding})))
    for extra, verdict in ((0, ("valid", "")), (1, ("invalid", "event-too-large"))):
        description = "d" * (1_048_576 - empty + extra)
        event = signed({"event_type": "integrity_finding", "payload": {**finding, "description": description}})
        assert len(canonical_bytes(event)) == 1_048_576 + extra
        assert oracle_verdict(event)[:2] == verdict
        assert code_verdict(event) == oracle_verdict(event)
