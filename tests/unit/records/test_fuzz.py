"""Fuzzing the decoder, the bundle reader and the verifier: the only outcomes allowed are success or
a named pithledger error. Inputs that once crashed live in tests/fuzz-corpus/ and run every time.

HYPOTHESIS_PROFILE=deep runs 5000 examples per property.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.common import ROOT, TESTS
from pithledger.errors import PithledgerError
from pithledger.merge import Entry, reduce_all
from pithledger.records.bundle import read_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import verify_event

CORPUS = TESTS / "fuzz-corpus"
EXAMPLES = ROOT / "bundles"
SEEDS = [p.read_bytes() for p in sorted(EXAMPLES.glob("demo-*.json"))] + [
    p.read_bytes() for p in sorted((TESTS / "fixtures" / "bundles").glob("*.json")) if p.name != "expected.json"
]


def pipeline(data: bytes) -> None:
    """Decode, read, verify and reduce; anything but a named error is a bug."""
    try:
        bundle = read_bundle(strict_decode(data))
    except PithledgerError:
        return
    verdicts = [verify_event(e) for e in bundle.events]
    for v in verdicts:
        assert v.status in ("valid", "invalid", "unverified")
        if v.status == "valid":  # only a valid event has an identity; anything else names nothing
            assert v.event_id.startswith("sha256:") and len(v.event_id) == 71
    states = reduce_all(Entry(e, v) for e, v in zip(bundle.events, verdicts, strict=True))
    for state in states.values():
        canonical_bytes(state)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*")), ids=lambda p: p.name)
def test_past_crashers(path: Path) -> None:
    pipeline(path.read_bytes())


@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    pipeline(data)


@given(
    st.sampled_from(SEEDS),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("fid")), max_size=8),
)
def test_byte_mutations_of_real_bundles(seed: bytes, edits: list[tuple[int, int, str]]) -> None:
    data = bytearray(seed)
    for pos, byte, op in edits:
        i = pos % (len(data) + 1)
        if op == "f" and i < len(data):
            data[i] ^= 1 << (byte % 8)
        elif op == "i":
            data.insert(i, byte)
        elif op == "d" and i < len(data):
            del data[i]
    pipeline(bytes(data))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


@given(st.sampled_from(SEEDS), st.data())
def test_type_confusion_anywhere_in_real_bundles(seed: bytes, data: st.DataObject) -> None:
    try:
        value = json.loads(seed)
    except ValueError:
        return
    for _ in range(data.draw(st.integers(1, 3))):
        targets = [p for p in paths(value) if p]
        if not targets:
            break
        path = data.draw(st.sampled_from(targets))
        node = value
        for step in path[:-1]:
            node = node[step]
        if data.draw(st.booleans()):
            node[path[-1]] = data.draw(json_values)
        elif isinstance(node, dict):
            del node[path[-1]]
        else:
            node[path[-1]] = data.draw(json_values)
    pipeline(canonical_bytes(copy.deepcopy(value)))
