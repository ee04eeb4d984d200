"""C2SP signed notes (Ed25519), tlog-checkpoint bodies and tlog-cosignature/v1 lines. Pure: no IO.

Specs (spec/transparency.md §2): c2sp.org/signed-note, c2sp.org/tlog-checkpoint, c2sp.org/tlog-cosignature.
A signed note is ``text`` (ending in "\\n"), a blank line, then lines ``— <name> base64(key_id || sig)``.
Key ID = SHA-256(name || 0x0A || type || public key)[:4] with type 0x01 (Ed25519 note signature) or
0x04 (Ed25519 cosignature/v1, whose signature is timestamp(8, big-endian) || Ed25519 signature over
"cosignature/v1\\ntime <T>\\n" || checkpoint body). Checked against Go's golang.org/x/mod/sumdb/note and
transparency-dev/formats vectors (tests/vectors/tlog).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import nacl.signing

from pithledger.errors import (
    BadEncoding,
    BadNoteSignature,
    BadVerifierKey,
    MalformedCheckpoint,
    MalformedNote,
    NoVerifiedSignature,
    UnexpectedOrigin,
    UnknownNoteKey,
    UnsupportedKeyType,
)
from pithledger.records.keys import b64decode_strict, b64encode, signature_ok

if TYPE_CHECKING:
    from pithledger.records.keys import LocalKey

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
#: Signature types of C2SP signed-note that pithledger cannot check, named when a key of one is given.
_KEY_TYPES = {0x06: " (ML-DSA-44)"}
SIGNATURE_PREFIX = "\u2014 "  # EM DASH, space
# Bounds so a hostile note costs little: the spec asks verifiers to accept at least 16 signatures;
# Go's note.Open stops at 100. A checkpoint with 100 Ed25519/cosignature lines is ~15 kB.
MAX_SIGNATURES = 100
MAX_NOTE_BYTES = 1 << 16
MAX_TIMESTAMP = 2**63 - 1
COSIGNATURE_HEADER = "cosignature/v1\n"


def _valid_name(name: str) -> bool:
    # signed-note: non-empty, no Unicode spaces, no "+" (Go: unicode.IsSpace; Python's isspace plus Z*).
    return (
        bool(name)
        and "+" not in name
        and not any(c.isspace() or unicodedata.category(c) in ("Zs", "Zl", "Zp") for c in name)
    )


def _check_name(name: str) -> None:
    if not _valid_name(name) or not _clean_text(name):
        raise MalformedNote(f"key name {name!r} is empty or holds a space, a '+' or a control character")


def _clean_text(text: str) -> bool:
    """Valid UTF-8 (no lone surrogates) without ASCII control characters other than newline."""
    if any(c < " " and c != "\n" for c in text):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def key_id(name: str, alg: int, public_key: bytes) -> bytes:
    """signed-note key ID: SHA-256(name || 0x0A || alg || public key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public_key).digest()[:4]


def cosignature_message(checkpoint_text: str, timestamp: int) -> bytes:
    """What an Ed25519 cosignature/v1 signs: header line, time line, the whole checkpoint body."""
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{checkpoint_text}".encode()


class NoteSignature(NamedTuple):
    name: str
    key_id: bytes  # 4 bytes
    sig: bytes  # the signature bytes after the key ID

    def line(self) -> str:
        return f"{SIGNATURE_PREFIX}{self.name} {b64encode(self.key_id + self.sig)}\n"


@dataclass(frozen=True)
class Note:
    text: str
    signatures: tuple[NoteSignature, ...]  # every signature line, in order (duplicates dropped)
    verified_by: tuple[str, ...]  # names of the trusted keys whose signatures verified


