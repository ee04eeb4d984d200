"""Canonical JSON and strict decoding.

The canonical bytes must equal Pith's json.dumps form over the whole admitted value space, and every
way an input can be ambiguous or hostile is rejected with its own named error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pithledger import errors
from pithledger.canonical import (
    MAX_SAFE_INTEGER,
    canon_text,
    canonical_bytes,
    check_value,
    strict_decode,
    text_sha256,
)

from conftest import FIXTURES, TEXT_CANON


def pith_canon(value: Any) -> bytes:
    """Pith's published form (PITH-FORMAT §1), the reference our encoder must match."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# Every Unicode scalar value (surrogates excluded: they are not characters and never admitted).
text = st.text(st.characters(codec="utf-8"), max_size=20)
scalars = st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | text
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


@given(values)
def test_canonical_bytes_equal_pith_json_dumps_form(value: Any) -> None:
    assert canonical_bytes(value) == pith_canon(value)


@given(values)
def test_canonical_bytes_decode_strictly_back_to_the_same_value(value: Any) -> None:
    assert strict_decode(canonical_bytes(value)) == value
    check_value(value)


@given(st.dictionaries(text, st.integers(0, 9), min_size=2, max_size=8))
def test_keys_sort_by_code_point_like_python(value: dict[str, int]) -> None:
    encoded = canonical_bytes(value).decode()
    positions = [encoded.index(json.dumps(k, ensure_ascii=False) + ":") for k in sorted(value)]
    assert positions == sorted(positions)


@pytest.mark.parametrize("vector", TEXT_CANON, ids=[v["source"][-40:] for v in TEXT_CANON])
def test_real_title_and_abstract_hashes(vector: dict[str, str]) -> None:
    assert text_sha256(vector["text"]) == vector["canon_sha256"]


def test_text_canonicalisation_collapses_whitespace_and_lowers_case() -> None:
    assert canon_text("  The\tDPG-star\n  Method  ") == "the dpg-star method"
    assert canon_text("$\\mathcal{O}(N)$  Bounds") == "$\\mathcal{o}(n)$ bounds"  # TeX kept raw


DECODE_FIXTURES = {
    "duplicate-keys.json": errors.DuplicateKey,
    "nan.json": errors.NonFiniteNumber,
    "infinity.json": errors.NonFiniteNumber,
    "float.json": errors.FloatNotAllowed,
    "exponent.json": errors.FloatNotAllowed,
    "integer-too-large.json": errors.IntegerOutOfRange,
    "invalid-utf8.json": errors.InvalidUtf8,
    "byte-order-mark.json": errors.InvalidUtf8,
    "trailing-bytes.json": errors.TrailingData,
    "truncated-json.json": errors.DecodeError,
    "deep-nesting.json": errors.NestingTooDeep,
    "very-deep-nesting.json": errors.NestingTooDeep,
    "lone-surrogate.json": errors.LoneSurrogate,
    "raw-control-character.json": errors.DecodeError,
    "single-quotes.json": errors.DecodeError,
}


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in (FIXTURES / "decode").iterdir()) == sorted(DECODE_FIXTURES)


@pytest.mark.parametrize("name", sorted(DECODE_FIXTURES))
def test_strict_decoding_names_the_fault(name: str) -> None:
    data = (FIXTURES / "decode" / name).read_bytes()
    with pytest.raises(DECODE_FIXTURES[name]) as info:
        strict_decode(data)
    assert type(info.value) is DECODE_FIXTURES[name]
    assert info.value.hint


def test_oversized_document_is_refused_before_parsing() -> None:
    with pytest.raises(errors.DocumentTooLarge):
        strict_decode(b" " * 1001 + b"1", max_bytes=1000)


def test_hundred_thousand_digit_integer_is_refused_quickly() -> None:
    with pytest.raises(errors.IntegerOutOfRange):
        strict_decode(b"[" + b"9" * 100_000 + b"]")


def test_largest_safe_integers_are_admitted() -> None:
    assert strict_decode(f"[{MAX_SAFE_INTEGER},-{MAX_SAFE_INTEGER}]".encode()) == [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]


def test_a_surrogate_pair_escape_is_one_character() -> None:
    assert strict_decode(b'"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"a": 1.5}, errors.FloatNotAllowed),
        ([2**53], errors.IntegerOutOfRange),
        ({1: "x"}, errors.DecodeError),
        (["\udc00"], errors.LoneSurrogate),
        ([b"bytes"], errors.DecodeError),
    ],
)
def test_values_built_in_code_are_checked_before_signing(value: Any, error: type) -> None:
    with pytest.raises(error):
        check_value(value)


def test_fixture_files_are_what_they_say(tmp_path: Path) -> None:
    # The duplicate-keys fixture holds the key twice with different values; a lax reader takes the last.
    data = (FIXTURES / "decode" / "duplicate-keys.json").read_bytes()
    assert json.loads(data)["source"]["id"] == "2605.00425"
