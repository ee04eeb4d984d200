"""A timestamp_anchor's carried Bitcoin headers (spec/events.md §3.1.3): what makes an anchor checked, claimed
or invalid. Cases are named after the mutation they carry. Headers are mined here at regtest difficulty and
checked under REGTEST put in place of MAINNET for the test, as the registry key is in others; the mainnet cases
use the real header of block 358391 and show that regtest headers never pass mainnet's rules."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from helpers import bitcoinkit as bk
from helpers.common import FIXTURES
from helpers.eventpool import ALICE, IDS, P
from pithledger.errors import OtsBadHeader, OtsMerkleRootDiffers, OtsPowShort
from pithledger.merge import Entry, reduce
from pithledger.records import bitcoin, keys, ots
from pithledger.records.events import compute_event_id, make_event, signing_message, verify_event

DIGEST = bytes.fromhex(IDS[0].canonical_sha256)
PROOF = ots.build(DIGEST, ["https://a.example"], [900_000])  # branch 1: the Bitcoin attestation
ROOT = bk.message_of(DIGEST, 1)
WHEN = "2026-06-02T00:00:00Z"
# block 358391 (opentimestamps-client examples/hello-world.txt.ots); its double SHA-256 is the block hash
HEADER_358391 = bytes.fromhex(
    "02000000b96394585a281b7e5f438fd1c9ed492645a1fd61cb3802040000000000000000007ee445d23ad061af4a36b809501fab1ac4"
    "f2d7e7a739817dd0cbb7ec661b8a1e376755f58616186272def6"
)


@pytest.fixture
def regtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)


def anchor(run: bytes | None, proof: bytes = PROOF, **extra: Any) -> dict[str, Any]:
    """A signed anchor, valid or not (make_event refuses to sign an invalid one)."""
    payload: dict[str, Any] = {"ots_proof_b64": base64.b64encode(proof).decode()}
    if run is not None:
        payload["bitcoin_headers_b64"] = base64.b64encode(run).decode()
    event = make_event("timestamp_anchor", P[0], {"ots_proof_b64": payload["ots_proof_b64"]}, ALICE, created_at=WHEN)
    event["payload"] = payload | extra
    del event["event_id"], event["signature_b64"]
    event["signature_b64"] = keys.b64encode(ALICE.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


def relink(run: bytes, at: int, raw: bytes) -> bytes:
    """``run`` with header ``at`` replaced by ``raw`` and every later header re-mined onto it."""
    headers = [run[i : i + 80] for i in range(0, len(run), 80)]
    headers[at] = raw
    for i in range(at + 1, len(headers)):
        h = headers[i]
        headers[i] = bk.mine(
            bk.dsha(headers[i - 1]), h[36:68], int.from_bytes(h[68:72], "little"), int.from_bytes(h[72:76], "little")
        )
    return b"".join(headers)


def test_checked_on_regtest(regtest: None) -> None:
    run = bk.run(ROOT, 3, bits=bk.CHECKED_BITS)
    v = verify_event(anchor(run))
    assert v.status == "valid"
    block = v.facts["bitcoin_block"]
    assert block == {
        "block_hash": bk.dsha(run[:80])[::-1].hex(),
        "headers": 3,
        "height": 900_000,
        "run_work": "768",
        "time": "2026-05-28T20:26:40Z",
        "work": "256",
    }
    assert verify_event(anchor(run[:80])).facts["bitcoin_block"]["headers"] == 1  # one header of enough work
    state = reduce(P[0], [Entry(anchor(run), v)])  # pending record: the view is listed once it is present
    assert state["record_status"] == "pending"


def test_below_the_minimum_work_is_claimed_not_checked(regtest: None) -> None:
    """The minimum is asked of the attested block's own header (each forged block costs it, ADR 0017): 2016 headers
    of 2 work each (4032 in all) do not make up for an attested header of 2 < 128."""
    v = verify_event(anchor(bk.run(ROOT, 64)))
    assert v.status == "valid" and v.facts["bitcoin_block"] is None and v.facts["bitcoin_heights"] == [900_000]


def test_no_headers_is_claimed() -> None:
    v = verify_event(anchor(None))
    assert v.status == "valid" and v.facts["bitcoin_block"] is None
    assert verify_event(anchor(None, bitcoin_headers_b64=None)).facts["bitcoin_block"] is None


@pytest.mark.parametrize(
    "name, run, words",
    [
        (
            "wrong-merkle-root",
            lambda: bk.run(hashlib.sha256(b"another block").digest(), 8, bits=bk.CHECKED_BITS),
            "no Bitcoin attestation",
        ),
        (
            "pending-branch-root",
            lambda: bk.run(bk.message_of(DIGEST, 0), 8, bits=bk.CHECKED_BITS),
            "no Bitcoin attestation",
        ),
        (
            "unlinked-header",
            lambda: bk.run(ROOT, 8, bits=bk.CHECKED_BITS, unlink_at=3),
            "does not link",
        ),
        (
            "difficulty-changes-without-a-retarget",
            lambda: (lambda r: relink(r, 4, bk.mine(bk.dsha(r[240:320]), r[320 + 36 : 320 + 68], bk.T0, 0x207FFFFE)))(
                bk.run(ROOT, 8, bits=bk.CHECKED_BITS)
            ),
            "changes the difficulty",
        ),
        (
            "changed-nonce",
            lambda: (lambda r: r[:76] + _failing_nonce(r[:76]) + r[80:])(bk.run(ROOT, 8, bits=bk.CHECKED_BITS)),
            "above its target",
        ),
        ("truncated-header", lambda: bk.run(ROOT, 8, bits=bk.CHECKED_BITS)[:-1], "bytes"),
        ("empty-run", lambda: b"", "bytes"),
        ("more-than-2016-headers", lambda: bk.run(ROOT, 1, bits=bk.CHECKED_BITS) * 2017, "2016"),
    ],
)
def test_bad_headers_make_the_event_invalid(regtest: None, name: str, run: Any, words: str) -> None:
    v = verify_event(anchor(run()))
    assert (v.status, v.reason) == ("invalid", "bad-headers"), name
    assert words in v.message, v.message


def _failing_nonce(prefix: bytes) -> bytes:
    target = bitcoin.target_of(int.from_bytes(prefix[72:76], "little"))
    for nonce in range(1000):
        if int.from_bytes(bk.dsha(prefix + nonce.to_bytes(4, "little")), "little") > target:
            return nonce.to_bytes(4, "little")
    raise AssertionError("no failing nonce")


def test_non_canonical_base64_headers(regtest: None) -> None:
    good = base64.b64encode(bk.run(ROOT, 8, bits=bk.CHECKED_BITS)).decode()
    v = verify_event(anchor(None, bitcoin_headers_b64=good + "\n"))
    assert (v.status, v.reason) == ("invalid", "bad-headers")


def test_headers_of_the_wrong_type_are_a_bad_payload() -> None:
    v = verify_event(anchor(None, bitcoin_headers_b64=["00" * 80]))
    assert (v.status, v.reason) == ("invalid", "bad-payload")


def test_regtest_headers_never_pass_mainnet() -> None:
    """Without the test's substitution the chain is mainnet: a header at regtest difficulty is short of work."""
    assert bitcoin.CONSENSUS_CHAIN is bitcoin.MAINNET
    v = verify_event(anchor(bk.run(ROOT, 8, bits=bk.CHECKED_BITS)))
    assert (v.status, v.reason) == (
        "invalid",
        "bad-headers",
    ) and "easier than the chain's proof-of-work limit" in v.message