@dataclass(frozen=True)
class NoteVerifier:
    """A trusted key: Ed25519 note key (type 0x01) or Ed25519 cosignature/v1 key (type 0x04)."""

    name: str
    alg: int
    public_key: bytes

    def __post_init__(self) -> None:
        if not _valid_name(self.name) or not _clean_text(self.name):
            raise BadVerifierKey(f"key name {self.name!r} is empty or holds a space, a '+' or a control character")
        if self.alg not in (ALG_ED25519, ALG_COSIGNATURE_V1):
            raise UnsupportedKeyType(
                f"the verifier key {self.name[:120]} is of type 0x{self.alg:02x}"
                f"{_KEY_TYPES.get(self.alg, '')}, which pithledger does not support"
            )
        if len(self.public_key) != 32:
            raise BadVerifierKey(f"an Ed25519 public key is 32 bytes, not {len(self.public_key)}")

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.alg, self.public_key)

    @property
    def vkey(self) -> str:
        return f"{self.name}+{self.key_id.hex()}+{b64encode(bytes([self.alg]) + self.public_key)}"

    @classmethod
    def from_vkey(cls, vkey: str) -> NoteVerifier:
        """Parse ``name+hex8(key ID)+base64(type || public key)``; the key ID must match."""
        parts = vkey.split("+", 2)  # base64 may itself hold "+"
        if len(parts) != 3:
            raise BadVerifierKey("a verifier key has three parts separated by '+': name+hex8+base64")
        name, hex_id, b64 = parts
        if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise BadVerifierKey("the key ID of a verifier key is 8 lowercase hex digits")
        try:
            raw = b64decode_strict(b64, what="verifier key material")
        except BadEncoding as exc:
            raise BadVerifierKey(exc.message) from None
        if len(raw) < 1:
            raise BadVerifierKey("the verifier key material is empty")
        if not _valid_name(name) or not _clean_text(name):
            raise BadVerifierKey(f"key name {name[:120]!r} is empty or holds a space, a '+' or a control character")
        # the ID first (it is over any type): a mistyped key is bad-verifier-key whatever its type byte
        expected = key_id(name, raw[0], raw[1:]).hex()
        if expected != hex_id:
            raise BadVerifierKey(f"the key ID {hex_id} does not match the key (it should be {expected})")
        return cls(name, raw[0], raw[1:])

    def verify(self, text: str, sig: bytes) -> bool:
        """Whether ``sig`` (the bytes after the key ID) is this key's signature of note ``text``."""
        message = text.encode("utf-8")
        if self.alg == ALG_COSIGNATURE_V1:
            if len(sig) != 8 + 64:
                return False
            timestamp = int.from_bytes(sig[:8], "big")
            if timestamp > MAX_TIMESTAMP:
                return False
            message = cosignature_message(text, timestamp)
            sig = sig[8:]
        return signature_ok(self.public_key, message, sig)


class NoteSigner:
    """Signs notes with an Ed25519 key under a key name (signature type 0x01)."""

    def __init__(self, name: str, key: nacl.signing.SigningKey) -> None:
        _check_name(name)
        self.name = name
        self._key = key
        self.public_key = bytes(key.verify_key)
        self.key_id = key_id(name, ALG_ED25519, self.public_key)

    @property
    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self.name, ALG_ED25519, self.public_key)

    @property
    def vkey(self) -> str:
        return self.verifier.vkey

    @property
    def cosigner(self) -> NoteVerifier:
        """The same key as a cosignature/v1 key (type 0x04): what a witness publishes."""
        return NoteVerifier(self.name, ALG_COSIGNATURE_V1, self.public_key)

    def signature(self, text: str) -> NoteSignature:
        _check_text(text)
        return NoteSignature(self.name, self.key_id, self._key.sign(text.encode("utf-8")).signature)

    def sign(self, text: str) -> bytes:
        """The signed note: ``text``, a blank line, this key's signature line."""
        return (text + "\n" + self.signature(text).line()).encode("utf-8")

    def _raw_sign(self, message: bytes) -> bytes:
        return self._key.sign(message).signature


