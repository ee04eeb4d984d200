"""Canonical JSON and strict decoding.

The canonical bytes must equal Pith's json.dumps form over the whole admitted value space, and every
way an input can be ambiguous or hostile is rejected with its own named error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.common import FIXTURES, ROOT, TEXT_CANON
from pithledger import errors
from pithledger.records.canonical import (
    _NOT_COMPACT,
    MAX_SAFE_INTEGER,
    _compact_decode,
    _strict_reading,
    canon_text,
    canonical_bytes,
    check_value,
    strict_decode,
    text_sha256,
)


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


# --- the compact reading (spec/identifiers.md §1.2): where it answers, it answers as the strict one -------


def _reading(data: bytes) -> tuple[str, Any]:
    try:
        return "value", _strict_reading(data, "input")
    except errors.PithledgerError as exc:
        return "error", type(exc)


def _typed(value: Any) -> bytes:
    """The value with its keys in their order and every type told apart (True is not 1)."""
    return msgspec.msgpack.encode(value)


# Byte-level mutations of a compact document: each one a way an input can be hostile or merely unusual.
def _dup_first_key(d: bytes) -> bytes:
    """The first object's first key given again, first (the same object then names it twice)."""
    at = d.find(b'{"')
    colon = d.find(b'":', at + 2) if at >= 0 else -1
    if colon < 0:
        return d
    return d[: at + 1] + d[at + 1 : colon + 2] + b"0," + d[at + 1 :]


MUTATIONS = {
    "repeated-key": _dup_first_key,
    "a-float": lambda d: d.replace(b"1", b"1.0", 1),
    "an-exponent": lambda d: d.replace(b"1", b"1e0", 1),
    "unsafe-integer": lambda d: d.replace(b"1", b"9007199254740992", 1),
    "huge-integer": lambda d: d.replace(b"1", b"9" * 400, 1),
    "negative-zero": lambda d: d.replace(b"0", b"-0", 1),
    "deep-nesting": lambda d: b"[" * 64 + d + b"]" * 64,
    "lone-surrogate": lambda d: d.replace(b'"', b'"\\udc00', 1),
    "escaped-character": lambda d: d.replace(b'"', b'"\\u0041', 1),
    "white-space": lambda d: d.replace(b",", b", ", 1),
    "byte-order-mark": lambda d: b"\xef\xbb\xbf" + d,
    "trailing-data": lambda d: d + b"0",
    "invalid-utf8": lambda d: d.replace(b'"', b'"\xff', 1),
    "an-encoded-surrogate": lambda d: d.replace(b'"', b'"\xed\xa0\x80', 1),
    "nan": lambda d: d.replace(b"null", b"NaN", 1),
    "truncated": lambda d: d[:-1],
}


@given(
    values,
    st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(list(b'{}[]",:.e-09 \\\x00\xff'))), max_size=2),
)
def test_the_compact_reading_answers_only_as_the_strict_one(
    value: Any, mutations: list[str], flips: list[tuple[int, int]]
) -> None:
    data = msgspec.json.encode(value)
    for name in mutations:
        data = MUTATIONS[name](data)
    for at, byte in flips:  # and a byte or two anywhere replaced by one that means something in JSON
        if data:
            data = data[: at % len(data)] + bytes([byte]) + data[at % len(data) + 1 :]
    fast = _compact_decode(data)
    kind, strict = _reading(data)
    if fast is not _NOT_COMPACT:
        assert kind == "value" and _typed(fast) == _typed(strict), (data, strict)
    if not mutations and not flips:  # compact, in msgspec's form: the compact reading takes it
        assert fast is not _NOT_COMPACT or not _bounded_value(value)


def _bounded_value(value: Any) -> bool:
    try:
        check_value(value)
    except errors.PithledgerError:
        return False
    return True


@pytest.mark.parametrize(
    "mutation", ["repeated-key", "a-float", "unsafe-integer", "huge-integer", "deep-nesting", "lone-surrogate"]
)
def test_a_hostile_compact_document_is_left_to_the_strict_reading(mutation: str) -> None:
    data = MUTATIONS[mutation](b'{"a":1,"b":[0,"x"]}')
    assert _compact_decode(data) is _NOT_COMPACT
    with pytest.raises(errors.DecodeError):
        strict_decode(data)


def test_real_bundles_take_the_compact_reading() -> None:
    lines = (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_bytes().splitlines()
    assert lines and all(_compact_decode(line) is not _NOT_COMPACT for line in lines)
