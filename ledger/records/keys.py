"""Ed25519 keys (PyNaCl/libsodium), fingerprints, the built-in Pith registry key, receipts, key files.

Signature rule (spec/events.md "Ed25519"): libsodium's ``crypto_sign_verify_detached`` as shipped in
PyNaCl >= 1.5 (libsodium >= 1.0.18): S must be canonical (< L), and small-order public keys and R
points are rejected. Every mirror runs the same rule, so validity never depends on the machine.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
import stat
from pathlib import Path

import msgspec
import nacl.exceptions
import nacl.signing

from pithledger.errors import BadEncoding, KeyError_, UnknownKey, VerificationFailed

PUBLIC_KEY_LEN = 32
SIGNATURE_LEN = 64


def fingerprint_hex(public_key: bytes) -> str:
    """First 128 bits of sha256(raw key) as lowercase hex (Pith's ``fingerprint_sha256_hex``)."""
    return hashlib.sha256(public_key).hexdigest()[:32]


def fingerprint_b32(public_key: bytes) -> str:
    """First 26 base32 chars of sha256(raw key) (Pith's ``fingerprint_sha256_b32_first128bits``)."""
    return base64.b32encode(hashlib.sha256(public_key).digest()).decode("ascii")[:26]


def b64decode_strict(text: str, *, length: int | None = None, what: str = "value") -> bytes:
    """Standard padded base64 in its one canonical form (no whitespace, zero pad bits)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise BadEncoding(f"{what} is not standard padded base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise BadEncoding(f"{what} is not in canonical base64 form (non-zero padding bits)")
    if length is not None and len(raw) != length:
        raise BadEncoding(f"{what} is {len(raw)} bytes; expected {length}")
    return raw


def b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")


def digest_from_hex(text: str, *, what: str = "digest") -> bytes:
    if not _HEX64.match(text):
        raise BadEncoding(f"{what} must be 64 lowercase hex characters (a SHA-256 digest)")
    return bytes.fromhex(text)


def signature_ok(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` under ``public_key``."""
    if len(public_key) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
        return False
    try:
        _verifier(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, nacl.exceptions.TypeError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _verifier(public_key: bytes) -> nacl.signing.VerifyKey:
    # a ledger meets the same few signers over and over: each key is parsed once (a pure function of its bytes;
    # a key that cannot be parsed raises every time, uncached)
    return nacl.signing.VerifyKey(public_key)


# --- the Pith registry -----------------------------------------------------------------------------


class RegistryKey(msgspec.Struct, frozen=True):
    key_id: str
    public_key: bytes
    signer_id: str = "pith.science"
    signer_type: str = "pith_registry"

    @property
    def fingerprint(self) -> str:
        return fingerprint_hex(self.public_key)


#: Pinned by the merge version: published in Pith's mirror manifest (spec/identifiers.md §4).
PITH_REGISTRY_KEYS: dict[str, RegistryKey] = {
    "pith-v1-2026-05": RegistryKey(
        key_id="pith-v1-2026-05",
        public_key=base64.b64decode("stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="),
    ),
}


def verify_receipt_signature(digest: bytes, signature: bytes, key_id: str | None = None) -> RegistryKey:
    """Check a Pith receipt signature (Ed25519 over the raw 32-byte digest) against registry keys.

    Returns the key that verifies; raises :class:`UnknownKey` or :class:`VerificationFailed`.
    """
    if key_id is not None:
        if key_id not in PITH_REGISTRY_KEYS:
            raise UnknownKey(
                f"no Pith registry key has key_id {key_id!r}",
                hint="known registry keys: " + ", ".join(sorted(PITH_REGISTRY_KEYS)),
            )
        candidates = [PITH_REGISTRY_KEYS[key_id]]
    else:
        candidates = list(PITH_REGISTRY_KEYS.values())
    for key in candidates:
        if signature_ok(key.public_key, digest, signature):
            return key
    names = ", ".join(k.key_id for k in candidates)
    raise VerificationFailed(f"the signature does not verify for digest {digest.hex()} under {names}")


# --- local signing keys ----------------------------------------------------------------------------

KEY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class KeyFile(msgspec.Struct, forbid_unknown_fields=True):
    key_type: str
    name: str
    seed_b64: str
    public_key_b64: str


class LocalKey(msgspec.Struct, frozen=True):
    name: str
    seed: bytes

    @property
    def signing_key(self) -> nacl.signing.SigningKey:
        return nacl.signing.SigningKey(self.seed)

    @property
    def public_key(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    def sign(self, message: bytes) -> bytes:
        return self.signing_key.sign(message).signature


def default_key_dir() -> Path:
    if env := os.environ.get("PITHLEDGER_KEYS"):
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "pithledger" / "keys"


class KeyStore:
    """A directory of key files, owner-only (0700 directory, 0600 files)."""

    KEY_TYPE = "pithledger-ed25519-v1"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        if not KEY_NAME_RE.match(name):
            raise KeyError_(
                f"key name {name!r} is not allowed",
                hint="use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit",
            )
        return self.directory / f"{name}.key.json"

    def new(self, name: str) -> LocalKey:
        path = self._path(name)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.directory, 0o700)
        except FileExistsError:
            raise KeyError_(
                f"the key directory {self.directory} exists and is not a directory",
                hint="point --key-dir (or PITHLEDGER_KEYS) at a directory, or at a path that does not exist yet",
            ) from None
        except OSError as exc:
            raise KeyError_(
                f"cannot create the key directory {self.directory}: {exc.strerror}",
                hint="point --key-dir (or PITHLEDGER_KEYS) at a directory you can write",
            ) from None
        seed = bytes(nacl.signing.SigningKey.generate())
        key = LocalKey(name=name, seed=seed)
        doc = KeyFile(
            key_type=self.KEY_TYPE, name=name, seed_b64=b64encode(seed), public_key_b64=b64encode(key.public_key)
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise KeyError_(
                f"a key named {name!r} already exists in {self.directory}", hint="choose another name"
            ) from None
        except OSError as exc:
            raise KeyError_(
                f"cannot write {path}: {exc.strerror}",
                hint="point --key-dir (or PITHLEDGER_KEYS) at a directory you can write",
            ) from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(msgspec.json.encode(doc) + b"\n")
        return key

    def load(self, name: str) -> LocalKey:
        path = self._path(name)
        try:
            info = path.stat()
            data = path.read_bytes()
        except FileNotFoundError:
            raise UnknownKey(f"no local key named {name!r} in {self.directory}") from None
        except OSError as exc:
            raise KeyError_(
                f"cannot read key file {path}: {exc.strerror}", hint="check the key directory and its permissions"
            ) from None
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyError_(
                f"key file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):o})",
                hint=f"run: chmod 600 {path}",
            )
        damaged = (
            f"restore {path} from a backup; if you have none, move it away and create a new key with "
            f"`pithledger keys new {name}` (events signed with the old key stay valid)"
        )
        try:
            doc = msgspec.json.decode(data, type=KeyFile)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise KeyError_(f"key file {path} is damaged: {exc}", hint=damaged) from None
        try:
            seed = b64decode_strict(doc.seed_b64, length=32, what=f"seed in {path}")
        except BadEncoding as exc:
            raise KeyError_(f"key file {path} is damaged: {exc.message}", hint=damaged) from None
        key = LocalKey(name=name, seed=seed)
        if doc.key_type != self.KEY_TYPE or b64encode(key.public_key) != doc.public_key_b64:
            raise KeyError_(f"key file {path} is damaged: its public key does not match its seed", hint=damaged)
        return key

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name[: -len(".key.json")] for p in self.directory.glob("*.key.json"))


def public_key_doc(key_id: str, public_key: bytes) -> dict[str, str]:
    """A public key as Pith publishes its own (mirror manifest ``public_key`` object)."""
    return {
        "algorithm": "ed25519",
        "fingerprint_sha256_b32_first128bits": fingerprint_b32(public_key),
        "fingerprint_sha256_hex": fingerprint_hex(public_key),
        "key_id": key_id,
        "public_key_b64": b64encode(public_key),
        "public_key_hex": public_key.hex(),
    }
