"""apply's fast path (ledger/records/fast.py, spec/adr/0020) equals today's path on hostile input.

Every case reads one bundle line through the real functions of apply's two passes twice, fast path on and
off: pass 1's verdict on the line (ingest.bundles._check_line: Checked, or the error's class, code, message
and hint), and for a line pass 1 accepts, pass 2's msgpack bytes for its clean region with the copies
verified on the reading worker (``_reread_region(check=True)``: Prepared, each copy's _Checked: log entry,
evidence entry, verdict, tlog entry) and as a batch verifies them (``_verify_offers``). Equal, byte for
byte. Real Ed25519 keys; the events are the merge properties' pool (every kind, valid and not), the
adversary's garblings, and edits of them: payload fields of every kind made wrong, null, missing or
unknown, unknown fields at every level, re-signed or not; the line written canonically or with reordered
keys, escapes, white space, duplicate keys, floats, huge integers.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.adversary import GARBLINGS, garble, replay_under
from helpers.eventpool import ALICE, IDS, RECS, P, pool
from pithledger.errors import PithledgerError
from pithledger.ingest.bundles import _check_line, _prepared_decoder, _Region, _reread_region
from pithledger.records import fast, keys
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import compute_event_id, signing_message, verify_event
from pithledger.store.entries import _checked_decoder
from pithledger.store.workers import _verify_offers


@pytest.fixture(autouse=True)
def _fast_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(fast, "ENABLED", True)
    yield


def _outcome(line: bytes) -> tuple[Any, ...]:
    """What apply's passes make of ``line`` (see the module's docstring), as comparable values."""
    found = _check_line(line, "in.jsonl:1", "in.jsonl:1")
    if isinstance(found, PithledgerError):
        return ("refused", type(found).__name__, found.code, found.message, found.hint)
    region = line + b"\n"
    expected = _Region(hashlib.sha256(region).digest(), True)
    verified = _reread_region(region, 1, "in.jsonl", expected, False, check=True)
    unverified = _reread_region(region, 1, "in.jsonl", expected, False, check=False)
    assert verified is not None and unverified is not None
    offers = [(c.data, c.claimed_id, False) for _, p in _prepared_decoder.decode(unverified) if p for c in p.events]
    batch = _checked_decoder.decode(_verify_offers(offers)) if offers else []
    return ("read", tuple(found), verified, unverified, batch)


def both_ways(line: bytes) -> tuple[tuple[Any, ...], int]:
    """The outcome with the fast path off, asserted equal to it on; and how many events the fast path took."""
    fast.ENABLED = False
    slow = _outcome(line)
    fast.ENABLED = True
    before = fast.taken["events"]
    assert _outcome(line) == slow
    return slow, fast.taken["events"] - before


# --- the inputs ------------------------------------------------------------------------------------


def resign(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` signed again by alice (self-signed), with its id recomputed: only its content decides."""
    out = copy.deepcopy(event)
    if not isinstance(out.get("signer"), dict) or "event_version" not in out:
        return out
    pk = ALICE.public_key
    out["signer"] = {
        **out["signer"],
        "signer_type": "self_signed",
        "key_id": ALICE.name,
        "public_key_b64": keys.b64encode(pk),
        "public_key_fingerprint": keys.fingerprint_hex(pk),
    }
    out.pop("event_id", None)
    out.pop("signature_b64", None)
    try:
        out["signature_b64"] = keys.b64encode(ALICE.sign(signing_message(out)))
        out["event_id"] = compute_event_id(out)
    except (TypeError, ValueError, PithledgerError):  # a value with no JSON form: left unsigned
        pass
    return out


