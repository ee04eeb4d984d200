"""Event kinds, payload rules, event_id, signing and verifying events. Pure: no IO, no clock.

Validity is a function of the event's bytes alone plus the constants pinned here (the Pith registry
keys, the kinds and their rules), never of local keys or configuration: every mirror agrees on it.
The rules are written in spec/events.md.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import re
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import msgspec

from pithledger.errors import EventInvalid, PithledgerError
from pithledger.records import bitcoin as _bitcoin
from pithledger.records import ids, keys
from pithledger.records import ots as _ots
from pithledger.records.canonical import canonical_bytes, check_value
from pithledger.records.model import HEX64_RE, TIME_RE, check_time, record_ids

EVENT_VERSION = "pithledger-event-v1"
#: Signatures cover this prefix + the canonical bytes of the event without event_id and signature_b64.
SIGNING_DOMAIN = b"pithledger-event-v1\x00"
MAX_EVENT_BYTES = 1024 * 1024

# ASCII only, anchored at both ends with \Z ("$" would admit a trailing newline): spec/events.md §3.
EVENT_ID_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
ORCID_RE = re.compile(r"^[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]\Z")
WAYBACK_RE = re.compile(r"^https://web\.archive\.org/web/([0-9]{14})/(https?://[!-~]+)\Z")
#: http(s), a non-empty host part, then printable ASCII without spaces; at most 2048 characters.
HTTP_URL_RE = re.compile(r"^https?://[!-.0-~][!-~]*\Z")

RELATIONS = ("cites", "compares", "depends_on", "extends", "refutes", "replaces", "supports", "uses_method")
REPLICATION_TYPES = ("formal_bridge", "falsification", "replication")
OUTCOMES = ("failed", "inconclusive", "partial", "succeeded")
SEVERITIES = ("critical", "info", "warning")

Status = Literal["valid", "invalid", "unverified"]
Trust = Literal["registry", "self_signed", "none"]

#: kind -> the ``target`` its events carry (Pith shows "record" and "graph").
TARGETS: dict[str, str] = {
    "record_created": "record",
    "graph_snapshot": "graph",
    "timestamp_anchor": "record",
    "storage_attestation": "record",
    "author_attestation": "record",
    "citation_signature": "record",
    "replication_record": "record",
    "integrity_finding": "record",
    "challenge": "record",
    "revocation": "event",
}
KNOWN_KINDS = frozenset(TARGETS)


# --- payloads --------------------------------------------------------------------------------------
# Unknown payload fields are admitted and kept (a newer writer may add optional fields); the rules
# below read only the fields they name.


class Receipt(msgspec.Struct):
    kind: Literal["pith_receipt"]
    key_id: str
    algorithm: Literal["ed25519"]
    signed_at: str
    signature_b64: str


class RecordCreated(msgspec.Struct):
    canonical_record: dict[str, Any]
    canonical_sha256: str
    receipt: Receipt | None = None


class GraphSnapshot(msgspec.Struct):
    graph_snapshot: dict[str, Any]


class TimestampAnchor(msgspec.Struct):
    ots_proof_b64: str
    bitcoin_headers_b64: str | None = None  # absent or null: none (spec/events.md §3.1.3)


class StorageAttestation(msgspec.Struct):
    capture_url: str
    captured_at: str
    content_sha256: str | None = None


class AuthorAttestation(msgspec.Struct):
    author_name: str
    orcid: str | None = None


class CitationSignature(msgspec.Struct):
    cited_pith_number: str
    relation: str


class ReplicationRecord(msgspec.Struct):
    replication_type: str
    outcome: str
    artifact_url: str


class IntegrityFinding(msgspec.Struct):
    finding_type: str
    severity: str
    description: str


class Challenge(msgspec.Struct):
    challenged_event_id: str
    reason: str


class Revocation(msgspec.Struct):
    revoked_event_id: str
    reason: str | None = None  # optional: absent or null (spec/events.md §2.2 step 10)


PAYLOAD_TYPES: dict[str, type[msgspec.Struct]] = {
    "record_created": RecordCreated,
    "graph_snapshot": GraphSnapshot,
    "timestamp_anchor": TimestampAnchor,
    "storage_attestation": StorageAttestation,
    "author_attestation": AuthorAttestation,
    "citation_signature": CitationSignature,
    "replication_record": ReplicationRecord,
    "integrity_finding": IntegrityFinding,
    "challenge": Challenge,
    "revocation": Revocation,
}


def orcid_checksum_ok(orcid: str) -> bool:
    """ISO 7064 MOD 11-2 check digit, as ORCID defines it."""
    digits = orcid.replace("-", "")
    total = 0
    for ch in digits[:-1]:
        total = (total + int(ch)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def _http_url(value: str, what: str) -> None:
    if len(value) > 2048 or not HTTP_URL_RE.match(value):
        raise EventInvalid("bad-payload", f"{what} {value[:80]!r} is not an http(s) URL")


# --- the envelope ----------------------------------------------------------------------------------

#: The only characters a name may consist of and still count as empty: ASCII white space. Unicode's
#: white-space classes differ between languages, so they are not used for any rule.
ASCII_BLANKS = frozenset(" \t\n\v\f\r")
#: Fields every event carries, checked for presence and type first (spec/events.md §2.2, step 2).
_STRING_FIELDS = ("event_type", "subject_pith_number", "target", "created_at")
_SIGNER_FIELDS = ("key_id", "public_key_fingerprint", "signer_id", "signer_type")
PITH_RECORD_DOMAIN = b"pithledger-pith-record-v1\x00"


def is_blank(text: str) -> bool:
    """True for "" and strings of ASCII white space only (the one portable reading of "empty")."""
    return all(ch in ASCII_BLANKS for ch in text)


class Verdict(msgspec.Struct, frozen=True):
    """What verification concluded about one event. ``facts`` feeds the reducer.

    ``event_id``: for a valid event, its ledger identity (spec/events.md §2.3); otherwise the declared
    ``event_id`` when it is a string (for display only: it names nothing), else "".
    """

    event_id: str
    event_type: str
    subject: str
    status: Status
    reason: str = ""  # error code when invalid/unverified
    message: str = ""
    trust: Trust = "none"
    signer_key: str = ""  # who signed: "registry:<key_id>" or "ed25519:<public key hex>"
    facts: dict[str, Any] = {}


def body_of(event: dict[str, Any]) -> dict[str, Any]:
    """The event without ``event_id``: what ``event_id`` hashes."""
    return {k: v for k, v in event.items() if k != "event_id"}


def compute_event_id(event: dict[str, Any]) -> str:
    """``"sha256:" + hex(sha256(canonical(event without event_id)))``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(body_of(event))).hexdigest()


