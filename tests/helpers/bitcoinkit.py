"""Bitcoin block headers for tests: regtest-difficulty headers mined here in microseconds (compact 0x207fffff:
about one hash in two meets it), so a test can build a run of linked headers whose first commits to a proof's
result. They check only where a test puts pithledger.records.bitcoin.REGTEST in place of MAINNET."""

from __future__ import annotations

import hashlib
import itertools

from pithledger.records import bitcoin

REGTEST_BITS = 0x207FFFFF  # work 2 per header: under REGTEST's minimum (128), so an anchor on it stays claimed
CHECKED_BITS = 0x2000FFFF  # work 256 per header (~256 hashes to mine): an attested block with it checks on REGTEST
T0 = 1_780_000_000  # 2026-05-28T20:26:40Z


def dsha(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


def header(prev: bytes, root: bytes, time: int, bits: int, nonce: int, version: int = 0x20000000) -> bytes:
    return (
        version.to_bytes(4, "little")
        + prev
        + root
        + time.to_bytes(4, "little")
        + bits.to_bytes(4, "little")
        + nonce.to_bytes(4, "little")
    )


def mine(prev: bytes, root: bytes, time: int, bits: int = REGTEST_BITS) -> bytes:
    """The first nonce (from 0) whose header meets ``bits``' target: deterministic."""
    target = bitcoin.target_of(bits)
    for nonce in itertools.count():
        raw = header(prev, root, time, bits, nonce)
        if int.from_bytes(dsha(raw), "little") <= target:
            return raw
    raise AssertionError("unreachable")


def run(
    root: bytes,
    count: int,
    *,
    bits: int = REGTEST_BITS,
    prev: bytes = b"\x11" * 32,
    time: int = T0,
    unlink_at: int = -1,
) -> bytes:
    """``count`` linked headers, the first with Merkle root ``root``, the others with made-up roots; ``unlink_at``:
    that header names another previous block (the run goes on from it). spec/vectors/merge/make_vectors.py mines
    its vectors' headers with it."""
    out = b""
    for i in range(count):
        link = b"\x22" * 32 if i == unlink_at else prev
        raw = mine(link, root if i == 0 else hashlib.sha256(b"block %d" % i).digest(), time + 600 * i, bits)
        out += raw
        prev = dsha(raw)
    return out


def message_of(digest: bytes, branch: int) -> bytes:
    """The result at branch ``branch``'s attestation of a proof made by ``ots.build`` (append 4 bytes, sha256)."""
    return hashlib.sha256(digest + branch.to_bytes(4, "big")).digest()
