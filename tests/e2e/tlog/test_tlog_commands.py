"""The log's verbs for people (spec/transparency.md §4, §5): `checkpoint`, `prove`, `verify-proof`,
`consistency`. Real CLI subprocesses, real keys, real LMDB ledgers grown batch by batch; proofs at
several sizes; every field of a proof document forged in turn, each refused; a fork named."""

from __future__ import annotations

import base64
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from helpers.eventpool import BOB
from helpers.tlogkit import SUBJECT, attestations, base_ledger, grow, pl, vkey_of
from pithledger.errors import BadProof
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.keys import KeyStore
from pithledger.store import Ledger
from pithledger.tlog.merkle import leaf_hash, root
from pithledger.tlog.note import NoteVerifier, open_checkpoint
from pithledger.tlog.proofs import inclusion_document, log_signer, verify_inclusion_document

KEY = "mirror"


@dataclass
class Grown:
    tmp: Path
    ledger: Path
    vkey: str
    checkpoints: list[Path]  # one signed checkpoint file per stage: sizes 65, 266, 566
    proofs: dict[tuple[int, int], Path]  # (stage, index) -> proof file
    ids: list[str]  # event ids in log order


def _log_ids(tmp: Path, ledger: Path) -> list[str]:
    return [
        json.loads(line)["event_id"] for line in pl(tmp, "--ledger", str(ledger), "log", "--json").stdout.splitlines()
    ]


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Grown:
    tmp = tmp_path_factory.mktemp("tlog-cli")
    pl(tmp, "keys", "new", KEY)
    ledger = base_ledger(tmp)
    checkpoints: list[Path] = []
    proofs: dict[tuple[int, int], Path] = {}
    for stage, (grow_by, start) in enumerate(((0, 0), (200, 0), (300, 200))):
        if grow_by:
            grow(tmp, ledger, grow_by, start)
        cp = tmp / f"stage{stage}.checkpoint"
        cp.write_text(pl(tmp, "--ledger", str(ledger), "checkpoint", "--key", KEY).stdout)
        checkpoints.append(cp)
        ids = _log_ids(tmp, ledger)
        for index in sorted({0, 1, len(ids) // 2, len(ids) - 2, len(ids) - 1}):
            out = tmp / f"proof-{stage}-{index}.json"
            pl(tmp, "--ledger", str(ledger), "prove", ids[index], "--key", KEY, "-o", str(out))
            proofs[(stage, index)] = out
    return Grown(tmp, ledger, vkey_of(tmp, ledger, KEY), checkpoints, proofs, _log_ids(tmp, ledger))


def test_checkpoint_signs_the_root_of_the_ledgers_log(grown: Grown) -> None:
    verifier = NoteVerifier.from_vkey(grown.vkey)
    with Ledger(grown.ledger, readonly=True) as ledger:
        entries = ledger.tlog_entries(0, 566)
    for path, size in zip(grown.checkpoints, (65, 266, 566)):
        checkpoint, _ = open_checkpoint(path.read_bytes(), [verifier], origin=verifier.name)
        # the root, recomputed here from the entries with the plain RFC 9162 code (not the tiles' code)
        assert (checkpoint.size, checkpoint.root) == (size, root([leaf_hash(e) for e in entries[:size]]))
    doc = json.loads(pl(grown.tmp, "--ledger", str(grown.ledger), "checkpoint", "--key", KEY, "--json").stdout)
    assert doc["checkpoint"] == grown.checkpoints[2].read_text() and doc["size"] == 566


def test_the_default_origin_and_given_ones(grown: Grown) -> None:
    fingerprint = json.loads(pl(grown.tmp, "keys", "list", "--json").stdout)["keys"][0]["fingerprint_sha256_hex"]
    assert fingerprint.startswith(grown.vkey.split("+")[0].removeprefix("pithledger/"))
    assert grown.vkey.startswith(f"pithledger/{fingerprint[:16]}+")
    given = pl(
        grown.tmp, "--ledger", str(grown.ledger), "checkpoint", "--key", KEY, "--origin", "log.example.org/pith"
    ).stdout
    assert given.startswith("log.example.org/pith\n566\n") and "\n— log.example.org/pith " in given
    derived = pl(
        grown.tmp,
        "--ledger",
        str(grown.ledger),
        "checkpoint",
        "--key",
        KEY,
        "--base-url",
        "https://Mirror.Example.ORG/a/",
    ).stdout
    assert derived.startswith("mirror.example.org/a\n")


@pytest.mark.parametrize("origin", ["two words", "a+b", "", "x" * 256, "caf\u00e9", "tab\there"])
def test_an_origin_that_is_no_note_key_name_is_named(grown: Grown, origin: str) -> None:
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "checkpoint", "--key", KEY, "--origin", origin, check=False)
    assert proc.returncode == 1 and "error[bad-origin]" in proc.stderr and "hint:" in proc.stderr, proc.stderr


def test_no_key_is_named_with_the_fix(grown: Grown) -> None:
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "checkpoint", check=False)
    assert proc.returncode == 1 and "error[no-log-key]" in proc.stderr
    assert "pithledger keys new" in proc.stderr and "--key" in proc.stderr
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "prove", grown.ids[0], "--key", "nosuch", check=False)
    assert proc.returncode == 1 and "error[unknown-key]" in proc.stderr