def signer_from_key(local_key: LocalKey, name: str) -> NoteSigner:
    """The key-directory key ``local_key`` as a note signer under the note key name ``name``."""
    return NoteSigner(name, local_key.signing_key)


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise MalformedNote("a note's text must end with a newline")
    if not _clean_text(text):
        raise MalformedNote("a note's text must be UTF-8 without control characters other than newline")


def _parse_signature_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise MalformedNote("a signature line must start with an em dash and a space")
    name, sep, b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not sep or not _valid_name(name) or not b64:
        raise MalformedNote("a signature line is '— <key name> <base64>' with a valid key name")
    try:
        raw = b64decode_strict(b64, what="signature")
    except BadEncoding:
        raise MalformedNote("a signature is not canonical standard base64") from None
    if len(raw) < 5:
        raise MalformedNote("a signature is at least a 4-byte key ID and one byte")
    return NoteSignature(name, raw[:4], raw[4:])


def parse_signature_line(line: str) -> NoteSignature:
    """One signature line (without its newline), parsed, not verified."""
    return _parse_signature_line(line)


def _index(verifiers: Iterable[NoteVerifier]) -> dict[tuple[str, bytes], NoteVerifier]:
    known: dict[tuple[str, bytes], NoteVerifier] = {}
    for v in verifiers:
        other = known.setdefault((v.name, v.key_id), v)
        if other != v:
            raise BadVerifierKey(f"two different trusted keys share the name and key ID {v.name}+{v.key_id.hex()}")
    return known


