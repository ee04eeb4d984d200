"""A small reader for OpenTimestamps proofs (.ots): what file digest they commit to, which attestations.

Only the structure is read; no hash operation is executed and no calendar or Bitcoin node is asked,
so the result is a pure function of the bytes. Checking a Bitcoin attestation against the chain is
left to the OpenTimestamps client (spec/events.md, timestamp_anchor).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from pithledger.errors import OtsError

MAGIC = b"\x00OpenTimestamps\x00\x00Proof\x00\xbf\x89\xe2\xe8\x84\xe8\x92\x94"
_FILE_HASH_OPS = {0x08: ("sha256", 32), 0x02: ("sha1", 20), 0x03: ("ripemd160", 20), 0x67: ("keccak256", 32)}
_UNARY_OPS = {0x08, 0x02, 0x03, 0x67, 0xF2, 0xF3}  # sha256 sha1 ripemd160 keccak256 reverse hexlify
_BINARY_OPS = {0xF0, 0xF1}  # append, prepend
_ATTESTATIONS = {
    bytes.fromhex("83dfe30d2ef90c8e"): "pending",
    bytes.fromhex("0588960d73d71901"): "bitcoin",
    bytes.fromhex("06869a0d73d71b45"): "litecoin",
}
MAX_ARG = 4096  # the reference implementation's limit for append/prepend arguments
MAX_DEPTH = 256
MAX_NODES = 10_000
#: Written limits for integers read from a proof (spec/events.md, timestamp_anchor): a varuint is at most
#: 8 bytes (< 2**56), and a claimed block height at most 2**32 - 1 (Bitcoin is near 10**6), so every
#: value that reaches a state is an exact JSON integer on every reader.
MAX_VARUINT_BYTES = 8
MAX_HEIGHT = 2**32 - 1


class Attestation(msgspec.Struct, frozen=True):
    kind: Literal["pending", "bitcoin", "litecoin", "unknown"]
    calendar: str | None = None  # pending: the calendar URL to upgrade from
    height: int | None = None  # bitcoin/litecoin: the claimed block height


class OtsProof(msgspec.Struct, frozen=True):
    hash_op: str
    digest: bytes
    attestations: list[Attestation]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.nodes = data, 0, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise OtsError("proof is truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def byte(self) -> int:
        return self.take(1)[0]

    def varuint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift >= 7 * MAX_VARUINT_BYTES:
                raise OtsError(f"a varuint is longer than {MAX_VARUINT_BYTES} bytes")

    def varbytes(self, limit: int) -> bytes:
        n = self.varuint()
        if n > limit:
            raise OtsError(f"field of {n} bytes exceeds the limit of {limit}")
        return self.take(n)


def parse(data: bytes) -> OtsProof:
    """Parse a detached .ots proof; raise :class:`OtsError` naming what is wrong."""
    r = _Reader(data)
    if r.take(len(MAGIC)) != MAGIC:
        raise OtsError("not an OpenTimestamps proof (bad magic bytes)")
    if (version := r.varuint()) != 1:
        raise OtsError(f"unsupported proof version {version}")
    tag = r.byte()
    if tag not in _FILE_HASH_OPS:
        raise OtsError(f"unknown file hash operation 0x{tag:02x}")
    name, size = _FILE_HASH_OPS[tag]
    digest = r.take(size)
    attestations: list[Attestation] = []
    _timestamp(r, attestations, MAX_DEPTH)
    if r.pos != len(data):
        raise OtsError("trailing bytes after the proof")
    if not attestations:
        raise OtsError("proof holds no attestation")
    return OtsProof(hash_op=name, digest=digest, attestations=attestations)


def _timestamp(r: _Reader, out: list[Attestation], depth: int) -> None:
    if depth <= 0:
        raise OtsError("proof nests too deeply")
    tag = r.byte()
    while tag == 0xFF:  # fork: one more branch follows, then the rest
        _node(r, r.byte(), out, depth)
        tag = r.byte()
    _node(r, tag, out, depth)


def _node(r: _Reader, tag: int, out: list[Attestation], depth: int) -> None:
    r.nodes += 1
    if r.nodes > MAX_NODES:
        raise OtsError("proof has too many operations")
    if tag == 0x00:
        out.append(_attestation(r))
        return
    if tag in _BINARY_OPS:
        r.varbytes(MAX_ARG)
    elif tag not in _UNARY_OPS:
        raise OtsError(f"unknown operation 0x{tag:02x}")
    _timestamp(r, out, depth - 1)


def _attestation(r: _Reader) -> Attestation:
    tag = r.take(8)
    payload = _Reader(r.varbytes(8192))
    kind = _ATTESTATIONS.get(tag, "unknown")
    if kind == "pending":
        try:
            uri = payload.varbytes(1000).decode("ascii")
        except UnicodeDecodeError:
            raise OtsError("pending attestation URL is not ASCII") from None
        return Attestation(kind="pending", calendar=uri)
    if kind in ("bitcoin", "litecoin"):
        height = payload.varuint()
        if height > MAX_HEIGHT:
            raise OtsError(f"the claimed {kind} block height {height} exceeds {MAX_HEIGHT}")
        return Attestation(kind=kind, height=height)  # type: ignore[arg-type]
    return Attestation(kind="unknown")


def _varuint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def build(digest: bytes, calendars: list[str], bitcoin_heights: list[int] = []) -> bytes:  # noqa: B006
    """Serialise a minimal sha256 proof: one branch per attestation (for tests and demo bundles)."""
    atts = [bytes.fromhex("83dfe30d2ef90c8e") + _varbytes(_varbytes(c.encode())) for c in calendars]
    atts += [bytes.fromhex("0588960d73d71901") + _varbytes(_varuint_bytes(h)) for h in bitcoin_heights]
    if not atts:
        raise ValueError("a proof needs at least one attestation")
    body = b""
    for i, att in enumerate(atts):
        branch = b"\xf0" + _varbytes(i.to_bytes(4, "big")) + b"\x08" + b"\x00" + att
        body += (b"\xff" + branch) if i < len(atts) - 1 else branch
    return MAGIC + b"\x01" + b"\x08" + digest + body


def _varbytes(b: bytes) -> bytes:
    return _varuint_bytes(len(b)) + b
