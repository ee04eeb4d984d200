"""One error hierarchy. Every error a user can hit has a stable code and a hint.

The CLI prints ``error[<code>]: <message>`` and ``hint: <hint>`` and exits 1;
nothing a user types or feeds in should ever surface as a traceback.
"""

from __future__ import annotations


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
    hint = ("something wrote to the input while it was being applied; what was committed came from the checked bytes "
            "and the rest was not written: let the writer finish, then run the same command again (nothing is applied twice)")


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


# --- the ledger ------------------------------------------------------------------------------------


class LedgerError(PithledgerError):
    code = "ledger-error"
    hint = "run `pithledger fsck` to check the ledger"


class NoLedger(LedgerError):
    code = "no-ledger"
    hint = "apply bundles first (`pithledger --ledger PATH apply FILE`), or point --ledger / PITHLEDGER_LEDGER at an existing ledger"


class NotALedger(LedgerError):
    code = "not-a-ledger"
    hint = ("--ledger names a directory that holds other files: give a new or empty directory for a new ledger, "
            "or the directory of an existing one (it holds data.mdb)")


class LayoutMismatch(LedgerError):
    code = "layout-mismatch"
    hint = "use the pithledger version that wrote this ledger, or rebuild it by exporting and applying into a new one"


class LedgerFull(LedgerError):
    code = "ledger-full"
    hint = "free disk space (the batch was not written; the ledger is as before) and run the same command again"


class DerivationPending(PithledgerError):
    code = "derivation-pending"
    hint = ("an apply or sync is running on this ledger, or one was interrupted: wait for it, or finish the work with "
            "`pithledger --ledger L digest` (any whole-view reader finishes it)")


class NotFound(PithledgerError):
    code = "not-found"
    hint = "check the identifier, or apply the bundle that holds this record"


class AmbiguousId(PithledgerError):
    code = "ambiguous-id"
    hint = "type more characters of the suffix, or the long Pith Number"


# --- mirrors ---------------------------------------------------------------------------------------


class SourceError(PithledgerError):
    """A published mirror that cannot be read, or whose files contradict each other."""

    code = "bad-source"
    hint = "check the path or URL; if the source is being re-published right now, run the command again"


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
    hint = ("pithledger checks Ed25519 keys only: type 0x01 (a log's note key) and 0x04 (a witness's cosignature/v1 key); "
            "ask the log or witness for an Ed25519 key, or check this one with a tool that supports its type")


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


# --- where the parallel work runs (ledger/fanout.py) ---------------------------------------------------


class DaskMissing(PithledgerError):
    code = "dask-not-installed"
    hint = "install the extra: pip install 'pithledger[dask]'"


class SchedulerUnreachable(PithledgerError):
    code = "scheduler-unreachable"
    hint = ("check the address (e.g. tcp://host:8786) and that the scheduler is running and reachable from here; "
            "or leave --scheduler out to work on this machine's cores (--workers N)")
