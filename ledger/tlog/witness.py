"""A C2SP tlog-witness (``add-checkpoint``), and evidence files a third party checks offline.

spec/transparency.md §6. A witness follows the logs its config names (origin + the log's verifier key);
for each it remembers the latest checkpoint it cosigned. It cosigns a new checkpoint only after checking
it against that one (old size, consistency proof), persists the new one (atomically, durably) before it
answers, and on an inconsistent checkpoint refuses and writes the evidence: both signed checkpoints and
the proof, as a file :func:`check_evidence` (``pithledger check-evidence FILE``) judges with nothing but
the log's public key.

IO stays at the edges: the request is parsed and judged by pure functions; files are written by
:func:`write_atomic` under a per-origin lock file (``flock``: two requests for one origin, in threads or in
processes, are serialised, so "check the old size, persist the new one" is one atomic step).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pithledger.errors import (
    BadConfig,
    BadEvidence,
    BadRequest,
    BadVerifierKey,
    CannotWrite,
    DamagedState,
    Inconsistent,
    NotVerified,
    PithledgerError,
    ProofError,
    SizeConflict,
    UnknownLog,
    UnsupportedKeyType,
    WitnessError,
)
from pithledger.files import replace_atomically
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.tlog import merkle

#: Largest add-checkpoint body read: the old-size line, 63 proof lines and a checkpoint with many
#: signatures take a few KiB; 64 KiB leaves room for extension lines and 16+ post-quantum signatures.
MAX_BODY = 64 * 1024
#: C2SP tlog-witness: "The client MUST NOT send more than 63 consistency proof lines."
MAX_PROOF = 63
#: Tree sizes are uint64 in C2SP; a cosignature timestamp at most 2^63 - 1. Sizes above 2^63 - 1 are refused.
MAX_SIZE = (1 << 63) - 1
#: Largest config, state or evidence file read.
MAX_FILE = 1024 * 1024
MAX_LOGS = 10_000
CONFIG_TYPE = "pithledger_witness_config"
STATE_TYPE = "pithledger_witness_state"
EVIDENCE_TYPE = "pithledger_log_inconsistency"
VERSION = "1"
_OLD_LINE = re.compile(rb"old (0|[1-9][0-9]{0,18})\Z")


# --- small pure helpers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, media type, body."""

    status: int
    content_type: str
    body: bytes


