"""Every written limit of event validity at the limit (accepted) and one past it (refused with its code), on each
decoding path it applies to (issue #42 item 2): JSON (``pithledger.verify_bundle`` of bytes, by its compact and
its strict reading), the store's msgpack form (a real LMDB ledger: what ``apply`` logs and ``fsck`` reads back and
verifies again), and Pith's record document. The table in tests/README.md names each case."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from helpers import bitcoinkit as bk
from helpers.common import VECTORS
from helpers.eventkit import DIGEST, OTHER, anchor, event, replication, self_signer
from pithledger import verify_bundle
from pithledger.errors import BundleError, IntegerOutOfRange, NestingTooDeep, PithledgerError
from pithledger.records import bitcoin, ots
from pithledger.records.bundle import Bundle, read_bundle, write_bundle
from pithledger.records.canonical import MAX_DEPTH, MAX_SAFE_INTEGER, canonical_bytes, check_value, strict_decode
from pithledger.records.events import verify_event
from pithledger.store import Ledger

# --- the decoding paths --------------------------------------------------------------------------------


def through_json(e: dict[str, Any], *, pretty: bool = False) -> tuple[str, str]:
    """The verdict of ``e`` offered in a bundle's bytes: compact (msgspec's reading) or pretty (the strict one)."""
    bundle = write_bundle(e["subject_pith_number"], [e])
    data = json.dumps(bundle, indent=1).encode() if pretty else canonical_bytes(bundle)
    try:
        (v,) = verify_bundle(data)
    except PithledgerError as exc:
        return "refused", exc.code
    return v.status, v.reason


def through_the_store(tmp_path: Path, e: dict[str, Any]) -> tuple[str, str]:
    """The verdict of ``e`` applied to a real ledger; a valid one is logged (msgpack), read back and verified again
    from its logged bytes by ``fsck --reverify``, with the facts the log holds."""
    ledger = Ledger(tmp_path / "ledger", create=True)
    try:
        result = ledger.apply_batch([Bundle(pith_number=e["subject_pith_number"], events=[e])])
        if not result.new:
            (rejected,) = result.rejected
            return rejected.status, rejected.reason
        (entry,) = list(ledger.log())
        assert entry.event == canonical_bytes(e)
        assert verify_event(msgspec.json.decode(entry.event)).facts == entry.facts
        assert ledger.fsck(reverify=True) == []
        return "valid", ""
    finally:
        ledger.close()


def both(tmp_path: Path, e: dict[str, Any]) -> tuple[str, str]:
    """The one verdict JSON (both readings) and the store give ``e``."""
    verdicts = {through_json(e), through_json(e, pretty=True), through_the_store(tmp_path, e)}
    assert len(verdicts) == 1, verdicts
    return verdicts.pop()


# --- URL length ----------------------------------------------------------------------------------------


def url_of(length: int) -> str:
    head = "https://example.org/"
    return head + "a" * (length - len(head))


@pytest.mark.parametrize(
    "name, length, expected",
    [("url-of-2048-chars", 2048, ("valid", "")), ("url-of-2049-chars", 2049, ("invalid", "bad-payload"))],
    ids=["url-of-2048-chars", "url-of-2049-chars"],
)
def test_artifact_url_length(tmp_path: Path, name: str, length: int, expected: tuple[str, str]) -> None:
    assert both(tmp_path, replication(artifact_url=url_of(length))) == expected, name


# --- blanks: ASCII white space only --------------------------------------------------------------------

UNICODE_SPACES = {"nbsp": "\u00a0", "em-space": "\u2003", "ideographic-space": "\u3000", "nel": "\u0085"}
UNICODE_SPACES |= {"ogham-space-mark": "\u1680", "unit-separator": "\u001f", "line-separator": "\u2028"}
ASCII_BLANKS = {"space": " ", "tab": "\t", "lf": "\n", "vt": "\v", "ff": "\f", "cr": "\r"}


@pytest.mark.parametrize("space", sorted(UNICODE_SPACES))
@pytest.mark.parametrize("field", ["signer-id", "key-id", "author-name"])
def test_a_name_of_unicode_spaces_is_not_blank(tmp_path: Path, field: str, space: str) -> None:
    """``signer-id-of-nbsp-is-not-blank`` and its kin: only ASCII white space is blank (spec/events.md §2);
    str.strip()'s reading would refuse each of these."""
    text = UNICODE_SPACES[space] * 2
    if field == "author-name":
        e = event("author_attestation", {"author_name": text})
    else:
        payload = {"cited_pith_number": OTHER, "relation": "cites"}
        e = event("citation_signature", payload, signer=self_signer(**{field.replace("-", "_"): text}))
    assert both(tmp_path, e) == ("valid", ""), f"{field}-of-{space}-is-not-blank"