def split_note(data: bytes) -> tuple[str, list[NoteSignature]]:
    """Parse a signed note without verifying it: its text and its signature lines (duplicates dropped)."""
    if len(data) > MAX_NOTE_BYTES:
        raise MalformedNote(f"the note is {len(data)} bytes, more than the {MAX_NOTE_BYTES} accepted")
    try:
        whole = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNote("the note is not valid UTF-8") from None
    if not _clean_text(whole):
        raise MalformedNote("the note holds a control character other than newline")
    split = whole.rfind("\n\n")
    if split < 0:
        raise MalformedNote("the note has no blank line before its signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block or not block.endswith("\n"):
        raise MalformedNote("the note has no signature lines, or its last line does not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"the note has {len(lines)} signatures, more than the {MAX_SIGNATURES} accepted")
    sigs: list[NoteSignature] = []
    for line in lines:
        sig = _parse_signature_line(line)
        if sig not in sigs:  # a repeated identical line says nothing new
            sigs.append(sig)
    return text, sigs


def open_note(data: bytes, verifiers: Iterable[NoteVerifier]) -> Note:
    """Parse and verify a signed note. Signatures by unknown keys (name and key ID not both matching a
    trusted key) are ignored; a failing signature by a trusted key refuses the whole note; at least one
    trusted signature must verify."""
    known = _index(verifiers)
    text, sigs = split_note(data)
    verified: list[str] = []
    for sig in sigs:
        v = known.get((sig.name, sig.key_id))
        if v is None:
            continue
        if not v.verify(text, sig.sig):
            raise BadNoteSignature(f"the signature by {sig.name}+{sig.key_id.hex()} does not verify")
        if sig.name not in verified:
            verified.append(sig.name)
    if not verified:
        raise NoVerifiedSignature(
            f"the note carries no signature by a trusted key (signed by: {', '.join(sorted({s.name for s in sigs}))})"
        )
    return Note(text, tuple(sigs), tuple(verified))


def add_signatures(data: bytes, lines: Sequence[str]) -> bytes:
    """A signed note with more signature lines appended (e.g. a witness's cosignature)."""
    split_note(data)
    for line in lines:
        if not line.endswith("\n") or "\n" in line[:-1]:
            raise MalformedNote("a signature line is one line ending with a newline")
        _parse_signature_line(line[:-1])
    out = data + "".join(lines).encode("utf-8")
    split_note(out)
    return out


# --- tlog-checkpoint -------------------------------------------------------------------------------

_SIZE = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


@dataclass(frozen=True)
class Checkpoint:
    """A C2SP tlog-checkpoint body: origin, tree size, root hash, optional extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin or not _clean_text(self.origin):
            raise MalformedCheckpoint("the origin must be one non-empty line without control characters")
        if not 0 <= self.size <= MAX_TIMESTAMP:
            raise MalformedCheckpoint(f"the tree size {self.size} is outside 0..2^63-1")
        if len(self.root) != 32:
            raise MalformedCheckpoint(f"the root hash is {len(self.root)} bytes, not 32")
        for ext in self.extensions:
            if not ext or "\n" in ext or not _clean_text(ext):
                raise MalformedCheckpoint("an extension line must be one non-empty line without control characters")

    def body(self) -> str:
        return "".join(line + "\n" for line in (self.origin, str(self.size), b64encode(self.root), *self.extensions))

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Strictly: "\\n"-terminated lines, decimal size without leading zeros, canonical base64 of 32 bytes."""
        if not text.endswith("\n"):
            raise MalformedCheckpoint("a checkpoint body ends with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise MalformedCheckpoint("a checkpoint has at least three lines: origin, size, root hash")
        origin, size, root, *extensions = lines
        if not _SIZE.match(size):
            raise MalformedCheckpoint("the tree size must be a decimal number without leading zeros")
        try:
            raw = b64decode_strict(root, length=32, what="the root hash")
        except BadEncoding as exc:
            raise MalformedCheckpoint(exc.message) from None
        return cls(origin, int(size), raw, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signer: NoteSigner) -> bytes:
    return signer.sign(checkpoint.body())


def open_checkpoint(
    data: bytes, verifiers: Iterable[NoteVerifier], *, origin: str | None = None
) -> tuple[Checkpoint, Note]:
    """Verify a signed checkpoint note and parse its body; ``origin``, when given, must be its origin."""
    note = open_note(data, verifiers)
    checkpoint = Checkpoint.parse(note.text)
    if origin is not None and checkpoint.origin != origin:
        raise UnexpectedOrigin(f"the checkpoint's origin is {checkpoint.origin!r}, not {origin!r}")
    return checkpoint, note


# --- tlog-cosignature (cosignature/v1, Ed25519) ----------------------------------------------------


def cosign(checkpoint_text: str, signer: NoteSigner, timestamp: int) -> str:
    """The cosignature/v1 signature line (ending in "\\n") of ``signer`` over a checkpoint body."""
    Checkpoint.parse(checkpoint_text)
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise MalformedNote(f"a cosignature timestamp must be within 0..2^63-1, not {timestamp}")
    sig = signer._raw_sign(cosignature_message(checkpoint_text, timestamp))
    cosigner = signer.cosigner
    return NoteSignature(cosigner.name, cosigner.key_id, timestamp.to_bytes(8, "big") + sig).line()


def verify_cosignature(checkpoint_text: str, line: str, verifier: NoteVerifier) -> int:
    """Check one cosignature line against a cosigner key (type 0x04); returns its timestamp."""
    if verifier.alg != ALG_COSIGNATURE_V1:
        raise BadVerifierKey(f"{verifier.name}'s key is not a cosignature/v1 key (type 0x04)")
    sig = _parse_signature_line(line.removesuffix("\n"))
    if (sig.name, sig.key_id) != (verifier.name, verifier.key_id):
        raise UnknownNoteKey(
            f"the cosignature is by {sig.name}+{sig.key_id.hex()}, not {verifier.name}+{verifier.key_id.hex()}"
        )
    if not verifier.verify(checkpoint_text, sig.sig):
        raise BadNoteSignature(f"the cosignature by {sig.name} does not verify over this checkpoint")
    return int.from_bytes(sig.sig[:8], "big")


def cosignature_timestamp(sig: NoteSignature) -> int:
    """The timestamp a cosignature/v1 signature carries (unverified: verify it first)."""
    if len(sig.sig) != 72:
        raise MalformedNote("a cosignature/v1 signature is 4 + 8 + 64 bytes")
    return int.from_bytes(sig.sig[:8], "big")