def origin_hash(origin: str) -> str:
    """The lowercase hex SHA-256 of an origin: the name of its state file (and C2SP's monitoring path)."""
    return hashlib.sha256(origin.encode()).hexdigest()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def unb64_hash(text: str | bytes, what: str) -> bytes:
    """One 32-byte hash in canonical standard base64."""
    raw_text = text.encode("ascii", "replace") if isinstance(text, str) else text
    try:
        raw = base64.b64decode(raw_text, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{what} is not base64") from None
    if len(raw) != merkle.HASH_LEN or base64.b64encode(raw) != raw_text:
        raise BadRequest(f"{what} is not one 32-byte hash in canonical base64")
    return raw


def prefix_root(size1: int, size2: int, proof: Sequence[bytes]) -> bytes | None:
    """The root of the first ``size1`` leaves of the tree of ``size2`` that ``proof`` (RFC 9162 §2.1.4)
    implies, or None when the proof does not carry it (``size1`` a power of two: the old root is a node
    of the new tree and the proof omits it) or is malformed. It is the "first root" of RFC 9162's
    verification, computed without comparing; ``merkle.verify_consistency`` with it as root1 then checks
    that the proof also reaches the new root. Kept here, not in merkle.py, because only evidence needs it."""
    if not 0 < size1 < size2 or not proof or size1 & (size1 - 1) == 0:
        return None
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            fr = merkle.node_hash(c, fr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        fn >>= 1
        sn >>= 1
    return fr


def now_iso(clock: Callable[[], float] = time.time) -> str:
    return datetime.fromtimestamp(int(clock()), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- files -----------------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never a mixture, and
    the new one is on disk when this returns: a temporary file beside it, fsync, rename, fsync the directory.
    ``mode``: the file's mode less the umask (default: owner-only)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, (data,), mode=0o600 if mode is None else mode, durable=True)
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}") from None


def read_small(path: Path, what: str, error: type[PithledgerError]) -> Any:
    """A small strict-JSON file (config, state, evidence), or ``error`` naming what is wrong."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE + 1)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE:
        raise error(f"{what} {path} is larger than {MAX_FILE:,} bytes")
    try:
        return strict_decode(data, what=str(path))
    except PithledgerError as exc:
        raise error(f"{what} {path}: {exc.message}") from None


@contextlib.contextmanager
def locked(path: Path, on_wait: Callable[[], None] | None = None, wait: float | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created): held by one thread or process at a time. ``on_wait``:
    called once, before waiting, when another holds it; ``wait``: seconds to wait at most (None: no
    limit), then :class:`TimeoutError`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # never through a symlink: a link planted where the lock goes would make this create its target
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise CannotWrite(f"cannot open the lock file {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            if wait is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                end = time.monotonic() + wait
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= end:
                            raise TimeoutError(f"{path} was held by another for {wait:g} s") from None
                        time.sleep(min(0.1, max(0.0, end - time.monotonic())))
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# --- notes (ledger/tlog/note.py, branch tlog-formats) -------------------------------------------------------


@dataclass(frozen=True)
class Signed:
    """A verified signed checkpoint: the note as received, its text, and the parsed checkpoint."""

    note: str
    text: str
    origin: str
    size: int
    root: bytes
    verified_by: tuple[str, ...] = ()


def note_origin(note: bytes) -> str:
    """The first line of a note (a checkpoint's origin), before anything is verified: to find the key."""
    first, sep, _ = note.partition(b"\n")
    if not sep or not first:
        raise BadRequest("the checkpoint has no origin line")
    try:
        return first.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the checkpoint is not UTF-8") from None


def open_checkpoint(note: bytes, vkeys: Sequence[str], extra: Sequence[Any] = ()) -> Signed:
    """Verify ``note`` with the log keys ``vkeys`` (and ``extra`` verifiers, e.g. witnesses'), and parse it
    as a checkpoint. BadRequest when it is no signed checkpoint at all (malformed); another NoteError
    (a PithledgerError) when it does not verify."""
    from pithledger.errors import MalformedCheckpoint, MalformedNote
    from pithledger.tlog.note import NoteVerifier
    from pithledger.tlog.note import open_checkpoint as open_note_checkpoint

    verifiers = [NoteVerifier.from_vkey(v) for v in vkeys] + list(extra)
    try:
        cp, opened = open_note_checkpoint(note, verifiers)
    except (MalformedNote, MalformedCheckpoint) as exc:
        raise BadRequest(f"the note is not a signed checkpoint: {exc.message}") from None
    return Signed(
        note=note.decode("utf-8"),
        text=opened.text,
        origin=cp.origin,
        size=cp.size,
        root=cp.root,
        verified_by=opened.verified_by,
    )


# --- config ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogConfig:
    origin: str
    vkey: str


@dataclass(frozen=True)
class Config:
    """A witness's config file (spec/transparency.md §6.1)."""

    path: Path
    name: str  # the witness's cosigner name (the key name in its cosignature lines)
    key: str  # the local key (key directory) it signs with
    state_dir: Path
    logs: Mapping[str, LogConfig]


def load_config(path: Path) -> Config:
    doc = read_small(path, "the witness config", BadConfig)
    if not isinstance(doc, dict) or doc.get("config_type") != CONFIG_TYPE or doc.get("config_version") != VERSION:
        raise BadConfig(f"{path} is not a {CONFIG_TYPE} version {VERSION}")
    unknown = set(doc) - {"config_type", "config_version", "name", "key", "state_dir", "logs"}
    if unknown:
        raise BadConfig(f"{path}: unknown fields {', '.join(sorted(unknown))}")
    name, key, logs = doc.get("name"), doc.get("key"), doc.get("logs")
    if not isinstance(name, str) or not name or any(c.isspace() or c == "+" for c in name) or len(name) > 256:
        raise BadConfig(
            f"{path}: name must be a key name: 1-256 characters, no spaces, no '+' (e.g. witness.example/w1)"
        )
    if not isinstance(key, str) or not key:
        raise BadConfig(f"{path}: key must name the witness's local key (pithledger keys new NAME)")
    if not isinstance(logs, list) or len(logs) > MAX_LOGS:
        raise BadConfig(f"{path}: logs must be a list of at most {MAX_LOGS:,} {{origin, vkey}} objects")
    state = doc.get("state_dir", "witness-state")
    if not isinstance(state, str) or not state:
        raise BadConfig(f"{path}: state_dir must be a directory path (relative to the config's directory)")
    follows: dict[str, LogConfig] = {}
    from pithledger.tlog.note import NoteVerifier

    for i, log in enumerate(logs):
        if (
            not isinstance(log, dict)
            or set(log) != {"origin", "vkey"}
            or not all(isinstance(v, str) for v in log.values())
        ):
            raise BadConfig(f"{path}: logs[{i}] must be an object with exactly origin and vkey, both strings")
        origin, vkey = log["origin"], log["vkey"]
        if not origin or "\n" in origin or origin in follows:
            raise BadConfig(f"{path}: logs[{i}]: the origin is empty, holds a newline, or is listed twice")
        try:
            NoteVerifier.from_vkey(vkey)
        except UnsupportedKeyType as exc:  # named as such: the config is well formed, the key's type unsupported
            raise UnsupportedKeyType(f"{path}: logs[{i}]: vkey: {exc.message}") from None
        except PithledgerError as exc:
            raise BadConfig(f"{path}: logs[{i}]: vkey: {exc.message}") from None
        follows[origin] = LogConfig(origin, vkey)
    return Config(path=path, name=name, key=key, state_dir=(path.parent / state), logs=follows)


# --- the witness -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: bytes


def parse_request(body: bytes) -> Request:
    """A C2SP add-checkpoint body: ``old <size>\\n``, 0-63 base64 proof lines, an empty line, a checkpoint."""
    if len(body) > MAX_BODY:
        raise BadRequest(f"the body is over {MAX_BODY:,} bytes")
    line, sep, rest = body.partition(b"\n")
    m = _OLD_LINE.match(line)
    if not sep or not m:
        raise BadRequest('the first line must be "old <size>" (decimal, no leading zeroes)')
    old = int(m.group(1))
    if old > MAX_SIZE:
        raise BadRequest("the old size is larger than 2^63 - 1")
    proof: list[bytes] = []
    while True:
        line, sep, rest = rest.partition(b"\n")
        if not sep:
            raise BadRequest("the body ends before the empty line that separates the proof from the checkpoint")
        if not line:
            break
        if len(proof) == MAX_PROOF:
            raise BadRequest(f"more than {MAX_PROOF} consistency proof lines")
        proof.append(unb64_hash(line, f"proof line {len(proof) + 1}"))
    if not rest:
        raise BadRequest("no checkpoint after the proof")
    return Request(old, tuple(proof), rest)


def request_body(old_size: int, proof: Sequence[bytes], checkpoint: bytes) -> bytes:
    """What a log POSTs (the inverse of :func:`parse_request`)."""
    return f"old {old_size}\n".encode() + b"".join(base64.b64encode(p) + b"\n" for p in proof) + b"\n" + checkpoint


def evidence_doc(
    *,
    origin: str,
    log_key: str,
    old: str,
    new: str,
    proof: Sequence[bytes],
    prefix: bytes | None,
    observer: str,
    observed_at: str,
    kind: str,
) -> dict[str, Any]:
    """The evidence of two signed checkpoints of one log that do not extend each other (spec §6.3)."""
    return {
        "evidence_type": EVIDENCE_TYPE,
        "evidence_version": VERSION,
        "kind": kind,
        "origin": origin,
        "log_key": log_key,
        "old_checkpoint": old,
        "new_checkpoint": new,
        "proof": [b64(p) for p in proof],
        "new_tree_old_root": b64(prefix) if prefix is not None else None,
        "observer": observer,
        "observed_at": observed_at,
    }


#: The kinds of inconsistency that the two signed checkpoints and the proof prove by themselves (judge).
PROVEN_KINDS = frozenset({"same-size-different-root", "inconsistent-proof"})


def write_evidence(directory: Path, doc: dict[str, Any]) -> Path:
    """Write an evidence file, named by its content (the same fork seen twice is one file). A file already
    there is kept as it is: evidence is never replaced (another copy could say less)."""
    core = {k: doc.get(k) for k in ("origin", "old_checkpoint", "new_checkpoint", "proof", "kind", "new_tree_old_root")}
    tag = hashlib.sha256(canonical_bytes(core)).hexdigest()[:16]
    path = directory / f"fork-{origin_hash(doc['origin'])[:16]}-{tag}.json"
    if not path.exists():
        write_atomic(path, canonical_bytes(doc) + b"\n")
    return path


def judge(
    old: Signed, new: Signed, proof: Sequence[bytes], prefix: bytes | None = None
) -> tuple[str, bytes | None] | None:
    """None when ``new`` extends ``old`` by ``proof``; else (kind of inconsistency, the old size's root in
    the new tree when known). Kinds: ``same-size-different-root`` and ``inconsistent-proof`` prove a fork
    (the latter: a proof that reaches the new root from a different old root); ``bad-proof`` (a proof that
    reaches neither) and ``rollback`` (a smaller tree after a larger one) are observations, not proofs."""
    if new.size == old.size:
        return None if new.root == old.root else ("same-size-different-root", new.root)
    if new.size < old.size:
        return ("rollback", None)
    if old.size == 0:
        return None if not proof else ("bad-proof", None)
    try:
        merkle.verify_consistency(old.size, new.size, old.root, new.root, list(proof))
        return None
    except ProofError:
        pass
    x = prefix if prefix is not None else prefix_root(old.size, new.size, proof)
    if x is not None and x != old.root:
        try:
            merkle.verify_consistency(old.size, new.size, x, new.root, list(proof))
            return ("inconsistent-proof", x)
        except ProofError:
            pass
    return ("bad-proof", None)


class Witness:
    """One witness: its name, its cosigning key, the logs it follows and its state directory.

    ``after_persist``: called once the new state is on disk and before the cosignature is made (tests
    use it to stop the witness between persisting and answering)."""

    def __init__(
        self,
        name: str,
        signer: Any,
        logs: Mapping[str, LogConfig],
        state_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        after_persist: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.signer = signer
        self.logs = dict(logs)
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.after_persist = after_persist

    @classmethod
    def from_config(cls, config: Config, key_store: Any) -> Witness:
        from pithledger.tlog.note import signer_from_key

        return cls(config.name, signer_from_key(key_store.load(config.key), config.name), config.logs, config.state_dir)

    @property
    def evidence_dir(self) -> Path:
        return self.state_dir / "evidence"

    def _state_path(self, origin: str) -> Path:
        return self.state_dir / f"{origin_hash(origin)}.json"

    def state(self, origin: str) -> Signed | None:
        """The checkpoint last cosigned for ``origin``, or None."""
        path = self._state_path(origin)
        if not path.exists():
            return None
        doc = read_small(path, "the witness state", DamagedState)
        if (
            not isinstance(doc, dict)
            or doc.get("state_type") != STATE_TYPE
            or doc.get("origin") != origin
            or type(doc.get("size")) is not int
            or not 0 <= doc["size"] <= MAX_SIZE
            or not isinstance(doc.get("checkpoint"), str)
            or not isinstance(doc.get("text"), str)
        ):
            raise DamagedState(f"the witness state {path} is damaged")
        try:
            root = unb64_hash(str(doc.get("root")), "root")
        except BadRequest:
            raise DamagedState(f"the witness state {path} is damaged: its root is not one base64 hash") from None
        return Signed(note=doc["checkpoint"], text=doc["text"], origin=origin, size=doc["size"], root=root)

    def _persist(self, cp: Signed) -> None:
        doc = {
            "state_type": STATE_TYPE,
            "state_version": VERSION,
            "origin": cp.origin,
            "size": cp.size,
            "root": b64(cp.root),
            "text": cp.text,
            "checkpoint": cp.note,
            "cosigned_at": now_iso(self.clock),
        }
        write_atomic(self._state_path(cp.origin), canonical_bytes(doc) + b"\n")

    def handle(self, body: bytes) -> Answer:
        """An HTTP add-checkpoint request's answer."""
        try:
            req = parse_request(body)
            lines = self.add_checkpoint(req.old_size, req.proof, req.checkpoint)
        except WitnessError as exc:
            return Answer(exc.status, exc.content_type, exc.body())
        except (
            PithledgerError
        ) as exc:  # the witness's own fault (its state cannot be read or written): nothing cosigned
            return Answer(500, "text/plain; charset=utf-8", f"{exc.code}: the witness cannot answer now\n".encode())
        return Answer(200, "text/plain; charset=utf-8", lines.encode())

    def add_checkpoint(
        self, old_size: int, proof: Sequence[bytes], checkpoint: bytes, *, prefix: bytes | None = None
    ) -> str:
        """C2SP tlog-witness add-checkpoint: the cosignature line(s), or a :class:`WitnessError` whose
        ``status`` is the HTTP status the spec gives. ``prefix``: the old size's root in the new tree, when
        the caller computed it from tiles (only to make evidence provable when the old size is a power of 2)."""
        origin = note_origin(checkpoint)
        log = self.logs.get(origin)
        if log is None:
            raise UnknownLog(f"this witness follows no log with origin {origin[:200]!r}")
        if len(proof) > MAX_PROOF:
            raise BadRequest(f"more than {MAX_PROOF} consistency proof lines")
        try:
            new = open_checkpoint(checkpoint, [log.vkey])
        except BadRequest:
            raise
        except PithledgerError as exc:
            raise NotVerified(f"{origin[:200]}: {exc.message}") from None
        if new.origin != origin:  # pragma: no cover - the origin is the note's first line
            raise BadRequest("the checkpoint's origin is not its first line")
        if old_size > new.size:
            raise BadRequest(f"the old size {old_size} is larger than the checkpoint's size {new.size}")
        if new.size == 0 and new.root != merkle.EMPTY_ROOT:
            raise Inconsistent("a checkpoint of size 0 must carry the root of the empty tree")
        with locked(self.state_dir / f"{origin_hash(origin)}.lock"):
            last = self.state(origin)
            size = last.size if last is not None else 0
            if old_size != size:
                raise SizeConflict(
                    f"the old size is {old_size}, but this witness last cosigned size {size} of {origin[:200]!r}", size
                )
            if old_size == 0 and proof:
                raise Inconsistent("the old size is 0: the consistency proof must be empty")
            if last is not None and last.size == new.size and proof:
                raise Inconsistent("the old size is the checkpoint's size: the consistency proof must be empty")
            if last is not None:
                verdict = judge(last, new, proof, prefix)
                if verdict is not None:
                    kind, x = verdict
                    # The proof is the sender's, and anyone may send one: only evidence that proves a fork by
                    # itself is kept (a proof that reaches no root proves nothing of the log, and keeping
                    # each would let anyone fill this disk).
                    path = (
                        write_evidence(
                            self.evidence_dir,
                            evidence_doc(
                                origin=origin,
                                log_key=log.vkey,
                                old=last.note,
                                new=new.note,
                                proof=proof,
                                prefix=x,
                                observer=self.name,
                                observed_at=now_iso(self.clock),
                                kind=kind,
                            ),
                        )
                        if kind in PROVEN_KINDS
                        else None
                    )
                    raise Inconsistent(
                        f"{origin[:200]}: size {new.size} does not extend the size {last.size} this "
                        f"witness cosigned ({kind})",
                        path,
                    )
            self._persist(new)  # durable before any answer (C2SP: MUST persist before responding)
            if self.after_persist is not None:
                self.after_persist()
        return self._cosign(new)

    def _cosign(self, cp: Signed) -> str:
        from pithledger.tlog.note import cosign

        ts = max(1, int(self.clock()))  # C2SP: the timestamp MUST NOT be zero
        line: str = cosign(cp.text, self.signer, ts)
        return line if line.endswith("\n") else line + "\n"


# --- evidence, checked offline ---------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceVerdict:
    """What `check_evidence` concludes of a fork evidence file (an event's verdict is records.events.Verdict)."""

    kind: str
    origin: str
    old_size: int
    new_size: int
    proven: bool
    message: str


def _evidence_form(data: bytes) -> tuple[dict[str, Any], list[bytes], bytes | None]:
    """An evidence file's form checked: (its fields, the proof's hashes, the new tree's root of the old size)."""
    try:
        doc = strict_decode(data, max_bytes=MAX_FILE, what="the evidence file")
    except PithledgerError as exc:
        raise BadEvidence(exc.message) from None
    fields = {
        "evidence_type",
        "evidence_version",
        "kind",
        "origin",
        "log_key",
        "old_checkpoint",
        "new_checkpoint",
        "proof",
        "new_tree_old_root",
        "observer",
        "observed_at",
    }
    if not isinstance(doc, dict) or doc.get("evidence_type") != EVIDENCE_TYPE or doc.get("evidence_version") != VERSION:
        raise BadEvidence(f"not a {EVIDENCE_TYPE} version {VERSION}")
    if set(doc) != fields:
        raise BadEvidence(f"the fields must be exactly {', '.join(sorted(fields))}")
    for name in ("kind", "origin", "log_key", "old_checkpoint", "new_checkpoint"):
        if not isinstance(doc[name], str):
            raise BadEvidence(f"{name} must be a string")
    if (
        not isinstance(doc["proof"], list)
        or len(doc["proof"]) > MAX_PROOF
        or not all(isinstance(p, str) for p in doc["proof"])
    ):
        raise BadEvidence(f"proof must be a list of at most {MAX_PROOF} base64 hashes")
    try:
        proof = [unb64_hash(p, f"proof[{i}]") for i, p in enumerate(doc["proof"])]
        x = None if doc["new_tree_old_root"] is None else unb64_hash(str(doc["new_tree_old_root"]), "new_tree_old_root")
    except BadRequest as exc:
        raise BadEvidence(exc.message) from None
    return doc, proof, x


def _evidence_key(doc: dict[str, Any], log_key: str | None) -> str:
    """The log key the evidence is judged under (``log_key`` given, else the file's), checked first: a mistyped
    --log-key, or one of a type we cannot check, is no damaged evidence."""
    key = log_key or doc["log_key"]
    from pithledger.tlog.note import NoteVerifier

    try:
        NoteVerifier.from_vkey(key)
    except UnsupportedKeyType as exc:
        raise UnsupportedKeyType(f"the log key {key[:120]}: {exc.message}") from None
    except BadVerifierKey as exc:
        if log_key is not None:
            raise BadVerifierKey(f"--log-key {log_key[:120]!r}: {exc.message}") from None
        raise BadEvidence(f"the file's log_key is no verifier key: {exc.message}") from None
    return key


def _evidence_checkpoints(doc: dict[str, Any], key: str) -> tuple[Signed, Signed]:
    """The file's old and new checkpoints, each verified under ``key`` and of the file's origin."""
    checked: list[Signed] = []
    for name in ("old_checkpoint", "new_checkpoint"):
        try:
            cp = open_checkpoint(doc[name].encode(), [key])
        except PithledgerError as exc:
            raise BadEvidence(f"{name} does not verify under the log key {key[:120]}: {exc.message}") from None
        if cp.origin != doc["origin"]:
            raise BadEvidence(f"{name} is of origin {cp.origin[:200]!r}, not the file's {doc['origin'][:200]!r}")
        checked.append(cp)
    old, new = checked
    return old, new


def check_evidence(data: bytes, log_key: str | None = None) -> EvidenceVerdict:
    """Judge an evidence file with nothing but the log's key (the file's ``log_key``, or ``log_key`` given:
    the one a third party trusts). Raises :class:`BadEvidence` when the file is malformed or a checkpoint
    does not verify; returns the verdict (``proven``: the two signed checkpoints cannot both be views of
    one append-only log)."""
    doc, proof, x = _evidence_form(data)
    key = _evidence_key(doc, log_key)
    old, new = _evidence_checkpoints(doc, key)
    verdict = judge(old, new, proof, x)
    if verdict is None:
        return EvidenceVerdict(
            "consistent",
            old.origin,
            old.size,
            new.size,
            False,
            f"size {new.size} extends size {old.size} by the proof: this is no evidence of a fork",
        )
    kind = verdict[0]
    if kind != doc["kind"]:
        raise BadEvidence(f"the file says {doc['kind'][:60]!r}, but its checkpoints and proof show {kind!r}")
    messages = {
        "same-size-different-root": f"the log signed two different trees of size {new.size}: a fork, proven",
        "inconsistent-proof": (
            f"the proof reaches the new root {b64(new.root)} (size {new.size}) from a root of its first "
            f"{old.size} leaves that is not the one the log signed for size {old.size}: a fork, proven"
        ),
        "bad-proof": f"the proof from size {old.size} to {new.size} reaches neither root: the log misbehaved, but this proves no fork",
        "rollback": f"the log signed size {new.size} after size {old.size}: an old checkpoint may be served again, so this proves no fork",
    }
    return EvidenceVerdict(
        kind, old.origin, old.size, new.size, kind in ("same-size-different-root", "inconsistent-proof"), messages[kind]
    )