OURS = [e for e in pool() if "event_version" in e]
#: The kinds the pool lacks, signed by alice.
MORE_KINDS = [
    resign({**OURS[5], "event_type": kind, "target": "record", "payload": payload})
    for kind, payload in (
        ("integrity_finding", {"description": "d", "finding_type": "figure_reuse", "severity": "warning"}),
        ("challenge", {"challenged_event_id": "sha256:" + "cd" * 32, "reason": "r"}),
    )
]
EVENTS = [*pool(), *MORE_KINDS, *(garble(e, how) for e in OURS[:4] for how in GARBLINGS), replay_under(OURS[5], P[2])]
ODD_VALUES: list[Any] = [
    None,
    "",
    " \t",
    "é",
    "\u2028",
    "\x7f",
    'a"b\\c/d',
    0,
    -1,
    2**53 - 1,
    2**53,
    -(2**53),
    10**30,
    1.5,
    1.0,
    True,
    [],
    {},
    ["x"],
    {"k": None},
    "sha256:" + "ab" * 32,
    P[0],
    "0000-0002-1825-0097",
    "https://example.org/x",
]
FIELDS = [
    "relation",
    "cited_pith_number",
    "canonical_sha256",
    "canonical_record",
    "receipt",
    "author_name",
    "orcid",
    "capture_url",
    "captured_at",
    "content_sha256",
    "replication_type",
    "outcome",
    "artifact_url",
    "severity",
    "finding_type",
    "description",
    "revoked_event_id",
    "reason",
    "challenged_event_id",
    "ots_proof_b64",
    "bitcoin_headers_b64",
    "graph_snapshot",
    "unknown_field",
]
LEVELS = ["event", "payload", "signer", "top", "record"]
#: Values near the right ones, per field: what reaches the rules after the type checks.
NEAR: dict[str, list[Any]] = {
    "target": ["record", "graph", "event", "Record"],
    "event_type": ["citation_signature", "revocation", "graph_snapshot", "challenge", "record_created", "peer_review"],
    "created_at": ["2026-02-30T00:00:00Z", "2026-06-01T00:00:00.5Z", "2026-06-01 00:00:00Z", "1969-12-31T23:59:59Z"],
    "event_version": ["pithledger-event-v2", "pithledger-event-v1 "],
    "subject_pith_number": [*P, "pith:2026:short"],
    "signer_type": ["pith_registry", "self_signed", "other"],
    "key_id": ["", " ", "pith-v1-2026-05", "alice"],
    "signer_id": ["", "\t", "x"],
    "public_key_fingerprint": ["00" * 16],
    "relation": ["cites", "cite", "refutes", ""],
    "cited_pith_number": [*P, "pith:FZ7AO632"],
    "orcid": ["0000-0002-1825-0097", "0000-0002-1825-0098", "0000-0002-1825-009X"],
    "author_name": ["", " \n", "Ada"],
    "severity": ["info", "fatal"],
    "replication_type": ["replication", "rerun"],
    "outcome": ["failed", "unknown"],
    "artifact_url": ["https://e.org/a", "ftp://e.org/a", "https:// x"],
    "revoked_event_id": ["sha256:" + "ab" * 32, "sha256:" + "AB" * 32, "ab" * 32],
    "challenged_event_id": ["sha256:" + "cd" * 32, "sha256:"],
    "capture_url": ["https://web.archive.org/web/20260601000000/https://arxiv.org/abs/x", "https://example.org"],
    "captured_at": ["2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z"],
    "content_sha256": ["ab" * 32, "AB" * 32],
    "canonical_sha256": [i.canonical_sha256 for i in IDS],
    "canonical_record": RECS,
    "receipt": [None],
    "reason": ["because", None],
}


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    event = copy.deepcopy(draw(st.sampled_from(EVENTS)))
    for _ in range(draw(st.integers(0, 2))):
        level = draw(st.sampled_from(LEVELS[:3]))
        target = event if level == "event" else event.get(level)
        if not isinstance(target, dict):
            continue
        name = draw(st.sampled_from(FIELDS if level == "payload" else [*target, "unknown_field"]))
        if draw(st.integers(0, 4)) == 0:
            target.pop(name, None)
        elif name in NEAR and draw(st.booleans()):
            target[name] = copy.deepcopy(draw(st.sampled_from(NEAR[name])))
        else:
            target[name] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
    return resign(event) if draw(st.integers(0, 3)) else event


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


#: How a line is written: canonically, or in ways a strict reader accepts but that are not canonical, or with
#: what the strict reader refuses, each at one place of the line.
NOT_CANONICAL = [
    "reordered keys",
    "ascii escapes",
    "escaped solidus",
    "white space",
    "duplicate key",
    "float",
    "exponent",
    "minus zero",
    "huge integer",
    "lone surrogate",
    "surrogate pair",
    "trailing data",
    "deep nesting",
    "invalid utf-8",
]
WRITINGS = [*["canonical"] * 24, *NOT_CANONICAL]


def write(value: dict[str, Any], how: str, at: int) -> bytes:
    data = canonical_bytes(value)
    if how == "reordered keys":
        return json.dumps(_reordered(value), separators=(",", ":"), ensure_ascii=False).encode()
    if how == "ascii escapes":
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    if how == "white space":
        return json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    # the rest edit the canonical bytes at the ``at``-th place that allows it
    if how == "escaped solidus":
        return _nth(data, b"/", b"\\/", at)
    if how == "duplicate key":
        return _nth(data, b'":"', b'":"x","' + _key_before(data, b'":"', at) + b'":"', at)
    if how in ("float", "exponent", "minus zero", "huge integer"):
        number = {"float": b"1.0", "exponent": b"1e3", "minus zero": b"-0", "huge integer": b"9007199254740993"}[how]
        return _nth(data, b'":"', b'":' + number + b',"x":"', at)
    if how == "lone surrogate":
        return _nth(data, b'":"', b'":"\\ud800', at)
    if how == "surrogate pair":
        return _nth(data, b'":"', b'":"\\ud83d\\ude00', at)
    if how == "trailing data":
        return data + b"{}"
    if how == "deep nesting":
        return _nth(data, b'":"', b'":' + b"[" * 70 + b"]" * 70 + b',"x":"', at)
    if how == "invalid utf-8":
        return _nth(data, b'":"', b'":"\xff', at)
    return data


