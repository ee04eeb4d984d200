"""Adversarial review of pithledger-merge-v3's checked anchors (issue #34, spec/events.md §3.1.3, ADR 0017).

Each test names one finding. A failing one is marked ``xfail(strict=True)`` with the reason; the rest pin a fix.
Headers are mined at regtest difficulty and checked under REGTEST put in place of MAINNET, as the other anchor
tests do (tests/unit/records/test_anchor_headers.py)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from helpers import bitcoinkit as bk
from helpers.eventpool import ALICE, IDS, P
from helpers.pagekit import _state, _view
from pithledger.records import bitcoin, events, keys, ots
from pithledger.records.events import make_event, verify_event
from pithledger.render import pages

HEIGHT = 900_000
BTC = bytes.fromhex("0588960d73d71901")


@pytest.fixture
def regtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)


def _varbytes(b: bytes) -> bytes:
    assert len(b) < 128
    return bytes([len(b)]) + b


def _proof(digest: bytes, path: bytes, height: int = HEIGHT) -> bytes:
    """A sha256 proof of ``digest``: the operations ``path``, then one Bitcoin attestation at ``height``."""
    return ots.MAGIC + b"\x01\x08" + digest + path + b"\x00" + BTC + _varbytes(ots._varuint_bytes(height))


def _anchor(i: int, proof: bytes, run: bytes) -> dict[str, Any]:
    """Record i's anchor, signed (make_event signs only a valid event: the run must check)."""
    payload = {"ots_proof_b64": base64.b64encode(proof).decode(), "bitcoin_headers_b64": base64.b64encode(run).decode()}
    return make_event("timestamp_anchor", P[i], payload, ALICE, created_at="2026-06-02T00:00:00Z")


def _work(run: bytes) -> int:
    return sum(bitcoin.check_header(run[i : i + 80], bitcoin.REGTEST.pow_limit).work for i in range(0, len(run), 80))


# --- finding 1 (design, ADR 0017): the minimum must cost a forger per forged block, not per window of headers ----


def _one_run_for_a_batch(bits: int) -> tuple[list[dict[str, Any]], int]:
    """Two records in one Merkle tree under one mined block: sha256(D0 || D1) is its Merkle root."""
    d0, d1 = (bytes.fromhex(IDS[i].canonical_sha256) for i in (0, 1))
    run = bk.run(hashlib.sha256(d0 + d1).digest(), 1, bits=bits)
    events = [
        _anchor(0, _proof(d0, b"\xf0" + _varbytes(d1) + b"\x08"), run),  # append D1, sha256
        _anchor(1, _proof(d1, b"\xf1" + _varbytes(d0) + b"\x08"), run),  # prepend D0, sha256
    ]
    return events, _work(run)


def _a_sliding_window(bits: int) -> tuple[list[dict[str, Any]], int]:
    """A private chain of 9 headers, each committing to a new record, each record's run the 8 headers from its own:
    under a minimum on the run's total, every header mined after the first 8 anchored one more record cheaply."""
    d0, d1 = (bytes.fromhex(IDS[i].canonical_sha256) for i in (0, 1))
    r0, r1 = (hashlib.sha256(d).digest() for d in (d0, d1))
    chain, prev = b"", b"\x11" * 32
    for i, root in enumerate([r0, r1] + [hashlib.sha256(b"filler %d" % i).digest() for i in range(7)]):
        raw = bk.mine(prev, root, bk.T0 + 600 * i, bits)
        chain, prev = chain + raw, bk.dsha(raw)
    events = [
        _anchor(0, _proof(d0, b"\x08", HEIGHT), chain[:640]),
        _anchor(1, _proof(d1, b"\x08", HEIGHT + 1), chain[80:720]),
    ]
    return events, _work(chain)


@pytest.mark.parametrize("build", [_one_run_for_a_batch, _a_sliding_window], ids=["batch", "sliding-window"])
def test_every_checked_anchor_names_a_block_that_itself_carries_the_minimum_work(
    regtest: None, monkeypatch: pytest.MonkeyPatch, build: Any
) -> None:
    """The finding: a minimum on a run's total let a private chain anchor one record per cheap header. Now it is
    asked of the attested block's own header, so every forged block costs the minimum (one block may still hold
    many digests, as a calendar's does: the cost is per block, ADR 0017). Cheap headers: every anchor stays claimed,
    however many headers follow; headers of enough work each: they check, and each names its own block."""
    with monkeypatch.context() as m:  # signed where the cheap runs would have checked under a minimum of 16 in all
        m.setattr(bitcoin, "CONSENSUS_CHAIN", msgspec.structs.replace(bitcoin.REGTEST, min_work=2))
        cheap, _ = build(bk.REGTEST_BITS)
    assert [verify_event(e).facts["bitcoin_block"] for e in cheap] == [None] * len(cheap)
    costly, _ = build(bk.CHECKED_BITS)
    blocks = [verify_event(e).facts["bitcoin_block"] for e in costly]
    assert all(b is not None and int(b["work"]) >= bitcoin.REGTEST.min_work for b in blocks), blocks


