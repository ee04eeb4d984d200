"""Bitcoin block headers, checked offline: what `pithledger ots verify` needs to trust a Bitcoin attestation
(spec/events.md §3.1.2, spec/adr/0016). Pure: bytes in, facts or a named refusal out.

A header checks when it is 80 bytes, its `bits` encode a positive target no easier than mainnet's proof-of-work
limit, and its double SHA-256 (read as a little-endian number) is at most that target. That proves work was
spent on it, not that it lies on the best chain: the height is the attestation's claim, and the chain itself
is item 2 of issue #34 (a header archive), not this module.

`verify` checks a proof (read strictly, spec/events.md §3.1.1) against given headers.
"""

from __future__ import annotations

import hashlib

import msgspec

from pithledger.errors import (
    OtsBadHeader,
    OtsDigestDiffers,
    OtsMerkleRootDiffers,
    OtsNoHeader,
    OtsNotVerified,
    OtsPendingOnly,
    OtsPowShort,
)

from . import ots as _ots

HEADER_LEN = 80
#: mainnet's proof-of-work limit, compact 0x1d00ffff: (2^16 - 1) * 2^208; no valid mainnet block has an easier target
POW_LIMIT = 0xFFFF << 208


class Header(msgspec.Struct, frozen=True):
    raw: bytes
    hash: str  # the block hash as people write it (byte-reversed double SHA-256)
    merkle_root: bytes  # internal byte order: what an OpenTimestamps Bitcoin attestation's message equals
    time: int
    bits: int
    target: int
    work: int  # the expected number of hashes for this target: 2^256 // (target + 1)


def target_of(bits: int) -> int:
    """Bitcoin's compact encoding (arith_uint256::SetCompact), refusing a negative or overflowing one."""
    exponent, mantissa = bits >> 24, bits & 0x007FFFFF
    target = mantissa >> 8 * (3 - exponent) if exponent <= 3 else mantissa << 8 * (exponent - 3)
    if bits & 0x00800000 and target:
        raise OtsBadHeader(f"the header's bits 0x{bits:08x} encode a negative target")
    if target.bit_length() > 256:
        raise OtsBadHeader(f"the header's bits 0x{bits:08x} overflow 256 bits")
    return target


def check_header(raw: bytes) -> Header:
    """Read one 80-byte header and check its proof of work against mainnet's rules."""
    if len(raw) != HEADER_LEN:
        raise OtsBadHeader(f"a block header is {HEADER_LEN} bytes; this one is {len(raw)}")
    bits = int.from_bytes(raw[72:76], "little")
    target = target_of(bits)
    if target == 0:
        raise OtsBadHeader(f"the header's bits 0x{bits:08x} encode a zero target")
    if target > POW_LIMIT:
        raise OtsPowShort(f"the header's target (bits 0x{bits:08x}) is easier than mainnet's limit 0x1d00ffff")
    digest = hashlib.sha256(hashlib.sha256(raw).digest()).digest()
    if int.from_bytes(digest, "little") > target:
        raise OtsPowShort(f"the header's hash {digest[::-1].hex()} is above its target (bits 0x{bits:08x})")
    return Header(
        raw=raw,
        hash=digest[::-1].hex(),
        merkle_root=raw[36:68],
        time=int.from_bytes(raw[68:72], "little"),
        bits=bits,
        target=target,
        work=2**256 // (target + 1),
    )


class Verified(msgspec.Struct, frozen=True):
    """One Bitcoin attestation that checks: the height it claims and the header it checks against."""

    height: int
    header: Header


def parse_header_arg(text: str) -> tuple[int | None, bytes]:
    """``HEX`` or ``HEIGHT:HEX`` (``--header``): the header bytes, and the one height it may answer for."""
    height: int | None = None
    if ":" in text:
        before, text = text.split(":", 1)
        if not before.isascii() or not before.isdigit() or len(before) > 10 or int(before) > _ots.MAX_HEIGHT:
            raise OtsBadHeader(
                f"the height before ':' must be a block height (0 to {_ots.MAX_HEIGHT}), not {before[:20]!r}"
            )
        height = int(before)
    text = text.strip()
    if len(text) != 2 * HEADER_LEN:
        raise OtsBadHeader(f"a header is {2 * HEADER_LEN} hex digits; this one has {len(text)}")
    try:
        return height, bytes.fromhex(text)
    except ValueError:
        raise OtsBadHeader("a header must be hexadecimal") from None


class TimestampCheck(msgspec.Struct, frozen=True):
    """What ``pithledger ots verify`` reports: the proof's digest, and each Bitcoin attestation that checks."""

    hash_op: str
    digest: bytes
    verified: list[Verified]


def verify(proof: bytes, digest: bytes, headers: list[tuple[int | None, bytes]]) -> TimestampCheck:
    """Check ``proof`` (read as the reference does) for ``digest`` against ``headers`` ((height or None, 80 bytes)
    each; a header without a height may answer for any attestation). Returns the attestations that
    check, lowest height first (at least one); raises :class:`OtsError` for a proof that cannot be read, else
    the :class:`OtsNotVerified` subclass that names the best reason none checks."""
    read = _ots.parse(proof, strict=True)
    if digest != read.digest:
        raise OtsDigestDiffers(f"the proof stamps the {read.hash_op} digest {read.digest.hex()}, not {digest.hex()}")
    bitcoin = sorted(
        {
            (c.attestation.height, c.msg)
            for c in read.commitments
            if c.attestation.kind == "bitcoin" and c.attestation.height is not None
        }
    )
    if not bitcoin:
        kinds = sorted({c.attestation.kind for c in read.commitments})
        raise OtsPendingOnly(f"the proof has no Bitcoin attestation (only {', '.join(kinds)})")
    verified: list[Verified] = []
    failures: list[OtsNotVerified] = []
    for height, msg in bitcoin:
        candidates = [raw for h, raw in headers if h is None or h == height]
        if not candidates:
            failures.append(
                OtsNoHeader(f"no header given for block {height}, which the proof's Bitcoin attestation names")
            )
        for raw in candidates:
            try:
                header = check_header(raw)
            except OtsNotVerified as exc:
                # the header's own fault counts only when it is of this block (its Merkle root is the proof's)
                failures.append(exc if raw[36:68] == msg else OtsMerkleRootDiffers(_differs(height, msg, raw)))
                continue
            if header.merkle_root != msg:
                failures.append(OtsMerkleRootDiffers(_differs(height, msg, raw)))
                continue
            verified.append(Verified(height=height, header=header))
    if verified:
        return TimestampCheck(hash_op=read.hash_op, digest=read.digest, verified=verified)
    # the most telling reason: a header of this block without the work, then a header of another block, then none
    order = (OtsPowShort, OtsBadHeader, OtsMerkleRootDiffers, OtsNoHeader)
    raise min(failures, key=lambda e: next(i for i, cls in enumerate(order) if isinstance(e, cls)))


def _differs(height: int, msg: bytes, raw: bytes) -> str:
    return (
        f"the proof's result at its block-{height} attestation is the Merkle root {msg[::-1].hex()}; "
        f"the header's is {raw[36:68][::-1].hex()}"
    )