def _nth(data: bytes, old: bytes, new: bytes, at: int) -> bytes:
    count = data.count(old)
    if not count:
        return data
    i = -1
    for _ in range(at % count + 1):
        i = data.index(old, i + 1)
    return data[:i] + new + data[i + len(old) :]


def _key_before(data: bytes, old: bytes, at: int) -> bytes:
    count = data.count(old)
    i = -1
    for _ in range(at % count + 1):
        i = data.index(old, i + 1)
    return data[data.rindex(b'"', 0, i) + 1 : i]


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    evs = draw(st.lists(events(), min_size=1, max_size=3))
    subject = evs[0].get("subject_pith_number")
    for i, e in enumerate(evs[1:], 1):  # mostly about one record, as a bundle must be
        if e.get("subject_pith_number") != subject and draw(st.integers(0, 5)):
            evs[i] = {**e, "subject_pith_number": subject}
            evs[i] = resign(evs[i]) if draw(st.integers(0, 3)) else evs[i]
    number = subject if isinstance(subject, str) and draw(st.integers(0, 11)) else P[1]
    record = None
    if number in P and draw(st.booleans()):
        record = copy.deepcopy(RECS[P.index(number)])
    value = write_bundle(
        number, evs, canonical_record=record, aliases_created_at="2026-05-31T00:00:00Z" if record else None
    )
    if draw(st.integers(0, 9)) == 0:
        level = draw(st.sampled_from(["top", "record"]))
        target = value if level == "top" else value.get("canonical_record")
        if isinstance(target, dict):
            target[draw(st.sampled_from([*target, "unknown_field"]))] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
    return write(value, draw(st.sampled_from(WRITINGS)), draw(st.integers(0, 200)))


# --- the properties ----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_fast_path_equals_todays_path_on_hostile_lines(line: bytes) -> None:
    both_ways(line)


def test_the_fast_path_takes_the_well_formed_lines() -> None:
    """A property that only ever ran the slow path would prove nothing: every valid event of our envelope, in
    a canonical line (with its record, or not), is taken on the fast path, both passes, and verified there."""
    valid = [e for e in OURS if e.get("event_type") != "peer_review_v9"][:18]
    taken = 0
    for e in valid:
        n = P.index(e["subject_pith_number"]) if e["subject_pith_number"] in P else None
        for record in ([RECS[n]] if n is not None else []) + [None]:
            line = canonical_bytes(write_bundle(e["subject_pith_number"], [e], canonical_record=record))
            assert fast.read_line(line) is not None, line[:200]
            taken += both_ways(line)[1]
    assert taken >= 2 * len(valid)  # pass 2 on the worker and the batch's verification: each verified fast


@pytest.mark.parametrize("how", NOT_CANONICAL)
@pytest.mark.parametrize("at", [0, 3, 17, 40])
def test_every_fault_of_the_strict_reading_leaves_the_fast_path(how: str, at: int) -> None:
    """Each thing the strict decoder refuses (or reads, but is not canonical) at several places of a line
    the fast path takes: it hands the line to today's path, which says the same as before."""
    e = OURS[0]
    author = next(x for x in OURS if x["event_type"] == "author_attestation")
    named = resign(
        {**author, "subject_pith_number": e["subject_pith_number"], "payload": {"author_name": "Jérôme / Ω"}}
    )
    value = write_bundle(e["subject_pith_number"], [e, named], canonical_record=RECS[0])
    assert fast.read_line(canonical_bytes(value)) is not None
    line = write(value, how, at)
    assert line != canonical_bytes(value)
    assert fast.read_line(line) is None
    both_ways(line)


RECEIPT = {
    "algorithm": "ed25519",
    "key_id": "pith-v1-2026-05",
    "kind": "pith_receipt",
    "signature_b64": "A" * 86 + "==",
    "signed_at": "2026-06-01T00:00:00Z",
}


def test_fast_event_id_and_signing_message_cut_from_the_bytes_equal_todays() -> None:
    """The cut (records/fast.py) for every event of our envelope the pool holds, a receipt's signature_b64
    key inside the payload among them."""
    for e in [*OURS, resign({**OURS[0], "payload": {**OURS[0]["payload"], "receipt": RECEIPT}})]:
        data = canonical_bytes(e)
        read = fast.read_event(data)
        assert read is not None or e.get("event_type") == "peer_review_v9"
        if read is None:
            continue
        assert fast.event_id(read) == compute_event_id(e)
        assert fast._signing_message(read) == signing_message(e)