def test_proofs_of_every_stage_hold_offline_with_the_size_of_their_own_checkpoint(grown: Grown) -> None:
    for (stage, index), path in grown.proofs.items():
        proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, "--json")
        got = json.loads(proc.stdout)
        assert got["valid"] is True and got["index"] == index and got["size"] == (65, 266, 566)[stage]
        assert got["event_id"] == grown.ids[index]
    text = pl(grown.tmp, "verify-proof", str(grown.proofs[(2, 565)]), "--log-key", grown.vkey).stdout
    assert f"is entry 565 of the log {grown.vkey.split('+')[0]} at size 566" in text
    assert "not proven:" in text and "valid under the merge rules" in text


def test_verify_proof_checks_the_event_itself_when_given(grown: Grown, tmp_path: Path) -> None:
    path = grown.proofs[(2, 565)]
    event_id = json.loads(path.read_text())["entry"]
    mine = [
        e for e in attestations(300, 200) if e["event_id"].removeprefix("sha256:") == json.loads(event_id)["event_id"]
    ]
    assert len(mine) == 1
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps(write_bundle(SUBJECT, mine)))
    out = json.loads(
        pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, "--event", str(bundle), "--json").stdout
    )
    assert out["event_checked"].startswith("the given event is the one logged")
    other = tmp_path / "other.json"
    other.write_text(json.dumps(write_bundle(SUBJECT, attestations(1, 900))))
    proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, "--event", str(other), check=False)
    assert proc.returncode == 1 and "error[bad-proof]" in proc.stderr
    edited = dict(mine[0], payload={"author_name": "Someone Else"})
    other.write_text(json.dumps(write_bundle(SUBJECT, [edited])))
    proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, "--event", str(other), check=False)
    assert proc.returncode == 1 and "error[bad-proof]" in proc.stderr and "not valid" in proc.stderr


def _resign(grown: Grown, note: str, key: str) -> str:
    """The body of ``note`` signed by the local key ``key`` under the same origin."""
    store = KeyStore(grown.tmp / "keys")
    body = note.split("\n\n")[0] + "\n"
    origin = body.split("\n")[0]
    return log_signer(store.load(key), origin, store.directory).sign(body).decode()


def _flip_hash(doc: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(doc["hashes"][0]))
    raw[0] ^= 0x80
    doc["hashes"][0] = base64.b64encode(bytes(raw)).decode()


