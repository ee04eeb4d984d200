"""The mirror's transparency log: RFC 9162 proofs over stored subtree hashes, C2SP tlog-tiles. Pure: no IO.

Addressing (spec/transparency.md §1): the hash at (level L, index N) is the root of the complete subtree
over leaves [N·2^L, (N+1)·2^L); level 0 holds leaf hashes. A :class:`HashReader` serves those. Proofs
are RFC 9162 §2.1.3.1/§2.1.4.1, generated iteratively: at most one sibling is an incomplete right-edge
subtree, so a proof reads O(log n) stored hashes. Verification stays in ledger.merkle.

tlog-tiles: the tile at level L, index N holds the hashes at tree level 8·L, indices [256·N, 256·N + W).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol

from pithledger.errors import BadTilePath, MalformedEntryBundle, MalformedTile, OutsideTree, TileMismatch
from pithledger.records.canonical import canonical_bytes
from pithledger.tlog.merkle import EMPTY_ROOT, HASH_LEN, leaf_hash, node_hash
from pithledger.tlog.note import Checkpoint, NoteVerifier, open_checkpoint

TILE_HEIGHT = 8
TILE_WIDTH = 256
MAX_ENTRY_LEN = 0xFFFF
MAX_LEVEL = 63
MAX_INDEX = 2**64 - 1  # tile indices are uint64 (as in cloudflare/azul's tlog_tiles)


def log_entry(event_id: str, record: str, served: bytes) -> bytes:
    """The log entry of one logged event (spec/transparency.md §1): canonical JSON naming its ledger id
    (64 lowercase hex; a ``sha256:`` prefix is dropped), its record's long Pith Number and the SHA-256 of
    the event's canonical bytes as this mirror serves them (``served``)."""
    return canonical_bytes(
        {"event_id": event_id.removeprefix("sha256:"), "record": record, "sha256": hashlib.sha256(served).hexdigest()}
    )


class HashReader(Protocol):
    def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        """Complete-subtree hashes at ``level`` for indices [start, end); LookupError if not available."""
        ...


def _read_one(reader: HashReader, level: int, index: int) -> bytes:
    got = reader.read_hashes(level, index, index + 1)
    if len(got) != 1 or len(got[0]) != HASH_LEN:
        raise LookupError(f"the hash at level {level}, index {index} is not available")
    return got[0]


def _range_hash(reader: HashReader, lo: int, hi: int) -> bytes:
    """MTH of leaves [lo, hi) where lo is aligned to the largest power of two not above hi - lo (every
    range the RFC 9162 recursion asks for): its complete subtrees left to right, folded from the right."""
    parts: list[bytes] = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        parts.append(_read_one(reader, level, lo >> level))
        lo += 1 << level
    h = parts[-1]
    for p in reversed(parts[:-1]):
        h = node_hash(p, h)
    return h


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def tree_hash(reader: HashReader, size: int) -> bytes:
    """The root of the tree of ``size`` leaves (EMPTY_ROOT for 0), from at most log2(size) + 1 hashes."""
    if size < 0:
        raise OutsideTree(f"a tree size cannot be negative ({size})")
    return EMPTY_ROOT if size == 0 else _range_hash(reader, 0, size)


