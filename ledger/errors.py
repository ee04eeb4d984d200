"""One error hierarchy. Every error a user can hit has a stable code and a hint.

The CLI prints ``error[<code>]: <message>`` and ``hint: <hint>`` and exits 1;
nothing a user types or feeds in should ever surface as a traceback.

Every public error class is defined here, below :class:`PithledgerError`, in one section per concern;
the modules that raise them import them from here. spec/errors.md lists every code with its class,
and tests/unit/test_errors.py checks that the two agree and that no code is used twice by accident. Codes
shared on purpose: the source errors of the transport and a published mirror (``bad-source``, their
hints tell them apart), and ``NoSuchTile`` (``not-found``, as every other path a server lacks).
``EventInvalid``, ``HTTPError`` and ``ActionError`` carry a code chosen per instance (an event's
reason, an HTTP answer's code), which spec/events.md and spec/serve.md name.

Exceptions that never reach a caller stay private, underscore-named, beside the code that raises and
catches them: ``records/canonical._Float`` and ``records/events._Unverified`` (decoding and verifying
signals), ``mirror/http11._Reset``, ``mirror/transport._TooLong``, ``mirror/pull._Stop``, and the CLI's
``_bundles._TooLong`` / ``_Changed`` (each turned into a coded error or a retry where it is caught).
Two are not underscore-named but are caught inside the library too: ``store/log.BatchWithdrawn`` (a
commit whose ``admit`` declined: the serve writer retries) and ``store/lookup.StatePending`` (a
state not yet derived: the CLI's fast path reads the events instead). The CLI keeps ``UsageProblem`` (exit 2, not 1: a
command line that makes no sense, not an error of the library) and ``OutputFailed`` (an OSError of
stdout, reported as :class:`CannotWriteOutput`).
"""

from __future__ import annotations

from pathlib import Path


class PithledgerError(Exception):
    """Base of every error pithledger raises on purpose."""

    code = "error"
    hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def describe(self, where: str = "") -> str:
        """What a user sees: ``error[code]: where: message`` (``where`` once, even when the message
        already names it), and ``hint: ...`` on the next line when there is one."""
        prefix = f"{where}: " if where and where not in self.message else ""
        return f"error[{self.code}]: {prefix}{self.message}" + (f"\nhint: {self.hint}" if self.hint else "")

    def document(self) -> dict[str, str]:
        """The error as ``--json`` prints it on stdout: ``{"error": code, "message", "hint"}``."""
        return {"error": self.code, "message": self.message, "hint": self.hint}


class CannotRead(PithledgerError):
    code = "cannot-read"
    hint = "check the path and its permissions"


class InputChanged(PithledgerError):
    code = "input-changed"
    hint = (
        "something wrote to the input while it was being applied; what was committed came from the checked bytes "
        "and the rest was not written: let the writer finish, then run the same command again (nothing is applied twice)"
    )


class CannotWrite(PithledgerError):
    code = "cannot-write"
    hint = "check that the directory exists, is writable and has free space"


class CannotWriteOutput(CannotWrite):
    """stdout refused what a command printed (a full disk or /dev/full, a device error)."""

    code = "cannot-write-output"
    hint = "the output went to a file or device that is full or failing: free space, or send it elsewhere"


# --- strict decoding -------------------------------------------------------------------------------


class DecodeError(PithledgerError):
    """The bytes are not a JSON document pithledger accepts (spec/identifiers.md, "Strict decoding")."""

    code = "malformed-json"
    hint = "the input must be one UTF-8 JSON document; check that the file is complete and not corrupted"


class InvalidUtf8(DecodeError):
    code = "invalid-utf8"
    hint = "re-encode the file as UTF-8 (without a byte-order mark)"


class TrailingData(DecodeError):
    code = "trailing-data"
    hint = "the file holds more than one JSON document; split it or use a .jsonl file (one document per line)"