@pytest.mark.parametrize("blank", sorted(ASCII_BLANKS))
@pytest.mark.parametrize("field", ["signer-id", "key-id", "author-name"])
def test_a_name_of_ascii_blanks_is_blank(field: str, blank: str) -> None:
    text = " " + ASCII_BLANKS[blank]
    if field == "author-name":
        e, code = event("author_attestation", {"author_name": text}), "bad-payload"
    else:
        payload = {"cited_pith_number": OTHER, "relation": "cites"}
        e, code = (
            event("citation_signature", payload, signer=self_signer(**{field.replace("-", "_"): text})),
            "bad-envelope",
        )
    assert through_json(e) == ("invalid", code), f"{field}-of-{blank}-is-blank"


# --- nesting depth and the integer bound ---------------------------------------------------------------


def nested(kind: str, levels: int) -> Any:
    """``levels`` containers of ``kind`` ("object" or "array"), one inside the other."""
    value: Any = {} if kind == "object" else []
    for _ in range(levels - 1):
        value = {"a": value} if kind == "object" else [value]
    return value


# A bundle holds its event at depth 3 (bundle, events, event), the payload at 4, graph_snapshot at 5: a value of
# n levels there reaches depth 4 + n.
AT_LIMIT = MAX_DEPTH - 4


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("past", [0, 1], ids=["nested-to-max-depth", "nested-one-past-max-depth"])
def test_nesting_depth_in_a_bundle(tmp_path: Path, kind: str, past: int) -> None:
    """``object-nested-one-past-max-depth``, ``array-nested-one-past-max-depth``: refused by both JSON readings;
    at the limit the event is valid and logged, and verifies again from the log."""
    e = event("graph_snapshot", {"graph_snapshot": {"n": nested(kind, AT_LIMIT - 1 + past)}})
    if past:
        assert through_json(e) == through_json(e, pretty=True) == ("refused", "nesting-too-deep")
    else:
        assert both(tmp_path, e) == ("valid", "")


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("surrogate", [False, True], ids=["plain", "with-an-escaped-surrogate-pair"])
def test_nesting_depth_by_each_reading(kind: str, surrogate: bool) -> None:
    """strict_decode's compact and strict readings and check_value (which the strict reading runs on a document
    with a \\uD8xx escape, and make_event and Pith's document reading run) agree on the limit, for objects and
    arrays."""
    for levels, ok in ((MAX_DEPTH, True), (MAX_DEPTH + 1, False)):
        value = nested(kind, levels)
        if surrogate:
            value = {"s": "\U0001f600", "v": nested(kind, levels - 1)}
        compact = canonical_bytes(value)
        pretty = json.dumps(value, indent=1).encode()  # ensure_ascii: the emoji is a \ud83d\ude00 escape
        for data in (compact, pretty):
            if ok:
                assert strict_decode(data) == value
            else:
                with pytest.raises(NestingTooDeep):
                    strict_decode(data)
        if ok:
            check_value(value)
        else:
            with pytest.raises(NestingTooDeep):
                check_value(value)


