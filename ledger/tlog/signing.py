"""The one guard every checkpoint of a ledger's log is signed through: a log key never signs a tree that
does not extend the one it last signed for an origin (spec/transparency.md §4.1).

A ledger can be swapped under its key (a backup restored, a ledger refilled by ``export --all``): its log
then holds another history, and signing it would publish a fork of the mirror's own log under its own key
— permanent evidence of equivocation for every follower and witness. So what the key last signed is kept
**beside the key**, outside the ledger (which is what gets restored): ``<key dir>/signed/<hex sha256 of
the vkey>.json`` (the vkey names the origin and the key). Before signing (size n, root r) the record (m,
R) must be a prefix of the ledger's log: its tree holds at least m entries and its tree hash at m is R;
else :class:`LogWouldFork`, nothing signed. The record moves forward (never back: signing an older prefix
is fine) durably, under an exclusive lock (``flock``, so ``serve`` and ``publish`` signing at once cannot
both sign different trees), BEFORE the signed note leaves :func:`sign_tree`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import nacl.signing

from pithledger.errors import DamagedSignedRecord, LogWouldFork, PithledgerError
from pithledger.records.canonical import canonical_bytes
from pithledger.tlog import witness as w
from pithledger.tlog.note import Checkpoint, NoteSigner, NoteVerifier

RECORD_DIR = "signed"
RECORD_TYPE = "pithledger_signed_checkpoint"
RECORD_VERSION = "1"


class LogSigner(NoteSigner):
    """A log key (a key-directory key under the note key name = the origin) that knows where its
    record of what it signed lives: ``key_dir``. Only :func:`sign_tree` signs checkpoints with it."""

    def __init__(self, name: str, key: nacl.signing.SigningKey, key_dir: Path) -> None:
        super().__init__(name, key)
        self.key_dir = Path(key_dir)

    @property
    def record_path(self) -> Path:
        return record_path(self.key_dir, self.vkey)


def record_path(key_dir: Path, vkey: str) -> Path:
    """Where ``key_dir`` records what the log key ``vkey`` (name = origin) last signed."""
    return Path(key_dir) / RECORD_DIR / f"{hashlib.sha256(vkey.encode()).hexdigest()}.json"


def last_signed(signer: LogSigner) -> tuple[int, bytes] | None:
    """(size, root) the key last signed for its origin, or None (never signed, or signed before records)."""
    return recorded(signer.key_dir, signer.verifier)


def recorded(key_dir: Path, verifier: NoteVerifier) -> tuple[int, bytes] | None:
    """(size, root) the log key ``verifier`` last signed for its origin as ``key_dir`` records it, or None;
    read without the private key (``restore-log`` checks its source against it)."""
    path = record_path(key_dir, verifier.vkey)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # fail closed: only a record that is not there at all means "never signed"
        raise DamagedSignedRecord(f"cannot look up the signed-checkpoint record {path}: {exc.strerror}") from None
    # there (a symlink too, dangling or looping): it must read back, else damaged-signed-record
    doc = w.read_small(path, "the signed-checkpoint record", DamagedSignedRecord)
    try:
        if (
            doc["record_type"] != RECORD_TYPE
            or doc["origin"] != verifier.name
            or doc["log_key"] != verifier.vkey
            or type(doc["size"]) is not int
            or doc["size"] < 0
        ):
            raise KeyError("record_type")
        return doc["size"], w.unb64_hash(str(doc["root"]), "root")
    except (KeyError, TypeError, PithledgerError):
        raise DamagedSignedRecord(f"the signed-checkpoint record {path} is damaged") from None


def _write(signer: LogSigner, size: int, root: bytes) -> None:
    doc = {
        "record_type": RECORD_TYPE,
        "record_version": RECORD_VERSION,
        "origin": signer.name,
        "log_key": signer.vkey,
        "size": size,
        "root": w.b64(root),
        "signed_at": w.now_iso(),
    }
    w.write_atomic(signer.record_path, canonical_bytes(doc) + b"\n")


def sign_tree(signer: NoteSigner, size: int, root: bytes, tree_hash: Callable[[int], bytes]) -> bytes:
    """The signed checkpoint note of the tree (``size``, ``root``) of a ledger's log, or
    :class:`LogWouldFork` when it does not extend what ``signer`` last signed for its origin.
    ``tree_hash(m)``: the root of the ledger's log at size m, read in the same snapshot as ``size`` and
    ``root`` (``TlogOutOfRange``, a LookupError, when the log holds fewer than m entries)."""
    if not isinstance(signer, LogSigner):  # a programming error: every log checkpoint goes through a record
        raise TypeError("a log checkpoint is signed by a LogSigner (pithledger.tlog.proofs.log_signer)")
    checkpoint = Checkpoint(signer.name, size, root)
    with w.locked(signer.record_path.with_suffix(".lock")):
        last = last_signed(signer)
        if last is not None:
            m, r = last
            try:
                ours = root if m == size else tree_hash(m)
            except LookupError:
                ours = None
            if ours != r:
                held = f"holds {size:,} entries" if ours is None else f"has another root at size {m:,}"
                raise LogWouldFork(
                    f"the log key {signer.vkey[:120]} signed a tree of size {m:,} of {signer.name!r} "
                    f"(root {r.hex()[:16]}…); this ledger's log {held}, so signing it would fork the published log"
                )
        if last is None or size > last[0]:
            _write(signer, size, root)  # durable before the note exists
    return signer.sign(checkpoint.body())