class DuplicateKey(DecodeError):
    code = "duplicate-key"
    hint = "an object names the same key twice; signed data must be unambiguous, remove the duplicate"


class FloatNotAllowed(DecodeError):
    code = "float-not-allowed"
    hint = "pithledger accepts integers only (floats have no portable canonical form); encode the value as a string"


class NonFiniteNumber(DecodeError):
    code = "non-finite-number"
    hint = "NaN and Infinity are not JSON; remove them"


class IntegerOutOfRange(DecodeError):
    code = "integer-out-of-range"
    hint = "integers must lie within +/-(2**53 - 1) so that every JSON implementation reads them exactly"


class LoneSurrogate(DecodeError):
    code = "lone-surrogate"
    hint = "a \\uD800-\\uDFFF escape without its pair is not a Unicode character; fix the string"


class NestingTooDeep(DecodeError):
    code = "nesting-too-deep"
    hint = "no pithledger document nests deeper than the limit in spec/identifiers.md"


class DocumentTooLarge(DecodeError):
    code = "document-too-large"
    hint = "split the input into smaller files"


# --- records and identifiers -----------------------------------------------------------------------


class SchemaError(PithledgerError):
    """A document decoded but does not have the shape its format requires."""

    code = "schema-error"
    hint = "compare the document with the format in spec/"


class MalformedId(PithledgerError):
    code = "malformed-id"
    hint = (
        "use one of: pith:YYYY:<26 base32 chars>, pith:<8 chars>, a bare 8/12/16/26-char suffix, "
        "an arXiv id (2502.21231, math/0611599, optionally with vN), or its DOI 10.48550/arxiv.<id>"
    )


class MetadataError(PithledgerError):
    """arXiv metadata that cannot be minted into a canonical record."""

    code = "bad-metadata"
    hint = "each line must be one arXiv metadata object with id, title, abstract, categories, license, versions"


# --- keys and signatures ---------------------------------------------------------------------------


class KeyError_(PithledgerError):  # noqa: N801 - KeyError is a builtin
    code = "key-error"
    hint = "list local keys with `pithledger keys list`; create one with `pithledger keys new NAME`"


class UnknownKey(KeyError_):
    code = "unknown-key"


class BadEncoding(PithledgerError):
    """Hex or base64 that is not in the one form pithledger accepts."""

    code = "bad-encoding"
    hint = "digests are 64 lowercase hex characters; signatures and keys are standard padded base64"


class VerificationFailed(PithledgerError):
    code = "bad-signature"
    hint = "the data or the signature was altered, or it was signed by a different key"


# --- bundles ---------------------------------------------------------------------------------------


class BundleError(PithledgerError):
    """A bundle whose structure is wrong: it is refused whole and nothing from it is written."""

    code = "bad-bundle"
    hint = "a bundle is {bundle_type, bundle_version, pith_number, events[...]}; see spec/bundle.md"


class SubjectMismatch(BundleError):
    code = "subject-mismatch"
    hint = "every event in a bundle must be about the bundle's pith_number; carry other records in their own bundles"


class EventTooLarge(BundleError):
    code = "event-too-large"
    hint = "an event's canonical bytes are at most 1 MiB (spec/events.md); the bundle was refused whole"


class BundleInconsistent(BundleError):
    code = "bundle-inconsistent"
    hint = "the bundle's top-level record, hash, numbers and aliases must all derive from its canonical_record"


# --- events and timestamp proofs (ledger/records/events.py, ots.py) -------------------------------


class EventInvalid(PithledgerError):
    """Why one event is invalid. Its ``code`` is the reason reported in verify, log and state."""

    code = "invalid-event"
    hint = "the event was altered after signing, or was built wrongly; ask its signer for the original"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class OtsError(PithledgerError, ValueError):
    """A detached OpenTimestamps proof that cannot be read (spec/events.md, timestamp_anchor). Still a
    ValueError, as it always was."""

    code = "malformed-ots-proof"
    hint = "give the detached .ots file that `ots stamp FILE` wrote beside FILE"

    def __str__(self) -> str:
        # The bare message, as before: it is quoted inside an event's bad-proof reason, which a ledger stores.
        return self.message


