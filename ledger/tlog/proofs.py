"""The mirror's log for people: origins, its signed checkpoint, inclusion proofs a person can keep and
check offline, consistency between two checkpoints (spec/transparency.md §4-§5).

Pure but for the ledger reads of :func:`ledger_checkpoint`, :func:`inclusion_document` and
:func:`consistency_hashes` (each inside one ledger snapshot). Verifiers take the tree size, the root and
the origin from the signed checkpoint, never from a proof document: a proof document has no size field.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pithledger.errors import BadEncoding, BadOrigin, BadProof, InconsistentLog, NotInLog, PithledgerError, ProofError
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.keys import b64decode_strict, b64encode, fingerprint_hex
from pithledger.tlog.merkle import HASH_LEN, leaf_hash, verify_consistency, verify_inclusion
from pithledger.tlog.note import Checkpoint, NoteVerifier, open_checkpoint
from pithledger.tlog.signing import LogSigner, sign_tree

if TYPE_CHECKING:
    from pathlib import Path

    from pithledger.records.keys import LocalKey


class LogHolder(Protocol):
    """What the proofs here read of a ledger's transparency log (``pithledger.store.Ledger`` is one): typed
    by what is called, not by the store's class, which sits in a layer above this one."""

    def snapshot(self) -> AbstractContextManager[None]: ...
    def tlog_size(self) -> int: ...
    def tlog_root(self, size: int | None = None) -> bytes: ...
    def tlog_index(self, event_id: str) -> int | None: ...
    def tlog_entries(self, start: int, end: int) -> list[bytes]: ...
    def read_hashes(self, level: int, start: int, end: int) -> list[bytes]: ...  # a tiles.HashReader


PROOF_TYPE = "pithledger_inclusion_proof"
PROOF_VERSION = "1"
#: A proof document is small: a checkpoint note, one ~200-byte entry, at most 64 hashes.
MAX_PROOF_BYTES = 256 * 1024
MAX_ORIGIN = 255
_ORIGIN = re.compile(r"[\x21-\x2a\x2c-\x7e]{1,%d}\Z" % MAX_ORIGIN, re.ASCII)  # printable ASCII, no space, no '+'
_HEX64 = re.compile(r"[0-9a-f]{64}\Z", re.ASCII)
_PITH = re.compile(r"pith:[0-9]{4}:[A-Z2-7]{26}\Z", re.ASCII)


# --- origins ---------------------------------------------------------------------------------------


def check_origin(origin: str) -> str:
    """An origin we sign under: it is also the note key name of the log's key, so it must be a valid one
    (C2SP signed-note: no spaces, no '+'); we ask for printable ASCII of at most 255 bytes."""
    if not _ORIGIN.match(origin):
        raise BadOrigin(f"{origin[:80]!r} is not a valid origin")
    return origin


def origin_of_url(base_url: str) -> str:
    """The origin a mirror served at ``base_url`` signs under: the URL without its scheme, query or
    trailing slash (C2SP tlog-checkpoint: a schema-less URL), e.g. ``mirror.example.org/pith``."""
    parts = urllib.parse.urlsplit(base_url)
    return check_origin(parts.netloc.lower() + parts.path.rstrip("/"))


def default_origin(public_key: bytes) -> str:
    """The origin of a mirror that names no base URL: ``pithledger/`` and the first 16 hex digits of
    the log key's fingerprint (stable for a key, and two keys never share it by accident)."""
    return f"pithledger/{fingerprint_hex(public_key)[:16]}"


def choose_origin(key: LocalKey, origin: str | None = None, base_url: str = "") -> str:
    """``--origin`` when given, else from ``--base-url``, else :func:`default_origin`."""
    if origin is not None:
        return check_origin(origin)
    if base_url:
        return origin_of_url(base_url)
    return default_origin(key.public_key)


def log_signer(key: LocalKey, origin: str, key_dir: Path) -> LogSigner:
    """The log key: the key-directory key under the note key name ``origin`` (our logs sign under their
    origin), keeping what it signs in ``key_dir`` (the directory ``key`` was loaded from: ledger/tlog/signing.py)."""
    return LogSigner(check_origin(origin), key.signing_key, key_dir)


