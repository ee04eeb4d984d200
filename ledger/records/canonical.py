"""Canonical JSON bytes, strict decoding, text canonicalisation and hashing. Pure: no IO.

Pith hashes ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8. msgspec's sorted encoder yields the same bytes for every value the strict
decoder admits (dicts with string keys, lists, strings without lone surrogates, integers within
+/-(2**53-1), booleans and null) at ~10x the speed; tests/unit/records/test_canonical.py proves the identity
with Hypothesis. Floats are never admitted, so the encoders' float formatting never matters.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from pithledger.errors import (
    DecodeError,
    DocumentTooLarge,
    DuplicateKey,
    FloatNotAllowed,
    IntegerOutOfRange,
    InvalidUtf8,
    LoneSurrogate,
    NestingTooDeep,
    NonFiniteNumber,
    TrailingData,
)

#: Largest integer magnitude admitted (I-JSON, RFC 7493 §2.2): every JSON reader represents it exactly.
MAX_SAFE_INTEGER = 2**53 - 1
#: Deepest nesting admitted. The deepest real Pith document (a state) nests 7 levels.
MAX_DEPTH = 64
#: Default size cap for one JSON document read whole (a bundle file; bulk transfer uses .jsonl).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

_encoder = msgspec.json.Encoder(order="sorted")


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON bytes of ``value``.

    ``value`` must lie in the admitted value space (see :func:`check_value`); values that come from
    :func:`strict_decode` always do.
    """
    return _encoder.encode(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


def canon_text(text: str) -> str:
    """Pith's text canonicalisation: collapse all whitespace runs to one space, trim, lower-case."""
    return " ".join(text.split()).lower()


def text_sha256(text: str) -> str:
    return sha256_hex(canon_text(text).encode("utf-8"))


# --- strict decoding -------------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(f"duplicate key {key!r} in one object")
            seen.add(key)
    return obj


def _float(text: str) -> Any:
    raise FloatNotAllowed(f"number {text[:40]} is not an integer")


def _constant(text: str) -> Any:
    raise NonFiniteNumber(f"{text} is not a JSON number")


def _int(text: str) -> int:
    # Checked on the text first: int() of a 100,000-digit string is itself a denial of service.
    if len(text.lstrip("-")) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
        raise IntegerOutOfRange(f"integer {text[:40]}{'...' if len(text) > 40 else ''} is out of range")
    return int(text)


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_value(value: Any, *, max_depth: int = MAX_DEPTH, surrogates: bool = True) -> None:
    """Raise a :class:`DecodeError` unless ``value`` lies in the admitted value space.

    ``surrogates=False`` skips the lone-surrogate scan when the caller knows none can occur.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > max_depth:
                raise NestingTooDeep(f"document nests deeper than {max_depth} levels")
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise DecodeError(f"object key {key!r} is not a string")
                if surrogates and _has_surrogate(key):
                    raise LoneSurrogate(f"object key {key!r} holds a lone surrogate")
                stack.append((sub, depth + 1))
        elif isinstance(item, list):
            if depth > max_depth:
                raise NestingTooDeep(f"document nests deeper than {max_depth} levels")
            stack.extend((sub, depth + 1) for sub in item)
        elif isinstance(item, str):
            if surrogates and _has_surrogate(item):
                raise LoneSurrogate(f"string {item[:40]!r} holds a lone surrogate")
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int):
            if abs(item) > MAX_SAFE_INTEGER:
                raise IntegerOutOfRange(f"integer {item} is out of range")
        elif isinstance(item, float):
            raise FloatNotAllowed(f"number {item!r} is not an integer")
        else:
            raise DecodeError(f"value of type {type(item).__name__} has no JSON form")


def strict_decode(data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES, what: str = "input") -> Any:
    """Decode one JSON document, rejecting everything that could make two readers disagree.

    Rejected, each with its own error: documents over ``max_bytes``, invalid UTF-8 or a byte-order
    mark, malformed JSON, trailing bytes, duplicate keys, floats, NaN/Infinity, integers outside
    +/-(2**53-1), lone surrogates, nesting deeper than :data:`MAX_DEPTH`.
    """
    if len(data) > max_bytes:
        raise DocumentTooLarge(f"{what} is {len(data):,} bytes; the limit is {max_bytes:,}")
    value = _compact_decode(data)
    return value if value is not _NOT_COMPACT else _strict_reading(data, what)


def _strict_reading(data: bytes, what: str) -> Any:
    """:func:`strict_decode` of a document within the size limit, by the standard library's parser with
    a hook for every fault: what decides whenever :func:`_compact_decode` cannot."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidUtf8(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise InvalidUtf8(f"{what} starts with a byte-order mark")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_float=_float,
            parse_int=_int,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise TrailingData(
                f"{what} has data after the JSON document (line {exc.lineno}, column {exc.colno})"
            ) from None
        raise DecodeError(f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise NestingTooDeep(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    # Cheap pre-filter: a lone surrogate can only arrive through a \\uD8xx-\\uDFxx escape. Without one,
    # the hooks above have already refused floats, NaN and out-of-range integers and every key is a
    # string, so only the depth is left to check: by the compact reading's walk, whose integer test
    # cannot fail here (the hook refused them), so a value it refuses nests too deep.
    if "\\ud" in text or "\\uD" in text:
        check_value(value)
    elif not _bounded(value):
        raise NestingTooDeep(f"document nests deeper than {MAX_DEPTH} levels")
    return value


class _Float(Exception):
    """A number with a fraction or an exponent met by :data:`_compact_decoder` (never leaves this module)."""


def _no_float(text: str) -> Any:
    raise _Float


_NOT_COMPACT: Any = object()
# msgspec's decoder refuses invalid UTF-8, lone surrogates (escaped or encoded), NaN and Infinity, a
# byte-order mark and trailing bytes; floats are refused by the hook. It keeps the last of two equal
# keys and admits any integer and any depth: the rest of the checks are _compact_decode's.
_compact_decoder = msgspec.json.Decoder(float_hook=_no_float)
_as_decoded = msgspec.json.Encoder()  # keys in the order decoded, no white space


def _compact_decode(data: bytes) -> Any:
    """The value :func:`strict_decode` returns for ``data``, found at msgspec's speed, or _NOT_COMPACT
    when that is not certain (then the strict reading decides, and names the fault). Certain when
    msgspec decodes it without meeting a float, re-encoding the value gives ``data`` byte for byte,
    and the value nests at most MAX_DEPTH deep with every integer in range. The byte equality is what
    rules out duplicate keys: a dropped member would make the re-encoding shorter (spec/identifiers.md §1.2).
    Compact JSON in msgspec's form (ours, and what `export` and the bench write) takes this path; a
    pretty-printed or ASCII-escaped document takes the strict one."""
    try:
        value = _compact_decoder.decode(data)
    except (msgspec.DecodeError, _Float, RecursionError):
        return _NOT_COMPACT
    if _as_decoded.encode(value) != data or not _bounded(value):
        return _NOT_COMPACT
    return value


def _bounded(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether containers nest at most ``max_depth`` deep and every integer is within +/-MAX_SAFE_INTEGER."""
    t = type(value)
    if t is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    if t is not dict and t is not list:
        return True
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return False
        for sub in item.values() if type(item) is dict else item:
            t = type(sub)
            if t is dict or t is list:
                stack.append((sub, depth + 1))
            elif t is int and not -MAX_SAFE_INTEGER <= sub <= MAX_SAFE_INTEGER:
                return False
    return True