class OtsNotVerified(PithledgerError):
    """``pithledger ots verify``: the proof was read, but no Bitcoin attestation in it checks against the
    headers given (spec/events.md §3.1.2). Each subclass names why."""

    code = "ots-not-verified"
    hint = "see spec/events.md §3.1.2 for what `ots verify` checks"


class OtsPendingOnly(OtsNotVerified):
    code = "ots-pending-only"
    hint = "the proof has no Bitcoin attestation yet: `ots upgrade PROOF` once its calendar has been anchored (a few hours)"


class OtsNoHeader(OtsNotVerified):
    code = "ots-no-header"
    hint = "give the header of the attested block: --header HEX (its 80 bytes, from a node you trust: `bitcoin-cli getblockheader HASH false`)"


class OtsBadHeader(OtsNotVerified):
    code = "ots-bad-header"
    hint = "a --header is the 80-byte block header in hex (160 hex digits), optionally HEIGHT:HEX"


class OtsPowShort(OtsNotVerified):
    code = "ots-pow-short"
    hint = "the header does not carry mainnet's proof of work (a changed or test-network header): get it from a mainnet node"


class OtsMerkleRootDiffers(OtsNotVerified):
    code = "ots-merkle-root-differs"
    hint = "the proof's path does not lead to this block's Merkle root: the header is of another block, or the proof was altered"


class OtsDigestDiffers(OtsNotVerified):
    code = "ots-digest-differs"
    hint = "the proof stamps another file: give the file (or digest) that was stamped"


# --- the ledger ------------------------------------------------------------------------------------


class LedgerError(PithledgerError):
    code = "ledger-error"
    hint = "run `pithledger fsck` to check the ledger"


class NoLedger(LedgerError):
    code = "no-ledger"
    hint = "apply bundles first (`pithledger --ledger PATH apply FILE`), or point --ledger / PITHLEDGER_LEDGER at an existing ledger"

    @classmethod
    def at(cls, path: Path | str) -> LedgerError:
        """``no ledger at PATH``; a tree `publish` wrote is named as one (:meth:`NotALedger.published`)."""
        return NotALedger.published(path) if _published_tree(path) else cls(f"no ledger at {path}")


class NotALedger(LedgerError):
    code = "not-a-ledger"
    hint = (
        "--ledger names a directory that holds other files: give a new or empty directory for a new ledger, "
        "or the directory of an existing one (it holds data.mdb)"
    )

    @classmethod
    def holding(cls, path: Path | str, shown: str) -> NotALedger:
        """A directory that is neither a ledger nor empty; a tree `publish` wrote is named as one."""
        if _published_tree(path):
            return cls.published(path)
        return cls(f"{path} is not a ledger (it holds no data.mdb) and is not empty: it holds {shown}")

    @classmethod
    def published(cls, path: Path | str) -> NotALedger:
        """--ledger at a published tree (issue #41: it said "no ledger at pub", which told a new user nothing)."""
        return cls(
            f"{path} is a published mirror tree (it holds {PUBLISHED_TREE_MARK}), not a ledger",
            hint=f"read it into a ledger with `pithledger --ledger LEDGER sync {path}`, or compare it with another "
            f"mirror with `pithledger audit {path} OTHER`; --ledger names a ledger (a directory holding data.mdb)",
        )


#: The file `publish` writes at the root of every tree (spec/serve.md §7): how a published tree is told apart.
PUBLISHED_TREE_MARK = "pith-mirrors.json"


