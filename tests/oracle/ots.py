"""OpenTimestamps proofs read strictly (spec/events.md §3.1, §3.1.1, §3.1.4) and the Bitcoin headers an
anchor carries (§3.1.3). Only accept/refuse and the facts matter here: every fault is one code."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .ids import b64_canonical
from .keccak import keccak256

MAGIC = b"\x00OpenTimestamps\x00\x00Proof\x00\xbf\x89\xe2\xe8\x84\xe8\x92\x94"
FILE_HASH_OPS = {0x08: 32, 0x02: 20, 0x03: 20, 0x67: 32}
PENDING = bytes.fromhex("83dfe30d2ef90c8e")
BITCOIN = bytes.fromhex("0588960d73d71901")
LITECOIN = bytes.fromhex("06869a0d73d71b45")
ETHEREUM = bytes.fromhex("30fe8087b5c7ead7")
URI_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._/:")
MAX_NODES, MAX_DEPTH, MAX_READ = 10_000, 256, 131_072
MAX_RESULT, MAX_HEXLIFY, MAX_ARG, MAX_PAYLOAD, MAX_URI = 4096, 2048, 4096, 8192, 1000
MAX_HEIGHT = 2**32 - 1


class OtsError(Exception):
    """Any fault of a proof (`bad-proof`)."""


class HeaderError(Exception):
    """Any fault of carried headers (`bad-headers`)."""


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise OtsError("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def varuint(self) -> int:
        value = 0
        for i in range(8):  # at most 8 bytes: an 8th byte with its high bit set is refused
            b = self.byte()
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return value
        raise OtsError("varuint over 8 bytes")

    def varbytes(self, limit: int) -> bytes:
        n = self.varuint()
        if n > limit:
            raise OtsError("varbytes over its limit")
        return self.take(n)

    def at_end(self) -> bool:
        return self.pos == len(self.data)


@dataclass(frozen=True)
class Attestation:
    kind: str  # "pending", "bitcoin", "litecoin", "unknown" (Ethereum is reported as unknown)
    value: Any  # the URI (bytes), the height, or the tag and payload


def read_attestation(r: Reader) -> Attestation:
    tag = r.take(8)
    payload = r.varbytes(MAX_PAYLOAD)
    if tag == PENDING:
        p = Reader(payload)
        uri = p.varbytes(MAX_URI)
        if any(b not in URI_BYTES for b in uri) or not p.at_end():
            raise OtsError("bad pending attestation")
        return Attestation("pending", uri)
    if tag in (BITCOIN, LITECOIN, ETHEREUM):
        p = Reader(payload)
        height = p.varuint()
        if height > MAX_HEIGHT or not p.at_end():
            raise OtsError("bad height attestation")
        if tag == BITCOIN:
            return Attestation("bitcoin", height)
        if tag == LITECOIN:
            return Attestation("litecoin", height)
    return Attestation("unknown", (tag, payload))


HASHES = {
    0x08: lambda m: hashlib.sha256(m).digest(),
    0x02: lambda m: hashlib.sha1(m).digest(),
    0x03: lambda m: hashlib.new("ripemd160", m).digest(),
    0x67: keccak256,
}


class Proof:
    """One strict reading of a whole proof: the file digest and the (message, attestation) pairs kept."""

    def __init__(self, data: bytes) -> None:
        self.nodes = 0
        self.read = 0
        r = Reader(data)
        if r.take(len(MAGIC)) != MAGIC or r.varuint() != 1:
            raise OtsError("not a version 1 detached proof")
        self.file_hash_op = r.byte()
        if self.file_hash_op not in FILE_HASH_OPS:
            raise OtsError("unknown file hash op")
        self.digest = r.take(FILE_HASH_OPS[self.file_hash_op])
        self.kept = self.timestamp(r, self.digest, 1)
        if not r.at_end():
            raise OtsError("bytes after the proof")

    def timestamp(self, r: Reader, msg: bytes, depth: int) -> list[tuple[bytes, Attestation]]:
        attestations: set[Attestation] = set()
        ops: dict[tuple[int, bytes], list[tuple[bytes, Attestation]]] = {}  # a repeated op: the later wins
        tag = r.byte()
        while tag == 0xFF:
            self.node(r, r.byte(), msg, depth, attestations, ops)
            tag = r.byte()
        self.node(r, tag, msg, depth, attestations, ops)
        kept = [(msg, a) for a in attestations]
        for branch in ops.values():
            kept.extend(branch)
        return kept

    def node(
        self,
        r: Reader,
        tag: int,
        msg: bytes,
        depth: int,
        attestations: set[Attestation],
        ops: dict[tuple[int, bytes], list[tuple[bytes, Attestation]]],
    ) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise OtsError("too many nodes")
        if tag == 0x00:
            attestations.add(read_attestation(r))
            return
        arg = b""
        if tag in (0xF0, 0xF1):
            arg = r.varbytes(MAX_ARG)
            if not arg:
                raise OtsError("empty argument")
        elif tag not in HASHES and tag not in (0xF2, 0xF3):
            raise OtsError("unknown op")
        self.read += len(msg) + len(arg)
        if self.read > MAX_READ:
            raise OtsError("operations read too much")
        if tag == 0xF0:
            result = msg + arg
        elif tag == 0xF1:
            result = arg + msg
        elif tag == 0xF2:
            result = msg[::-1]
        elif tag == 0xF3:
            if len(msg) > MAX_HEXLIFY:
                raise OtsError("hexlify of a long message")
            result = msg.hex().encode("ascii")
        else:
            result = HASHES[tag](msg)
        if len(result) > MAX_RESULT:
            raise OtsError("result too long")
        if depth + 1 > MAX_DEPTH:
            raise OtsError("too deep")
        ops[(tag, arg)] = self.timestamp(r, result, depth + 1)


# §3.1.3: the chains' rules.
CHAINS = {
    "mainnet": {"limit_bits": 0x1D00FFFF, "retarget": True, "min_work": 2**78},
    "regtest": {"limit_bits": 0x207FFFFF, "retarget": False, "min_work": 2**7},
}
MAX_HEADERS = 2016


def dsha256(b: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(b).digest()).digest()


def target_of(bits: int) -> int | None:
    """Bitcoin's compact decoding; None for a zero, negative or over-256-bit target."""
    size, word = bits >> 24, bits & 0x007FFFFF
    value = word >> (8 * (3 - size)) if size <= 3 else word << (8 * (size - 3))
    negative = word != 0 and bits & 0x00800000 != 0
    overflow = word != 0 and (size > 34 or (word > 0xFF and size > 33) or (word > 0xFFFF and size > 32))
    if negative or overflow or value == 0:
        return None
    return value


