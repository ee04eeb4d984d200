"""A small reader for OpenTimestamps proofs (.ots): what file digest they commit to, which attestations.

Two readings, both pure functions of the bytes (no calendar or Bitcoin node is asked):
- the default (``strict=False``) reads the structure only and executes no operation: the reading event validity
  used under ``pithledger-merge-v2`` (spec/events.md §3.1), kept as that version's definition;
- ``strict=True`` reads as the reference library (python-opentimestamps 0.4.5) does: every operation's
  result is computed under its limits, and what the reference refuses is refused (spec/events.md §3.1.1).
  It also returns each attestation's message (for Bitcoin: the block's Merkle root), which
  ``pithledger ots verify`` checks against block headers. Event validity uses it since ``pithledger-merge-v3``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Protocol

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


class Commitment(msgspec.Struct, frozen=True):
    """Strict reading only: an attestation and the message it attests (the result of the path to it)."""

    msg: bytes
    attestation: Attestation


class OtsProof(msgspec.Struct, frozen=True):
    hash_op: str
    digest: bytes
    attestations: list[Attestation]
    commitments: tuple[Commitment, ...] = ()  # filled by the strict reading only


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.nodes, self.ops_input = data, 0, 0, 0

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


def parse(data: bytes, *, strict: bool = False) -> OtsProof:
    """Parse a detached .ots proof; raise :class:`OtsError` naming what is wrong.

    ``strict=True`` is the reference reading (module docstring); the default is merge v2's."""
    if strict:
        return _parse_strict(data)
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


# ---- the reference reading (strict=True): spec/events.md §3.1.1 ----------------------------------------------

MAX_RESULT = 4096  # python-opentimestamps Op.MAX_RESULT_LENGTH: every result, and every append/prepend argument
MAX_MSG = 4096  # Op.MAX_MSG_LENGTH: the message an operation is applied to
MAX_HEXLIFY_MSG = MAX_RESULT // 2  # OpHexlify.MAX_MSG_LENGTH
MAX_URI = 1000  # PendingAttestation.MAX_URI_LENGTH
#: pithledger's own limit (not the reference's): the bytes all of a proof's operations read, messages and arguments
#: together. The largest real proof in tests/fixtures/ots reads 11.7 KiB; without a bound 10,000 nodes could each
#: hash 4 KiB (~40 MB per event), and at 1 MiB a 3 KB proof still cost ~7 ms (issue #34's second review).
MAX_OPERATIONS_INPUT = 128 * 1024
URI_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._/:")
_ETHEREUM = bytes.fromhex("30fe8087b5c7ead7")  # the reference's "dubious" Ethereum attestation: a height
_OP_NAMES = {
    0x08: "sha256",
    0x02: "sha1",
    0x03: "ripemd160",
    0x67: "keccak256",
    0xF2: "reverse",
    0xF3: "hexlify",
    0xF0: "append",
    0xF1: "prepend",
}


class Hasher(Protocol):
    def update(self, data: bytes, /) -> Any: ...
    def digest(self) -> bytes: ...


def hasher(name: str) -> Hasher:
    """A fresh hasher for one of the proof's hash operations (sha256, sha1, ripemd160, keccak256)."""
    if name == "sha256" or name == "sha1":
        return hashlib.new(name)
    if name == "ripemd160":  # not in every OpenSSL build's hashlib, so from the library the reference uses too
        from Cryptodome.Hash import RIPEMD160

        return RIPEMD160.new()  # type: ignore[no-any-return, unused-ignore]
    from Cryptodome.Hash import keccak  # Keccak-256 (original padding), not SHA3-256

    return keccak.new(digest_bits=256)  # type: ignore[no-any-return, unused-ignore]


def _hash(name: str, msg: bytes) -> bytes:
    h = hasher(name)
    h.update(msg)
    return h.digest()


def _apply(tag: int, arg: bytes, msg: bytes) -> bytes:
    """One operation's result, refusing what the reference's Op.__call__ refuses."""
    name = _OP_NAMES[tag]
    limit = MAX_HEXLIFY_MSG if tag == 0xF3 else MAX_MSG
    if len(msg) > limit:
        raise OtsError(f"{name} is applied to a message of {len(msg)} bytes; the limit is {limit}")
    if tag == 0xF0:
        result = msg + arg
    elif tag == 0xF1:
        result = arg + msg
    elif tag == 0xF2:
        result = msg[::-1]
    elif tag == 0xF3:
        result = msg.hex().encode("ascii")
    else:
        result = _hash(name, msg)
    if len(result) > MAX_RESULT:
        raise OtsError(f"{name} gives a result of {len(result)} bytes; the limit is {MAX_RESULT}")
    return result  # never empty: every message is (a digest is 20 or 32 bytes, and no op shortens to 0)