def copy_sha256(data: bytes) -> str:
    """The hash of one received copy's canonical bytes, every field included: how evidence is keyed
    (never consensus)."""
    return hashlib.sha256(data).hexdigest()


def pith_record_event_id(canonical_sha256: str, key_id: str, signature_b64: str) -> str:
    """Identity of a valid Pith-envelope record_created event: what its receipt authenticates, nothing
    else, so that copies differing in unauthenticated fields are one event (spec/events.md §2.3)."""
    claim = {"canonical_sha256": canonical_sha256, "receipt_key_id": key_id, "receipt_signature_b64": signature_b64}
    return "sha256:" + hashlib.sha256(PITH_RECORD_DOMAIN + canonical_bytes(claim)).hexdigest()


def signing_message(event: dict[str, Any]) -> bytes:
    unsigned = {k: v for k, v in event.items() if k not in ("event_id", "signature_b64")}
    return SIGNING_DOMAIN + canonical_bytes(unsigned)


def is_pithledger_envelope(event: dict[str, Any]) -> bool:
    """Our envelope is recognised by either of its own keys, whatever their values (spec/events.md §2.1)."""
    return "signature_b64" in event or "event_version" in event


def subject_of(event: Any) -> str:
    """The subject Pith Number of an event value, or raise if it cannot be attributed to a record."""
    if not isinstance(event, dict):
        raise EventInvalid("bad-envelope", "an event must be a JSON object")
    subject = event.get("subject_pith_number")
    if not isinstance(subject, str) or not ids.PITH_NUMBER_RE.match(subject):
        raise EventInvalid("bad-envelope", f"subject_pith_number {str(subject)[:60]!r} is not a long Pith Number")
    return subject


