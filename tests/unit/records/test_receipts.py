"""Pith receipt signatures verify against the built-in registry key; any flipped bit fails."""

from __future__ import annotations

import base64

import pytest

from helpers.common import PITH_RECEIPTS
from pithledger.errors import BadEncoding, UnknownKey, VerificationFailed
from pithledger.records import keys

PITH_KEY = keys.PITH_REGISTRY_KEYS["pith-v1-2026-05"]


def test_registry_key_fingerprints_match_the_published_manifest() -> None:
    # ../shared/reference/pith-pages/pith-mirrors.json.txt
    assert PITH_KEY.public_key.hex() == "b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3"
    assert keys.fingerprint_hex(PITH_KEY.public_key) == "8d4b5ee74e4693bcd1df2446408b0d54"
    assert keys.fingerprint_b32(PITH_KEY.public_key) == "RVFV5Z2OI2J3ZUO7ERDEBCYNKS"


@pytest.mark.parametrize("vector", PITH_RECEIPTS, ids=[v["pith_suffix"] for v in PITH_RECEIPTS])
def test_real_receipt_verifies_over_the_raw_digest(vector: dict[str, str]) -> None:
    digest = bytes.fromhex(vector["canonical_sha256"])
    sig = base64.b64decode(vector["signature_b64"])
    assert keys.verify_receipt_signature(digest, sig, vector["key_id"]) is PITH_KEY
    assert keys.verify_receipt_signature(digest, sig) is PITH_KEY
    # The signature covers the 32 raw bytes, not the 64-character hex text.
    assert not keys.signature_ok(PITH_KEY.public_key, vector["canonical_sha256"].encode(), sig)


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@pytest.mark.parametrize("bit", [0, 7, 100, 255])
def test_flipped_bit_in_digest_fails(bit: int) -> None:
    v = PITH_RECEIPTS[0]
    with pytest.raises(VerificationFailed):
        keys.verify_receipt_signature(
            _flip(bytes.fromhex(v["canonical_sha256"]), bit), base64.b64decode(v["signature_b64"])
        )


@pytest.mark.parametrize("bit", [0, 255, 256, 511])
def test_flipped_bit_in_signature_fails(bit: int) -> None:
    v = PITH_RECEIPTS[1]
    with pytest.raises(VerificationFailed):
        keys.verify_receipt_signature(
            bytes.fromhex(v["canonical_sha256"]), _flip(base64.b64decode(v["signature_b64"]), bit)
        )


def test_signature_of_another_record_fails() -> None:
    a, b = PITH_RECEIPTS[0], PITH_RECEIPTS[1]
    with pytest.raises(VerificationFailed):
        keys.verify_receipt_signature(bytes.fromhex(a["canonical_sha256"]), base64.b64decode(b["signature_b64"]))


def test_unknown_key_id_is_named() -> None:
    v = PITH_RECEIPTS[0]
    with pytest.raises(UnknownKey, match="pith-v9"):
        keys.verify_receipt_signature(
            bytes.fromhex(v["canonical_sha256"]), base64.b64decode(v["signature_b64"]), "pith-v9"
        )


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("not base64!", 64),
        ("AAAA", 64),  # valid base64, wrong length
        (PITH_RECEIPTS[0]["signature_b64"].rstrip("="), 64),  # padding missing
        (PITH_RECEIPTS[0]["signature_b64"][:-3] + "B==", 64),  # non-zero pad bits: a second spelling
        (" " + PITH_RECEIPTS[0]["signature_b64"], 64),
    ],
    ids=["not-base64", "wrong-length", "missing-padding", "non-canonical-pad-bits", "leading-space"],
)
def test_base64_is_accepted_in_one_form_only(text: str, length: int) -> None:
    with pytest.raises(BadEncoding):
        keys.b64decode_strict(text, length=length)


@pytest.mark.parametrize("text", ["", "ABC", "G" * 64, "A" * 64, "a" * 63])
def test_digest_must_be_64_lowercase_hex(text: str) -> None:
    with pytest.raises(BadEncoding):
        keys.digest_from_hex(text)


def test_non_zero_pad_bits_decode_leniently_elsewhere_but_not_here() -> None:
    sig = PITH_RECEIPTS[0]["signature_b64"]
    assert sig.endswith("A==")
    twin = sig[:-3] + "B=="
    assert base64.b64decode(twin) == base64.b64decode(sig)  # the same bytes under a second spelling
    with pytest.raises(BadEncoding, match="canonical"):
        keys.b64decode_strict(twin, length=64)