class _Node:
    """A timestamp as the reference holds it: a set of attestations, and one child per distinct operation."""

    __slots__ = ("msg", "attestations", "ops")

    def __init__(self, msg: bytes) -> None:
        self.msg = msg
        self.attestations: dict[tuple[object, ...], Attestation] = {}  # the reference's set, in first-read order
        self.ops: dict[tuple[int, bytes], _Node] = {}  # the reference's dict: a repeated op replaces the earlier


def _parse_strict(data: bytes) -> OtsProof:
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
    root = _strict_timestamp(r, digest, MAX_DEPTH)
    if r.pos != len(data):
        raise OtsError("trailing bytes after the proof")
    commitments: list[Commitment] = []
    stack = [root]
    while stack:  # document order of what the reference keeps; iterative: the depth is bounded but a path is long
        node = stack.pop()
        commitments += [Commitment(msg=node.msg, attestation=a) for a in node.attestations.values()]
        stack += reversed(list(node.ops.values()))
    return OtsProof(
        hash_op=name, digest=digest, attestations=[c.attestation for c in commitments], commitments=tuple(commitments)
    )


def _strict_timestamp(r: _Reader, msg: bytes, depth: int) -> _Node:
    if depth <= 0:
        raise OtsError("proof nests too deeply")
    node = _Node(msg)
    tag = r.byte()
    while tag == 0xFF:
        _strict_node(r, r.byte(), node, depth)
        tag = r.byte()
    _strict_node(r, tag, node, depth)
    return node


def _strict_node(r: _Reader, tag: int, node: _Node, depth: int) -> None:
    r.nodes += 1
    if r.nodes > MAX_NODES:
        raise OtsError("proof has too many operations")
    if tag == 0x00:
        key, att = _strict_attestation(r)
        node.attestations.setdefault(key, att)
        return
    arg = b""
    if tag in _BINARY_OPS:
        n = r.varuint()
        if n > MAX_RESULT:
            raise OtsError(f"field of {n} bytes exceeds the limit of {MAX_RESULT}")
        if n == 0:
            raise OtsError(f"an empty {_OP_NAMES[tag]} argument")
        arg = r.take(n)
    elif tag not in _UNARY_OPS:
        raise OtsError(f"unknown operation 0x{tag:02x}")
    r.ops_input += len(node.msg) + len(arg)
    if r.ops_input > MAX_OPERATIONS_INPUT:
        raise OtsError(f"the proof's operations read more than {MAX_OPERATIONS_INPUT} bytes in all")
    result = _apply(tag, arg, node.msg)
    child = _strict_timestamp(r, result, depth - 1)
    node.ops[(tag, arg)] = child  # a repeated operation: the later branch replaces the earlier (§3.1.1)


def _strict_attestation(r: _Reader) -> tuple[tuple[object, ...], Attestation]:
    tag = r.take(8)
    raw = r.varbytes(8192)
    payload = _Reader(raw)
    kind = _ATTESTATIONS.get(tag)
    att: Attestation
    key: tuple[object, ...]
    if kind == "pending":
        uri = payload.varbytes(MAX_URI)
        if (bad := next((b for b in uri if b not in URI_CHARS), None)) is not None:  # the first by position
            raise OtsError(f"pending attestation URI holds the character {bytes([bad])!r}, outside [A-Za-z0-9._/:-]")
        att, key = Attestation(kind="pending", calendar=uri.decode("ascii")), ("pending", uri)
    elif kind in ("bitcoin", "litecoin") or tag == _ETHEREUM:
        height = payload.varuint()
        if height > MAX_HEIGHT:
            raise OtsError(f"the claimed {kind or 'ethereum'} block height {height} exceeds {MAX_HEIGHT}")
        if kind == "bitcoin" or kind == "litecoin":
            att = Attestation(kind="bitcoin" if kind == "bitcoin" else "litecoin", height=height)
        else:  # Ethereum: read and checked as the reference does, reported as unknown (as the default reading does)
            att = Attestation(kind="unknown")
        key = (tag, height)
    else:
        return (tag, raw), Attestation(kind="unknown")
    if payload.pos != len(raw):
        raise OtsError(f"trailing bytes inside a {kind or 'ethereum'} attestation")
    return key, att


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