def claimed_event_id(event: dict[str, Any]) -> str:
    """The id the ledger looks up before verifying: for our envelope the recomputed id (a copy whose
    declared id equals it and is already held is byte-identical to the held valid event)."""
    return compute_event_id(event) if is_pithledger_envelope(event) else ""


_canonical_decoder = msgspec.json.Decoder()


def verify_event(event: dict[str, Any], *, event_id: str | None = None) -> Verdict:
    """Classify one strictly decoded event value; never raises for a bad event, it says why instead.

    The event is verified as its canonical bytes read back (keys sorted at every level), as the
    ledger verifies what it logs or keeps: where an event has several faults of one kind, the one a
    message names never depends on the key order it came in.
    ``event_id``: ``compute_event_id(event)`` when the caller already computed it (the ledger does).
    """
    try:
        event = _canonical_decoder.decode(canonical_bytes(event))
    except (TypeError, ValueError, msgspec.EncodeError, msgspec.DecodeError):  # no JSON form: classified as it is
        pass
    return check_event(event, event_id=event_id)


def check_event(
    event: dict[str, Any], *, event_id: str | None = None, size: int | None = None, signature_known_good: bool = False
) -> Verdict:
    """:func:`prepare_event`, then its Ed25519 check — taken as passed when the caller vouches that
    this signature over these exact bytes verified before (``signature_known_good``: rebuild, fsck)."""
    checked = prepare_event(event, event_id=event_id, size=size)
    if isinstance(checked, Verdict):
        return checked
    return checked.verdict(
        signature_known_good or keys.signature_ok(checked.public_key, checked.message, checked.signature)
    )


class SignatureCheck(NamedTuple):
    """An event checked in every step but its signature (spec/events.md §2.2 step 7): what the
    signature check needs, and the verdict for either outcome. Steps 8-10 are pure and were taken
    assuming the signature verifies; when it does not, step 7's verdict stands, as in one pass."""

    public_key: bytes
    message: bytes
    signature: bytes
    if_valid: Verdict
    if_invalid: Verdict

    def verdict(self, signature_ok: bool) -> Verdict:
        return self.if_valid if signature_ok else self.if_invalid


def prepare_event(
    event: dict[str, Any], *, event_id: str | None = None, size: int | None = None
) -> Verdict | SignatureCheck:
    """:func:`verify_event` without the Ed25519 check of our envelope's signature, which it returns
    as a :class:`SignatureCheck` to run elsewhere (the ledger runs them on threads, which libsodium
    lets run in parallel, while this Python part stays on one). ``size``: ``len(canonical_bytes(event))``
    when the caller already has those bytes."""
    kind = event.get("event_type")
    kind = kind if isinstance(kind, str) else "?"
    subject = event.get("subject_pith_number")
    subject = subject if isinstance(subject, str) else ""
    declared = event.get("event_id")
    declared = declared if isinstance(declared, str) else ""
    deferred: list[tuple[bytes, bytes, bytes, str]] = []
    try:
        eid, trust, signer_key, facts = _verify(event, event_id, deferred, size)
        verdict = Verdict(eid, kind, subject, "valid", trust=trust, signer_key=signer_key, facts=facts)
    except EventInvalid as exc:
        verdict = Verdict(declared, kind, subject, "invalid", exc.code, exc.message)
    except _Unverified as exc:
        verdict = Verdict(declared, kind, subject, "unverified", exc.code, exc.message)
    if not deferred:
        return verdict
    public_key, message, signature, failure = deferred[0]
    return SignatureCheck(
        public_key, message, signature, verdict, Verdict(declared, kind, subject, "invalid", "bad-signature", failure)
    )


def valid_verdict(event: dict[str, Any], facts: dict[str, Any], event_id: str = "") -> Verdict:
    """The verdict of an event already found valid, rebuilt from the event and its facts (what the
    ledger stores instead of the whole verdict). ``event_id``: only for Pith's envelope, whose id is
    not in the event (§2.4); ours carries its own, verified on arrival."""
    signer = event["signer"]
    if not is_pithledger_envelope(event):
        trust: Trust = "registry"
        signer_key = f"registry:{facts['receipt_key']}"
    elif signer["signer_type"] == "self_signed":
        trust, signer_key = "self_signed", _self_signed_key(signer["public_key_b64"])
    else:
        trust, signer_key = "registry", f"registry:{signer['key_id']}"
    return Verdict(
        event_id or event["event_id"],
        event["event_type"],
        event["subject_pith_number"],
        "valid",
        trust=trust,
        signer_key=signer_key,
        facts=facts,
    )


