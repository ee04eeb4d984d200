"""The one guard a log key signs through (ledger/tlog/signing.py, spec/transparency.md §4.1): a key never
signs a tree that does not extend the one it last signed for the origin, recorded beside the key. Real
Ed25519 keys, real files and locks in temp dirs, real threads."""

from __future__ import annotations

import threading
from pathlib import Path

import nacl.signing
import pytest

from helpers.witness import LOG, Tree, entries
from pithledger import errors
from pithledger.tlog.note import Checkpoint, NoteSigner, open_checkpoint
from pithledger.tlog.signing import LogSigner, last_signed, sign_tree

SEED = bytes(range(32))


def signer(tmp_path: Path, origin: str = LOG) -> LogSigner:
    return LogSigner(origin, nacl.signing.SigningKey(SEED), tmp_path / "keys")


def sign(s: LogSigner, tree: Tree, size: int) -> bytes:
    def hash_at(m: int) -> bytes:
        if m > len(tree.leaves):
            raise errors.TlogOutOfRange(f"{m} is beyond the tree")
        return tree.root(m)

    return sign_tree(s, size, tree.root(size), hash_at)


def test_a_tree_that_does_not_extend_the_signed_one_is_refused_and_the_record_stays(tmp_path: Path) -> None:
    s = signer(tmp_path)
    ours, restored = Tree(entries(35)), Tree(entries(20) + entries(15, tag="other"))
    note = sign(s, ours, 35)
    cp, _ = open_checkpoint(note, [s.verifier])
    assert (cp.size, cp.root) == (35, ours.root(35)) == last_signed(s)
    held = s.record_path.read_bytes()
    with pytest.raises(errors.LogWouldFork) as refused:  # the same size, another root: the fork
        sign(s, restored, 35)
    assert "restore-log" in refused.value.hint
    with pytest.raises(errors.LogWouldFork):  # a shorter log than the one signed (a backup swapped in)
        sign(s, Tree(entries(20)), 20)
    with pytest.raises(errors.LogWouldFork):  # longer, but not through the signed tree
        sign(s, Tree(entries(20) + entries(30, tag="other")), 50)
    assert s.record_path.read_bytes() == held


def test_the_same_tree_an_older_prefix_and_an_extension_are_signed(tmp_path: Path) -> None:
    s = signer(tmp_path)
    tree = Tree(entries(50))
    first = sign(s, tree, 35)
    held = s.record_path.read_bytes()
    assert sign(s, tree, 35) == first  # idempotent (Ed25519 is deterministic)
    sign(s, tree, 20)  # an older prefix of what it signed (prove/checkpoint of an older tree)
    assert s.record_path.read_bytes() == held  # the record never moves back
    sign(s, tree, 50)
    assert last_signed(s) == (50, tree.root(50))


def test_the_record_is_per_key_and_origin(tmp_path: Path) -> None:
    a, b = signer(tmp_path), signer(tmp_path, "other.example/log")
    sign(a, Tree(entries(10)), 10)
    sign(b, Tree(entries(10, tag="b")), 10)  # another origin is another log
    other_key = LogSigner(LOG, nacl.signing.SigningKey(bytes(32)), tmp_path / "keys")
    sign(other_key, Tree(entries(10, tag="c")), 10)
    assert len(list((tmp_path / "keys" / "signed").glob("*.json"))) == 3


def test_a_damaged_record_refuses_to_sign(tmp_path: Path) -> None:
    s = signer(tmp_path)
    sign(s, Tree(entries(5)), 5)
    s.record_path.write_text(s.record_path.read_text().replace('"size":5', '"size":"5"'))
    with pytest.raises(errors.DamagedSignedRecord):
        sign(s, Tree(entries(5)), 5)


def test_a_bare_note_signer_cannot_sign_a_log_checkpoint(tmp_path: Path) -> None:
    bare = NoteSigner(LOG, nacl.signing.SigningKey(SEED))
    with pytest.raises(TypeError):
        sign_tree(bare, 1, Tree(entries(1)).root(1), lambda m: b"")
    assert not (tmp_path / "keys").exists()


def test_two_signers_at_once_never_both_sign_a_tree_of_one_size(tmp_path: Path) -> None:
    """serve and publish signing at the same moment for two ledgers of one key (the lock and the record)."""
    trees = [Tree(entries(35)), Tree(entries(35, tag="fork"))]
    signed: list[bytes] = []
    refused: list[Exception] = []
    start = threading.Barrier(2)

    def run(tree: Tree) -> None:
        s = signer(tmp_path)
        start.wait()
        try:
            signed.append(sign(s, tree, 35))
        except errors.LogWouldFork as exc:
            refused.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in trees]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(signed) == len(refused) == 1
    body = signed[0].split(b"\n\n")[0] + b"\n"
    assert last_signed(signer(tmp_path)) == (35, Checkpoint.parse(body.decode()).root)


def test_a_record_path_that_cannot_be_read_refuses_to_sign_rather_than_count_as_no_record(tmp_path: Path) -> None:
    """A record the key directory holds but that does not resolve (a symlink to an unmounted or moved
    store, a symlink loop) or cannot be looked at (signed/ not a directory) is no proof the key never signed.
    Before: Path.exists() said False for each, the key signed a fork and the link was replaced."""
    s = signer(tmp_path)
    sign(s, Tree(entries(35)), 35)
    s.record_path.rename(tmp_path / "moved.json")
    fork = Tree(entries(20) + entries(15, tag="other"))
    s.record_path.symlink_to(tmp_path / "absent" / "record.json")  # dangling
    with pytest.raises(errors.DamagedSignedRecord):
        sign(s, fork, 35)
    s.record_path.unlink()
    s.record_path.symlink_to(s.record_path)  # a loop
    with pytest.raises(errors.DamagedSignedRecord):
        sign(s, fork, 35)
    assert s.record_path.is_symlink()  # nothing replaced it
    s.record_path.unlink()
    s.record_path.symlink_to(tmp_path / "moved.json")  # a link that resolves is read through
    with pytest.raises(errors.LogWouldFork):
        sign(s, fork, 35)
