"""The oracle's OpenTimestamps reading (spec/events.md §3.1, §3.1.1, written from the spec) beside pithledger's
strict reading (`ots.parse(data, strict=True)`) on the reference client's example proofs, every truncation of
them, and generated proofs (a grammar of forks, operations and attestations near every bound, then a byte
changed): the same accept/refuse verdict and the same (message, attestation) facts. And carried headers
(§3.1.3) on regtest, mined here: the same verdict and state bytes for the anchor event."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle.ots import BITCOIN, ETHEREUM, LITECOIN, MAGIC, PENDING, OtsError, Proof
from oracle.reduce import reduce_all as oracle_reduce_all
from oracle.verify import Verifier

from helpers import bitcoinkit as bk
from helpers.consensus import REC, created, signed
from helpers.eventpool import ALICE
from pithledger.merge import Entry, reduce_all
from pithledger.records import bitcoin, ots
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import verify_event

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ots"
DIGEST = bytes.fromhex(REC["canonical_sha256"])
Facts = tuple[bytes, frozenset[tuple[bytes, str, Any]]] | None


def oracle_facts(data: bytes) -> Facts:
    try:
        p = Proof(data)
    except OtsError:
        return None
    kept = set()
    for msg, a in p.kept:
        if a.kind == "pending":
            kept.add((msg, "pending", a.value.decode("ascii")))
        elif a.kind in ("bitcoin", "litecoin"):
            kept.add((msg, a.kind, a.value))
        else:
            kept.add((msg, "unknown", None))
    return p.digest, frozenset(kept)


def code_facts(data: bytes) -> Facts:
    try:
        p = ots.parse(data, strict=True)
    except ots.OtsError:
        return None
    kept = set()
    for c in p.commitments:
        a = c.attestation
        value = a.calendar if a.kind == "pending" else a.height if a.kind in ("bitcoin", "litecoin") else None
        kept.add((c.msg, a.kind, value))
    return p.digest, frozenset(kept)


REFERENCE_PROOFS = sorted(FIXTURES.rglob("*.ots"))


@pytest.mark.parametrize("path", REFERENCE_PROOFS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_reference_proofs_and_their_truncations_read_alike(path: Path) -> None:
    data = path.read_bytes()
    accepted = 0
    for end in range(len(data), 0, -max(1, len(data) // 150)):  # the code's keccak makes each read slow
        o = oracle_facts(data[:end])
        assert o == code_facts(data[:end]), end
        accepted += o is not None
    assert accepted <= 1  # a strict reading accepts at most the whole proof, never a prefix of it


def test_reference_proofs_include_valid_and_refused_ones() -> None:
    verdicts = [oracle_facts(p.read_bytes()) is not None for p in REFERENCE_PROOFS]
    assert len(REFERENCE_PROOFS) >= 17 and any(verdicts) and not all(verdicts)


# A grammar of proofs: forks, operations (a few arguments repeated, so repeated operations at a fork happen),
# attestations of every tag with payloads on both sides of their bounds, sometimes a spare byte.
def varuint(n: int) -> bytes:
    out = b""
    while True:
        out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def varbytes(b: bytes) -> bytes:
    return varuint(len(b)) + b


# Each list holds mostly values on the allowed side, so that about half the proofs are read whole.
HEIGHTS = [0, 1, 900000, 900000, 2**32 - 1, 2**32, 2**56 - 1]
GOOD_URIS = [b"https://a.example", b"https://b.example/x_y-z:1", b"", b"x" * 1000]
URIS = GOOD_URIS * 3 + [b"https://a.example/?q=1", b"a b", b"x" * 1001]
payloads = st.one_of(
    st.tuples(st.just(PENDING), st.sampled_from(URIS).map(varbytes)),
    st.tuples(st.sampled_from([BITCOIN, LITECOIN, ETHEREUM]), st.sampled_from(HEIGHTS).map(varuint)),
    st.tuples(st.sampled_from([BITCOIN, PENDING, b"\x01" * 8]), st.binary(max_size=12)),
)
attestations = st.tuples(payloads, st.sampled_from([b""] * 5 + [b"\x00"])).map(
    lambda t: b"\x00" + t[0][0] + varbytes(t[0][1] + t[1])
)
ARGS = [b"\x01", b"x", b"\x00" * 32, b"", b"y" * 4064, b"y" * 4065]
operations = st.one_of(
    st.sampled_from([b"\x08", b"\x02", b"\x03", b"\x67", b"\xf2", b"\xf3"] * 3 + [b"\x42"]),
    st.tuples(st.sampled_from([b"\xf0", b"\xf1"]), st.one_of(st.sampled_from(ARGS), st.binary(max_size=40))).map(
        lambda t: t[0] + varbytes(t[1])
    ),
)


def forks(nodes: list[bytes]) -> bytes:
    return b"".join(b"\xff" + n for n in nodes[:-1]) + nodes[-1]


timestamps = st.recursive(
    st.lists(attestations, min_size=1, max_size=2).map(forks),
    lambda inner: st.lists(
        st.one_of(attestations, st.tuples(operations, inner).map(b"".join)), min_size=1, max_size=3
    ).map(forks),
    max_leaves=10,
)
headers_of_proof = st.sampled_from(
    [b"\x01\x08" + DIGEST, b"\x01\x08" + DIGEST, b"\x01\x02" + DIGEST[:20], b"\x02\x08" + DIGEST]
)
edits = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.none()),
    st.tuples(st.just("add"), st.integers(0, 10**6), st.integers(0, 255)),
)


def edit(data: bytes, how: tuple[str, int, int | None] | None) -> bytes:
    if how is None:
        return data
    what, at, value = how
    at %= len(data) + (what == "add")
    if what == "flip":
        return data[:at] + bytes([data[at] ^ (value or 1)]) + data[at + 1 :]
    if what == "cut":
        return data[:at]
    return data[:at] + bytes([value or 0]) + data[at:]


@given(headers_of_proof, timestamps, edits)
def test_generated_proofs_read_alike(head: bytes, body: bytes, how: tuple[str, int, int | None] | None) -> None:
    data = edit(MAGIC + head + body, how)
    assert oracle_facts(data) == code_facts(data)


def test_deep_and_wide_proofs_read_alike() -> None:
    """The bounds the grammar reaches rarely: depth, nodes, bytes read, result and hexlify lengths."""
    att = b"\x00" + BITCOIN + varbytes(varuint(900000))
    bodies = [
        b"\x08" * 255 + att,
        b"\x08" * 256 + att,
        (b"\xff" + att) * 9999 + att,
        (b"\xff" + att) * 10000 + att,
        b"\xf0" + varbytes(b"x" * 2016) + b"\xf3" + att,
        b"\xf0" + varbytes(b"x" * 2017) + b"\xf3" + att,
        b"\xf0" + varbytes(b"x" * 4064) + att,
        b"\xf0" + varbytes(b"x" * 4065) + att,
        (b"\xff\xf0" + varbytes(b"z" * 4000) + att) * 31 + b"\xf0" + varbytes(b"z" * 3000) + att,
        (b"\xff\xf0" + varbytes(b"z" * 4000) + att) * 32 + b"\xf0" + varbytes(b"z" * 3000) + att,
    ]
    verdicts = []
    for body in bodies:
        data = MAGIC + b"\x01\x08" + DIGEST + body
        verdicts.append(oracle_facts(data) is not None)
        assert oracle_facts(data) == code_facts(data)
    assert verdicts[:8] == [True, False] * 4


# Carried headers on regtest, mined here (bitcoinkit), the first header's root one of the proof's messages.
ORACLE_REGTEST = Verifier(chain="regtest")
RECORD = created(ALICE)


def anchor(proof: bytes, headers: bytes | None) -> dict[str, Any]:
    payload = {"ots_proof_b64": base64.b64encode(proof).decode()}
    if headers is not None:
        payload["bitcoin_headers_b64"] = base64.b64encode(headers).decode()
    return signed({"event_type": "timestamp_anchor", "payload": payload})


def proof_with(heights: list[int], extra: bytes = b"") -> bytes:
    """sha256(digest + i) then a Bitcoin attestation at heights[i], each on a fork; `extra` another branch."""
    nodes = [
        b"\xf0" + varbytes(bytes([i])) + b"\x08\x00" + BITCOIN + varbytes(varuint(h)) for i, h in enumerate(heights)
    ]
    if extra:
        nodes.append(extra)
    return MAGIC + b"\x01\x08" + DIGEST + forks(nodes)


@given(
    st.lists(st.sampled_from([0, 100, 2015, 2016, 2**32 - 2, 2**32 - 1]), min_size=1, max_size=3),
    st.integers(0, 3),
    st.integers(1, 3),
    st.sampled_from([bk.REGTEST_BITS, bk.CHECKED_BITS, 0x2003FFFF, 0x2001FFFF]),
    st.integers(-1, 2),
    st.sampled_from([0, 2**32 - 1]),
)
def test_carried_headers_on_regtest_give_the_same_verdicts_and_states(
    heights, pick, count, bits, unlink_at, time
) -> None:  # type: ignore[no-untyped-def]
    litecoin = b"\xf0" + varbytes(b"\x09") + b"\x08\x00" + LITECOIN + varbytes(varuint(7))
    proof = proof_with(heights, litecoin)
    roots = [hashlib.sha256(DIGEST + bytes([i])).digest() for i in range(len(heights))]
    roots.append(hashlib.sha256(DIGEST + b"\x09").digest())  # the Litecoin attestation's message: never matches
    roots.append(b"\x33" * 32)  # no attestation's message
    root = roots[pick % len(roots)]
    headers = bk.run(root, count, bits=bits, unlink_at=unlink_at, time=min(time, 2**32 - 1 - 600 * (count - 1)))
    event = anchor(proof, headers)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
        code_v = verify_event(event)
        code = {
            s: canonical_bytes(d)
            for s, d in reduce_all([Entry(RECORD, verify_event(RECORD)), Entry(event, code_v)]).items()
        }
    oracle_v = ORACLE_REGTEST(event)
    assert (code_v.status, code_v.reason) == (oracle_v.status, oracle_v.reason)
    assert code == oracle_reduce_all([(RECORD, ORACLE_REGTEST(RECORD)), (event, oracle_v)])


def test_a_digest_of_another_record_is_reported_before_false_headers() -> None:
    """§3's row read left to right: the proof, its hash op, the digest's suffix, and only then the headers."""
    proof = proof_with([100])
    false_headers = bk.run(b"\x44" * 32, 1)  # commits to no attestation: bad-headers on its own
    wrong_subject = {**anchor(proof, false_headers), "subject_pith_number": "pith:2026:" + "A" * 26}
    event = signed({k: v for k, v in wrong_subject.items() if k not in ("event_id", "signature_b64", "signer")})
    assert ORACLE_REGTEST(event).reason == "proof-digest-mismatch"
    assert ORACLE_REGTEST(anchor(proof, false_headers)).reason == "bad-headers"
    for e in (event, anchor(proof, false_headers), anchor(proof, b"\x00" * 79)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
            code_v = verify_event(e)
        assert (code_v.status, code_v.reason) == (ORACLE_REGTEST(e).status, ORACLE_REGTEST(e).reason)


# Mainnet's retarget rule (§3.1.3 step 3) cannot be mined here at mainnet's difficulty, so both sides get a test
# chain with mainnet's rules and regtest's limit: bits change only where h + i is a multiple of 2016, to a target at
# most 4 x the previous one (equal allowed, harder allowed). Worked by hand: 0x2000ffff's target is 0xffff * 2^232,
# 0x2003fffc's exactly 4 x that, 0x2003fffd's just over; 0x20007fff is harder.
RETARGET_RULES: dict[str, int | bool] = {"limit_bits": 0x207FFFFF, "retarget": True, "min_work": 128}
CODE_RETARGET = bitcoin.Chain(name="retarget-test", pow_limit=0x7FFFFF << 232, retarget=True, min_work=128)
RETARGET_CASES = {
    "4x-easier-at-2016": (2015, [0x2000FFFF, 0x2003FFFC], "valid"),
    "over-4x-easier-at-2016": (2015, [0x2000FFFF, 0x2003FFFD], "bad-headers"),
    "harder-at-2016": (2015, [0x2000FFFF, 0x20007FFF], "valid"),
    "changed-at-2015": (2014, [0x2000FFFF, 0x2001FFFF], "bad-headers"),
    "third-header-at-2016": (2014, [0x2000FFFF, 0x2000FFFF, 0x2003FFFC], "valid"),
    "at-4032": (4031, [0x2000FFFF, 0x2003FFFC], "valid"),
    "first-header-at-2016-has-no-previous": (2016, [0x2003FFFC, 0x2003FFFC], "valid"),
}


def mined_run(root: bytes, bits: list[int]) -> bytes:
    out, prev = b"", b"\x11" * 32
    for i, b in enumerate(bits):
        raw = bk.mine(prev, root if i == 0 else hashlib.sha256(b"block %d" % i).digest(), bk.T0 + 600 * i, b)
        out, prev = out + raw, bk.dsha(raw)
    return out


@pytest.mark.parametrize("case", RETARGET_CASES, ids=str)
def test_retargets_under_mainnets_rules_at_an_easy_limit(case: str) -> None:
    height, bits, expected = RETARGET_CASES[case]
    event = anchor(proof_with([height]), mined_run(hashlib.sha256(DIGEST + b"\x00").digest(), bits))
    oracle_v = Verifier(chain=RETARGET_RULES)(event)
    assert (oracle_v.status if expected == "valid" else oracle_v.reason) == expected
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitcoin, "CONSENSUS_CHAIN", CODE_RETARGET)
        code_v = verify_event(event)
    assert (code_v.status, code_v.reason) == (oracle_v.status, oracle_v.reason)
    if expected == "valid":  # and the same facts, through the state
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bitcoin, "CONSENSUS_CHAIN", CODE_RETARGET)
            code = reduce_all([Entry(RECORD, verify_event(RECORD)), Entry(event, code_v)])
        oracle = oracle_reduce_all([(RECORD, ORACLE_REGTEST(RECORD)), (event, oracle_v)])
        assert {s: canonical_bytes(d) for s, d in code.items()} == oracle


def test_without_retargets_any_change_of_bits_is_false() -> None:
    height, bits, _ = RETARGET_CASES["4x-easier-at-2016"]
    event = anchor(proof_with([height]), mined_run(hashlib.sha256(DIGEST + b"\x00").digest(), bits))
    assert ORACLE_REGTEST(event).reason == "bad-headers"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
        assert verify_event(event).reason == "bad-headers"


def test_the_attested_height_is_the_lowest_of_the_kept_bitcoin_attestations_at_the_root() -> None:
    """§3.1.3 step 2: two Bitcoin attestations at one message (one node, heights 300 and 100): h = 100."""
    message = hashlib.sha256(DIGEST + b"\x00").digest()
    node = b"\xf0\x01\x00\x08" + forks([b"\x00" + BITCOIN + varbytes(varuint(h)) for h in (300, 100)])
    event = anchor(MAGIC + b"\x01\x08" + DIGEST + node, bk.run(message, 1, bits=bk.CHECKED_BITS))
    oracle_v = ORACLE_REGTEST(event)
    assert oracle_v.facts["bitcoin_block"]["height"] == 100
    assert oracle_v.facts["bitcoin_heights"] == [100, 300]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
        code = reduce_all([Entry(RECORD, verify_event(RECORD)), Entry(event, verify_event(event))])
    oracle = oracle_reduce_all([(RECORD, ORACLE_REGTEST(RECORD)), (event, oracle_v)])
    assert {s: canonical_bytes(d) for s, d in code.items()} == oracle
