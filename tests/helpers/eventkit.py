"""Signed events for the refusal and limit tables (tests/unit/records/test_refusals.py, test_limits.py): built
and signed with real Ed25519 keys whatever they carry (make_event refuses to sign an invalid event; an adversary
does not), and a stand-in for the registry key (we hold no Pith private key)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.common import PITH_RECORDS
from helpers.eventpool import ALICE
from pithledger.records import events as _events
from pithledger.records import keys, ots
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import TARGETS, compute_event_id, signing_message
from pithledger.records.keys import LocalKey

REC = PITH_RECORDS[0]
NUMBER = REC["pith_number"]
OTHER = PITH_RECORDS[1]["pith_number"]
DIGEST = bytes.fromhex(REC["canonical_sha256"])
WHEN = "2026-06-01T00:00:00Z"
REGISTRY_KEY_ID = "pith-v1-2026-05"
#: We hold no Pith private key: a stand-in takes the registry key's place where a test signs as the registry.
STAND_IN = LocalKey(name="stand-in registry", seed=b"\x42" * 32)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKey]:
    """The registry key replaced by the stand-in. The signer check remembers outcomes per signer fields, so the
    memory is cleared on both sides: no verdict reached under the stand-in outlives the test, or precedes it."""
    _events._signer_key_of.cache_clear()
    monkeypatch.setitem(
        keys.PITH_REGISTRY_KEYS,
        REGISTRY_KEY_ID,
        keys.RegistryKey(key_id=REGISTRY_KEY_ID, public_key=STAND_IN.public_key),
    )
    yield STAND_IN
    _events._signer_key_of.cache_clear()


def self_signer(key: LocalKey = ALICE, **changes: Any) -> dict[str, Any]:
    signer = {
        "key_id": key.name,
        "public_key_b64": keys.b64encode(key.public_key),
        "public_key_fingerprint": keys.fingerprint_hex(key.public_key),
        "signer_id": f"ed25519:{keys.fingerprint_hex(key.public_key)}",
        "signer_type": "self_signed",
    }
    return {k: v for k, v in (signer | changes).items() if v is not DROP}


def registry_signer(**changes: Any) -> dict[str, Any]:
    signer = {
        "key_id": REGISTRY_KEY_ID,
        "public_key_fingerprint": keys.fingerprint_hex(STAND_IN.public_key),
        "signer_id": "pith.science",
        "signer_type": "pith_registry",
    }
    return {k: v for k, v in (signer | changes).items() if v is not DROP}


DROP: Any = object()  # a field to leave out


def event(
    kind: str,
    payload: dict[str, Any],
    *,
    key: LocalKey = ALICE,
    signer: dict[str, Any] | None = None,
    subject: str = NUMBER,
    **fields: Any,
) -> dict[str, Any]:
    """A signed event in our envelope, valid or not (make_event refuses to sign an invalid one; an adversary
    does not): ``fields`` replace envelope fields before signing (``DROP`` removes one)."""
    e: dict[str, Any] = {
        "created_at": WHEN,
        "event_type": kind,
        "event_version": _events.EVENT_VERSION,
        "payload": payload,
        "signer": self_signer(key) if signer is None else signer,
        "subject_pith_number": subject,
        "target": TARGETS.get(kind, "record"),
    }
    e.update(fields)
    e = {k: v for k, v in e.items() if v is not DROP}
    e["signature_b64"] = keys.b64encode(key.sign(signing_message(e)))
    e["event_id"] = compute_event_id(e)
    return e


def resealed(e: dict[str, Any], key: LocalKey = ALICE, **fields: Any) -> dict[str, Any]:
    """``e`` with ``fields`` replaced after it was signed: signed again, its id recomputed (``DROP``: removed)."""
    e = {k: v for k, v in e.items() if k not in ("event_id", "signature_b64")} | fields
    e = {k: v for k, v in e.items() if v is not DROP}
    e["signature_b64"] = keys.b64encode(key.sign(signing_message(e)))
    e["event_id"] = compute_event_id(e)
    return e


def citation(**fields: Any) -> dict[str, Any]:
    payload = fields.pop("payload", {"cited_pith_number": OTHER, "relation": "cites"})
    return event("citation_signature", payload, **fields)


def created(**payload: Any) -> dict[str, Any]:
    body = {"canonical_record": REC["canonical_record"], "canonical_sha256": REC["canonical_sha256"]} | payload
    return event("record_created", {k: v for k, v in body.items() if v is not DROP})


def receipt(signature_b64: str, key_id: str = REGISTRY_KEY_ID) -> dict[str, Any]:
    return {
        "kind": "pith_receipt",
        "key_id": key_id,
        "algorithm": "ed25519",
        "signed_at": "2026-05-18T01:47:41.701845Z",
        "signature_b64": signature_b64,
    }


def pith_created(**changes: Any) -> dict[str, Any]:
    """A record_created event in Pith's envelope (no signature_b64, no event_version), its receipt by the stand-in."""
    e: dict[str, Any] = {
        "event_type": "record_created",
        "subject_pith_number": NUMBER,
        "target": "record",
        "created_at": "2026-05-18T01:47:41Z",
        "signer": registry_signer(),
        "payload": {
            "canonical_record": REC["canonical_record"],
            "canonical_sha256": REC["canonical_sha256"],
            "receipt": receipt(keys.b64encode(STAND_IN.sign(DIGEST))),
        },
    }
    e.update(changes)
    return {k: v for k, v in e.items() if v is not DROP}


def anchor(proof: bytes, **payload: Any) -> dict[str, Any]:
    return event("timestamp_anchor", {"ots_proof_b64": base64.b64encode(proof).decode()} | payload)


def storage(**payload: Any) -> dict[str, Any]:
    body = {
        "capture_url": "https://web.archive.org/web/20260601000000/https://arxiv.org/abs/2605.00424",
        "captured_at": "2026-06-01T00:00:00Z",
    } | payload
    return event("storage_attestation", {k: v for k, v in body.items() if v is not DROP})


def replication(**payload: Any) -> dict[str, Any]:
    body = {"replication_type": "replication", "outcome": "succeeded", "artifact_url": "https://example.org/a"}
    return event("replication_record", body | payload)


def sized(size: int) -> dict[str, Any]:
    """A valid graph_snapshot whose canonical bytes are exactly ``size`` long (an unknown payload field pads it)."""
    base = len(canonical_bytes(event("graph_snapshot", {"graph_snapshot": {}, "pad": ""})))
    return event("graph_snapshot", {"graph_snapshot": {}, "pad": "x" * (size - base)})


def sha1_proof() -> bytes:
    """A well-formed proof of a sha1 file digest (file hash op 0x02), with one pending attestation."""
    pending = bytes.fromhex("83dfe30d2ef90c8e") + ots._varbytes(ots._varbytes(b"https://a.example"))
    return ots.MAGIC + b"\x01" + b"\x02" + DIGEST[:20] + b"\x00" + pending


def non_canonical_b64(raw: bytes) -> str:
    """``raw`` in standard padded base64 with a non-zero padding bit: decodes to the same bytes, yet is not the one
    canonical spelling (spec/identifiers.md §6). ``raw``'s length must not be a multiple of 3."""
    text = keys.b64encode(raw).rstrip("=")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(text[-1]) | 1]
    return text[:-1] + last + "=" * (-len(text) % 4)
