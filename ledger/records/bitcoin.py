"""Bitcoin block headers, checked offline: what `pithledger ots verify` needs to trust a Bitcoin attestation
(spec/events.md §3.1.2, spec/adr/0016). Pure: bytes in, facts or a named refusal out.

A header checks when it is 80 bytes, its `bits` encode a positive target no easier than the chain's proof-of-work
limit, and its double SHA-256 (read as a little-endian number) is at most that target. That proves work was
spent on it, not that it lies on the best chain: the height is the attestation's claim.

`verify` checks a proof (read strictly, spec/events.md §3.1.1) against given headers (`pithledger ots verify`).
`check_run` checks the run of headers a `timestamp_anchor` carries (spec/events.md §3.1.3, ADR 0017): linked,
each meeting its target, difficulty changing only as the chain's rules let it; with at least the chain's minimum
of work in the attested block's own header, that makes an anchor `bitcoin` rather than `claimed` (merge v3).
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
from pithledger.records import ots as _ots

HEADER_LEN = 80
#: mainnet's proof-of-work limit, compact 0x1d00ffff: (2^16 - 1) * 2^208; no valid mainnet block has an easier target
POW_LIMIT = 0xFFFF << 208
RETARGET_INTERVAL = 2016  # blocks between difficulty adjustments on mainnet
#: the most bytes of a ``--headers`` file read: 2016 headers of 160 hex digits with line ends, and room for CRLF
MAX_HEADERS_TEXT = 2016 * 164


class Chain(msgspec.Struct, frozen=True):
    """The rules a carried run of headers is checked under (spec/events.md §3.1.3)."""

    name: str
    pow_limit: int  # the easiest target any header may carry
    retarget: bool  # mainnet: bits change only at heights divisible by 2016, by at most 4x easier; else never
    min_work: int  # the least work the attested block's own header must carry for its anchor to count as checked
    max_headers: int = RETARGET_INTERVAL  # the most headers an anchor may carry


#: Bitcoin's main network: the only chain pithledger-merge-v3 checks anchors against. 2^78 hashes is about half
#: the work of one block at the end of 2026, asked of the attested block itself (ADR 0017 has the arithmetic).
MAINNET = Chain(name="mainnet", pow_limit=POW_LIMIT, retarget=True, min_work=2**78)
#: Bitcoin Core's regtest rules (compact 0x207fffff, no retargeting; any laptop mines a header in microseconds),
#: for tests only: a ledger's anchors are checked against it only where a test substitutes it for MAINNET.
REGTEST = Chain(name="regtest", pow_limit=0x7FFFFF << 232, retarget=False, min_work=2**7)  # bits 0x2000ffff: 256
#: The chain event validity checks anchors against: pinned by the merge version, like the registry keys.
CONSENSUS_CHAIN = MAINNET


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


def check_header(raw: bytes, pow_limit: int = POW_LIMIT) -> Header:
    """Read one 80-byte header and check its proof of work (against mainnet's limit unless told another)."""
    if len(raw) != HEADER_LEN:
        raise OtsBadHeader(f"a block header is {HEADER_LEN} bytes; this one is {len(raw)}")
    bits = int.from_bytes(raw[72:76], "little")
    target = target_of(bits)
    if target == 0:
        raise OtsBadHeader(f"the header's bits 0x{bits:08x} encode a zero target")
    if target > pow_limit:
        raise OtsPowShort(f"the header's target (bits 0x{bits:08x}) is easier than the chain's proof-of-work limit")
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


def parse_headers_text(text: str, what: str = "headers") -> bytes:
    """A run of headers written as text (``--headers FILE``): hex, one header per line as ``bitcoin-cli
    getblockheader HASH false`` prints it, white space and blank lines ignored; concatenated."""
    run = bytearray()
    for number, line in enumerate(text.splitlines(), 1):
        line = "".join(line.split())
        if not line:
            continue
        if len(line) != 2 * HEADER_LEN or not line.isascii() or any(c not in "0123456789abcdefABCDEF" for c in line):
            raise OtsBadHeader(f"{what}, line {number}: a block header is {2 * HEADER_LEN} hex digits")
        run += bytes.fromhex(line)
    if not run:
        raise OtsBadHeader(f"{what} holds no block header")
    return bytes(run)


class TimestampCheck(msgspec.Struct, frozen=True):
    """What ``pithledger ots verify`` reports: the proof's digest, and each Bitcoin attestation that checks."""

    hash_op: str
    digest: bytes
    verified: list[Verified]
    run: AnchorBlock | None = None  # with a run of headers: what it checks, its work against MAINNET.min_work


def _read_bitcoin(proof: bytes, digest: bytes) -> tuple[_ots.OtsProof, list[tuple[int, bytes]]]:
    """``proof`` read strictly, refused unless it stamps ``digest`` and holds a Bitcoin attestation; with its
    distinct (height, message) Bitcoin attestations, lowest height first."""
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
    return read, bitcoin


def verify_run(proof: bytes, digest: bytes, run: bytes) -> TimestampCheck:
    """Check ``proof`` for ``digest`` against a run of headers as an anchor carrying them is checked (spec/events.md
    §3.1.3, mainnet's rules); the minimum of work is not required here: the caller reports it."""
    read, _ = _read_bitcoin(proof, digest)
    block = check_run(read, run, MAINNET)
    return TimestampCheck(
        hash_op=read.hash_op,
        digest=read.digest,
        verified=[Verified(height=block.height, header=block.header)],
        run=block,
    )


def verify(proof: bytes, digest: bytes, headers: list[tuple[int | None, bytes]]) -> TimestampCheck:
    """Check ``proof`` (read as the reference does) for ``digest`` against ``headers`` ((height or None, 80 bytes)
    each; a header without a height may answer for any attestation). Returns the attestations that
    check, lowest height first (at least one); raises :class:`OtsError` for a proof that cannot be read, else
    the :class:`OtsNotVerified` subclass that names the best reason none checks."""
    read, bitcoin = _read_bitcoin(proof, digest)
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


class AnchorBlock(msgspec.Struct, frozen=True):
    """A Bitcoin attestation checked against the run of headers its event carries (spec/events.md §3.1.3)."""

    height: int  # the attestation's claim: a run of headers proves work, not its place in the chain
    header: Header  # the attested block's
    headers: int  # how many headers the run holds, the attested block's first
    work: int  # the run's total work (the attested block's own is header.work)


def check_run(proof: _ots.OtsProof, run: bytes, chain: Chain) -> AnchorBlock:
    """Check ``run`` (80-byte headers, concatenated: the attested block's, then its successors in order) against
    ``proof`` (read strictly) under ``chain``'s rules; raise :class:`OtsNotVerified` naming the first fault."""
    count, rest = divmod(len(run), HEADER_LEN)
    if rest or not 1 <= count <= chain.max_headers:
        raise OtsBadHeader(
            f"a run of headers is 1 to {chain.max_headers} headers of {HEADER_LEN} bytes; this one is {len(run)} bytes"
        )
    first = run[:HEADER_LEN]
    heights = sorted(
        c.attestation.height
        for c in proof.commitments
        if c.attestation.kind == "bitcoin" and c.attestation.height is not None and c.msg == first[36:68]
    )
    if not heights:
        raise OtsMerkleRootDiffers(
            f"the first header's Merkle root {first[36:68][::-1].hex()} is no Bitcoin attestation's result in the proof"
        )
    height = heights[0]
    if height + count - 1 > _ots.MAX_HEIGHT:
        raise OtsBadHeader(f"a run of {count} headers from block {height} passes block {_ots.MAX_HEIGHT}")
    headers: list[Header] = []
    for i in range(count):
        raw = run[i * HEADER_LEN : (i + 1) * HEADER_LEN]
        where = f"header {i} (block {height + i})"
        try:
            h = check_header(raw, chain.pow_limit)
        except OtsNotVerified as exc:
            raise type(exc)(f"{where}: {exc.message}") from None
        if headers:
            prev = headers[-1]
            if raw[4:36] != bytes.fromhex(prev.hash)[::-1]:
                raise OtsBadHeader(f"{where} does not link to the header before it (its previous-block hash differs)")
            if chain.retarget and (height + i) % RETARGET_INTERVAL == 0:
                if h.target > 4 * prev.target:  # a retarget makes mining at most 4x easier
                    raise OtsPowShort(f"{where} lowers the difficulty more than a retarget allows (4x)")
            elif h.bits != prev.bits:
                raise OtsPowShort(
                    f"{where} changes the difficulty (bits 0x{h.bits:08x}) where the chain's rules do not"
                )
        headers.append(h)
    return AnchorBlock(height=height, header=headers[0], headers=count, work=sum(h.work for h in headers))
