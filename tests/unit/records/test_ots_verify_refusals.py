"""Each refusal of ``pithledger.verify_timestamp`` (``pithledger ots verify``, spec/events.md §3.1.2) in process, on
the real proof of hello-world.txt and the real header of block 358391: every ``ots-*`` code of spec/errors.md,
each case named after the mutation of the valid check it carries (issue #42 item 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers import bitcoinkit as bk
from helpers.common import FIXTURES
from pithledger import verify_timestamp
from pithledger.errors import OtsError
from pithledger.records import bitcoin, ots

OTS = FIXTURES / "ots"
PROOF = (OTS / "hello-world.txt.ots").read_bytes()
FILE = OTS / "hello-world.txt"
DIGEST = ots.parse(PROOF, strict=True).digest
HEADER = (OTS / "block-358391.header.hex").read_text().strip()
RAW = bytes.fromhex(HEADER)


def with_bits(raw: bytes, bits: int) -> str:
    return (raw[:72] + bits.to_bytes(4, "little") + raw[76:]).hex()


def test_the_real_proof_checks_against_the_real_header() -> None:
    for headers in ([f"358391:{HEADER}"], [HEADER], [f"358390:{HEADER[:-2]}00", HEADER]):
        check = verify_timestamp(PROOF, headers, digest=DIGEST)
        assert [(v.height, v.header.hash) for v in check.verified] == [
            (358391, "000000000000000003e892881a8cdcdc117c06d444057c98b6f04a9ee75a2319")
        ]
    assert verify_timestamp(PROOF, [HEADER], file=FILE).digest == DIGEST
    block = verify_timestamp(PROOF, [], digest=DIGEST, run=RAW).run
    assert block is not None and block.height == 358391 and block.work < bitcoin.MAINNET.min_work


REFUSALS: dict[str, tuple[Callable[[], Any], str]] = {
    "digest-of-another-file": (lambda: verify_timestamp(PROOF, [HEADER], digest=bytes(32)), "ots-digest-differs"),
    "proof-with-only-a-pending-attestation": (
        lambda: verify_timestamp(ots.build(DIGEST, ["https://a.example"]), [HEADER], digest=DIGEST),
        "ots-pending-only",
    ),
    "header-for-another-height": (
        lambda: verify_timestamp(PROOF, [f"358390:{HEADER}"], digest=DIGEST),
        "ots-no-header",
    ),
    "no-header": (lambda: verify_timestamp(PROOF, [], digest=DIGEST), "ots-no-header"),
    "header-of-another-block": (
        lambda: verify_timestamp(PROOF, [(RAW[:36] + bytes(32) + RAW[68:]).hex()], digest=DIGEST),
        "ots-merkle-root-differs",
    ),
    "header-with-a-changed-nonce": (
        lambda: verify_timestamp(PROOF, [(RAW[:76] + bytes(4)).hex()], digest=DIGEST),
        "ots-pow-short",
    ),
    "header-mined-at-regtest-difficulty": (
        lambda: verify_timestamp(PROOF, [bk.mine(b"\x00" * 32, RAW[36:68], 1432827678).hex()], digest=DIGEST),
        "ots-pow-short",
    ),
    "header-bits-negative": (
        lambda: verify_timestamp(PROOF, [with_bits(RAW, 0x04923456)], digest=DIGEST),
        "ots-bad-header",
    ),
    "header-bits-over-256-bits": (
        lambda: verify_timestamp(PROOF, [with_bits(RAW, 0xFF123456)], digest=DIGEST),
        "ots-bad-header",
    ),
    "header-bits-zero-target": (
        lambda: verify_timestamp(PROOF, [with_bits(RAW, 0x01003456)], digest=DIGEST),
        "ots-bad-header",
    ),
    "header-of-159-hex-digits": (lambda: verify_timestamp(PROOF, [HEADER[:-1]], digest=DIGEST), "ots-bad-header"),
    "header-not-hex": (lambda: verify_timestamp(PROOF, ["zz" * 80], digest=DIGEST), "ots-bad-header"),
    "header-height-2-to-the-32": (
        lambda: verify_timestamp(PROOF, [f"{2**32}:{HEADER}"], digest=DIGEST),
        "ots-bad-header",
    ),
    "header-height-not-digits": (lambda: verify_timestamp(PROOF, [f"-1:{HEADER}"], digest=DIGEST), "ots-bad-header"),
    "run-of-79-bytes": (lambda: verify_timestamp(PROOF, [], digest=DIGEST, run=RAW[:79]), "ots-bad-header"),
    "run-of-another-block": (
        lambda: verify_timestamp(PROOF, [], digest=DIGEST, run=RAW[:36] + bytes(32) + RAW[68:]),
        "ots-merkle-root-differs",
    ),
    "proof-truncated": (lambda: verify_timestamp(PROOF[:-1], [HEADER], digest=DIGEST), "malformed-ots-proof"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_each_refusal_gives_its_code(name: str) -> None:
    call, code = REFUSALS[name]
    with pytest.raises(OtsError if code == "malformed-ots-proof" else Exception) as caught:
        call()
    assert getattr(caught.value, "code", None) == code, (name, caught.value)


def test_the_highest_height_is_a_height() -> None:
    """``header-height-2-to-the-32`` one below: 2^32 - 1 is read (and answers for no attestation of this proof)."""
    assert bitcoin.parse_header_arg(f"{2**32 - 1}:{HEADER}") == (2**32 - 1, RAW)


def test_the_most_telling_reason_wins() -> None:
    """Several headers, several faults: a header of this block short of work is named before another block's."""
    other = (RAW[:36] + bytes(32) + RAW[68:]).hex()
    with pytest.raises(Exception) as caught:
        verify_timestamp(PROOF, [other, (RAW[:76] + bytes(4)).hex()], digest=DIGEST)
    assert getattr(caught.value, "code", None) == "ots-pow-short"


@pytest.mark.parametrize(
    "text, ok",
    [
        pytest.param(f"{HEADER}\r\n\n  {HEADER.upper()}\n", True, id="two-headers-with-crlf-and-a-blank-line"),
        pytest.param("", False, id="no-header"),
        pytest.param(HEADER[:-1] + "g", False, id="a-header-with-a-non-hex-digit"),
        pytest.param(HEADER + "00", False, id="a-header-of-162-digits"),
    ],
)
def test_headers_text(text: str, ok: bool) -> None:
    if ok:
        assert bitcoin.parse_headers_text(text) == RAW + RAW
    else:
        with pytest.raises(Exception) as caught:
            bitcoin.parse_headers_text(text)
        assert getattr(caught.value, "code", None) == "ots-bad-header"