def verifier_of(vkey: str) -> NoteVerifier:
    verifier = NoteVerifier.from_vkey(vkey)
    check_origin(verifier.name)
    return verifier


# --- the ledger's checkpoint -----------------------------------------------------------------------


def ledger_checkpoint(ledger: LogHolder, signer: LogSigner, size: int | None = None) -> tuple[Checkpoint, bytes]:
    """The checkpoint of the ledger's log at ``size`` (default: its current size) and its signed note,
    signed only if it extends what the key last signed (:func:`pithledger.tlog.signing.sign_tree`)."""
    from pithledger.tlog.tiles import tree_hash

    with ledger.snapshot():
        n = ledger.tlog_size() if size is None else size
        root = ledger.tlog_root() if size is None else tree_hash(ledger, n)
        note = sign_tree(signer, n, root, lambda m: tree_hash(ledger, m))
    return Checkpoint(signer.name, n, root), note


# --- entries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogEntry:
    """One entry of the log, parsed (spec/transparency.md §1)."""

    event_id: str  # 64 lowercase hex
    record: str
    sha256: str

    @property
    def ledger_id(self) -> str:
        return "sha256:" + self.event_id


def parse_entry(data: bytes, where: str = "the entry") -> LogEntry:
    """An entry's bytes, strictly: canonical JSON of exactly {event_id, record, sha256}."""
    try:
        value = strict_decode(data, max_bytes=65535, what=where)
    except PithledgerError as exc:
        raise BadProof(f"{where} is not JSON: {exc.message}") from None
    if not (
        isinstance(value, dict)
        and set(value) == {"event_id", "record", "sha256"}
        and all(type(v) is str for v in value.values())
    ):
        raise BadProof(f"{where} is not an entry {{event_id, record, sha256}}")
    if not (_HEX64.match(value["event_id"]) and _HEX64.match(value["sha256"]) and _PITH.match(value["record"])):
        raise BadProof(f"{where} has an event_id, sha256 or record of the wrong form")
    if canonical_bytes(value) != data:
        raise BadProof(f"{where} is not in canonical form")
    return LogEntry(value["event_id"], value["record"], value["sha256"])


def event_sha256(event: dict[str, Any]) -> str:
    """The SHA-256 (hex) an entry names for an event: of its canonical bytes, as the log holds them."""
    return hashlib.sha256(canonical_bytes(event)).hexdigest()


# --- inclusion proofs ----------------------------------------------------------------------------------


def _index_of(ledger: LogHolder, event_id: str) -> int | None:
    bare = event_id.removeprefix("sha256:")
    for form in (bare, "sha256:" + bare):  # the store may key by either form
        index: int | None = ledger.tlog_index(form)
        if index is not None:
            return index
    return None


def normal_event_id(text: str) -> str:
    """An event id as a person types it (``sha256:<hex>`` or the bare 64 hex digits), as 64 lowercase hex."""
    bare = text.strip().removeprefix("sha256:").lower()
    if not _HEX64.match(bare):
        from pithledger.errors import MalformedId

        raise MalformedId(
            f"{text[:80]!r} is not an event id (sha256:<64 hex digits>)",
            hint="copy the event id from `pithledger log` or the record's events",
        )
    return bare


def inclusion_document(ledger: LogHolder, signer: LogSigner, event_id: str) -> dict[str, Any]:
    """The inclusion proof of one logged event against the ledger's current signed checkpoint."""
    from pithledger.tlog.tiles import inclusion_proof

    bare = normal_event_id(event_id)
    with ledger.snapshot():
        index = _index_of(ledger, bare)
        if index is None:
            raise NotInLog(f"no event sha256:{bare} in this mirror's log")
        checkpoint, note = ledger_checkpoint(ledger, signer)
        entry = ledger.tlog_entries(index, index + 1)[0]
        hashes = inclusion_proof(ledger, index, checkpoint.size)
    return {
        "proof_type": PROOF_TYPE,
        "proof_version": PROOF_VERSION,
        "checkpoint": note.decode("utf-8"),
        "index": index,
        "entry": entry.decode("ascii"),
        "hashes": [b64encode(h) for h in hashes],
    }


