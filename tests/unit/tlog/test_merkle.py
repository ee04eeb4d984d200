"""RFC 9162 hashing and proofs against the transparency-dev interop vectors (named after their mutation)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from helpers.common import TESTS
from pithledger.errors import ProofError
from pithledger.tlog import merkle

DATA = TESTS / "vectors" / "rfc9162" / "testdata"
INCLUSION = sorted((DATA / "inclusion").rglob("*.json"))
CONSISTENCY = sorted((DATA / "consistency").rglob("*.json"))


def b64(s: str) -> bytes:
    return base64.b64decode(s) if s else b""


def name(p: Path) -> str:
    return f"{p.parent.name}/{p.stem}"


@pytest.mark.parametrize("path", INCLUSION, ids=name)
def test_inclusion_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    args = (v["leafIdx"], v["treeSize"], b64(v["leafHash"]), [b64(p) for p in v["proof"] or []], b64(v["root"]))
    if v["wantErr"]:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(*args)
    else:
        merkle.verify_inclusion(*args)


@pytest.mark.parametrize("path", CONSISTENCY, ids=name)
def test_consistency_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    args = (v["size1"], v["size2"], b64(v["root1"]), b64(v["root2"]), [b64(p) for p in v["proof"] or []])
    if v["wantErr"]:
        with pytest.raises(ProofError):
            merkle.verify_consistency(*args)
    else:
        merkle.verify_consistency(*args)


def test_vectors_hold_both_outcomes() -> None:
    outcomes = {json.loads(p.read_text())["wantErr"] for p in INCLUSION + CONSISTENCY}
    assert outcomes == {True, False} and len(INCLUSION) > 50 and len(CONSISTENCY) > 50


def _reference_mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 §2.1.1 as written: split at the largest power of two smaller than n."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return merkle.node_hash(_reference_mth(leaves[:k]), _reference_mth(leaves[k:]))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 7, 8, 9, 31, 64, 100])
def test_iterative_root_equals_the_recursive_definition(n: int) -> None:
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(n)]
    assert merkle.root(leaves) == _reference_mth(leaves)


def test_root_of_the_vectors_eight_leaf_tree() -> None:
    # inclusion/1/happy-path: leaf 0 of 8 with its proof gives this root; the leaves are RFC 6962's test data.
    data = [
        b"",
        b"\x00",
        b"\x10",
        b"\x20\x21",
        b"\x30\x31",
        b"\x40\x41\x42\x43",
        b"\x50\x51\x52\x53\x54\x55\x56\x57",
        b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
    ]
    v = json.loads((DATA / "inclusion" / "1" / "happy-path.json").read_text())
    assert merkle.root([merkle.leaf_hash(d) for d in data]) == b64(v["root"])