def _entry(**change: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        entry = json.loads(doc["entry"])
        for k, v in change.items():
            entry[k] = v if k != "sha256" else entry[k][:-1] + ("0" if entry[k][-1] != "0" else "1")
        doc["entry"] = canonical_bytes(entry).decode()

    return mutate


def _size_line(doc: dict[str, Any]) -> None:
    doc["checkpoint"] = re.sub(r"\n566\n", "\n300000\n", doc["checkpoint"], count=1)


FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "size-in-note-changed": (_size_line, "bad-note-signature"),
    "index-plus-one": (lambda d: d.update(index=d["index"] + 1), "bad-proof"),
    "index-minus-one": (lambda d: d.update(index=d["index"] - 1), "bad-proof"),
    "index-beyond-size": (lambda d: d.update(index=566), "bad-proof"),
    "index-negative": (lambda d: d.update(index=-1), "bad-proof"),
    "hash-bit-flipped": (_flip_hash, "bad-proof"),
    "hash-dropped": (lambda d: d["hashes"].pop(), "bad-proof"),
    "hash-added": (lambda d: d["hashes"].append(d["hashes"][0]), "bad-proof"),
    "hashes-swapped": (lambda d: d.update(hashes=d["hashes"][::-1]), "bad-proof"),
    "entry-sha256-changed": (_entry(sha256=""), "bad-proof"),
    "entry-event-id-changed": (_entry(event_id="ab" * 32), "bad-proof"),
    "entry-record-changed": (_entry(record="pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"), "bad-proof"),
    "size-field-added": (lambda d: d.update(size=566), "bad-proof"),
    "version-changed": (lambda d: d.update(proof_version="2"), "bad-proof"),
    "type-changed": (lambda d: d.update(proof_type="something_else"), "bad-proof"),
    "hash-not-base64": (lambda d: d["hashes"].__setitem__(0, "not base64!"), "bad-proof"),
    "note-truncated": (lambda d: d.update(checkpoint=d["checkpoint"].split("\n\n")[0] + "\n"), "malformed-note"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_proof_document_is_refused(grown: Grown, tmp_path: Path, name: str) -> None:
    doc = json.loads(grown.proofs[(2, 283)].read_text())
    mutate, code = FORGERIES[name]
    mutate(doc)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(doc))
    proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, check=False)
    assert proc.returncode == 1 and f"error[{code}]" in proc.stderr, proc.stderr


def test_a_proof_under_another_key_or_another_checkpoint_is_refused(grown: Grown, tmp_path: Path) -> None:
    pl(grown.tmp, "keys", "new", "impostor")
    doc = json.loads(grown.proofs[(2, 283)].read_text())
    forged = dict(doc, checkpoint=_resign(grown, doc["checkpoint"], "impostor"))
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, check=False)
    assert proc.returncode == 1 and "error[unverified-note]" in proc.stderr
    # a genuine, older checkpoint of the same log does not hold a proof made against the newer one
    older = dict(doc, checkpoint=grown.checkpoints[1].read_text())
    path.write_text(json.dumps(older))
    proc = pl(grown.tmp, "verify-proof", str(path), "--log-key", grown.vkey, check=False)
    assert proc.returncode == 1 and "error[bad-proof]" in proc.stderr
    # the right proof checked under another mirror's key
    impostor = json.loads(
        pl(grown.tmp, "--ledger", str(grown.ledger), "checkpoint", "--key", "impostor", "--json").stdout
    )["log_key"]
    proc = pl(grown.tmp, "verify-proof", str(grown.proofs[(2, 283)]), "--log-key", impostor, check=False)
    assert proc.returncode == 1 and "error[unverified-note]" in proc.stderr


def test_every_index_of_a_small_tree_and_every_bit_of_a_proof(grown: Grown) -> None:
    """In process, on the real ledger: a proof for every index at the current size verifies; flipping
    any one bit of any proof hash of one of them is refused."""
    keys = KeyStore(grown.tmp / "keys")
    signer = log_signer(keys.load(KEY), NoteVerifier.from_vkey(grown.vkey).name, keys.directory)
    verifier = signer.verifier
    with Ledger(grown.ledger, readonly=True) as ledger:
        docs = [inclusion_document(ledger, signer, event_id) for event_id in grown.ids]
    for index, doc in enumerate(docs):
        got = verify_inclusion_document(canonical_bytes(doc), verifier)
        assert (got.index, got.size, got.entry.ledger_id) == (index, 566, grown.ids[index])
    doc = docs[300]
    for h in range(len(doc["hashes"])):
        raw = base64.b64decode(doc["hashes"][h])
        for bit in range(len(raw) * 8):
            flipped = bytearray(raw)
            flipped[bit // 8] ^= 1 << (bit % 8)
            hashes = list(doc["hashes"])
            hashes[h] = base64.b64encode(bytes(flipped)).decode()
            with pytest.raises(BadProof):
                verify_inclusion_document(canonical_bytes(dict(doc, hashes=hashes)), verifier)


def test_prove_names_an_event_not_in_the_log(grown: Grown) -> None:
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "prove", "sha256:" + "ab" * 32, "--key", KEY, check=False)
    assert proc.returncode == 1 and "error[not-in-log]" in proc.stderr
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "prove", "nonsense", "--key", KEY, check=False)
    assert proc.returncode == 1 and "error[malformed-id]" in proc.stderr