@dataclass(frozen=True)
class Inclusion:
    """What a verified proof document proves: ``entry`` is at ``index`` of the log ``origin`` at ``size``."""

    origin: str
    size: int
    root: bytes
    index: int
    entry: LogEntry
    checkpoint: bytes


def _hashes(value: Any, where: str) -> list[bytes]:
    if not isinstance(value, list) or len(value) > 64:
        raise BadProof(f"{where} is not a list of at most 64 hashes")
    out = []
    for n, h in enumerate(value):
        if type(h) is not str:
            raise BadProof(f"{where}[{n}] is not a base64 string")
        try:
            out.append(b64decode_strict(h, length=HASH_LEN, what=f"{where}[{n}]"))
        except BadEncoding as exc:
            raise BadProof(exc.message) from None
    return out


def verify_inclusion_document(data: bytes, verifier: NoteVerifier) -> Inclusion:
    """Check a proof document offline: the checkpoint's signature by ``verifier`` (its origin must be the
    key's name), then the entry's inclusion at ``index`` in the tree of the checkpoint's size and root."""
    if len(data) > MAX_PROOF_BYTES:
        raise BadProof(f"the proof document is {len(data):,} bytes; one is at most {MAX_PROOF_BYTES:,}")
    try:
        doc = strict_decode(data, what="the proof document")
    except PithledgerError as exc:
        raise BadProof(f"the proof document is not JSON: {exc.message}") from None
    keys = {"proof_type", "proof_version", "checkpoint", "index", "entry", "hashes"}
    if not isinstance(doc, dict) or doc.get("proof_type") != PROOF_TYPE:
        raise BadProof(f"not a {PROOF_TYPE} document")
    if doc.get("proof_version") != PROOF_VERSION:
        raise BadProof(
            f"proof_version {str(doc.get('proof_version'))[:20]!r} is not {PROOF_VERSION!r}",
            hint="this pithledger reads proof version 1 only: check with a pithledger that knows this version",
        )
    if set(doc) != keys:  # nothing beside the signed checkpoint may claim a size, a root or an origin
        raise BadProof(f"the proof document's fields are not exactly {', '.join(sorted(keys))}")
    if type(doc["checkpoint"]) is not str or type(doc["entry"]) is not str:
        raise BadProof("checkpoint and entry are strings")
    index = doc["index"]
    if type(index) is not int or index < 0:
        raise BadProof("index is not a non-negative integer")
    hashes = _hashes(doc["hashes"], "hashes")
    note = doc["checkpoint"].encode("utf-8")
    checkpoint, _ = open_checkpoint(note, [verifier], origin=verifier.name)
    entry_bytes = doc["entry"].encode("utf-8")
    entry = parse_entry(entry_bytes)
    try:
        verify_inclusion(index, checkpoint.size, leaf_hash(entry_bytes), hashes, checkpoint.root)
    except ProofError as exc:
        raise BadProof(
            f"the entry is not at index {index} of the tree the checkpoint signs "
            f"({checkpoint.origin}, size {checkpoint.size:,}): {exc}"
        ) from None
    return Inclusion(checkpoint.origin, checkpoint.size, checkpoint.root, index, entry, note)


# --- consistency -----------------------------------------------------------------------------------------


def check_consistency(old: Checkpoint, new: Checkpoint, hashes: list[bytes]) -> None:
    """That ``new`` extends ``old`` (same origin, RFC 9162 consistency proof), else :class:`InconsistentLog`."""
    if old.origin != new.origin:
        raise InconsistentLog(
            f"the checkpoints are of two logs: {old.origin!r} and {new.origin!r}",
            hint="compare checkpoints of one origin",
        )
    if new.size < old.size:
        raise InconsistentLog(
            f"the newer checkpoint's tree ({new.size:,}) is smaller than the older one's ({old.size:,})",
            hint="give the older checkpoint first: consistency OLD NEW",
        )
    if old.size == 0:
        return  # every tree extends the empty one
    try:
        verify_consistency(old.size, new.size, old.root, new.root, hashes)
    except ProofError as exc:
        raise InconsistentLog(
            f"the tree of size {new.size:,} does not extend the tree of size {old.size:,} ({old.origin}): {exc}"
        ) from None
