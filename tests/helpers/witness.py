"""What tests/unit/tlog/test_witness.py and tests/e2e/tlog/test_witness.py share: An in-memory log tree, its
checkpoints and entries, the `log_signer` and `witness` fixtures, and posting a checkpoint to a witness."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from pithledger.mirror import checkpoints as logcheck  # noqa: E402
from pithledger.tlog import merkle
from pithledger.tlog import tiles as tlog
from pithledger.tlog import witness as w
from pithledger.tlog.note import Checkpoint, NoteSigner, add_signatures, cosign  # noqa: E402

LOG = "example.org/log"


class Tree:
    """A log's tree over entries held in memory (a tlog.HashReader)."""

    def __init__(self, entries: list[bytes]) -> None:
        self.leaves = [merkle.leaf_hash(e) for e in entries]

    def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        step = 1 << level
        if end * step > len(self.leaves):
            raise LookupError("outside")
        return [merkle.root(self.leaves[i * step : (i + 1) * step]) for i in range(start, end)]

    def root(self, size: int) -> bytes:
        return merkle.root(self.leaves[:size])

    def proof(self, old: int, new: int) -> list[bytes]:
        return tlog.consistency_proof(self, old, new)


def entries(n: int, tag: str = "a") -> list[bytes]:
    return [f"{tag}-entry-{i}".encode() for i in range(n)]


def checkpoint(signer: NoteSigner, size: int, root: bytes, origin: str = LOG) -> bytes:
    return signer.sign(Checkpoint(origin, size, root).body())


@pytest.fixture
def log_signer() -> NoteSigner:
    return NoteSigner(LOG, nacl.signing.SigningKey.generate())


@pytest.fixture
def witness(tmp_path: Path, log_signer: NoteSigner) -> w.Witness:
    me = NoteSigner("witness.example/w1", nacl.signing.SigningKey.generate())
    return w.Witness("witness.example/w1", me, {LOG: w.LogConfig(LOG, log_signer.vkey)}, tmp_path / "state")


def post(wit: w.Witness, old: int, proof: list[bytes], note: bytes) -> w.Answer:
    return wit.handle(w.request_body(old, proof, note))


def cosigned(wit: w.Witness, tree: Tree, signer: NoteSigner, size: int) -> bytes:
    """Cosign size ``size`` of ``tree`` starting from whatever the witness holds."""
    last = wit.state(LOG)
    old = last.size if last else 0
    note = checkpoint(signer, size, tree.root(size))
    answer = post(wit, old, tree.proof(old, size) if 0 < old < size else [], note)
    assert answer.status == 200, answer.body
    return note


def rollback_doc(signer: NoteSigner) -> dict[str, Any]:
    """Evidence of a rollback: the log signed size 11, then size 5 (an observation, no proof possible)."""
    tree = Tree(entries(11))
    return w.evidence_doc(
        origin=LOG,
        log_key=signer.vkey,
        old=checkpoint(signer, 11, tree.root(11)).decode(),
        new=checkpoint(signer, 5, tree.root(5)).decode(),
        proof=[],
        prefix=None,
        observer="t",
        observed_at="2026-01-01T00:00:00Z",
        kind="rollback",
    )


def publish_log(
    base: Path,
    signer: NoteSigner,
    items: list[bytes],
    *,
    cosigners: tuple[NoteSigner, ...] = (),
    manifest_key: str | None = None,
    origin: str = LOG,
) -> bytes:
    """A published log as tlog-surface lays it out: pith-mirrors.json naming checkpoint + log_key,
    the signed checkpoint, its tiles. Returns the checkpoint note."""
    tree = Tree(items)
    base.mkdir(parents=True, exist_ok=True)
    for rel, data in tlog.tiles_for(tree, lambda s, e: items[s:e], len(items)):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    body = Checkpoint(origin, len(items), tree.root(len(items))).body()
    note = signer.sign(body)
    if cosigners:
        note = add_signatures(note, [cosign(body, c, int(time.time())) for c in cosigners])
    (base / "checkpoint").write_bytes(note)
    path = base / "pith-mirrors.json"
    manifest = (
        json.loads(path.read_text())
        if path.exists()
        else {"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0", "mirrors": []}
    )
    manifest.update(checkpoint="checkpoint", log_key=manifest_key or signer.vkey, origin=origin)
    (base / "pith-mirrors.json").write_text(json.dumps(manifest))
    return note


def _forked_sources(tmp_path: Path, signer: NoteSigner) -> tuple[Path, Path, Path]:
    """A ledger that remembers size 5 of the log, and two sources of it that fork after that size: both
    extend what the ledger saw, neither extends the other (two signed trees of size 9)."""
    ledger, a, b = tmp_path / "ledger", tmp_path / "src-a", tmp_path / "src-b"
    publish_log(a, signer, entries(5))
    logcheck.commit(ledger, logcheck.check_source(ledger, str(a)))
    publish_log(a, signer, entries(9))
    publish_log(b, signer, entries(5) + entries(4, tag="b"))
    return ledger, a, b