@functools.lru_cache(maxsize=4096)
def _self_signed_key(public_key_b64: str) -> str:
    # A ledger reads the same few signers' keys over and over (valid ones only: already checked).
    return "ed25519:" + keys.b64decode_strict(public_key_b64).hex()


class _Unverified(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _check_shape(event: dict[str, Any], ours: bool) -> None:
    """Step 2: every field present with its JSON type. Absent, null and mistyped are all bad-envelope."""
    for name in _STRING_FIELDS:
        if not isinstance(event.get(name), str):
            raise EventInvalid("bad-envelope", f"{name} is {_what(event, name)}; it must be a string")
    if not ids.PITH_NUMBER_RE.match(event["subject_pith_number"]):
        raise EventInvalid("bad-envelope", "subject_pith_number is not a long Pith Number")
    signer = event.get("signer")
    if not isinstance(signer, dict):
        raise EventInvalid("bad-envelope", f"signer is {_what(event, 'signer')}; it must be an object")
    for name in _SIGNER_FIELDS:
        if not isinstance(signer.get(name), str):
            raise EventInvalid("bad-envelope", f"signer.{name} is {_what(signer, name)}; it must be a string")
    if "public_key_b64" in signer and not isinstance(signer["public_key_b64"], str):
        raise EventInvalid(
            "bad-envelope", f"signer.public_key_b64 is {_what(signer, 'public_key_b64')}; it must be a string"
        )
    if not isinstance(event.get("payload"), dict):
        raise EventInvalid("bad-envelope", f"payload is {_what(event, 'payload')}; it must be an object")
    required = ("event_id", "event_version", "signature_b64") if ours else ()
    for name in ("event_id", "event_version", "signature_b64"):
        if (name in required or name in event) and not isinstance(event.get(name), str):
            raise EventInvalid("bad-envelope", f"{name} is {_what(event, name)}; it must be a string")


def _what(obj: dict[str, Any], name: str) -> str:
    if name not in obj:
        return "missing"
    value = obj[name]
    return "null" if value is None else f"a JSON {_JSON_TYPES.get(type(value), type(value).__name__)}"


_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", bool: "boolean"}


def _verify(
    event: dict[str, Any],
    event_id: str | None,
    deferred: list[tuple[bytes, bytes, bytes, str]],
    size: int | None = None,
) -> tuple[str, Trust, str, dict[str, Any]]:
    """Steps 1-10 of spec/events.md §2.2. Step 7's Ed25519 check is appended to ``deferred`` (key,
    message, signature, the failure message) and the steps after it are taken as if it passed."""
    # 1. size
    if (len(canonical_bytes(event)) if size is None else size) > MAX_EVENT_BYTES:
        raise EventInvalid("event-too-large", f"the event is larger than {MAX_EVENT_BYTES:,} bytes")
    ours = is_pithledger_envelope(event)
    # 2. shape
    _check_shape(event, ours)
    # 3. created_at
    created_at = event["created_at"]
    if not TIME_RE.match(created_at):
        raise EventInvalid("bad-time", f"created_at {created_at[:40]!r} is not whole-second UTC (YYYY-MM-DDThh:mm:ssZ)")
    try:
        check_time(created_at, "created_at")
    except PithledgerError as exc:
        raise EventInvalid("bad-time", exc.message) from None
    if not ours:
        return _verify_pith(event)

    # --- our envelope: the declared id must recompute and the signature must verify --------------
    if event["event_version"] != EVENT_VERSION:  # 4. a newer writer's envelope: not ours to judge
        raise _Unverified(
            "unsupported-event-version", f"event_version {event['event_version'][:40]!r} is not {EVENT_VERSION!r}"
        )
    eid = event_id or compute_event_id(event)
    if event["event_id"] != eid:  # 5
        # The id covers every field but itself, the signature too (spec/adr/0002): a copy altered after
        # signing (one flipped signature byte is enough) fails here, before its signature is checked.
        raise EventInvalid(
            "id-mismatch",
            f"declared event_id {event['event_id'][:80]!r} does not recompute (it is {eid}): "
            "the event was altered after it was signed (the id covers every field, the "
            "signature too), or was built wrongly",
        )
    public_key, trust, signer_key = _signer_key(event["signer"])  # 6
    try:  # 7
        signature = keys.b64decode_strict(event["signature_b64"], length=keys.SIGNATURE_LEN, what="signature_b64")
    except PithledgerError as exc:
        raise EventInvalid("bad-signature", exc.message) from None
    deferred.append(
        (
            public_key,
            signing_message(event),
            signature,
            f"the signature does not verify under {event['signer']['key_id'][:60]!r}",
        )
    )
    kind = event["event_type"]
    if kind not in KNOWN_KINDS:  # 8. signed and intact, of a kind this version does not fold
        return eid, trust, signer_key, {"unknown_kind": True}
    if event["target"] != TARGETS[kind]:  # 9
        raise EventInvalid("wrong-target", f"a {kind} event has target {TARGETS[kind]!r}, not {event['target'][:40]!r}")
    facts = payload_facts(kind, event["subject_pith_number"], event["payload"], trust)  # 10
    return eid, trust, signer_key, facts


def _registry_signer(signer: dict[str, Any]) -> keys.RegistryKey:
    reg = keys.PITH_REGISTRY_KEYS.get(signer["key_id"])
    if reg is None:
        raise EventInvalid("unknown-registry-key", f"no Pith registry key has key_id {signer['key_id'][:60]!r}")
    if signer["public_key_fingerprint"] != reg.fingerprint:
        raise EventInvalid("fingerprint-mismatch", "public_key_fingerprint is not the registry key's")
    if "public_key_b64" in signer and signer["public_key_b64"] != keys.b64encode(reg.public_key):
        raise EventInvalid("fingerprint-mismatch", "public_key_b64 is not the registry key")
    return reg


def _signer_key(signer: dict[str, Any]) -> tuple[bytes, Trust, str]:
    """Step 6 for a signer whose fields have their types (step 2). A ledger meets the same few signers
    over and over, so the outcome is remembered per the fields it reads (an error is not remembered)."""
    fields = tuple(signer[name] for name in _SIGNER_FIELDS)
    return _signer_key_of(fields, signer.get("public_key_b64"), "public_key_b64" in signer)


def typed_signer_key(
    key_id: str, public_key_fingerprint: str, signer_id: str, signer_type: str, public_key_b64: str | None
) -> tuple[bytes, Trust, str]:
    """Step 6 for a typed signer (the fast path's, ledger/records/fast.py; ``public_key_b64`` None: absent):
    :func:`_signer_key`'s outcome, remembered the same way."""
    fields = (key_id, public_key_fingerprint, signer_id, signer_type)
    return _signer_key_of(fields, public_key_b64, public_key_b64 is not None)


@functools.lru_cache(maxsize=1024)
def _signer_key_of(fields: tuple[str, ...], public_key_b64: str | None, has_key: bool) -> tuple[bytes, Trust, str]:
    signer: dict[str, Any] = dict(zip(_SIGNER_FIELDS, fields))
    if has_key:
        signer["public_key_b64"] = public_key_b64
    return _check_signer(signer)


def _check_signer(signer: dict[str, Any]) -> tuple[bytes, Trust, str]:
    if signer["signer_type"] == "pith_registry":
        reg = _registry_signer(signer)
        return reg.public_key, "registry", f"registry:{reg.key_id}"
    if signer["signer_type"] == "self_signed":
        if "public_key_b64" not in signer:
            raise EventInvalid("bad-key", "a self_signed signer must carry public_key_b64")
        try:
            pk = keys.b64decode_strict(signer["public_key_b64"], length=keys.PUBLIC_KEY_LEN, what="public_key_b64")
        except PithledgerError as exc:
            raise EventInvalid("bad-key", exc.message) from None
        if signer["public_key_fingerprint"] != keys.fingerprint_hex(pk):
            raise EventInvalid("fingerprint-mismatch", "public_key_fingerprint is not sha256(public key)[:32 hex]")
        if is_blank(signer["key_id"]) or is_blank(signer["signer_id"]):
            raise EventInvalid("bad-envelope", "signer key_id and signer_id must not be empty or blank")
        return pk, "self_signed", f"ed25519:{pk.hex()}"
    raise EventInvalid(
        "bad-envelope", f"signer_type {signer['signer_type'][:40]!r} is not pith_registry or self_signed"
    )


def _verify_pith(event: dict[str, Any]) -> tuple[str, Trust, str, dict[str, Any]]:
    """Events in Pith's own envelope. Pith does not publish what its event signatures cover, so only
    what carries its own proof is checked: a record_created event's receipt. The rest is unverified."""
    kind, signer = event["event_type"], event["signer"]
    if kind != "record_created" or signer["signer_type"] != "pith_registry":
        raise _Unverified(
            "unverifiable-signature",
            f"a {kind[:40]} event without a pithledger signature: Pith's event signatures are not published",
        )
    _registry_signer(signer)
    if event["target"] != "record":
        raise EventInvalid("wrong-target", f"a record_created event has target 'record', not {event['target'][:40]!r}")
    receipt = event["payload"].get("receipt")
    if receipt is None:
        raise _Unverified("no-receipt", "a Pith record_created event without a receipt carries no proof")
    if not (isinstance(receipt, dict) and isinstance(receipt.get("signature_b64"), str)):
        # Pith's receipt format is only partly public: one we cannot read is not evidence of forgery.
        raise _Unverified("unreadable-receipt", "the receipt has no signature_b64 string this version can check")
    facts = payload_facts("record_created", event["subject_pith_number"], event["payload"], "registry")
    eid = pith_record_event_id(facts["canonical_sha256"], facts["receipt_key"], receipt["signature_b64"])
    return eid, "registry", f"registry:{facts['receipt_key']}", facts


def _payload(kind: str, payload: dict[str, Any]) -> Any:
    try:
        return msgspec.convert(payload, PAYLOAD_TYPES[kind], strict=True)
    except msgspec.ValidationError as exc:
        raise EventInvalid("bad-payload", f"{kind} payload: {exc}") from None


def _anchor_block(proof: _ots.OtsProof, headers_b64: str | None) -> dict[str, Any] | None:
    """What the carried run of headers checks (spec/events.md §3.1.3): the attested block, or None when the event
    carries no run or the attested block's header has less than the chain's minimum of work (then only claimed)."""
    if headers_b64 is None:
        return None
    chain = _bitcoin.CONSENSUS_CHAIN
    limit = chain.max_headers * _bitcoin.HEADER_LEN
    if len(headers_b64) > (limit + 2) // 3 * 4:  # refused before decoding: the event's size bounds it already
        raise EventInvalid("bad-headers", f"bitcoin_headers_b64 holds more than {chain.max_headers} headers")
    try:
        run = keys.b64decode_strict(headers_b64, what="bitcoin_headers_b64")
        block = _bitcoin.check_run(proof, run, chain)
    except PithledgerError as exc:  # OtsNotVerified, or base64 that is not canonical
        raise EventInvalid("bad-headers", f"bitcoin_headers_b64: {exc.message}") from None
    header = block.header
    if header.work < chain.min_work:  # asked of the attested block itself: each forged block costs it (ADR 0017)
        return None
    return {
        "block_hash": header.hash,
        "headers": block.headers,
        "height": block.height,
        "run_work": str(block.work),
        "time": _utc(header.time),
        "work": str(header.work),  # decimal strings: they exceed 2^64 (no JSON reader loses a digit)
    }


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _utc(seconds: int) -> str:
    # arithmetic from the epoch, not fromtimestamp: that goes through the platform's time_t, which is 32 bits on
    # some (a header time is a uint32, to 2106), and this string is consensus bytes
    return (_EPOCH + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record_created_facts(p: RecordCreated, subject: str, trust: Trust) -> dict[str, Any]:
    try:
        rec_ids = record_ids(p.canonical_record)
    except PithledgerError as exc:
        raise EventInvalid("bad-record", exc.message) from None
    if p.canonical_sha256 != rec_ids.canonical_sha256:
        raise EventInvalid(
            "hash-mismatch", f"canonical_sha256 is not the hash of canonical_record ({rec_ids.canonical_sha256})"
        )
    if subject != rec_ids.pith_number:
        raise EventInvalid(
            "record-subject-mismatch",
            f"the record's Pith Number is {rec_ids.pith_number}, not the subject {subject}",
        )
    receipt_key = ""
    if p.receipt is not None:
        reg = keys.PITH_REGISTRY_KEYS.get(p.receipt.key_id)
        if reg is None:
            raise EventInvalid(
                "unknown-receipt-key",
                f"the receipt names key {p.receipt.key_id[:60]!r}, which is no Pith registry key",
            )
        try:
            sig = keys.b64decode_strict(
                p.receipt.signature_b64, length=keys.SIGNATURE_LEN, what="receipt signature_b64"
            )
        except PithledgerError as exc:
            raise EventInvalid("bad-receipt", exc.message) from None
        if not keys.signature_ok(reg.public_key, bytes.fromhex(rec_ids.canonical_sha256), sig):
            raise EventInvalid("bad-receipt", f"the receipt signature does not verify under {reg.key_id}")
        receipt_key = reg.key_id
    return {"canonical_sha256": rec_ids.canonical_sha256, "receipt_key": receipt_key}


def _graph_snapshot_facts(p: GraphSnapshot, subject: str, trust: Trust) -> dict[str, Any]:
    return {}


def _timestamp_anchor_facts(p: TimestampAnchor, subject: str, trust: Trust) -> dict[str, Any]:
    try:
        raw = keys.b64decode_strict(p.ots_proof_b64, what="ots_proof_b64")
        proof = _ots.parse(raw, strict=True)  # the reference's reading (merge v3, §3.1.1)
    except PithledgerError as exc:  # OtsError among them
        raise EventInvalid("bad-proof", f"ots_proof_b64: {exc}") from None
    if proof.hash_op != "sha256":
        raise EventInvalid("bad-proof", f"the proof stamps a {proof.hash_op} digest; a Pith record's digest is sha256")
    suffix = ids.suffix_of_pith_number(subject)
    if ids.suffix_of_digest(proof.digest) != suffix:
        raise EventInvalid("proof-digest-mismatch", "the proof does not commit to the subject's canonical digest")
    heights = sorted({a.height for a in proof.attestations if a.kind == "bitcoin" and a.height is not None})
    calendars = sorted({a.calendar for a in proof.attestations if a.kind == "pending" and a.calendar})
    return {
        "digest": proof.digest.hex(),
        "bitcoin_heights": heights,
        "pending_calendars": calendars,
        "bitcoin_block": _anchor_block(proof, p.bitcoin_headers_b64),
    }


def _storage_attestation_facts(p: StorageAttestation, subject: str, trust: Trust) -> dict[str, Any]:
    m = WAYBACK_RE.match(p.capture_url)
    if not m:
        raise EventInvalid("bad-payload", "capture_url must be https://web.archive.org/web/<14-digit time>/<url>")
    try:
        check_time(p.captured_at, "captured_at")
    except PithledgerError as exc:
        raise EventInvalid("bad-payload", exc.message) from None
    if "".join(ch for ch in p.captured_at if ch in "0123456789") != m[1]:
        raise EventInvalid("bad-payload", "captured_at does not match the time in capture_url")
    if p.content_sha256 is not None and not HEX64_RE.match(p.content_sha256):
        raise EventInvalid("bad-payload", "content_sha256 must be 64 lowercase hex characters")
    return {}


def _author_attestation_facts(p: AuthorAttestation, subject: str, trust: Trust) -> dict[str, Any]:
    if is_blank(p.author_name):
        raise EventInvalid("bad-payload", "author_name is empty")
    if p.orcid is not None and not (ORCID_RE.match(p.orcid) and orcid_checksum_ok(p.orcid)):
        raise EventInvalid(
            "bad-orcid", f"orcid {p.orcid!r} is not a valid ORCID iD (NNNN-NNNN-NNNN-NNNX with its check digit)"
        )
    strong = trust == "registry" and p.orcid is not None
    return {"strength": "strong" if strong else "weak"}


def _citation_signature_facts(p: CitationSignature, subject: str, trust: Trust) -> dict[str, Any]:
    if not ids.PITH_NUMBER_RE.match(p.cited_pith_number):
        raise EventInvalid("bad-payload", "cited_pith_number must be a long Pith Number")
    if p.cited_pith_number == subject:
        raise EventInvalid("bad-payload", "a record cannot cite itself")
    if p.relation not in RELATIONS:
        raise EventInvalid("bad-relation", f"relation {p.relation!r} is not one of {', '.join(RELATIONS)}")
    return {"cited": p.cited_pith_number, "relation": p.relation}


def _replication_record_facts(p: ReplicationRecord, subject: str, trust: Trust) -> dict[str, Any]:
    if p.replication_type not in REPLICATION_TYPES:
        raise EventInvalid("bad-payload", f"replication_type must be one of {', '.join(REPLICATION_TYPES)}")
    if p.outcome not in OUTCOMES:
        raise EventInvalid("bad-payload", f"outcome must be one of {', '.join(OUTCOMES)}")
    _http_url(p.artifact_url, "artifact_url")
    return {"replication_type": p.replication_type}


def _integrity_finding_facts(p: IntegrityFinding, subject: str, trust: Trust) -> dict[str, Any]:
    if p.severity not in SEVERITIES:
        raise EventInvalid("bad-payload", f"severity must be one of {', '.join(SEVERITIES)}")
    return {"severity": p.severity}


def _challenge_facts(p: Challenge, subject: str, trust: Trust) -> dict[str, Any]:
    if not EVENT_ID_RE.match(p.challenged_event_id):
        raise EventInvalid("bad-payload", "challenged_event_id must be sha256:<64 hex>")
    return {"challenged": p.challenged_event_id}


def _revocation_facts(p: Revocation, subject: str, trust: Trust) -> dict[str, Any]:
    if not EVENT_ID_RE.match(p.revoked_event_id):
        raise EventInvalid("bad-payload", "revoked_event_id must be sha256:<64 hex>")
    return {"revokes": p.revoked_event_id}


#: Step 10's payload rules, per kind: each checks its kind's payload (converted to its Struct) against the
#: event's subject and the signer's trust, and returns the facts the reducer folds. One dict lookup per event.
_FACTS: dict[str, Callable[[Any, str, Trust], dict[str, Any]]] = {
    "record_created": _record_created_facts,
    "graph_snapshot": _graph_snapshot_facts,
    "timestamp_anchor": _timestamp_anchor_facts,
    "storage_attestation": _storage_attestation_facts,
    "author_attestation": _author_attestation_facts,
    "citation_signature": _citation_signature_facts,
    "replication_record": _replication_record_facts,
    "integrity_finding": _integrity_finding_facts,
    "challenge": _challenge_facts,
    "revocation": _revocation_facts,
}


def payload_facts(kind: str, subject: str, payload: dict[str, Any], trust: Trust) -> dict[str, Any]:
    """Check a known kind's payload and return the facts the reducer folds (all JSON values): step 10,
    on both paths (the fast path's too: ledger/records/fast.py)."""
    p = _payload(kind, payload)
    facts = _FACTS.get(kind)
    if facts is None:  # pragma: no cover - KNOWN_KINDS and PAYLOAD_TYPES agree
        raise AssertionError(kind)
    return facts(p, subject, trust)


# --- making events ---------------------------------------------------------------------------------


def make_event(
    kind: str,
    subject: str,
    payload: dict[str, Any],
    key: keys.LocalKey,
    *,
    created_at: str,
    signer_id: str | None = None,
) -> dict[str, Any]:
    """Build and sign a self_signed event. Raises :class:`EventInvalid` if the result would not verify."""
    check_value(payload)
    pk = key.public_key
    event: dict[str, Any] = {
        "created_at": created_at,
        "event_type": kind,
        "event_version": EVENT_VERSION,
        "payload": payload,
        "signer": {
            "key_id": key.name,
            "public_key_b64": keys.b64encode(pk),
            "public_key_fingerprint": keys.fingerprint_hex(pk),
            "signer_id": signer_id or f"ed25519:{keys.fingerprint_hex(pk)}",
            "signer_type": "self_signed",
        },
        "subject_pith_number": subject,
        "target": TARGETS.get(kind, "record"),
    }
    event["signature_b64"] = keys.b64encode(key.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    verdict = verify_event(event)
    if verdict.status != "valid":
        raise EventInvalid(verdict.reason, verdict.message)
    return event