# --- finding 2 (page, spec/serve.md §5 item 5): a claimed timestamp says how to have it checked ----------------


def _rows(html: str) -> dict[str, tuple[str, str]]:
    section = html.split("<h2>Record completeness</h2>", 1)[1].split("</ol>", 1)[0]
    return {m[2]: (m[1], m[3]) for m in re.finditer(r'<li class="(\w+)" data-item="([^"]+)">(.*?)</li>', section, re.S)}


def test_a_claimed_timestamp_row_says_how_to_carry_the_headers() -> None:
    """spec/serve.md §5: "An open row (and a pending or claimed timestamp) says how to complete it" and the claimed
    one's how-to "says how to carry them: --headers"; the page dropped every claimed row's how-to, so
    _howto_anchor's "claimed" branch was never shown."""
    claimed = _view(
        "timestamp_anchor",
        {},
        anchor_state="claimed",
        bitcoin_block=None,
        bitcoin_heights=[840000],
        pending_calendars=[],
    )
    state = _state(timestamp_anchors=[claimed])
    state["current"]["badges"]["timestamp"] = "bitcoin anchor claimed"
    html = pages.record_page(state, pages.RecordFacts(receipts=[], signers=[]), None, pages.Links(), mirror="m")
    level, text = _rows(html)["Bitcoin timestamp"]
    assert level == "claimed"
    assert 'class="howto"' in text and "--headers headers.txt" in text, text
    assert "getblockheader HASH false" in text


# --- finding 3 (consensus, portability): the time fact must not depend on the platform's time_t ---------------


class _Datetime32(datetime.datetime):
    """datetime as on a platform whose time_t is 32 bits (e.g. Debian bookworm armhf/i386): CPython's
    fromtimestamp refuses a time past 2038-01-19T03:14:07Z there."""

    @classmethod
    def fromtimestamp(cls, t: float, tz: datetime.tzinfo | None = None) -> Any:  # type: ignore[override]
        if t > 2**31 - 1:
            raise OverflowError("timestamp out of range for platform time_t")
        return super().fromtimestamp(t, tz)


