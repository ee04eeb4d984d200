"""The witness (C2SP tlog-witness add-checkpoint), its evidence files, and the mirror's checkpoint memory.

Real Ed25519 keys, real files in temp dirs, real threads; the fork test at the end runs real processes
(`serve --witness` on loopback, `publish --key --witness`, `sync`)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from helpers.witness import (
    LOG,
    Tree,
    _forked_sources,
    checkpoint,
    cosigned,
    entries,
    post,
    publish_log,
    rollback_doc,
)
from pithledger import errors
from pithledger.tlog import merkle
from pithledger.tlog import tiles as tlog
from pithledger.tlog import witness as w
from pithledger.tlog.note import Checkpoint, NoteSigner, verify_cosignature

# --- add-checkpoint: each status -------------------------------------------------------------------


def test_first_checkpoint_is_cosigned_and_persisted(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(5))
    note = checkpoint(log_signer, 5, tree.root(5))
    answer = post(witness, 0, [], note)
    assert answer.status == 200 and answer.content_type.startswith("text/plain")
    line = answer.body.decode()
    assert line.startswith("\u2014 witness.example/w1 ") and line.endswith("\n") and line.count("\n") == 1
    ts = verify_cosignature(Checkpoint(LOG, 5, tree.root(5)).body(), line, witness.signer.cosigner)
    assert abs(ts - time.time()) < 60 and ts > 0
    state = witness.state(LOG)
    assert state is not None and (state.size, state.root, state.note) == (5, tree.root(5), note.decode())


def test_extension_with_a_valid_proof_is_cosigned(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(40))
    for size in (3, 8, 13, 13, 40):  # includes a power of two, and the same checkpoint again
        cosigned(witness, tree, log_signer, size)
        assert witness.state(LOG).size == size  # type: ignore[union-attr]


def test_unknown_origin_is_404(witness: w.Witness) -> None:
    other = NoteSigner("other.example/log", nacl.signing.SigningKey.generate())
    answer = post(witness, 0, [], checkpoint(other, 1, merkle.leaf_hash(b"x"), origin="other.example/log"))
    assert answer.status == 404 and b"unknown-log" in answer.body


def test_checkpoint_signed_by_another_key_is_403(witness: w.Witness) -> None:
    impostor = NoteSigner(LOG, nacl.signing.SigningKey.generate())  # same name, another key: ignored, so unsigned
    answer = post(witness, 0, [], checkpoint(impostor, 1, merkle.leaf_hash(b"x")))
    assert answer.status == 403 and witness.state(LOG) is None


def test_tampered_checkpoint_text_is_403(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(4))
    note = checkpoint(log_signer, 4, tree.root(4)).replace(b"\n4\n", b"\n5\n", 1)  # the trusted key's signature fails
    assert post(witness, 0, [], note).status == 403
    assert witness.state(LOG) is None


def test_old_size_above_the_checkpoint_is_400(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(4))
    assert post(witness, 5, [], checkpoint(log_signer, 4, tree.root(4))).status == 400


def test_old_size_not_the_cosigned_one_is_409_with_that_size(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(9))
    cosigned(witness, tree, log_signer, 6)
    for old in (0, 5, 7):
        answer = post(witness, old, tree.proof(old, 9) if old else [], checkpoint(log_signer, 9, tree.root(9)))
        assert (answer.status, answer.content_type, answer.body) == (409, "text/x.tlog.size", b"6\n")
    assert witness.state(LOG).size == 6  # type: ignore[union-attr]


def test_size_zero_with_a_root_other_than_the_empty_tree_is_422(witness: w.Witness, log_signer: NoteSigner) -> None:
    assert post(witness, 0, [], checkpoint(log_signer, 0, merkle.leaf_hash(b"x"))).status == 422
    assert post(witness, 0, [], checkpoint(log_signer, 0, merkle.EMPTY_ROOT)).status == 200


def test_old_size_zero_with_a_proof_is_422(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(4))
    answer = post(witness, 0, [tree.root(2)], checkpoint(log_signer, 4, tree.root(4)))
    assert answer.status == 422 and witness.state(LOG) is None


def test_equal_size_with_a_proof_is_422(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(4))
    note = cosigned(witness, tree, log_signer, 3)
    assert post(witness, 3, [tree.root(2)], note).status == 422
    assert list(witness.evidence_dir.glob("*.json")) == []  # a malformed request, not two views


# --- add-checkpoint: every mutation of a valid request is refused --------------------------------------


def _valid_request(witness: w.Witness, log_signer: NoteSigner) -> tuple[Tree, bytes]:
    tree = Tree(entries(23))
    cosigned(witness, tree, log_signer, 7)
    return tree, w.request_body(7, tree.proof(7, 23), checkpoint(log_signer, 23, tree.root(23)))


def test_proof_hash_bit_flipped_is_422_everywhere(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree, _ = _valid_request(witness, log_signer)
    proof = tree.proof(7, 23)
    note = checkpoint(log_signer, 23, tree.root(23))
    for i in range(len(proof)):
        for bit in (0, 77, 255):
            bad = list(proof)
            flipped = bytearray(bad[i])
            flipped[bit // 8] ^= 1 << (bit % 8)
            bad[i] = bytes(flipped)
            assert post(witness, 7, bad, note).status == 422
    assert witness.state(LOG).size == 7  # type: ignore[union-attr]
    assert post(witness, 7, proof, note).status == 200


@pytest.mark.parametrize("mutation", ["proof-truncated", "proof-extended", "proof-reordered", "proof-empty"])
def test_proof_shape_mutations_are_422(witness: w.Witness, log_signer: NoteSigner, mutation: str) -> None:
    tree, _ = _valid_request(witness, log_signer)
    proof = tree.proof(7, 23)
    bad = {
        "proof-truncated": proof[:-1],
        "proof-extended": proof + [proof[0]],
        "proof-reordered": proof[::-1],
        "proof-empty": [],
    }[mutation]
    assert post(witness, 7, bad, checkpoint(log_signer, 23, tree.root(23))).status == 422
    assert witness.state(LOG).size == 7  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "mutation",
    [
        "old-leading-zero",
        "old-missing",
        "old-negative",
        "old-not-decimal",
        "old-huge",
        "old-space",
        "proof-not-base64",
        "proof-short-hash",
        "proof-noncanonical-base64",
        "no-blank-line",
        "no-checkpoint",
        "too-many-proof-lines",
        "crlf-lines",
        "body-too-large",
        "note-not-utf8",
        "note-without-signature",
    ],
)
def test_malformed_bodies_are_400(witness: w.Witness, log_signer: NoteSigner, mutation: str) -> None:
    tree, body = _valid_request(witness, log_signer)
    head, _, rest = body.partition(b"\n")
    note = checkpoint(log_signer, 23, tree.root(23))
    h = base64.b64encode(tree.root(2))
    bad = {
        "old-leading-zero": b"old 07\n" + rest,
        "old-missing": b"old\n" + rest,
        "old-negative": b"old -7\n" + rest,
        "old-not-decimal": b"old seven\n" + rest,
        "old-huge": b"old 99999999999999999999\n" + rest,
        "old-space": b"old  7\n" + rest,
        "proof-not-base64": b"old 7\n!!!!\n\n" + note,
        "proof-short-hash": b"old 7\n" + base64.b64encode(b"x" * 31) + b"\n\n" + note,
        "proof-noncanonical-base64": b"old 7\n" + h[:-2] + b"B=\n\n" + note
        if h.endswith(b"=")
        else b"old 7\n" + h + b"=\n\n" + note,
        "no-blank-line": b"old 7\n" + h + b"\n",
        "no-checkpoint": b"old 7\n" + h + b"\n\n",
        "too-many-proof-lines": b"old 7\n" + (h + b"\n") * 64 + b"\n" + note,
        "crlf-lines": body.replace(b"\n", b"\r\n"),
        "body-too-large": body + b"x" * w.MAX_BODY,
        "note-not-utf8": b"old 7\n\n" + note.replace(LOG.encode(), b"\xff" + LOG.encode()[1:], 1),
        "note-without-signature": b"old 7\n\n" + Checkpoint(LOG, 23, tree.root(23)).body().encode(),
    }[mutation]
    answer = witness.handle(bad)
    assert answer.status in (400, 404), (mutation, answer)  # a mangled origin line names no known log
    assert witness.state(LOG).size == 7  # type: ignore[union-attr]


# --- state: persisted before the answer, serialised per origin ------------------------------------------


def test_state_is_on_disk_before_the_answer(witness: w.Witness, log_signer: NoteSigner) -> None:
    """The witness stops between persisting and answering (a crash): the state holds the new checkpoint,
    the log gets no cosignature; retried, the log learns the new size (409) and gets it cosigned."""
    tree = Tree(entries(12))
    cosigned(witness, tree, log_signer, 5)

    def crash() -> None:
        raise SystemExit("killed between persisting and answering")

    witness.after_persist = crash
    note = checkpoint(log_signer, 12, tree.root(12))
    with pytest.raises(SystemExit):
        post(witness, 5, tree.proof(5, 12), note)
    witness.after_persist = None
    fresh = w.Witness(witness.name, witness.signer, witness.logs, witness.state_dir)  # a restarted witness
    assert fresh.state(LOG).size == 12  # type: ignore[union-attr]
    assert post(fresh, 5, tree.proof(5, 12), note).body == b"12\n"
    assert post(fresh, 12, [], note).status == 200


def test_state_file_is_replaced_atomically(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(3))
    cosigned(witness, tree, log_signer, 3)
    names = sorted(p.name for p in witness.state_dir.iterdir())
    assert names == [f"{w.origin_hash(LOG)}.json", f"{w.origin_hash(LOG)}.lock"]  # no temporary file left behind


def test_two_requests_for_one_origin_are_serialised(
    witness: w.Witness, log_signer: NoteSigner, monkeypatch: Any
) -> None:
    """Both ask with old size 0 (the witness holds nothing): the lock lets one check-and-persist finish
    before the other checks, so exactly one is cosigned and the other learns its size (409)."""
    tree = Tree(entries(9))
    persist = w.Witness._persist

    def slow(self: w.Witness, cp: w.Signed) -> None:
        time.sleep(0.3)  # widen the window between the check and the write
        persist(self, cp)

    monkeypatch.setattr(w.Witness, "_persist", slow)
    answers: list[w.Answer] = []
    start = threading.Barrier(2)

    def go(size: int) -> None:
        start.wait()
        answers.append(post(witness, 0, [], checkpoint(log_signer, size, tree.root(size))))

    threads = [threading.Thread(target=go, args=(n,)) for n in (4, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status for a in answers) == [200, 409]
    won = next(a for a in answers if a.status == 409).body
    assert int(won) == witness.state(LOG).size  # type: ignore[union-attr]


# --- inconsistent checkpoints: refused, evidence written, checked offline ----------------------------------


def _fork(witness: w.Witness, log_signer: NoteSigner, old: int, new: int) -> tuple[w.Answer, Path | None]:
    honest, forked = Tree(entries(max(old, new))), Tree(entries(max(old, new), tag="b"))
    cosigned(witness, honest, log_signer, old)
    answer = post(
        witness, old, forked.proof(old, new) if old < new else [], checkpoint(log_signer, new, forked.root(new))
    )
    files = list(witness.evidence_dir.glob("*.json"))
    return answer, files[0] if files else None


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        (5, 5, "same-size-different-root"),
        (5, 11, "inconsistent-proof"),
        (3, 4, "inconsistent-proof"),
        (8, 11, "bad-proof"),
    ],
)
def test_fork_is_refused_with_evidence(
    witness: w.Witness, log_signer: NoteSigner, old: int, new: int, kind: str
) -> None:
    answer, path = _fork(witness, log_signer, old, new)
    assert answer.status == 422 and b"inconsistent-checkpoint" in answer.body
    assert witness.state(LOG).size == old  # type: ignore[union-attr]
    if kind == "bad-proof":
        # a power-of-two old size: the log's proof omits the old root, so a pushed proof cannot show another
        # one; it proves nothing of the log (anyone may send any proof), so nothing is kept
        assert path is None
        return
    assert path is not None
    verdict = w.check_evidence(path.read_bytes(), log_signer.vkey)
    assert verdict.kind == kind and (verdict.old_size, verdict.new_size) == (old, new) and verdict.proven


def test_evidence_of_a_power_of_two_old_size_is_proven_with_the_new_trees_prefix_root(
    witness: w.Witness, log_signer: NoteSigner
) -> None:
    honest, forked = Tree(entries(11)), Tree(entries(11, tag="b"))
    cosigned(witness, honest, log_signer, 8)
    with pytest.raises(errors.Inconsistent) as caught:
        witness.add_checkpoint(
            8, forked.proof(8, 11), checkpoint(log_signer, 11, forked.root(11)), prefix=forked.root(8)
        )
    assert caught.value.evidence is not None
    assert w.check_evidence(caught.value.evidence.read_bytes()).kind == "inconsistent-proof"


def _evidence(witness: w.Witness, log_signer: NoteSigner) -> dict[str, Any]:
    _, path = _fork(witness, log_signer, 5, 11)
    assert path is not None
    doc: dict[str, Any] = json.loads(path.read_bytes())
    return doc


@pytest.mark.parametrize(
    "mutation",
    [
        "old-checkpoint-edited",
        "new-checkpoint-edited",
        "kind-changed",
        "proof-hash-flipped",
        "origin-changed",
        "field-added",
        "field-removed",
        "wrong-type",
        "not-json",
    ],
)
def test_altered_evidence_is_refused(witness: w.Witness, log_signer: NoteSigner, mutation: str) -> None:
    doc = _evidence(witness, log_signer)
    assert w.check_evidence(json.dumps(doc).encode()).proven
    if mutation == "old-checkpoint-edited":
        doc["old_checkpoint"] = doc["old_checkpoint"].replace("\n5\n", "\n6\n", 1)
    elif mutation == "new-checkpoint-edited":
        doc["new_checkpoint"] = doc["new_checkpoint"].replace("\n11\n", "\n12\n", 1)
    elif mutation == "kind-changed":
        doc["kind"] = "same-size-different-root"
    elif mutation == "proof-hash-flipped":
        raw = bytearray(base64.b64decode(doc["proof"][0]))
        raw[0] ^= 1
        doc["proof"][0] = base64.b64encode(bytes(raw)).decode()
    elif mutation == "origin-changed":
        doc["origin"] = "other.example/log"
    elif mutation == "field-added":
        doc["note"] = "trust me"
    elif mutation == "field-removed":
        del doc["observer"]
    elif mutation == "wrong-type":
        doc["proof"] = "all of it"
    data = b"{not json" if mutation == "not-json" else json.dumps(doc).encode()
    with pytest.raises(errors.BadEvidence):
        w.check_evidence(data)


def test_evidence_under_another_log_key_is_refused(witness: w.Witness, log_signer: NoteSigner) -> None:
    doc = _evidence(witness, log_signer)
    other = NoteSigner(LOG, nacl.signing.SigningKey.generate())
    with pytest.raises(errors.BadEvidence):
        w.check_evidence(json.dumps(doc).encode(), other.vkey)
    doc["log_key"] = other.vkey  # the file cannot name a key of its own choosing either
    with pytest.raises(errors.BadEvidence):
        w.check_evidence(json.dumps(doc).encode())


def test_consistent_pair_is_no_evidence(log_signer: NoteSigner) -> None:
    tree = Tree(entries(11))
    doc = w.evidence_doc(
        origin=LOG,
        log_key=log_signer.vkey,
        old=checkpoint(log_signer, 5, tree.root(5)).decode(),
        new=checkpoint(log_signer, 11, tree.root(11)).decode(),
        proof=tree.proof(5, 11),
        prefix=None,
        observer="t",
        observed_at="2026-01-01T00:00:00Z",
        kind="inconsistent-proof",
    )
    verdict = w.check_evidence(json.dumps(doc).encode())
    assert verdict.kind == "consistent" and not verdict.proven


def test_rollback_is_an_observation_not_a_proof(log_signer: NoteSigner) -> None:
    doc = rollback_doc(log_signer)
    verdict = w.check_evidence(json.dumps(doc).encode())
    assert verdict.kind == "rollback" and not verdict.proven


def test_the_same_fork_twice_is_one_evidence_file(witness: w.Witness, log_signer: NoteSigner) -> None:
    forked = Tree(entries(11, tag="b"))
    _fork(witness, log_signer, 5, 11)
    post(witness, 5, forked.proof(5, 11), checkpoint(log_signer, 11, forked.root(11)))
    assert len(list(witness.evidence_dir.glob("*.json"))) == 1


def test_prefix_root_matches_the_tree_for_every_pair_of_small_sizes() -> None:
    tree = Tree(entries(33))
    for new in range(2, 34):
        for old in range(1, new):
            got = w.prefix_root(old, new, tree.proof(old, new))
            assert got == (None if old & (old - 1) == 0 else tree.root(old)), (old, new)


# --- config ---------------------------------------------------------------------------------------------


def _config(tmp_path: Path, **changes: Any) -> Path:
    signer = NoteSigner(LOG, nacl.signing.SigningKey.generate())
    doc: dict[str, Any] = {
        "config_type": w.CONFIG_TYPE,
        "config_version": "1",
        "name": "witness.example/w1",
        "key": "w1",
        "logs": [{"origin": LOG, "vkey": signer.vkey}],
    }
    doc.update(changes)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = tmp_path / "witness.json"
    path.write_text(json.dumps(doc))
    return path


def test_config_is_read(tmp_path: Path) -> None:
    cfg = w.load_config(_config(tmp_path, state_dir="st"))
    assert cfg.name == "witness.example/w1" and cfg.key == "w1" and list(cfg.logs) == [LOG]
    assert cfg.state_dir == tmp_path / "st"


@pytest.mark.parametrize(
    ("mutation", "changes"),
    [
        ("wrong-type", {"config_type": "x"}),
        ("wrong-version", {"config_version": "2"}),
        ("name-with-space", {"name": "a b"}),
        ("name-with-plus", {"name": "a+b"}),
        ("no-key", {"key": None}),
        ("logs-not-list", {"logs": {}}),
        ("log-bad-vkey", {"logs": [{"origin": LOG, "vkey": "nope"}]}),
        ("log-extra-field", {"logs": [{"origin": LOG, "vkey": "x", "k": 1}]}),
        ("origin-twice", "twice"),
        ("unknown-field", {"extra": 1}),
        ("not-json", "garbage"),
    ],
)
def test_bad_configs_are_named(tmp_path: Path, mutation: str, changes: Any) -> None:
    if changes == "garbage":
        path = tmp_path / "witness.json"
        path.write_text("{")
    elif changes == "twice":
        path = _config(tmp_path)
        doc = json.loads(path.read_text())
        doc["logs"] *= 2
        path.write_text(json.dumps(doc))
    else:
        path = _config(tmp_path, **changes)
    with pytest.raises(errors.BadConfig):
        w.load_config(path)


def test_origin_hash_is_the_sha256_hex_of_the_origin() -> None:
    assert w.origin_hash(LOG) == hashlib.sha256(LOG.encode()).hexdigest()


# --- the mirror's memory of each log (ledger/mirror/checkpoints.py) -------------------------------------------------

from pithledger.mirror import checkpoints as logcheck  # noqa: E402
from pithledger.tlog.note import cosign  # noqa: E402


def test_a_source_without_a_checkpoint_is_unlogged(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    assert logcheck.check_source(tmp_path / "ledger", str(src)).status == "unlogged"
    (src / "pith-mirrors.json").write_text(json.dumps({"manifest_type": "pith_mirror_manifest", "mirrors": []}))
    check = logcheck.check_source(tmp_path / "ledger", str(src))
    assert check.status == "unlogged" and check.pending is None and "unlogged" in check.line()


def test_first_then_same_then_extends(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    items = entries(300)  # two levels of tiles
    publish_log(src, log_signer, items[:5])
    first = logcheck.check_source(ledger, str(src))
    assert first.status == "first" and logcheck.remembered(ledger, LOG) is None  # nothing remembered before commit
    logcheck.commit(ledger, first)
    assert logcheck.remembered(ledger, LOG).size == 5  # type: ignore[union-attr]
    same = logcheck.check_source(ledger, str(src))
    assert same.status == "same"
    for size in (8, 200, 256, 257, 300):
        publish_log(src, log_signer, items[:size])
        ext = logcheck.check_source(ledger, str(src))
        assert (ext.status, ext.size) == ("extends", size)
        logcheck.commit(ledger, ext)
    assert logcheck.remembered(ledger, LOG).size == 300  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("old", "new", "kind", "proven"),
    [
        (5, 5, "same-size-different-root", True),
        (5, 11, "inconsistent-proof", True),
        (8, 11, "inconsistent-proof", True),
        (256, 300, "inconsistent-proof", True),
        (11, 5, "rollback", False),
    ],
)
def test_a_fork_is_named_with_evidence(
    tmp_path: Path, log_signer: NoteSigner, old: int, new: int, kind: str, proven: bool
) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, entries(old))
    logcheck.commit(ledger, logcheck.check_source(ledger, str(src)))
    forked = entries(new, tag="b") if kind != "rollback" else entries(new)
    publish_log(src, log_signer, forked)
    with pytest.raises(errors.LogFork) as caught:
        logcheck.check_source(ledger, str(src))
    assert str(caught.value.evidence) in caught.value.message
    verdict = w.check_evidence(caught.value.evidence.read_bytes(), log_signer.vkey)
    assert (verdict.kind, verdict.proven) == (kind, proven)
    assert logcheck.remembered(ledger, LOG).size == old  # type: ignore[union-attr]


def test_a_changed_log_key_is_named(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, entries(3))
    logcheck.commit(ledger, logcheck.check_source(ledger, str(src)))
    rotated = NoteSigner(LOG, nacl.signing.SigningKey.generate())
    publish_log(src, rotated, entries(4))
    with pytest.raises(errors.LogKeyChanged):
        logcheck.check_source(ledger, str(src))
    # given by the user (from the log's operator), the new key is used, and pinned once the run commits
    check = logcheck.check_source(ledger, str(src), log_key=rotated.vkey)
    assert check.status == "extends"
    logcheck.commit(ledger, check)
    assert logcheck.remembered(ledger, LOG).log_key == rotated.vkey  # type: ignore[union-attr]


def test_a_source_key_other_than_the_one_given_is_refused(tmp_path: Path, log_signer: NoteSigner) -> None:
    src = tmp_path / "src"
    publish_log(src, log_signer, entries(3))
    other = NoteSigner(LOG, nacl.signing.SigningKey.generate())
    with pytest.raises(errors.BadCheckpoint):
        logcheck.check_source(tmp_path / "ledger", str(src), log_key=other.vkey)


def test_a_manifest_key_that_does_not_sign_the_checkpoint_is_refused(tmp_path: Path, log_signer: NoteSigner) -> None:
    src = tmp_path / "src"
    other = NoteSigner(LOG, nacl.signing.SigningKey.generate())
    publish_log(src, log_signer, entries(3), manifest_key=other.vkey)
    with pytest.raises(errors.BadCheckpoint):
        logcheck.check_source(tmp_path / "ledger", str(src))


def test_witness_cosignatures_are_checked(tmp_path: Path, log_signer: NoteSigner) -> None:
    src = tmp_path / "src"
    w1 = NoteSigner("witness.example/w1", nacl.signing.SigningKey.generate())
    w2 = NoteSigner("witness.example/w2", nacl.signing.SigningKey.generate())
    publish_log(src, log_signer, entries(3), cosigners=(w1,))
    check = logcheck.check_source(tmp_path / "ledger", str(src), witness_keys=[w1.cosigner.vkey])
    assert check.cosigned_by == ["witness.example/w1"]
    with pytest.raises(errors.NotWitnessed):
        logcheck.check_source(tmp_path / "ledger", str(src), witness_keys=[w1.cosigner.vkey, w2.cosigner.vkey])
    note = (src / "checkpoint").read_bytes()
    forged = note[:-10] + (b"A" if note[-10:-9] != b"A" else b"B") + note[-9:]  # the cosignature's last bytes altered
    (src / "checkpoint").write_bytes(forged)
    logcheck.check_source(tmp_path / "ledger", str(src))  # the log key's own signature still verifies
    with pytest.raises(errors.NotWitnessed) as failed:
        logcheck.check_source(tmp_path / "ledger", str(src), witness_keys=[w1.cosigner.vkey])
    # named as the witness's failure, not the log key's (issue #41 item 10)
    assert "witness witness.example/w1" in failed.value.message and "log key" not in failed.value.message


def test_tiles_that_do_not_hash_to_the_signed_root_are_refused(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, entries(5))
    logcheck.commit(ledger, logcheck.check_source(ledger, str(src)))
    publish_log(src, log_signer, entries(9))
    tile = src / tlog.tile_path(0, 0, 9)
    data = bytearray(tile.read_bytes())
    data[0] ^= 1
    tile.write_bytes(bytes(data))
    with pytest.raises(errors.BadCheckpoint):
        logcheck.check_source(ledger, str(src))
    assert not logcheck.evidence_dir(ledger).exists()  # a broken copy of the log is not evidence against it


def test_memory_is_never_rolled_back(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, entries(4))
    small = logcheck.check_source(ledger, str(src))
    publish_log(src, log_signer, entries(9))
    large = logcheck.check_source(ledger, str(src))
    logcheck.commit(ledger, large)
    logcheck.commit(ledger, small)  # a slower concurrent run commits last
    assert logcheck.remembered(ledger, LOG).size == 9  # type: ignore[union-attr]


def test_two_runs_of_one_origin_take_turns_so_a_fork_between_their_views_is_caught(
    tmp_path: Path, log_signer: NoteSigner
) -> None:
    """Two runs check two views of the log at once, each extending what the ledger remembered: the second
    waits for the first's commit, checks against it, and names the fork (before, it accepted its side
    too and its commit dropped it silently: a mirror fed one history by each source saw none)."""
    ledger, a, b = _forked_sources(tmp_path, log_signer)
    first = logcheck.check_source(ledger, str(a), hold=True)
    assert (first.status, first.size) == ("extends", 9)
    waited = threading.Event()
    outcome: list[Any] = []

    def second() -> None:
        try:
            outcome.append(logcheck.check_source(ledger, str(b), hold=True, on_wait=lambda origin: waited.set()))
        except Exception as exc:  # noqa: BLE001 - the outcome is asserted below
            outcome.append(exc)

    runner = threading.Thread(target=second)
    runner.start()
    try:
        assert waited.wait(10), "the second run did not find the origin's lock held"
        time.sleep(0.2)
        assert runner.is_alive() and not outcome  # still waiting: it has not read the memory yet
        logcheck.commit(ledger, first)
    finally:
        first.release()
        runner.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], errors.LogFork), outcome
    assert json.loads(outcome[0].evidence.read_text())["kind"] == "same-size-different-root"
    remembered = logcheck.remembered(ledger, LOG)
    assert remembered is not None and remembered.source == str(a) and remembered.size == 9


def test_a_released_check_lets_the_next_run_through_and_release_is_idempotent(
    tmp_path: Path, log_signer: NoteSigner
) -> None:
    ledger, a, _ = _forked_sources(tmp_path, log_signer)
    stopped = logcheck.check_source(ledger, str(a), hold=True)
    stopped.release()  # a run that failed before its commit remembers nothing and holds nothing
    stopped.release()
    again = logcheck.check_source(
        ledger, str(a), hold=True, on_wait=lambda origin: pytest.fail("the lock was left held")
    )
    assert again.status == "extends"
    logcheck.commit(ledger, again)
    again.release()
    assert logcheck.remembered(ledger, LOG).size == 9  # type: ignore[union-attr]


def test_a_check_that_fails_releases_the_lock(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, a, b = _forked_sources(tmp_path, log_signer)
    logcheck.commit(ledger, logcheck.check_source(ledger, str(a)))
    with pytest.raises(errors.LogFork):
        logcheck.check_source(ledger, str(b), hold=True)
    same = logcheck.check_source(
        ledger, str(a), hold=True, on_wait=lambda origin: pytest.fail("the failed check kept the lock")
    )
    assert same.status == "same"
    same.release()


def test_an_empty_log_must_sign_the_empty_trees_root(tmp_path: Path, log_signer: NoteSigner) -> None:
    """A size-0 checkpoint with another root cannot be right, and once remembered any later tree would
    pass as extending it (nothing is proved from size 0): refused, nothing remembered."""
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, [])
    empty = logcheck.check_source(ledger, str(src))
    assert (empty.status, empty.size) == ("first", 0)
    (src / "checkpoint").write_bytes(checkpoint(log_signer, 0, hashlib.sha256(b"not empty").digest()))
    with pytest.raises(errors.BadCheckpoint, match="root of the empty tree"):
        logcheck.check_source(ledger, str(src))
    assert logcheck.remembered(ledger, LOG) is None


def test_pull_mode_witness_builds_its_proof_from_tiles(
    tmp_path: Path, log_signer: NoteSigner, witness: w.Witness
) -> None:
    src = tmp_path / "src"
    items = entries(300)
    for size in (8, 8, 100, 256, 300):
        publish_log(src, log_signer, items[:size])
        cp, line = logcheck.witness_source(witness, str(src))
        assert cp.size == size
        verify_cosignature(cp.text, line, witness.signer.cosigner)
    publish_log(src, log_signer, entries(400, tag="b"))
    with pytest.raises(errors.Inconsistent) as caught:
        logcheck.witness_source(witness, str(src))
    assert caught.value.evidence is not None and w.check_evidence(caught.value.evidence.read_bytes()).proven
    publish_log(src, log_signer, items[:200])
    with pytest.raises(errors.Inconsistent) as rolled:
        logcheck.witness_source(witness, str(src))
    assert rolled.value.evidence is not None and w.check_evidence(rolled.value.evidence.read_bytes()).kind == "rollback"
    assert witness.state(LOG).size == 300  # type: ignore[union-attr]


# --- the commands, as real processes ---------------------------------------------------------------------


# --- serve --witness: POST /add-checkpoint over real HTTP ------------------------------------------------


# --- the fork test, through real processes --------------------------------------------------------


def test_a_run_waits_for_the_origin_at_most_until_its_deadline(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, a, _ = _forked_sources(tmp_path, log_signer)
    holding = logcheck.check_source(ledger, str(a), hold=True)
    try:
        started = time.monotonic()
        with pytest.raises(errors.OriginBusy, match="deadline of 0.5 s"):
            logcheck.check_source(ledger, str(a), hold=True, deadline=0.5)
        assert time.monotonic() - started < 5
    finally:
        holding.release()


def test_a_damaged_witness_state_is_a_500_and_nothing_is_cosigned(witness: w.Witness, log_signer: NoteSigner) -> None:
    tree = Tree(entries(6))
    cosigned(witness, tree, log_signer, 3)
    state = witness.state_dir / f"{w.origin_hash(LOG)}.json"
    state.write_text(state.read_text().replace('"root":"', '"root":"!'))
    answer = post(witness, 3, tree.proof(3, 6), checkpoint(log_signer, 6, tree.root(6)))
    assert answer.status == 500 and b"damaged-witness-state" in answer.body
    with pytest.raises(errors.DamagedState):
        witness.state(LOG)


def test_a_damaged_memory_or_a_checkpoint_that_is_no_note_is_named(tmp_path: Path, log_signer: NoteSigner) -> None:
    ledger, src = tmp_path / "ledger", tmp_path / "src"
    publish_log(src, log_signer, entries(3))
    logcheck.commit(ledger, logcheck.check_source(ledger, str(src)))
    memory = logcheck.memory_path(ledger, LOG)
    memory.write_text("{}")
    with pytest.raises(errors.DamagedMemory):
        logcheck.check_source(ledger, str(src))
    memory.unlink()
    (src / "checkpoint").write_bytes(b"no newline at all")
    with pytest.raises(errors.BadCheckpoint):
        logcheck.check_source(ledger, str(src))


# --- publish --witness: what a witness's answer may add to the checkpoint --------------------------------


def test_a_witness_answer_adds_only_cosignatures_under_new_names(log_signer: NoteSigner) -> None:
    """A reader refuses a whole note on a failing signature by a key it trusts (spec §2.1), so an answer
    in the log's name, in another witness's, or that is not a cosignature at all is refused whole: the
    checkpoint stays verifiable for every reader."""
    from pithledger.mirror.checkpoints import _foreign_lines

    tree = Tree(entries(5))
    note = checkpoint(log_signer, 5, tree.root(5))
    text = Checkpoint(LOG, 5, tree.root(5)).body()
    w1 = NoteSigner("witness.example/w1", nacl.signing.SigningKey.generate())
    w2 = NoteSigner("witness.example/w2", nacl.signing.SigningKey.generate())
    good = cosign(text, w1, 1_700_000_000)
    assert _foreign_lines(note, [], [good]) == ""
    forged_log = "\u2014 " + LOG + " " + base64.b64encode(log_signer.key_id + bytes(72)).decode() + "\n"
    assert "already on the checkpoint" in _foreign_lines(note, [], [forged_log])
    assert "already on the checkpoint" in _foreign_lines(
        note, [good], [cosign(text, NoteSigner("witness.example/w1", nacl.signing.SigningKey.generate()), 1)]
    )
    plain = w2.sign(text).decode().split("\n\n", 1)[1]  # an Ed25519 note signature, not a cosignature
    assert "not a cosignature" in _foreign_lines(note, [], [plain])
    assert "at most" in _foreign_lines(note, [], [cosign(text, w2, 1)] * 5)
    assert _foreign_lines(note, [good], [cosign(text, w2, 1_700_000_001)]) == ""
    assert _foreign_lines(note, [], []) == "no signature lines"
