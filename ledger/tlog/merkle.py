"""RFC 9162 Merkle tree hashing and proof verification (in-house, about a hundred lines).

leaf = SHA-256(0x00 || data), node = SHA-256(0x01 || left || right), the empty tree = SHA-256("").
Checked against the transparency-dev interop vectors (tests/vectors/rfc9162).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pithledger.errors import ProofError

HASH_LEN = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH over already-hashed leaves (RFC 9162 §2.1.1), iteratively: pair up level by level,
    carrying a last odd node up unchanged, which is the same tree as the recursive split at the
    largest power of two below n."""
    if not leaf_hashes:
        return EMPTY_ROOT
    level = list(leaf_hashes)
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _check(h: bytes, what: str) -> None:
    if len(h) != HASH_LEN:
        raise ProofError(f"{what} is {len(h)} bytes, not {HASH_LEN}")


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes) -> None:
    """RFC 9162 §2.1.3.2. Raises :class:`ProofError` unless ``leaf`` is at ``index`` in the tree."""
    _check(leaf, "leaf hash")
    _check(expected_root, "root")
    for p in proof:
        _check(p, "proof hash")
    if index < 0 or index >= size:
        raise ProofError(f"index {index} is outside a tree of size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("proof is too short")
    if r != expected_root:
        raise ProofError("computed root does not match")


def verify_consistency(size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]) -> None:
    """RFC 9162 §2.1.4.2. Raises :class:`ProofError` unless the tree of ``size1`` is a prefix of ``size2``."""
    for p in proof:
        _check(p, "proof hash")
    if size1 < 1:
        raise ProofError("a consistency check from the empty tree proves nothing")
    if size2 < size1:
        raise ProofError(f"size2 {size2} is smaller than size1 {size1}")
    if size1 == size2:
        if proof:
            raise ProofError("trees of equal size need an empty proof")
        if root1 != root2:
            raise ProofError("trees of equal size have different roots")
        return
    _check(root1, "root1")
    _check(root2, "root2")
    if not proof:
        raise ProofError("the proof is empty")
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # an exact power of two: the old root is a node of the new tree
        path.insert(0, root1)
    fr, sr = _consistency_roots(size1, size2, path)
    if fr != root1 or sr != root2:
        raise ProofError("computed roots do not match")


def _consistency_roots(size1: int, size2: int, path: list[bytes]) -> tuple[bytes, bytes]:
    """RFC 9162 §2.1.4.2's walk up both trees along ``path`` (the proof, the old root first where it is a node of
    the new tree): the roots of the trees of ``size1`` and ``size2`` it computes."""
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("proof is too short")
    return fr, sr