# --- consistency -------------------------------------------------------------------------------------------


def test_consistency_between_sizes_and_between_signed_checkpoints(grown: Grown, tmp_path: Path) -> None:
    out = json.loads(pl(grown.tmp, "--ledger", str(grown.ledger), "consistency", "10", "566", "--json").stdout)
    assert out["consistent"] is True and (out["old"]["size"], out["new"]["size"]) == (10, 566) and out["proof"]
    c = [str(p) for p in grown.checkpoints]
    for old, new in ((c[0], c[1]), (c[1], c[2]), (c[0], c[2]), (c[2], c[0]), (c[2], c[2])):
        proc = pl(grown.tmp, "--ledger", str(grown.ledger), "consistency", old, new, "--log-key", grown.vkey)
        assert proc.stdout.startswith("consistent: the tree of size")
    site = tmp_path / "site"
    pl(grown.tmp, "--ledger", str(grown.ledger), "publish", str(site), "--key", KEY)
    proc = pl(grown.tmp, "consistency", c[0], c[2], "--log-key", grown.vkey, "--source", str(site), "--json")
    assert json.loads(proc.stdout)["source"] == str(site)
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "consistency", "10", "9999", check=False)
    assert proc.returncode == 2 and "error[usage]" in proc.stderr
    proc = pl(grown.tmp, "--ledger", str(grown.ledger), "consistency", c[0], c[1], check=False)
    assert proc.returncode == 2 and "--log-key" in proc.stderr


def test_a_fork_is_named_from_a_ledger_and_from_published_tiles(grown: Grown, tmp_path: Path) -> None:
    """One key, two histories: a second ledger holding bundles/ and 600 other events, signed by the same
    key under the same origin. Its checkpoint does not extend the first ledger's."""
    other = base_ledger(tmp_path, name="other")
    path = tmp_path / "other.json"
    path.write_text(json.dumps(write_bundle(SUBJECT, attestations(600, 0, signer=BOB))))
    pl(grown.tmp, "--ledger", str(other), "apply", str(path))
    # a copy of the key in another key directory (where the key's record of what it signed is not:
    # from the same directory the key refuses to sign the fork, tests/e2e/store/test_restore.py)
    keys = tmp_path / "copied-keys"
    keys.mkdir(mode=0o700)
    shutil.copy2(grown.tmp / "keys" / f"{KEY}.key.json", keys)
    forked = tmp_path / "forked.checkpoint"
    forked.write_text(pl(grown.tmp, "--ledger", str(other), "--key-dir", str(keys), "checkpoint", "--key", KEY).stdout)
    assert forked.read_text().split("\n")[1] == "666"
    proc = pl(
        grown.tmp,
        "--ledger",
        str(other),
        "consistency",
        str(grown.checkpoints[2]),
        str(forked),
        "--log-key",
        grown.vkey,
        check=False,
    )
    assert proc.returncode == 1 and "error[inconsistent-log]" in proc.stderr, proc.stderr
    site = tmp_path / "site"
    pl(grown.tmp, "--ledger", str(other), "--key-dir", str(keys), "publish", str(site), "--key", KEY)
    proc = pl(
        grown.tmp,
        "consistency",
        str(grown.checkpoints[2]),
        str(forked),
        "--log-key",
        grown.vkey,
        "--source",
        str(site),
        check=False,
    )
    assert proc.returncode == 1 and "error[inconsistent-log]" in proc.stderr, proc.stderr
    # the first ledger cannot prove a tree it does not hold, and says whom to ask
    proc = pl(
        grown.tmp,
        "--ledger",
        str(grown.ledger),
        "consistency",
        str(grown.checkpoints[2]),
        str(forked),
        "--log-key",
        grown.vkey,
        check=False,
    )
    assert proc.returncode == 2 and "--source" in proc.stderr