def _published_tree(path: Path | str) -> bool:
    """Whether ``path`` is a tree `publish` wrote (and not a ledger): only to word an error about it."""
    root = Path(path)
    try:
        return (root / PUBLISHED_TREE_MARK).is_file() and not (root / "data.mdb").exists()
    except OSError:
        return False


class LayoutMismatch(LedgerError):
    code = "layout-mismatch"
    hint = "use the pithledger version that wrote this ledger, or rebuild it by exporting and applying into a new one"


class LedgerFull(LedgerError):
    code = "ledger-full"
    hint = "free disk space (the batch was not written; the ledger is as before) and run the same command again"


class LedgerDamaged(LedgerError):
    """LMDB refuses the ledger's file as damaged (a page of the wrong type, a page past its end) where it opens it."""

    code = "ledger-damaged"
    hint = "restore the ledger from a backup (`pithledger backup` makes one), or fill a new one from a mirror (`pithledger sync`)"


class DiskFull(LedgerError):
    """A disk with no room for what an LMDB environment (the ledger, its display metadata, pull's cache,
    fsck's scratch, a backup) had to write: named before LMDB touches a page it cannot have (a SIGBUS)."""

    code = "disk-full"
    hint = "free space on that disk (the step that failed wrote nothing), then run the same command again"


class ReadOnlyLedger(LedgerError):
    """The ledger's directory or disk refuses writes (EROFS, EACCES): nothing is wrong with the ledger."""

    code = "read-only-ledger"
    hint = (
        "the ledger's directory or disk is read-only: remount it read-write or fix its permissions, "
        "or copy the ledger to a writable place (`pithledger backup`) and point --ledger there; reading commands work as they are"
    )


class BackupExists(CannotWrite):
    code = "backup-exists"
    hint = "give a path that does not exist yet: a backup never replaces anything (remove or move the old one first)"


class BackupFailed(LedgerError):
    code = "backup-failed"
    hint = (
        "nothing was left at the destination and the ledger is unchanged: free space there if the disk is full "
        "(a backup needs about the size of the ledger's data.mdb), then run the same command again"
    )


class DerivationPending(PithledgerError):
    code = "derivation-pending"
    hint = (
        "an apply or sync is running on this ledger, or one was interrupted: wait for it, or finish the work with "
        "`pithledger --ledger L digest` (any whole-view reader finishes it)"
    )


class NotFound(PithledgerError):
    code = "not-found"
    hint = "check the identifier, or apply the bundle that holds this record"


class AmbiguousId(PithledgerError):
    code = "ambiguous-id"
    hint = "type more characters of the suffix, or the long Pith Number"


# --- the ledger's transparency log tables (ledger/store/tlog_tables.py) ---------------------------


class TlogNotBuilt(LedgerError):
    """A read-only handle on a ledger of an older layout (4 or 3), whose log has no transparency log yet."""

    code = "tlog-not-built"
    hint = (
        "this ledger was written by an older pithledger (layout 4 or older) and has no transparency log yet: "
        "the first writer builds it (any `pithledger apply`, or `pithledger fsck`, `digest` or `publish`)"
    )


class TlogOutOfRange(LedgerError, LookupError):
    """A range of entries or hashes the tree at its current size does not hold (a tlog.HashReader's LookupError)."""

    code = "tlog-out-of-range"
    hint = "ask for entries and hashes below the log's size (`pithledger checkpoint` names it)"


class TlogDamaged(LedgerError):
    """The write path found the tlog out of step with the log: nothing is written on top of it."""

    code = "tlog-damaged"
    hint = "run `pithledger fsck` to see what is wrong; `pithledger rebuild --force` rebuilds the transparency log from the log"


# --- mirrors ---------------------------------------------------------------------------------------


class SourceError(PithledgerError):
    """A published mirror that cannot be read, or whose files contradict each other."""

    code = "bad-source"
    hint = "check the path or URL; if the source is being re-published right now, run the command again"


# --- reading a source (ledger/mirror/transport.py, published.py, pull.py) ------------------------