def inclusion_proof(reader: HashReader, index: int, size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(index, D[0:size])."""
    if not 0 <= index < size:
        raise OutsideTree(f"index {index} is not in a tree of size {size}")
    siblings: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            siblings.append(_range_hash(reader, lo + k, hi))
            hi = lo + k
        else:
            siblings.append(_range_hash(reader, lo, lo + k))
            lo += k
    return siblings[::-1]


def consistency_proof(reader: HashReader, old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(old_size, D[0:new_size]); empty when old_size is 0 or equals new_size."""
    if not 0 <= old_size <= new_size:
        raise OutsideTree(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    out: list[bytes] = []
    lo, hi, whole = 0, new_size, True  # whole: SUBPROOF's b (still on the old tree's own root path)
    while old_size != hi:
        k = _split(hi - lo)
        if old_size <= lo + k:
            out.append(_range_hash(reader, lo + k, hi))
            hi = lo + k
        else:
            out.append(_range_hash(reader, lo, lo + k))
            lo += k
            whole = False
    if not whole:
        out.append(_range_hash(reader, lo, hi))
    return out[::-1]


# --- tile paths ------------------------------------------------------------------------------------


class TilePath(NamedTuple):
    level: int  # 0 for entry bundles
    n: int
    width: int  # 1..256; 256 = a full tile
    entries: bool = False

    def path(self) -> str:
        return entries_path(self.n, self.width) if self.entries else tile_path(self.level, self.n, self.width)


def _index_path(n: int, width: int) -> str:
    if not 0 <= n <= MAX_INDEX:
        raise BadTilePath(f"a tile index is 0..2^64-1, not {n}")
    if not 1 <= width <= TILE_WIDTH:
        raise BadTilePath(f"a tile is 1..{TILE_WIDTH} hashes wide, not {width}")
    digits = str(n)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    out = "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])
    return out if width == TILE_WIDTH else f"{out}.p/{width}"


def tile_path(level: int, n: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``: N in 3-digit groups, "x" before all but the last (x001/x234/067)."""
    if not 0 <= level <= MAX_LEVEL:
        raise BadTilePath(f"a tile level is 0..{MAX_LEVEL}, not {level}")
    return f"tile/{level}/{_index_path(n, width)}"


def entries_path(n: int, width: int = TILE_WIDTH) -> str:
    return f"tile/entries/{_index_path(n, width)}"


_PATH = re.compile(r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/){0,6}[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?\Z")


def parse_tile_path(path: str) -> TilePath:
    """The tile a path names; only the one canonical spelling of each tile is accepted."""
    m = _PATH.match(path) if len(path) <= 64 else None
    if m is None:
        raise BadTilePath(f"{path[:80]!r} is not a tile path")
    kind, index, width = m.groups()
    tile = TilePath(
        0 if kind == "entries" else int(kind),
        int(index.replace("x", "").replace("/", "")),
        int(width) if width else TILE_WIDTH,
        kind == "entries",
    )
    if tile.level > MAX_LEVEL or tile.n > MAX_INDEX or (width and tile.width >= TILE_WIDTH) or tile.path() != path:
        raise BadTilePath(f"{path!r} is not the canonical path of a tile")
    return tile


# --- tile contents ---------------------------------------------------------------------------------


def hash_tile(reader: HashReader, level: int, n: int, width: int = TILE_WIDTH) -> bytes:
    """The tile's bytes: ``width`` hashes at tree level 8·level from index 256·n, concatenated."""
    tile_path(level, n, width)  # validates the arguments
    start = n * TILE_WIDTH
    hashes = reader.read_hashes(TILE_HEIGHT * level, start, start + width)
    if len(hashes) != width or any(len(h) != HASH_LEN for h in hashes):
        raise LookupError(f"the hashes of tile {tile_path(level, n, width)} are not all available")
    return b"".join(hashes)


def split_tile(data: bytes, width: int) -> list[bytes]:
    if len(data) != width * HASH_LEN:
        raise MalformedTile(f"a tile of width {width} is {width * HASH_LEN} bytes, not {len(data)}")
    return [data[i : i + HASH_LEN] for i in range(0, len(data), HASH_LEN)]


def entry_bundle(entries: Iterable[bytes]) -> bytes:
    """tlog-tiles entry bundle: each entry as a big-endian uint16 length, then its bytes."""
    out = bytearray()
    for e in entries:
        if len(e) > MAX_ENTRY_LEN:
            raise MalformedEntryBundle(f"a log entry is {len(e)} bytes, more than the {MAX_ENTRY_LEN} a bundle holds")
        out += len(e).to_bytes(2, "big") + e
    return bytes(out)


def parse_entry_bundle(data: bytes, width: int | None = None) -> list[bytes]:
    """The entries of a bundle (1..256 of them; exactly ``width`` when given); no trailing bytes."""
    entries: list[bytes] = []
    i = 0
    while i < len(data):
        if len(entries) == TILE_WIDTH:
            raise MalformedEntryBundle(f"an entry bundle holds at most {TILE_WIDTH} entries")
        if i + 2 > len(data):
            raise MalformedEntryBundle("the entry bundle ends inside a length prefix")
        length = int.from_bytes(data[i : i + 2], "big")
        if i + 2 + length > len(data):
            raise MalformedEntryBundle("the entry bundle ends inside an entry")
        entries.append(data[i + 2 : i + 2 + length])
        i += 2 + length
    if not entries:
        raise MalformedEntryBundle("an entry bundle is never empty")
    if width is not None and len(entries) != width:
        raise MalformedEntryBundle(f"the entry bundle holds {len(entries)} entries, not {width}")
    return entries


def _level_width(size: int, level: int) -> tuple[int, int]:
    """(number of full tiles, width of the partial tile or 0) at tile level ``level`` for a tree of ``size``."""
    count = size >> (TILE_HEIGHT * level)
    return count >> TILE_HEIGHT, count & (TILE_WIDTH - 1)


def tiles_for(
    reader: HashReader, entries: Callable[[int, int], list[bytes]], size: int, *, old_size: int = 0
) -> Iterator[tuple[str, bytes]]:
    """Every (path, content) of the tree at ``size``: full and right-edge partial hash tiles and entry
    bundles. With ``old_size``, only those not already in the tree at ``old_size`` (what a publish adds:
    a tile at level L changes only when floor(size / 256^L) does)."""
    if not 0 <= old_size <= size:
        raise OutsideTree(f"cannot publish from size {old_size} to size {size}")
    level = 0
    while size >> (TILE_HEIGHT * level):
        if old_size >> (TILE_HEIGHT * level) != size >> (TILE_HEIGHT * level):
            old_full, _ = _level_width(old_size, level)
            full, partial = _level_width(size, level)
            tiles = [(n, TILE_WIDTH) for n in range(old_full, full)] + ([(full, partial)] if partial else [])
            for n, width in tiles:
                yield tile_path(level, n, width), hash_tile(reader, level, n, width)
                if level == 0:
                    yield entries_path(n, width), entry_bundle(entries(n * TILE_WIDTH, n * TILE_WIDTH + width))
        level += 1


# --- a client that trusts only a signed checkpoint --------------------------------------------------


def _subtree(hashes: list[bytes]) -> bytes:
    """MTH of a power-of-two run of hashes (the run is a complete subtree)."""
    while len(hashes) > 1:
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


class TileClient:
    """Reads a tlog-tiles log through ``fetch(path) -> bytes`` (path relative to the log's base; raises
    when absent). Sizes and indices come only from the checkpoint it is given (:meth:`trust` or
    :meth:`fetch_checkpoint`): the right-edge partial tiles must hash to that checkpoint's root, every
    full tile to its hash in the tile above, every entry bundle to its level-0 tile. A HashReader, so
    ledger.tlog's tree_hash / inclusion_proof / consistency_proof run over it."""

    def __init__(self, fetch: Callable[[str], bytes], checkpoint: Checkpoint | None = None) -> None:
        self._fetch = fetch
        self._tiles: dict[tuple[int, int], list[bytes]] = {}
        self.checkpoint: Checkpoint | None = None
        if checkpoint is not None:
            self.trust(checkpoint)

    @property
    def size(self) -> int:
        return self.checkpoint.size if self.checkpoint else 0

    def fetch_checkpoint(self, verifiers: Iterable[NoteVerifier], *, origin: str | None = None) -> Checkpoint:
        """Fetch ``checkpoint``, verify its signature and origin, then :meth:`trust` it."""
        checkpoint, _ = open_checkpoint(self._fetch("checkpoint"), verifiers, origin=origin)
        self.trust(checkpoint)
        return checkpoint

    def trust(self, checkpoint: Checkpoint) -> None:
        """Take an already verified checkpoint as the tree; fetch the right-edge tiles and check that
        they yield its root (raises :class:`TileMismatch` if not, keeping nothing)."""
        self.checkpoint, self._tiles = checkpoint, {}
        try:
            partial: dict[int, list[bytes]] = {}
            level = 0
            while checkpoint.size >> (TILE_HEIGHT * level):
                full, width = _level_width(checkpoint.size, level)
                if width:
                    partial[level] = self._fetch_tile(level, full, width)
                level += 1
            # The root's complete subtrees all lie in the partial tiles: for each set bit b of the size,
            # the subtree at level b is 2^(b mod 8) consecutive hashes of the partial tile at level b // 8.
            parts: list[bytes] = []
            for level in sorted(partial, reverse=True):
                run, offset = partial[level], 0
                for bit in range(TILE_HEIGHT - 1, -1, -1):
                    if len(run) >> bit & 1:
                        parts.append(_subtree(run[offset : offset + (1 << bit)]))
                        offset += 1 << bit
            root = EMPTY_ROOT
            if parts:
                root = parts[-1]
                for p in reversed(parts[:-1]):
                    root = node_hash(p, root)
            if root != checkpoint.root:
                raise TileMismatch(
                    f"the log's right-edge tiles do not hash to the root of the checkpoint at size {checkpoint.size}"
                )
            for level, run in partial.items():
                self._tiles[(level, _level_width(checkpoint.size, level)[0])] = run
        except BaseException:
            self.checkpoint, self._tiles = None, {}
            raise

    def _fetch_tile(self, level: int, n: int, width: int) -> list[bytes]:
        path = tile_path(level, n, width)
        try:
            return split_tile(self._fetch(path), width)
        except MalformedTile as exc:
            raise TileMismatch(f"{path}: {exc.message}") from None

    def _tile(self, level: int, n: int) -> list[bytes]:
        """The verified hashes of tile (level, n) of the trusted tree."""
        if (got := self._tiles.get((level, n))) is not None:
            return got
        full, width = _level_width(self.size, level)
        if n >= full:  # the partial tile was fetched by trust(); anything further is outside the tree
            raise LookupError(f"tile {level}/{n} is outside the tree of size {self.size}")
        hashes = self._fetch_tile(level, n, TILE_WIDTH)
        parent = self._tile(level + 1, n >> TILE_HEIGHT)[n & (TILE_WIDTH - 1)]
        if _subtree(hashes) != parent:
            raise TileMismatch(f"{tile_path(level, n)} does not hash to its entry in the tile above")
        self._tiles[(level, n)] = hashes
        return hashes

    def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        if self.checkpoint is None:
            raise LookupError("the tile client has no trusted checkpoint yet")
        if level < 0 or start < 0 or end < start or end << level > self.size:
            raise LookupError(
                f"hashes [{start}, {end}) at level {level} are not complete subtrees of the tree of size {self.size}"
            )
        tile_level, sub = divmod(level, TILE_HEIGHT)
        out: list[bytes] = []
        for i in range(start, end):
            first = i << sub  # the run of 2^sub hashes at tree level 8·tile_level under this node
            n, offset = divmod(first, TILE_WIDTH)
            out.append(_subtree(self._tile(tile_level, n)[offset : offset + (1 << sub)]))
        return out

    def entries(self, start: int, end: int, *, keep: bool = True) -> list[bytes]:
        """Log entries [start, end), each checked against its leaf hash in the verified level-0 tile.
        ``keep=False``: forget each full level-0 tile once its entries are checked (a reader streaming
        the whole log keeps O(n / 256) hashes, not O(n))."""
        if not 0 <= start <= end <= self.size:
            raise OutsideTree(f"entries [{start}, {end}) are not in the tree of size {self.size}")
        out: list[bytes] = []
        full, partial = _level_width(self.size, 0)
        for n in range(start // TILE_WIDTH, (end + TILE_WIDTH - 1) // TILE_WIDTH):
            width = TILE_WIDTH if n < full else partial
            path = entries_path(n, width)
            try:
                bundle = parse_entry_bundle(self._fetch(path), width)
            except MalformedEntryBundle as exc:
                raise TileMismatch(f"{path}: {exc.message}") from None
            leaves = self._tile(0, n)
            for i, e in enumerate(bundle):
                if leaf_hash(e) != leaves[i]:
                    raise TileMismatch(f"{path}: entry {n * TILE_WIDTH + i} does not match its leaf hash")
            lo, hi = max(start - n * TILE_WIDTH, 0), min(end - n * TILE_WIDTH, width)
            out += bundle[lo:hi]
            if not keep and n < full:  # the right-edge partial tile stays: trust() alone fetches it
                self._tiles.pop((0, n), None)
        return out