@pytest.mark.parametrize("sign", [1, -1], ids=["positive", "negative"])
def test_the_integer_bound(tmp_path: Path, sign: int) -> None:
    """+/-(2**53 - 1) is valid through every path; 2**53 is refused by both JSON readings and check_value."""
    at = event("graph_snapshot", {"graph_snapshot": {"n": sign * MAX_SAFE_INTEGER}})
    assert both(tmp_path, at) == ("valid", "")
    past = event("graph_snapshot", {"graph_snapshot": {"n": sign * (MAX_SAFE_INTEGER + 1)}})
    assert through_json(past) == through_json(past, pretty=True) == ("refused", "integer-out-of-range")
    with pytest.raises(IntegerOutOfRange):
        check_value(past)
    deep = {"a": [{"b": [sign * (MAX_SAFE_INTEGER + 1)]}]}
    with pytest.raises(IntegerOutOfRange):
        check_value(deep)
    with pytest.raises(IntegerOutOfRange):
        strict_decode(canonical_bytes(deep))


def pith_document_with_receipt_nested(levels: int) -> dict[str, Any]:
    doc = json.loads((VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json").read_text())
    doc["receipt"]["junk"] = nested("array", levels)
    return doc


def test_nesting_depth_in_pith_record_document(tmp_path: Path) -> None:
    """Pith's envelope: the receipt lies at depth 2 in the document and 3 in its event; a receipt field of 61 levels
    makes an event of exactly 64 (valid, logged, verified again from the log), of 62 one of 65 (refused)."""
    doc = pith_document_with_receipt_nested(MAX_DEPTH - 3)
    bundle = read_bundle(strict_decode(canonical_bytes(doc)))
    (v,) = verify_bundle(canonical_bytes(doc))
    assert (v.status, v.reason) == ("valid", "")
    ledger = Ledger(tmp_path / "ledger", create=True)
    try:
        assert ledger.apply_batch([bundle]).new == 1
        assert ledger.fsck(reverify=True) == []
    finally:
        ledger.close()
    past = pith_document_with_receipt_nested(MAX_DEPTH - 2)
    with pytest.raises(BundleError, match="nests deeper than 64"):
        verify_bundle(canonical_bytes(past))
    with pytest.raises(BundleError, match="nests deeper than 64"):
        verify_bundle(json.dumps(past, indent=1).encode())


# --- OpenTimestamps bounds -----------------------------------------------------------------------------

BITCOIN, LITECOIN, ETHEREUM = (bytes.fromhex(t) for t in ("0588960d73d71901", "06869a0d73d71b45", "30fe8087b5c7ead7"))
PENDING = bytes.fromhex("83dfe30d2ef90c8e")


def vb(data: bytes) -> bytes:
    return ots._varbytes(data)


def vu(n: int) -> bytes:
    return ots._varuint_bytes(n)


def proof(timestamp: bytes) -> bytes:
    """A sha256 proof of the record's digest whose timestamp (the tree after the digest) is ``timestamp``."""
    return ots.MAGIC + b"\x01\x08" + DIGEST + timestamp


def attestation(tag: bytes, payload: bytes) -> bytes:
    return b"\x00" + tag + vb(payload)


def height(tag: bytes, h: bytes) -> bytes:
    return attestation(tag, h)


def padded_varuint(value: int, size: int) -> bytes:
    """``value`` as a varuint of ``size`` bytes (non-minimal: continuation bytes of zero bits)."""
    out = bytearray()
    for i in range(size):
        out.append((value >> (7 * i)) & 0x7F | (0x80 if i < size - 1 else 0))
    return bytes(out)


def appended(n: int) -> bytes:
    """Append ``n`` bytes to the digest, then a Bitcoin attestation: an operation reading 32 + ``n`` bytes."""
    return b"\xf0" + vb(b"\x01" * n) + height(BITCOIN, vu(1))


def forks(*branches: bytes) -> bytes:
    return b"".join(b"\xff" + b for b in branches[:-1]) + branches[-1]


OTS_LIMITS: dict[str, tuple[bytes, bytes]] = {  # name -> (at the limit, one past)
    "bitcoin-height-2-to-the-32": (
        height(BITCOIN, vu(ots.MAX_HEIGHT)),
        height(BITCOIN, vu(ots.MAX_HEIGHT + 1)),
    ),
    "litecoin-height-2-to-the-32": (
        height(LITECOIN, vu(ots.MAX_HEIGHT)),
        height(LITECOIN, vu(ots.MAX_HEIGHT + 1)),
    ),
    "ethereum-height-2-to-the-32": (
        height(ETHEREUM, vu(ots.MAX_HEIGHT)),
        height(ETHEREUM, vu(ots.MAX_HEIGHT + 1)),
    ),
    "varuint-of-9-bytes": (
        height(BITCOIN, padded_varuint(5, ots.MAX_VARUINT_BYTES)),
        height(BITCOIN, padded_varuint(5, ots.MAX_VARUINT_BYTES + 1)),
    ),
    "pending-uri-of-1001-bytes": (
        attestation(PENDING, vb(b"a" * ots.MAX_URI)),
        attestation(PENDING, vb(b"a" * (ots.MAX_URI + 1))),
    ),
    "attestation-payload-of-8193-bytes": (
        attestation(b"\x01" * 8, b"\x00" * 8192),
        attestation(b"\x01" * 8, b"\x00" * 8193),
    ),
    "append-result-of-4097-bytes": (
        b"\xf0" + vb(b"\x01" * (ots.MAX_RESULT - 32)) + height(BITCOIN, vu(1)),
        b"\xf0" + vb(b"\x01" * (ots.MAX_RESULT - 31)) + height(BITCOIN, vu(1)),
    ),
    "hexlify-of-2049-bytes": (
        b"\xf0" + vb(b"\x01" * (ots.MAX_HEXLIFY_MSG - 32)) + b"\xf3" + height(BITCOIN, vu(1)),
        b"\xf0" + vb(b"\x01" * (ots.MAX_HEXLIFY_MSG - 31)) + b"\xf3" + height(BITCOIN, vu(1)),
    ),
    "operations-nested-257-deep": (
        b"\xf2" * (ots.MAX_DEPTH - 1) + height(BITCOIN, vu(1)),
        b"\xf2" * ots.MAX_DEPTH + height(BITCOIN, vu(1)),
    ),
    "10001-nodes": (
        forks(*[height(BITCOIN, vu(1))] * ots.MAX_NODES),
        forks(*[height(BITCOIN, vu(1))] * (ots.MAX_NODES + 1)),
    ),
    # 31 appends reading 4096 bytes each (the digest and an argument of 4064), then two reading 2032 and 2064 or 2065:
    # every result within 4096, so only the total is past the limit
    "operations-reading-128-kib-and-1-byte": (
        forks(*[appended(4064)] * 31, appended(2000), appended(2032)),
        forks(*[appended(4064)] * 31, appended(2000), appended(2033)),
    ),
}


@pytest.mark.parametrize("name", sorted(OTS_LIMITS))
def test_ots_bounds(tmp_path: Path, name: str) -> None:
    at, past = OTS_LIMITS[name]
    assert ots.MAX_OPERATIONS_INPUT == 32 * 4096  # what the 128 KiB case is built on
    assert both(tmp_path, anchor(proof(at))) == ("valid", ""), name
    assert through_json(anchor(proof(past))) == ("invalid", "bad-proof"), name


def test_the_heights_reported_are_the_bitcoin_attestations(tmp_path: Path) -> None:
    e = anchor(proof(forks(height(BITCOIN, vu(ots.MAX_HEIGHT)), height(BITCOIN, vu(7)), height(LITECOIN, vu(9)))))
    assert verify_event(e).facts["bitcoin_heights"] == [7, ots.MAX_HEIGHT]


# --- the carried run of headers ------------------------------------------------------------------------

PROOF = ots.build(DIGEST, [], [900_000])
ROOT = bk.message_of(DIGEST, 0)


@pytest.fixture
def regtest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)


def headers_anchor(run: bytes, p: bytes = PROOF) -> dict[str, Any]:
    return anchor(p, bitcoin_headers_b64=base64.b64encode(run).decode())


def test_header_run_of_2016_is_checked_and_of_2017_refused(tmp_path: Path, regtest: None) -> None:
    """``header-run-of-2017``: the most headers an anchor may carry is 2016 (one retarget interval)."""
    run = bk.run(ROOT, bitcoin.RETARGET_INTERVAL, bits=bk.REGTEST_BITS)
    v = verify_event(headers_anchor(run))
    assert (v.status, v.reason) == ("valid", "")
    assert v.facts["bitcoin_block"] is None  # regtest bits: under REGTEST's minimum work, so claimed
    assert through_the_store(tmp_path, headers_anchor(run)) == ("valid", "")
    longer = run + bk.mine(bk.dsha(run[-80:]), b"\x05" * 32, bk.T0 + 600 * 2016)
    v = verify_event(headers_anchor(longer))
    assert (v.status, v.reason) == ("invalid", "bad-headers")
    assert "2016" in v.message


def test_a_run_ending_at_the_highest_height(regtest: None) -> None:
    """``run-past-block-2-to-the-32``: a run may reach block 2^32 - 1, not pass it."""
    p = ots.build(DIGEST, [], [ots.MAX_HEIGHT])
    one = bk.run(ROOT, 1, bits=bk.CHECKED_BITS)
    v = verify_event(headers_anchor(one, p))
    assert v.status == "valid" and v.facts["bitcoin_block"]["height"] == ots.MAX_HEIGHT
    v = verify_event(headers_anchor(bk.run(ROOT, 2, bits=bk.CHECKED_BITS), p))
    assert (v.status, v.reason) == ("invalid", "bad-headers") and "passes block" in v.message


def test_the_lowest_attested_height_is_the_blocks(tmp_path: Path, regtest: None) -> None:
    """``merkle-root-attested-at-two-heights``: one Merkle root attested at heights 900000 and 900005 checks as
    the lowest (the highest would move bitcoin_block.height); the same with the heights in the other order."""
    msg_tail = b"\xf0" + vb(b"\x00\x00\x00\x00") + b"\x08"  # append 4 zero bytes, sha256: bk.message_of(DIGEST, 0)
    for first, second in ((900_000, 900_005), (900_005, 900_000)):
        p = proof(msg_tail + forks(height(BITCOIN, vu(first)), height(BITCOIN, vu(second))))
        run = bk.run(ROOT, 2, bits=bk.CHECKED_BITS)
        e = headers_anchor(run, p)
        v = verify_event(e)
        assert v.status == "valid" and v.facts["bitcoin_block"]["height"] == 900_000
        assert v.facts["bitcoin_heights"] == [900_000, 900_005]
    assert through_the_store(tmp_path, e) == ("valid", "")


def test_the_minimum_work_is_asked_of_the_attested_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """``attested-block-one-hash-short-of-the-minimum-work``: a header of exactly the minimum checks; one unit of
    work short, the anchor is only claimed."""
    run = bk.run(ROOT, 1, bits=bk.CHECKED_BITS)  # work 256
    for min_work, checked in ((256, True), (257, False)):
        chain = bitcoin.Chain(name="t", pow_limit=bitcoin.REGTEST.pow_limit, retarget=False, min_work=min_work)
        monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", chain)
        block = verify_event(headers_anchor(run)).facts["bitcoin_block"]
        assert (block is not None) == checked, min_work
        if checked:
            assert block["work"] == "256" and block["run_work"] == "256"


# The retarget rule under mainnet's rules with a limit a test can mine under (2^255): bits change only where the
# next block's height is a multiple of 2016, and then make mining at most 4x easier.
HARD, EASY4, EASY4_PLUS = 0x2000FFFF, 0x2003FFFC, 0x2003FFFD  # targets t, exactly 4t, the next one above 4t


@pytest.fixture
def retargeting(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = bitcoin.Chain(name="test", pow_limit=2**255, retarget=True, min_work=1)
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", chain)


def two_headers(first_height: int, bits2: int) -> dict[str, Any]:
    p = ots.build(DIGEST, [], [first_height])
    a = bk.mine(b"\x00" * 32, ROOT, bk.T0, HARD)
    return headers_anchor(a + bk.mine(bk.dsha(a), b"\x01" * 32, bk.T0 + 600, bits2), p)


@pytest.mark.parametrize(
    "name, first_height, bits2, expected",
    [
        pytest.param(
            "retarget-4x-easier-at-block-2016", 2015, EASY4, ("valid", ""), id="retarget-4x-easier-at-block-2016"
        ),
        pytest.param(
            "retarget-more-than-4x-easier-at-block-2016",
            2015,
            EASY4_PLUS,
            ("invalid", "bad-headers"),
            id="retarget-more-than-4x-easier-at-block-2016",
        ),
        pytest.param(
            "retarget-4x-easier-at-block-4032", 4031, EASY4, ("valid", ""), id="retarget-4x-easier-at-block-4032"
        ),
        pytest.param(
            "retarget-harder-at-block-2016", 2015, 0x1F7FFFFF, ("valid", ""), id="retarget-harder-at-block-2016"
        ),
        pytest.param("retarget-at-block-2017", 2016, EASY4, ("invalid", "bad-headers"), id="retarget-at-block-2017"),
        pytest.param("retarget-at-block-2015", 2014, EASY4, ("invalid", "bad-headers"), id="retarget-at-block-2015"),
        pytest.param("same-bits-at-block-2017", 2016, HARD, ("valid", ""), id="same-bits-at-block-2017"),
    ],
)
def test_the_retarget_rule(retargeting: None, name: str, first_height: int, bits2: int, expected: Any) -> None:
    v = verify_event(two_headers(first_height, bits2))
    assert (v.status, v.reason) == expected, (name, v.message)


def test_the_retarget_rule_through_the_store(tmp_path: Path, retargeting: None) -> None:
    assert through_the_store(tmp_path, two_headers(2015, EASY4)) == ("valid", "")
    assert through_the_store(tmp_path, two_headers(2015, EASY4_PLUS)) == ("invalid", "bad-headers")


@pytest.mark.parametrize(
    "name, value, code",
    [
        pytest.param("integer-of-2-to-the-53", 2**53, "integer-out-of-range", id="integer-of-2-to-the-53"),
        pytest.param("object-nested-65-deep", nested("object", AT_LIMIT), "nesting-too-deep", id="object-nested-65"),
        pytest.param("lone-surrogate", "\udc80", "lone-surrogate", id="lone-surrogate"),
    ],
)
def test_a_decoded_bundle_is_held_to_the_limits_its_bytes_are(name: str, value: Any, code: str) -> None:
    """``pithledger.verify_bundle`` of a decoded value (the API's other form) refuses what the same bundle as bytes
    is refused for, with its code; before, it gave a valid verdict past the integer bound and the depth limit, and
    a UnicodeEncodeError for a lone surrogate."""
    e = event("graph_snapshot", {"graph_snapshot": {"n": 1}})
    e["payload"]["graph_snapshot"]["n"] = value  # after signing: the value has no canonical bytes to sign
    bundle = write_bundle(e["subject_pith_number"], [e])
    with pytest.raises(PithledgerError) as caught:
        verify_bundle(bundle)
    assert caught.value.code == code, name
    assert verify_bundle(write_bundle(e["subject_pith_number"], [event("graph_snapshot", {"graph_snapshot": {}})]))
