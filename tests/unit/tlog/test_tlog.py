"""The tree, proofs and tiles (ledger/tlog/tiles.py): proofs generated here verify with ledger.merkle at every size
1..1000 and match the RFC 9162 vectors; tile paths and tile sets follow C2SP tlog-tiles; a TileClient trusts
only the signed checkpoint and refuses tampered tiles (named after their mutation)."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
from pathlib import Path

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.common import TESTS
from pithledger.errors import BadTilePath, MalformedEntryBundle, OutsideTree, ProofError, TileMismatch
from pithledger.tlog import merkle, note
from pithledger.tlog import tiles as tlog

RFC9162 = TESTS / "vectors" / "rfc9162" / "testdata"
TLOG_VECTORS = TESTS / "vectors" / "tlog"
C2 = json.loads((TLOG_VECTORS / "c2sp-examples.json").read_text(encoding="utf-8"))
AZUL = json.loads((TLOG_VECTORS / "azul-tlog-tiles.json").read_text(encoding="utf-8"))

# The leaves of the RFC 6962 / transparency-dev/merkle test tree (testonly/constants.go LeafInputs), over which
# the happy-path vectors in tests/vectors/rfc9162 were computed.
RFC6962_LEAVES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")
]


class MemoryTree:
    """A HashReader holding every complete-subtree hash of a list of entries (what the store keeps)."""

    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self.levels = [[merkle.leaf_hash(e) for e in entries]]
        while len(self.levels[-1]) > 1:
            prev = self.levels[-1]
            self.levels.append([merkle.node_hash(prev[i], prev[i + 1]) for i in range(0, len(prev) - 1, 2)])
        self.reads = 0

    def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        if level >= len(self.levels) or not 0 <= start <= end <= len(self.levels[level]):
            raise LookupError((level, start, end))
        self.reads += end - start
        return self.levels[level][start:end]

    def read_entries(self, start: int, end: int) -> list[bytes]:
        return self.entries[start:end]


def entries(n: int) -> list[bytes]:
    return [b"entry %d" % i for i in range(n)]


BIG = MemoryTree(entries(1000))


@functools.cache
def root(n: int) -> bytes:
    return merkle.root(BIG.levels[0][:n])


def test_log_entry_bytes() -> None:
    entry = tlog.log_entry("ab" * 32, "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L", b'{"x":1}')
    assert (
        entry
        == (
            '{"event_id":"' + "ab" * 32 + '","record":"pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L",'
            '"sha256":"' + hashlib.sha256(b'{"x":1}').hexdigest() + '"}'
        ).encode()
    )
    assert len(entry) < 256


# --- proofs ------------------------------------------------------------------------------------------


def test_tree_hash_matches_merkle_root_at_every_size() -> None:
    assert tlog.tree_hash(BIG, 0) == merkle.EMPTY_ROOT
    for n in range(1, 1001):
        assert tlog.tree_hash(BIG, n) == root(n)


def test_inclusion_and_consistency_at_every_size_1_to_1000() -> None:
    rng = random.Random(22)
    for n in range(1, 1001):
        r = root(n)
        for i in {0, n - 1, n // 2, rng.randrange(n)}:
            merkle.verify_inclusion(i, n, BIG.levels[0][i], tlog.inclusion_proof(BIG, i, n), r)
        for m in {1, n, max(1, n - 1), rng.randrange(1, n + 1)}:
            merkle.verify_consistency(m, n, root(m), r, tlog.consistency_proof(BIG, m, n))


def flips(proof: list[bytes]) -> list[list[bytes]]:
    """The proof with one bit flipped in one hash, for every hash and every byte of it (the bit moving
    through all 8 positions along the bytes, so every byte and every bit position is hit)."""
    out = []
    for k, h in enumerate(proof):
        for byte in range(len(h)):
            b = bytearray(h)
            b[byte] ^= 1 << ((byte + k) % 8)
            out.append(proof[:k] + [bytes(b)] + proof[k + 1 :])
    return out


def test_exhaustive_small_trees_every_proof_and_every_hash_bit_flipped() -> None:
    for n in range(1, 17):
        r = root(n)
        for i in range(n):
            proof = tlog.inclusion_proof(BIG, i, n)
            merkle.verify_inclusion(i, n, BIG.levels[0][i], proof, r)
            for bad in flips(proof):
                with pytest.raises(ProofError):
                    merkle.verify_inclusion(i, n, BIG.levels[0][i], bad, r)
            for [leaf] in flips([BIG.levels[0][i]]):
                with pytest.raises(ProofError):
                    merkle.verify_inclusion(i, n, leaf, proof, r)
        for m in range(1, n + 1):
            proof = tlog.consistency_proof(BIG, m, n)
            merkle.verify_consistency(m, n, root(m), r, proof)
            for bad in flips(proof):
                with pytest.raises(ProofError):
                    merkle.verify_consistency(m, n, root(m), r, bad)


def test_proofs_read_logarithmically_many_hashes() -> None:
    tree = MemoryTree(entries(1000))
    for n in (1000, 999, 513, 511):
        for i in (0, n - 1, n // 3):
            tree.reads = 0
            tlog.inclusion_proof(tree, i, n)
            assert tree.reads <= 2 * n.bit_length()
        tree.reads = 0
        tlog.consistency_proof(tree, n // 3, n)
        assert tree.reads <= 2 * n.bit_length()
        tree.reads = 0
        tlog.tree_hash(tree, n)
        assert tree.reads <= n.bit_length()


@pytest.mark.parametrize("path", sorted(RFC9162.glob("inclusion/*/happy-path.json")), ids=lambda p: p.parent.name)
def test_generated_inclusion_proof_equals_rfc9162_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    tree = MemoryTree(RFC6962_LEAVES)
    assert tlog.tree_hash(tree, v["treeSize"]) == base64.b64decode(v["root"])
    proof = tlog.inclusion_proof(tree, v["leafIdx"], v["treeSize"])
    assert [base64.b64encode(p).decode() for p in proof] == (v["proof"] or [])


@pytest.mark.parametrize("path", sorted(RFC9162.glob("consistency/*/happy-path.json")), ids=lambda p: p.parent.name)
def test_generated_consistency_proof_equals_rfc9162_vector(path: Path) -> None:
    v = json.loads(path.read_text())
    tree = MemoryTree(RFC6962_LEAVES)
    assert tlog.tree_hash(tree, v["size1"]) == base64.b64decode(v["root1"])
    proof = tlog.consistency_proof(tree, v["size1"], v["size2"])
    assert [base64.b64encode(p).decode() for p in proof] == (v["proof"] or [])


@pytest.mark.parametrize("args", [(-1, 5), (5, 5), (0, 0)])
def test_inclusion_outside_the_tree_is_refused(args: tuple[int, int]) -> None:
    with pytest.raises(OutsideTree):
        tlog.inclusion_proof(BIG, *args)


def test_consistency_with_old_above_new_is_refused() -> None:
    with pytest.raises(OutsideTree):
        tlog.consistency_proof(BIG, 6, 5)
    assert tlog.consistency_proof(BIG, 0, 5) == [] == tlog.consistency_proof(BIG, 5, 5)


# --- tile paths ----------------------------------------------------------------------------------------


def test_c2sp_tile_index_example() -> None:
    ex = C2["tile_index_path"]
    assert tlog.tile_path(0, ex["n"]) == ex["path"]
    assert tlog.parse_tile_path(ex["path"]) == tlog.TilePath(0, ex["n"], 256)


@pytest.mark.parametrize("name", sorted(AZUL["valid"]))
def test_azul_valid_tile_path(name: str) -> None:
    path = AZUL["valid"][name]
    assert tlog.parse_tile_path(path).path() == path


@pytest.mark.parametrize("mutation", sorted(AZUL["invalid"]))
def test_azul_invalid_tile_path_is_refused(mutation: str) -> None:
    with pytest.raises(BadTilePath):
        tlog.parse_tile_path(AZUL["invalid"][mutation])


@pytest.mark.parametrize(
    "path,tile",
    [
        ("tile/0/000", tlog.TilePath(0, 0, 256)),
        ("tile/0/255", tlog.TilePath(0, 255, 256)),
        ("tile/1/x001/234", tlog.TilePath(1, 1234, 256)),
        ("tile/63/x123/x456/078.p/2", tlog.TilePath(63, 123456078, 2)),
        ("tile/0/001.p/255", tlog.TilePath(0, 1, 255)),
        ("tile/entries/000.p/1", tlog.TilePath(0, 0, 1, True)),
        ("tile/entries/x003/x057/500", tlog.TilePath(0, 3057500, 256, True)),
    ],
)
def test_tile_path_round_trip(path: str, tile: tlog.TilePath) -> None:
    assert tlog.parse_tile_path(path) == tile
    assert tile.path() == path


@pytest.mark.parametrize(
    "mutation,path",
    [
        ("missing-x-prefix", "tile/3/123/456/078"),
        ("negative-index", "tile/3/-1/123/456/078"),
        ("go-height-element", "tile/8/0/x001/234"),
        ("level-64", "tile/64/000"),
        ("level-leading-zero", "tile/01/000"),
        ("index-leading-zero-group", "tile/0/x000/005"),
        ("index-two-digits", "tile/0/05"),
        ("x-on-last-group", "tile/0/x005"),
        ("width-0", "tile/0/000.p/0"),
        ("width-256", "tile/0/000.p/256"),
        ("width-leading-zero", "tile/0/000.p/05"),
        ("width-missing", "tile/0/000.p/"),
        ("trailing-slash", "tile/0/000/"),
        ("leading-slash", "/tile/0/000"),
        ("data-instead-of-entries", "tile/data/000"),
        ("trailing-newline", "tile/0/000\n"),
        ("unicode-digit", "tile/0/00\u0661"),
        ("too-long", "tile/0/" + "x000/" * 20 + "001"),
    ],
)
def test_bad_tile_path_is_refused(mutation: str, path: str) -> None:
    with pytest.raises(BadTilePath):
        tlog.parse_tile_path(path)


@pytest.mark.parametrize("args", [(-1, 0, 256), (64, 0, 256), (0, -1, 256), (0, 0, 0), (0, 0, 257)])
def test_tile_path_arguments_out_of_range_are_refused(args: tuple[int, int, int]) -> None:
    with pytest.raises(BadTilePath):
        tlog.tile_path(*args)


# --- tiles, bundles ----------------------------------------------------------------------------------


def tiles(tree: MemoryTree, size: int, old_size: int = 0) -> dict[str, bytes]:
    return dict(tlog.tiles_for(tree, tree.read_entries, size, old_size=old_size))


def test_c2sp_tile_sets_of_size_70000_and_256() -> None:
    tree = MemoryTree(entries(70000))
    got = tiles(tree, 70000)
    assert sum(p.startswith("tile/0/") and ".p/" not in p for p in got) == 273
    assert sorted(p for p in got if ".p/" in p or p.startswith(("tile/1/", "tile/2/"))) == [
        "tile/0/273.p/112",
        "tile/1/000",
        "tile/1/001.p/17",
        "tile/2/000.p/1",
        "tile/entries/273.p/112",
    ]
    assert len(got) == 2 * 274 + 3
    assert sorted(tiles(tree, 256)) == ["tile/0/000", "tile/1/000.p/1", "tile/entries/000"]
    # the level-1 tile holds the roots of level-0 tiles; the level-2 one the root of the first 65 536 leaves
    assert got["tile/1/000"][32:64] == merkle.root(tree.levels[0][256:512])
    assert got["tile/2/000.p/1"] == merkle.root(tree.levels[0][:65536])
    assert tlog.parse_entry_bundle(got["tile/entries/001"]) == tree.entries[256:512]


def test_tiles_for_old_size_adds_exactly_what_changed() -> None:
    tree = MemoryTree(entries(70000))
    published: dict[str, bytes] = {}
    old = 0
    rng = random.Random(7)
    sizes = sorted({rng.randrange(1, 70000) for _ in range(15)} | {255, 256, 257, 65535, 65536, 65537, 70000})
    for size in sizes:
        new = tiles(tree, size, old)
        full = tiles(tree, size)
        # exactly the tiles not yet published; nothing published is rewritten; together they hold the tree
        assert set(new) == {p for p in full if p not in published}
        assert all(full[p] == c for p, c in new.items())
        published.update(new)
        assert all(published[p] == c for p, c in full.items())
        old = size
    assert tiles(tree, 70000, 70000) == {}


def test_hash_tile_is_width_hashes_at_level_8l() -> None:
    tree = MemoryTree(entries(70000))
    assert tlog.hash_tile(tree, 0, 1, 3) == b"".join(tree.levels[0][256:259])
    assert tlog.hash_tile(tree, 1, 0, 2) == b"".join(tree.levels[8][0:2])
    with pytest.raises(LookupError):
        tlog.hash_tile(tree, 0, 273, 256)


def test_entry_bundle_round_trip() -> None:
    items = [b"", b"a", bytes(65535)] + entries(10)
    assert tlog.parse_entry_bundle(tlog.entry_bundle(items), len(items)) == items


@pytest.mark.parametrize(
    "mutation,data",
    [
        ("empty", b""),
        ("truncated-length-prefix", b"\x00\x01a\x00"),
        ("truncated-entry", b"\x00\x05abc"),
        ("trailing-byte", b"\x00\x01ab"),
        ("257-entries", b"\x00\x00" * 257),
    ],
)
def test_malformed_entry_bundle_is_refused(mutation: str, data: bytes) -> None:
    with pytest.raises(MalformedEntryBundle):
        tlog.parse_entry_bundle(data)


def test_entry_bundle_with_other_count_than_width_is_refused() -> None:
    with pytest.raises(MalformedEntryBundle):
        tlog.parse_entry_bundle(tlog.entry_bundle(entries(3)), 4)


def test_entry_over_65535_bytes_is_refused() -> None:
    with pytest.raises(MalformedEntryBundle):
        tlog.entry_bundle([bytes(65536)])


# --- the tile client -----------------------------------------------------------------------------------

LOG = note.NoteSigner("mirror.example/log", nacl.signing.SigningKey(bytes(32)))


def published(size: int) -> tuple[dict[str, bytes], note.Checkpoint]:
    tree = MemoryTree(entries(size))
    files = tiles(tree, size)
    cp = note.Checkpoint(LOG.name, size, tlog.tree_hash(tree, size))
    files["checkpoint"] = note.sign_checkpoint(cp, LOG)
    return files, cp


FILES_70000, CP_70000 = published(70000)


def client(files: dict[str, bytes]) -> tlog.TileClient:
    c = tlog.TileClient(files.__getitem__)
    c.fetch_checkpoint([LOG.verifier], origin=LOG.name)
    return c


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 1000])
def test_client_recomputes_root_proofs_and_entries(size: int) -> None:
    files, cp = published(size)
    c = client(files)
    assert tlog.tree_hash(c, size) == cp.root
    assert c.entries(0, size) == entries(size)
    for i in {0, size - 1, size // 2}:
        merkle.verify_inclusion(i, size, merkle.leaf_hash(entries(size)[i]), tlog.inclusion_proof(c, i, size), cp.root)
    old = max(1, size // 3)
    merkle.verify_consistency(old, size, tlog.tree_hash(c, old), cp.root, tlog.consistency_proof(c, old, size))


def test_client_over_three_tile_levels() -> None:
    c = client(FILES_70000)
    assert tlog.tree_hash(c, 70000) == CP_70000.root
    all_entries = entries(70000)
    assert c.entries(65530, 65540) == all_entries[65530:65540]
    for i in (0, 300, 65535, 65536, 69999):
        merkle.verify_inclusion(
            i, 70000, merkle.leaf_hash(all_entries[i]), tlog.inclusion_proof(c, i, 70000), CP_70000.root
        )
    merkle.verify_consistency(
        40000, 70000, tlog.tree_hash(c, 40000), CP_70000.root, tlog.consistency_proof(c, 40000, 70000)
    )


def flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 1
    return bytes(b)


@pytest.mark.parametrize(
    "mutation,path,reads",
    [
        ("bit-flip-full-level-0-tile", "tile/0/100", lambda c: c.entries(25600, 25601)),
        ("bit-flip-full-level-1-tile", "tile/1/000", lambda c: tlog.inclusion_proof(c, 5, 70000)),
        ("bit-flip-full-entry-bundle", "tile/entries/100", lambda c: c.entries(25600, 25601)),
        ("bit-flip-partial-entry-bundle", "tile/entries/273.p/112", lambda c: c.entries(69999, 70000)),
    ],
)
def test_client_refuses_tampered_full_tile(mutation: str, path: str, reads: object) -> None:
    files = dict(FILES_70000)
    files[path] = flip(files[path], 40)
    c = client(files)
    with pytest.raises(TileMismatch):
        reads(c)  # type: ignore[operator]


@pytest.mark.parametrize("path", ["tile/0/273.p/112", "tile/1/001.p/17", "tile/2/000.p/1"])
def test_client_refuses_checkpoint_when_a_partial_tile_is_bit_flipped(path: str) -> None:
    files = dict(FILES_70000)
    files[path] = flip(files[path], 0)
    with pytest.raises(TileMismatch):
        client(files)


@pytest.mark.parametrize("mutation", ["truncated-by-one-byte", "extended-by-one-hash"])
def test_client_refuses_tile_of_wrong_length(mutation: str) -> None:
    files = dict(FILES_70000)
    data = files["tile/0/100"]
    files["tile/0/100"] = data[:-1] if mutation.startswith("truncated") else data + data[:32]
    c = client(files)
    with pytest.raises(TileMismatch):
        c.entries(25600, 25601)


def test_client_refuses_entry_bundle_with_an_extra_entry() -> None:
    files = dict(FILES_70000)
    files["tile/entries/273.p/112"] += b"\x00\x00"
    with pytest.raises(TileMismatch):
        client(files).entries(69999, 70000)


def test_client_refuses_checkpoint_signed_over_another_root() -> None:
    files = dict(FILES_70000)
    cp = note.Checkpoint(LOG.name, 70000, bytes(32))
    files["checkpoint"] = note.sign_checkpoint(cp, LOG)
    with pytest.raises(TileMismatch):
        client(files)


def test_client_trusts_the_checkpoint_size_not_the_tiles() -> None:
    # a checkpoint for 69 999 leaves over tiles published for 70 000: the partial tiles it needs are absent
    files = dict(FILES_70000)
    tree = MemoryTree(entries(70000))
    cp = note.Checkpoint(LOG.name, 69999, tlog.tree_hash(tree, 69999))
    with pytest.raises(KeyError):
        tlog.TileClient(files.__getitem__, cp)
    c = tlog.TileClient(files.__getitem__)
    c.trust(CP_70000)
    with pytest.raises(LookupError):
        c.read_hashes(0, 70000, 70001)
    with pytest.raises(OutsideTree):
        c.entries(69999, 70001)


def test_client_without_checkpoint_reads_nothing() -> None:
    c = tlog.TileClient(FILES_70000.__getitem__)
    with pytest.raises(LookupError):
        c.read_hashes(0, 0, 1)


FILES_1000, CP_1000 = published(1000)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(p for p in FILES_1000 if p != "checkpoint")), st.data())
def test_client_over_any_tile_with_any_byte_changed_refuses(path: str, data: st.DataObject) -> None:
    files = dict(FILES_1000)
    at = data.draw(st.integers(0, len(files[path]) - 1))
    files[path] = flip(files[path], at) if data.draw(st.booleans()) else files[path][:at]
    try:
        c = client(files)
        c.entries(0, 1000)  # reads every tile and bundle of the tree
    except TileMismatch:
        return
    raise AssertionError(f"{path} changed at byte {at} was accepted")


# --- hostile inputs ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_parse_entry_bundle_on_arbitrary_bytes_raises_only_malformed_entry_bundle(data: bytes) -> None:
    try:
        got = tlog.parse_entry_bundle(data)
    except MalformedEntryBundle:
        return
    assert tlog.entry_bundle(got) == data


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=60)
    | st.from_regex(r"tile/(entries|[0-9]{1,3})/(x[0-9]{3}/){0,3}[0-9]{1,4}(\.p/[0-9]{1,4})?", fullmatch=True)
)
def test_parse_tile_path_on_arbitrary_text_raises_only_bad_tile_path(path: str) -> None:
    try:
        tile = tlog.parse_tile_path(path)
    except BadTilePath:
        return
    assert tile.path() == path