def header_time(header: bytes) -> str:
    seconds = int.from_bytes(header[68:72], "little")  # unsigned: ffffffff is 2106
    return (datetime(1970, 1, 1) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_headers(
    value: str, kept: list[tuple[bytes, Attestation]], chain: str | dict[str, int | bool]
) -> dict[str, Any] | None:
    """The fact `bitcoin_block`, or None when the attested header's work is under the minimum; HeaderError
    for false evidence. `chain`: a name of CHAINS, or rules of the same shape (a test chain)."""
    rules = CHAINS[chain] if isinstance(chain, str) else chain
    limit = target_of(int(rules["limit_bits"]))
    assert limit is not None
    if len(value) > -(-MAX_HEADERS * 80 // 3) * 4:
        raise HeaderError("too long")
    raw = b64_canonical(value)
    if raw is None or len(raw) % 80 or not 1 <= len(raw) // 80 <= MAX_HEADERS:
        raise HeaderError("not 1 to 2016 headers in canonical base64")
    headers = [raw[i : i + 80] for i in range(0, len(raw), 80)]
    root = headers[0][36:68]
    heights = [a.value for m, a in kept if a.kind == "bitcoin" and m == root]
    if not heights:
        raise HeaderError("no kept Bitcoin attestation at this Merkle root")
    h, n = min(heights), len(headers)
    if h + n - 1 > MAX_HEIGHT:
        raise HeaderError("run past height 2^32 - 1")
    works = []
    prev_target = 0
    for i, header in enumerate(headers):
        bits = int.from_bytes(header[72:76], "little")
        target = target_of(bits)
        if target is None or target > limit:
            raise HeaderError("bad target")
        if int.from_bytes(dsha256(header), "little") > target:
            raise HeaderError("short of work")
        if i:
            prev = headers[i - 1]
            if header[4:36] != dsha256(prev):
                raise HeaderError("unlinked")
            if rules["retarget"] and (h + i) % 2016 == 0:
                if target > 4 * prev_target:
                    raise HeaderError("retarget over 4x")
            elif bits != int.from_bytes(prev[72:76], "little"):
                raise HeaderError("bits changed outside a retarget")
        prev_target = target
        works.append(2**256 // (target + 1))
    if works[0] < int(rules["min_work"]):
        return None
    return {
        "block_hash": dsha256(headers[0])[::-1].hex(),
        "headers": n,
        "height": h,
        "run_work": str(sum(works)),
        "time": header_time(headers[0]),
        "work": str(works[0]),
    }