class SourceTimeout(SourceError):
    hint = "the source is slow or stalled; try again later, or allow more time (timeout / deadline)"


class SourceConnectionError(SourceError):
    hint = "check the URL and the network; the server refused, dropped or reset the connection"


class SourceTLSError(SourceError):
    hint = "the server's certificate does not verify for this host name, or the port does not speak TLS"


class SourceProtocolError(SourceError):
    hint = "the server's reply is not valid HTTP/1.1 (or is cut short); the server is broken, or is not an HTTP server"


class SourceTooLarge(SourceError):
    hint = "no file of a published mirror may be larger than the limit; the source is broken or hostile"


class RedirectRefused(SourceError):
    hint = (
        "redirects are followed only within one origin (scheme, host and port), at most 5 and never in a "
        "loop; give the mirror's final URL"
    )


class SourceHTTPStatus(SourceError):
    hint = "the server answered with an error status; check the URL, or try again later"

    def __init__(self, message: str, status: int, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class SourceFileMissing(SourceError):
    hint = "the source is incomplete, or was re-published while being read: run the command again"


class UnsafePath(SourceError):
    hint = (
        "a published mirror is a tree of regular files; this one names a path outside its tree, a symlink "
        "leading out of it, or something that is not a regular file (broken or hostile)"
    )


class MalformedSource(SourceError):
    """A file of a published mirror that does not have the shape of spec/audit.md §4."""

    hint = (
        "the mirror's files are not in the pithledger-digest-v1 layout (spec/audit.md §4), or contradict each "
        "other; the source is broken or hostile"
    )


class BadManifest(SourceError):
    code = "bad-manifest"
    hint = (
        "SOURCE must be a pith-mirrors.json (manifest_type pith_mirror_manifest, manifest_version 1.0, mirrors "
        "with a bundle_pattern holding {suffix}; spec/pull.md §1), or the base URL of a mirror that serves one"
    )


# --- transparency log: signed notes, checkpoints, cosignatures (ledger/tlog/note.py) --------------------


class NoteError(PithledgerError):
    """A signed note (C2SP signed-note), checkpoint or cosignature that cannot be accepted."""

    code = "bad-note"
    hint = "fetch the checkpoint again from the mirror; if it stays refused, the mirror or the key you trust is wrong"


class MalformedNote(NoteError):
    code = "malformed-note"


class BadVerifierKey(NoteError):
    code = "bad-verifier-key"
    hint = "a verifier key is written name+hex8+base64 (C2SP signed-note); copy it again from the mirror's manifest"


class UnsupportedKeyType(BadVerifierKey):
    """A well-formed verifier key of a signature type this version cannot check (e.g. ML-DSA-44, 0x06):
    named as such, never as a signature that fails (which would read as tampering)."""

    code = "unsupported-key-type"
    hint = (
        "pithledger checks Ed25519 keys only: type 0x01 (a log's note key) and 0x04 (a witness's cosignature/v1 key); "
        "ask the log or witness for an Ed25519 key, or check this one with a tool that supports its type"
    )


class UnknownNoteKey(NoteError):
    code = "unknown-note-key"
    hint = "the signature is by a key you did not configure: check the name and verifier key you trust"


class BadNoteSignature(NoteError):
    code = "bad-note-signature"
    hint = "the note was changed after signing, or signed by another key of the same name: do not trust it"


class NoVerifiedSignature(NoteError):
    code = "unverified-note"
    hint = "no signature on the note is by a key you trust: check the verifier key (the log_key of the mirror)"


class MalformedCheckpoint(NoteError):
    code = "malformed-checkpoint"


class UnexpectedOrigin(NoteError):
    code = "unexpected-origin"
    hint = "the checkpoint names another log: check the origin you expect (--origin) and the mirror you read"


# --- transparency log: tree, tiles, entry bundles (ledger/tlog/tiles.py) -----------------------------------


class TlogError(PithledgerError):
    """A tile, entry bundle or tree request that is malformed or does not match the signed tree."""

    code = "bad-tlog"
    hint = "fetch the log again; if it stays refused, the mirror's published log does not match its checkpoint"


class BadTilePath(TlogError):
    code = "bad-tile-path"
    hint = "tile paths are tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>] (C2SP tlog-tiles)"


class MalformedTile(TlogError):
    code = "malformed-tile"


class MalformedEntryBundle(TlogError):
    code = "malformed-entry-bundle"


class TileMismatch(TlogError):
    code = "tile-mismatch"
    hint = "the mirror's tiles do not hash to the root it signed: do not trust this copy of the log; report it"


class OutsideTree(TlogError):
    code = "outside-tree"
    hint = "ask for an index below the tree size (and an old size not above the new one)"


# --- Merkle proofs and proof documents (ledger/tlog/merkle.py, proofs.py) -------------------------


class ProofError(PithledgerError, ValueError):
    """An RFC 9162 inclusion or consistency proof that does not hold. Still a ValueError, as it always was."""

    code = "bad-merkle-proof"
    hint = "the proof does not hold for the trees it names: fetch the proof and the checkpoints again"

    def __str__(self) -> str:
        # The bare message, as before: it is quoted inside BadProof's and InconsistentLog's messages.
        return self.message


class BadOrigin(PithledgerError):
    code = "bad-origin"
    hint = (
        "an origin is 1-255 printable ASCII characters without spaces or '+', e.g. mirror.example.org/pith "
        "(spec/transparency.md §4)"
    )


class NoLogKey(PithledgerError):
    code = "no-log-key"
    hint = (
        "name the key that signs this mirror's checkpoints: --key NAME (create one with `pithledger keys new mirror`, "
        "then `pithledger checkpoint --key mirror`); `pithledger keys list` shows the keys you have"
    )


class BadProof(PithledgerError):
    """A proof document that is malformed, or whose proof does not hold against its signed checkpoint."""

    code = "bad-proof"
    hint = "the proof document was changed or is not one `pithledger prove` wrote: do not rely on it; ask the mirror for a new one"


class InconsistentLog(PithledgerError):
    code = "inconsistent-log"
    hint = (
        "the newer checkpoint does not extend the older one: the log was rewritten (a fork). Keep both checkpoint "
        "files as evidence; they are signed, so anyone can check them"
    )


class NotInLog(PithledgerError):
    code = "not-in-log"
    hint = "the event is not in this mirror's log: check the event id (`pithledger log` lists the events appended)"


# --- witness (ledger/tlog/witness.py) -------------------------------------------------------------


class WitnessError(PithledgerError):
    """A refused add-checkpoint; ``status`` is its HTTP status (C2SP tlog-witness)."""

    code = "witness-refused"
    status = 400
    content_type = "text/plain; charset=utf-8"
    hint = "see spec/transparency.md §6 for what a witness checks"

    def body(self) -> bytes:
        """The body of the HTTP answer (witness.Answer) with ``status`` and ``content_type``."""
        return f"{self.code}: {self.message}\n".encode()


class BadRequest(WitnessError):
    code = "bad-add-checkpoint"
    status = 400
    hint = (
        'the body is "old <size>\\n", up to 63 base64 proof lines, an empty line, then the signed checkpoint '
        "(C2SP tlog-witness)"
    )


class UnknownLog(WitnessError):
    code = "unknown-log"
    status = 404
    hint = "this witness follows only the logs of its config; ask its operator to add the origin and the log's key"


class NotVerified(WitnessError):
    code = "checkpoint-not-verified"
    status = 403
    hint = "the checkpoint must carry a valid signature by the log key this witness has for its origin"


class SizeConflict(WitnessError):
    """The old size is not the size this witness last cosigned: the body of the answer is that size."""

    code = "size-conflict"
    status = 409
    hint = "send the consistency proof from the size this witness last cosigned (the answer's body)"

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size

    content_type = "text/x.tlog.size"  # C2SP tlog-witness: the 409 answer's body is the size last cosigned

    def body(self) -> bytes:
        return f"{self.size}\n".encode()


class Inconsistent(WitnessError):
    """The checkpoint is not an extension of the one last cosigned; ``evidence`` is the file written, if any."""

    code = "inconsistent-checkpoint"
    status = 422
    hint = "the log showed this witness two histories that do not extend each other; the evidence file shows both"

    def __init__(self, message: str, evidence: Path | None = None) -> None:
        super().__init__(message + (f"; evidence written to {evidence}" if evidence else ""))
        self.evidence = evidence


class BadConfig(PithledgerError):
    code = "bad-witness-config"
    hint = (
        'a witness config is {"config_type": "pithledger_witness_config", "config_version": "1", "name": ..., '
        '"key": ..., "logs": [{"origin": ..., "vkey": ...}]}: see spec/transparency.md §6'
    )


class DamagedState(PithledgerError):
    code = "damaged-witness-state"
    hint = "restore the witness's state directory from a backup; never edit its files by hand"


class BadEvidence(PithledgerError):
    code = "bad-evidence"
    hint = "an evidence file is the JSON a witness or a sync wrote (spec/transparency.md §6.3); it was altered, or is another file"


class ForkNotProven(PithledgerError):
    code = "fork-not-proven"
    hint = (
        "the file is well formed and both checkpoints are the log's, but they do not prove by themselves that the "
        "log forked (spec/transparency.md §6.3)"
    )


# --- remembered checkpoints of the logs a ledger reads (ledger/mirror/checkpoints.py) -------------


class OriginBusy(SourceError):
    """Another run of this ledger held the origin's memory for longer than this run's deadline."""

    code = "origin-busy"
    hint = (
        "another pithledger run (sync or pull) is reading this log into this ledger: let it finish, or stop it, "
        "and run this again (or give a longer --deadline)"
    )


class LogFork(SourceError):
    """The source's log does not extend the one this ledger saw for the same origin (or its witnesses')."""

    code = "log-fork"
    hint = (
        "the source shows a history of this log that does not extend the one seen before: do not trust it; "
        "the evidence file (check it with `pithledger check-evidence FILE`) shows both signed checkpoints"
    )

    def __init__(self, message: str, evidence: Path) -> None:
        super().__init__(f"{message}; evidence written to {evidence}")
        self.evidence = evidence


class LogKeyChanged(SourceError):
    code = "log-key-changed"
    hint = (
        "the source names another key for a log whose key this ledger pinned: if the log really changed its key, "
        "give the new one with --log-key VKEY (from its operator, not from the source)"
    )


class BadCheckpoint(SourceError):
    code = "bad-checkpoint"
    hint = "the source's checkpoint or log tiles cannot be verified: do not trust this copy of the log"


class DamagedMemory(PithledgerError):
    code = "damaged-checkpoint-memory"
    hint = "move the file away: the next run remembers the source's checkpoint afresh (with no history to check it against)"


class NotWitnessed(SourceError):
    code = "not-witnessed"
    hint = "the checkpoint carries no valid cosignature by a witness given with --witness-key: a witness may have refused it"


# --- published logs and verify-log (ledger/mirror/logsite.py) -------------------------------------


class PublishedLogDiffers(PithledgerError):
    """The directory already holds a log that this ledger's log does not extend."""

    code = "published-log-differs"
    hint = (
        "the directory holds another history of this mirror's log (a fork of your own log: two ledgers published "
        "under one key, or a ledger rebuilt from other events). Nothing was written: publish into a new directory, "
        "or find out which history is right before publishing over it"
    )


class LogWouldFork(PithledgerError):
    """The log key was asked to sign a tree that does not extend the one it last signed for that origin."""

    code = "log-would-fork"
    hint = (
        "nothing was signed. This ledger's log is not the log this key published (a restored backup, a ledger "
        "filled by `export --all`): bring it back to the published log first with `pithledger restore-log SOURCE "
        "--log-key VKEY` (SOURCE: your own published tree or URL), then sign; or publish this ledger under a new "
        'origin (README "Rotating a log key")'
    )


class DamagedSignedRecord(PithledgerError):
    code = "damaged-signed-record"
    hint = (
        "the key directory's record of what this log key signed cannot be read: restore it from the key "
        "directory's backup; never delete it to get past this error (the key would then sign a fork)"
    )


class LogDiverged(PithledgerError):
    """restore-log: this ledger's log is not a prefix of the published log it is to be brought back to."""

    code = "log-diverged"
    hint = (
        "this ledger appended events the published log does not hold at those positions (events applied after the "
        "restore, before restore-log): nothing was written. Restore the backup again, run restore-log first, "
        'then apply; or publish this ledger under a new origin (README "Rotating a log key")'
    )


class NotTheSignedLog(PithledgerError):
    """restore-log: SOURCE's log is not the tree the log key last signed (an older copy, another log), or
    nothing in the key directory vouches for the key SOURCE's manifest names."""

    code = "not-the-signed-log"
    hint = (
        "nothing was written. Give restore-log the newest copy of this mirror's own published log (serve's URL "
        "while it still runs on the replaced ledger, or a directory that `pithledger --ledger REPLACED publish "
        "DIR --key NAME` writes from the replaced ledger, with serve's --base-url or --origin) and --log-key VKEY, your log key from your own records; "
        'if no copy holds the tree the key signed, publish under a new origin (README "Rotating a log key")'
    )


class NoSuchTile(PithledgerError):
    code = "not-found"
    hint = "tile paths are tile/<L>/<N>[.p/<W>] and tile/entries/<N>[.p/<W>] within the tree of /checkpoint (C2SP tlog-tiles)"


class LogCheckFailed(PithledgerError):
    code = "log-check-failed"
    hint = "the mirror's published log does not hold what its signed checkpoint promises: do not trust this copy; report it"


class NoPublishedLog(PithledgerError):
    code = "no-published-log"
    hint = "the mirror publishes no checkpoint: it must be published with `pithledger publish DIR --key NAME` (or served with --key)"


# --- LaTeX (ledger/render/latex.py) ---------------------------------------------------------------


class BadResolver(PithledgerError):
    code = "bad-resolver"
    hint = "give a plain http(s) base URL: letters, digits, '.', '-', '/' and a :port, e.g. https://mirror.example.org"


# --- serving (ledger/web/serve.py, actions.py) ----------------------------------------------------


class PortInUse(PithledgerError):
    code = "port-in-use"
    hint = "another program listens there: stop it, or choose another --port (0 picks a free one)"


class CannotListen(PithledgerError):
    code = "cannot-listen"
    hint = "check --host (an address of this machine, e.g. 127.0.0.1) and --port (1024-65535 unless you are root)"


class HTTPError(PithledgerError):
    """A request the server answers with an error status; ``code`` is chosen per answer (spec/serve.md)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class ActionError(PithledgerError):
    """An answer other than the writer's: status, code (chosen per answer, spec/serve.md), message, extra headers."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers or {}


# --- where the parallel work runs (ledger/fanout.py) ---------------------------------------------------


class DaskMissing(PithledgerError):
    code = "dask-not-installed"
    hint = "install the extra: pip install 'pithledger[dask]'"


class SchedulerUnreachable(PithledgerError):
    code = "scheduler-unreachable"
    hint = (
        "check the address (e.g. tcp://host:8786) and that the scheduler is running and reachable from here; "
        "or leave --scheduler out to work on this machine's cores (--workers N)"
    )
