"""Canonical JSON and the admitted value space (spec/identifiers.md §1, §1.1)."""

from __future__ import annotations

import json
from typing import Any

MAX_INT = 2**53 - 1
MAX_DEPTH = 64


def canon(value: Any) -> bytes:
    """canon(v) of spec/identifiers.md §1, word for word."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def admitted(value: Any, depth: int = 0) -> bool:
    """§1.1: objects with string keys, arrays, strings of scalar values, booleans, null, integers within
    ±(2^53 − 1); no floats; at most 64 levels of nesting (§1.2)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -MAX_INT <= value <= MAX_INT
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, (list, dict)):
        if depth >= MAX_DEPTH:
            return False
        if isinstance(value, dict):
            return all(isinstance(k, str) and admitted(k) and admitted(v, depth + 1) for k, v in value.items())
        return all(admitted(v, depth + 1) for v in value)
    return False