def test_the_real_block_358391_checks_under_mainnet_but_is_short_of_the_minimum_work() -> None:
    """hello-world.txt.ots against its real block: the run checks (hash, time, work), and one 2015 block's work
    (~2^67.5) is far below mainnet's minimum (2^78), so an anchor carrying only it stays claimed."""
    proof = ots.parse((FIXTURES / "ots" / "hello-world.txt.ots").read_bytes(), strict=True)
    block = bitcoin.check_run(proof, HEADER_358391, bitcoin.MAINNET)
    assert block.height == 358391 and block.headers == 1
    assert block.header.hash == "000000000000000003e892881a8cdcdc117c06d444057c98b6f04a9ee75a2319"
    assert block.header.time == 1432827678
    assert block.work == 2**256 // (0x1686F5 * 2 ** (8 * (0x18 - 3)) + 1)
    assert 2**67 < block.work < bitcoin.MAINNET.min_work
    with pytest.raises(OtsPowShort, match="above its target"):
        bitcoin.check_run(proof, HEADER_358391[:76] + b"\x00\x00\x00\x00", bitcoin.MAINNET)  # changed nonce


def test_a_regtest_header_with_the_real_merkle_root_is_refused_by_mainnet() -> None:
    """Anyone can mine a header carrying the right Merkle root at regtest difficulty in a second."""
    proof = ots.parse((FIXTURES / "ots" / "hello-world.txt.ots").read_bytes(), strict=True)
    fake = bk.mine(b"\x00" * 32, HEADER_358391[36:68], 1432827678)
    with pytest.raises(OtsPowShort):
        bitcoin.check_run(proof, fake, bitcoin.MAINNET)
    assert bitcoin.check_run(proof, fake, bitcoin.REGTEST).height == 358391


def test_mainnet_retargets_only_at_a_multiple_of_2016_and_at_most_4x_easier() -> None:
    """The retarget rule, on a chain with mainnet's rules but a limit a test can mine under (2^255)."""
    chain = bitcoin.Chain(name="test", pow_limit=2**255, retarget=True, min_work=1)
    proof = ots.parse(ots.build(DIGEST, [], [2015]), strict=True)  # its second header is block 2016
    root = bk.message_of(DIGEST, 0)
    hard, easy4, easy5 = 0x2000FFFF, 0x2003FFFC, 0x2004FFFB  # targets t, ~4t, ~5t

    def two(bits2: int, first_height_bits: int = hard) -> bytes:
        a = bk.mine(b"\x00" * 32, root, bk.T0, first_height_bits)
        return a + bk.mine(bk.dsha(a), b"\x01" * 32, bk.T0 + 600, bits2)

    assert bitcoin.check_run(proof, two(easy4), chain).headers == 2
    with pytest.raises(OtsPowShort, match="more than a retarget allows"):
        bitcoin.check_run(proof, two(easy5), chain)
    proof_mid = ots.parse(ots.build(DIGEST, [], [2000]), strict=True)  # no boundary between 2000 and 2001
    with pytest.raises(OtsPowShort, match="changes the difficulty"):
        bitcoin.check_run(proof_mid, two(easy4), chain)
    with pytest.raises(OtsMerkleRootDiffers):
        bitcoin.check_run(proof, two(easy4)[80:], chain)
    with pytest.raises(OtsBadHeader, match="bytes"):
        bitcoin.check_run(proof, b"\x00" * 79, chain)