def test_the_header_time_fact_is_computed_without_the_platform_time_t(
    regtest: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header's time is a uint32 (to 2106); bitcoin_block.time is consensus bytes. Read through
    datetime.fromtimestamp, a mirror with a 32-bit time_t raises OverflowError (not an EventInvalid: it escapes
    verify_event) on any checked anchor timed after 2038, where a 64-bit mirror accepts it: mirrors would disagree
    or crash. Pure arithmetic from the epoch gives the same string everywhere."""
    d0 = bytes.fromhex(IDS[0].canonical_sha256)
    when = 2**31 + 1  # 2038-01-19T03:14:09Z
    event = _anchor(0, _proof(d0, b"\x08"), bk.run(hashlib.sha256(d0).digest(), 8, time=when, bits=bk.CHECKED_BITS))
    monkeypatch.setattr(events.datetime, "datetime", _Datetime32)
    v = verify_event(event)
    assert v.status == "valid" and v.facts["bitcoin_block"]["time"] == "2038-01-19T03:14:09Z"


# --- finding 4 (cost): a proof's operations are bounded in the bytes they read ---------------------------------


@pytest.mark.parametrize("signature", ["garbage", "valid"])
def test_a_costly_proof_is_refused_within_a_bound_of_operation_input(
    monkeypatch: pytest.MonkeyPatch, signature: str
) -> None:
    """The finding: since merge v3 every operation is executed, and ~80 KB of forks over a 4 KiB message made ~5,000
    Keccak-256 of 4 KiB (~150 ms) before the signature was even checked. Checking the signature first would not
    help: a self-signed key costs nothing. The bound is on the work itself: the operations of one proof read at
    most 128 KiB (ots.MAX_OPERATIONS_INPUT, spec/events.md §3.1.1), so the proof is refused after ~40 of them."""
    d0 = bytes.fromhex(IDS[0].canonical_sha256)
    calls: list[int] = []
    real = ots._apply
    monkeypatch.setattr(ots, "_apply", lambda *a: calls.append(a[0]) or real(*a))
    attestation = b"\x00" + bytes(8) + b"\x00"  # an unknown attestation with an empty payload
    costly = ots.MAGIC + b"\x01\x08" + d0 + b"\xf3" * 7 + (b"\xff\x67" + attestation) * 4990 + attestation
    good = make_event(
        "timestamp_anchor",
        P[0],
        {"ots_proof_b64": base64.b64encode(ots.build(d0, ["https://a.example"])).decode()},
        ALICE,
        created_at="2026-06-02T00:00:00Z",
    )
    forged = {k: v for k, v in good.items() if k not in ("event_id", "signature_b64")}
    forged["payload"] = {"ots_proof_b64": base64.b64encode(costly).decode()}
    forged["signature_b64"] = (
        base64.b64encode(bytes(64)).decode()
        if signature == "garbage"
        else keys.b64encode(ALICE.sign(events.signing_message(forged)))
    )
    forged["event_id"] = events.compute_event_id(forged)
    calls.clear()
    v = verify_event(forged)
    assert (v.status, v.reason) == ("invalid", "bad-signature" if signature == "garbage" else "bad-proof")
    assert len(calls) < 45, f"{len(calls)} operations executed"
    with pytest.raises(ots.OtsError, match=f"read more than {ots.MAX_OPERATIONS_INPUT} bytes"):
        ots.parse(costly, strict=True)


# --- round 2 (held): pinned so they stay held ---------------------------------------------------------------------


def test_headers_naming_an_attestation_only_in_a_dropped_branch_are_bad_headers(regtest: None) -> None:
    """A repeated operation at one fork: the later branch replaces the earlier (spec/events.md §3.1.1), so a Bitcoin
    attestation only in the earlier one is no attestation of the proof; headers committing to its result are false
    evidence, not a checked anchor."""
    d0 = bytes.fromhex(IDS[0].canonical_sha256)
    append_x = b"\xf0\x01\x78"
    bitcoin_att = b"\x00" + BTC + _varbytes(bytes([0xA0, 0xF7, 0x36]))  # height 900_000
    pending = b"\x00" + bytes.fromhex("83dfe30d2ef90c8e") + _varbytes(_varbytes(b"https://a"))
    proof = ots.MAGIC + b"\x01\x08" + d0 + b"\xff" + append_x + b"\x08" + bitcoin_att + append_x + b"\x08" + pending
    assert [c.attestation.kind for c in ots.parse(proof, strict=True).commitments] == ["pending"]
    run = bk.run(hashlib.sha256(d0 + b"\x78").digest(), 2, bits=bk.CHECKED_BITS)
    with pytest.raises(events.EventInvalid, match="no Bitcoin attestation's result"):
        _anchor(0, proof, run)


def _set_compact(bits: int) -> tuple[int, bool, bool]:
    """Bitcoin Core's arith_uint256::SetCompact: (value mod 2^256, negative, overflow)."""
    size, word = bits >> 24, bits & 0x007FFFFF
    if size <= 3:
        word >>= 8 * (3 - size)
        value = word
    else:
        value = (word << 8 * (size - 3)) % 2**256
    negative = word != 0 and bool(bits & 0x00800000)
    overflow = word != 0 and (size > 34 or (word > 0xFF and size > 33) or (word > 0xFFFF and size > 32))
    return value, negative, overflow


def test_compact_targets_are_read_as_bitcoin_core_reads_them() -> None:
    """CheckProofOfWork's refusals (negative, zero, overflow, above the limit) and its target, on every exponent with
    mantissas at each edge, and on seeded random bits."""
    import random

    rng = random.Random(34)
    edges = (0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFF, 0x800000, 0x800001, 0xFFFFFF)
    for bits in [e << 24 | m for e in range(256) for m in edges] + [rng.getrandbits(32) for _ in range(20_000)]:
        value, negative, overflow = _set_compact(bits)
        core = None if negative or overflow or value == 0 else value
        try:
            ours = bitcoin.target_of(bits) or None
        except bitcoin.OtsBadHeader:
            ours = None
        assert ours == core, hex(bits)


# --- round 2, finding (cost, low): a 1 MiB bound was ~90x the largest real proof's reading; it is 128 KiB now ----


def test_a_small_proof_cannot_make_its_operations_read_a_hundred_times_its_size() -> None:
    d0 = bytes.fromhex(IDS[0].canonical_sha256)
    unknown = b"\x00" + bytes(8) + b"\x00"
    bitcoin_att = b"\x00" + BTC + _varbytes(bytes([0xA0, 0xF7, 0x36]))
    costly = ots.MAGIC + b"\x01\x08" + d0 + b"\xff\x08" + bitcoin_att + b"\xf3" * 7 + (b"\xff\x67" + unknown) * 250
    costly += unknown
    assert len(costly) < 3200
    with pytest.raises(ots.OtsError, match="operations read more than"):
        ots.parse(costly, strict=True)


# --- round 2, finding (docs, low): SECURITY.md still said v2's words about anchors ------------------------------


def test_security_md_says_what_a_checked_anchor_means_under_merge_v3() -> None:
    """SECURITY.md ("What pithledger does not defend against") said pithledger "does not check anchors against the
    Bitcoin chain; it reports what is claimed" (v2), and its threat table had no row for forged headers: a reader of
    the security model learnt neither that `anchored in bitcoin` exists nor what it costs a forger (2^78 per block)."""
    from helpers.common import ROOT

    text = (ROOT / "SECURITY.md").read_text()
    assert "it reports what is claimed." not in text
    assert "2^78" in text and "bitcoin_headers_b64" in text and "bad-headers" in text
    for name in re.findall(r"tests/unit/records/test_anchor_review\.py::(\w+)", text):
        assert f"def {name}(" in Path(__file__).read_text(), name