def test_the_hostile_lines_reach_the_fast_path() -> None:
    """The property's lines reach the fast path, and past it. Measured on 200 derandomized examples: 44 lines
    read on the fast path and 55 with an event verified there (113 refused by pass 1: the faults of the strict
    reading and of read_bundle, which the fast path hands over whole). Required: a tenth each."""
    seen: Counter[str] = Counter()

    @settings(max_examples=200, derandomize=True, deadline=None, database=None)
    @given(lines())
    def run(line: bytes) -> None:
        slow, n = both_ways(line)
        seen["lines"] += 1
        seen["read fast"] += fast.read_line(line) is not None
        seen["verified fast"] += n > 0
        seen["refused"] += slow[0] == "refused"

    run()
    assert seen["read fast"] >= seen["lines"] / 10 and seen["verified fast"] >= seen["lines"] / 10, seen


ONE_OF_EACH_KIND = list({e["event_type"]: e for e in OURS + MORE_KINDS if verify_event(e).status == "valid"}.values())
ENVELOPE_FIELDS = ["target", "event_type", "created_at", "event_version", "subject_pith_number"]
SIGNER_FIELDS = ["signer_type", "key_id", "signer_id", "public_key_fingerprint"]


def test_every_near_value_of_every_field_on_both_paths() -> None:
    """Each value near the right one (NEAR) in each field of the envelope, the signer and each kind's payload,
    re-signed so that only that field can be at fault, in a canonical line: the same outcome both ways (the
    rules the fast path runs itself — time, version, target, signer — meet each of their faults here)."""
    for e in ONE_OF_EACH_KIND:
        for level, names in (("event", ENVELOPE_FIELDS), ("signer", SIGNER_FIELDS), ("payload", list(e["payload"]))):
            for name in names:
                for value in NEAR.get(name, ODD_VALUES[:3]):
                    edited = copy.deepcopy(e)
                    (edited if level == "event" else edited[level])[name] = copy.deepcopy(value)
                    edited = resign(edited)
                    subject = edited["subject_pith_number"]
                    both_ways(canonical_bytes(write_bundle(subject, [edited])))


@pytest.mark.parametrize("how", sorted(GARBLINGS))
def test_every_garbling_on_both_paths(how: str) -> None:
    """The adversary's garblings of signed events (a wrong or missing id, a malleated signature, ...), not
    re-signed, in canonical lines: the same outcome both ways."""
    for e in ONE_OF_EACH_KIND:
        bad = garble(e, how)
        both_ways(canonical_bytes(write_bundle(e["subject_pith_number"], [bad])))


@pytest.mark.parametrize("value", [2**53, -(2**53), 10**30, [[[[["x"]]]]], 1.5])
def test_values_out_of_the_admitted_space_in_a_top_level_field_leave_the_fast_path(value: Any) -> None:
    """read_bundle reads an alias's own fields only: a value the strict reading refuses in another field
    of an alias (an integer out of range, a float) or nested too deep there is found by the fast path's own
    value-space walk, and the line handed over."""
    e = OURS[0]
    bundle = write_bundle(
        e["subject_pith_number"], [e], canonical_record=RECS[0], aliases_created_at="2026-05-31T00:00:00Z"
    )
    nested: Any = value
    if isinstance(value, list):
        for _ in range(62):
            nested = [nested]
    bundle["source_aliases"][0]["note"] = nested
    line = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert fast.read_line(line) is None
    both_ways(line)


def test_bad_signatures_under_recomputed_ids_on_both_paths() -> None:
    """Copies whose only fault is their signature (their ids recomputed: a replay under another record, a
    flipped byte, another signer's signature), in canonical lines: the same outcome both ways, invalid."""
    for e in ONE_OF_EACH_KIND:
        other = next(p for p in P if p != e["subject_pith_number"])
        flipped = copy.deepcopy(e)
        sig = bytearray(keys.b64decode_strict(e["signature_b64"]))
        sig[7] ^= 1
        flipped["signature_b64"] = keys.b64encode(bytes(sig))
        borrowed = {
            **copy.deepcopy(e),
            "signature_b64": OURS[0]["signature_b64"] if e is not OURS[0] else OURS[1]["signature_b64"],
        }
        for bad in (replay_under(e, other), flipped, borrowed):
            bad["event_id"] = compute_event_id(bad)
            slow, _ = both_ways(canonical_bytes(write_bundle(bad["subject_pith_number"], [bad])))
            assert slow[0] == "read" and b"bad-signature" in slow[2], slow
