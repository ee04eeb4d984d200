"""Event classification (spec/events.md §2.2's one checking order, §2.3–§2.5, §3)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from . import ids
from .canon import canon
from .ots import HeaderError, OtsError, Proof, check_headers

EVENT_VERSION = "pithledger-event-v1"
MAX_EVENT_BYTES = 1_048_576
SIGNING_PREFIX = b"pithledger-event-v1\x00"
PITH_RECORD_PREFIX = b"pithledger-pith-record-v1\x00"

# §3: kind -> (target, named fields as (name, JSON type, required)).
STR, OBJ = str, dict
KINDS: dict[str, tuple[str, list[tuple[str, type, bool]]]] = {
    "record_created": (
        "record",
        [("canonical_record", OBJ, True), ("canonical_sha256", STR, True), ("receipt", OBJ, False)],
    ),
    "graph_snapshot": ("graph", [("graph_snapshot", OBJ, True)]),
    "timestamp_anchor": ("record", [("ots_proof_b64", STR, True), ("bitcoin_headers_b64", STR, False)]),
    "storage_attestation": (
        "record",
        [("capture_url", STR, True), ("captured_at", STR, True), ("content_sha256", STR, False)],
    ),
    "author_attestation": ("record", [("author_name", STR, True), ("orcid", STR, False)]),
    "citation_signature": ("record", [("cited_pith_number", STR, True), ("relation", STR, True)]),
    "replication_record": (
        "record",
        [("replication_type", STR, True), ("outcome", STR, True), ("artifact_url", STR, True)],
    ),
    "integrity_finding": (
        "record",
        [("finding_type", STR, True), ("severity", STR, True), ("description", STR, True)],
    ),
    "challenge": ("record", [("challenged_event_id", STR, True), ("reason", STR, True)]),
    "revocation": ("event", [("revoked_event_id", STR, True), ("reason", STR, False)]),
}
RELATIONS = {"cites", "compares", "depends_on", "extends", "refutes", "replaces", "supports", "uses_method"}
WAYBACK = re.compile(r"https://web\.archive\.org/web/([0-9]{14})/(https?://[!-~]+)\Z")
ARTIFACT_URL = re.compile(r"https?://[!-.0-~][!-~]*\Z")
ORCID = re.compile(r"[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]\Z")


class Fault(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class Verdict:
    status: str  # valid, invalid, unverified
    reason: str = ""
    event_id: str | None = None
    trust: str = ""  # registry or self_signed
    signer_key: str = ""  # spec/merge.md §1
    ours: bool = True  # our envelope (views are made only of these)
    facts: dict[str, Any] = field(default_factory=dict)


def is_str(v: Any) -> bool:
    return isinstance(v, str)


def verifies(signature: bytes, message: bytes, public_key: bytes) -> bool:
    """The Ed25519 rule: libsodium's verification as PyNaCl ships it (spec/events.md §2.5): `crypto_sign_open`,
    which runs the same checks as `crypto_sign_verify_detached` (S < L, no small-order key or R)."""
    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, ValueError):
        return False
    return True


def orcid_checks(orcid: str) -> bool:
    """ISO 7064 MOD 11-2 over the 15 digits, the last character the check."""
    digits = orcid.replace("-", "")
    total = 0
    for c in digits[:-1]:
        total = (total + int(c)) * 2
    check = (12 - total % 11) % 11
    return digits[-1] == ("X" if check == 10 else str(check))


def shape_ok(e: Any, ours: bool) -> bool:
    """Step 2."""
    if not isinstance(e, dict):
        return False
    if not all(is_str(e.get(k)) for k in ("event_type", "subject_pith_number", "target", "created_at")):
        return False
    if not ids.LONG_PITH_NUMBER.match(e["subject_pith_number"]):
        return False
    signer = e.get("signer")
    if not isinstance(signer, dict):
        return False
    if not all(is_str(signer.get(k)) for k in ("key_id", "public_key_fingerprint", "signer_id", "signer_type")):
        return False
    if "public_key_b64" in signer and not is_str(signer["public_key_b64"]):
        return False
    if not isinstance(e.get("payload"), dict):
        return False
    for k in ("event_id", "event_version", "signature_b64"):
        if (ours or k in e) and not is_str(e.get(k)):
            return False
    return True


class Verifier:
    """Classifies events under one registry key set and one Bitcoin chain (both replaceable per vector)."""

    def __init__(self, registry: dict[str, str] | None = None, chain: str | dict[str, int | bool] = "mainnet") -> None:
        self.registry_b64 = dict(ids.PITH_REGISTRY if registry is None else registry)
        self.registry = {k: ids.b64_canonical(v, 32) for k, v in self.registry_b64.items()}
        self.chain = chain

    def __call__(self, event: Any) -> Verdict:
        try:
            return self.classify(event)
        except Fault as f:
            return Verdict(f.status, f.reason)

    def classify(self, e: Any) -> Verdict:
        if isinstance(e, dict) and len(canon(e)) > MAX_EVENT_BYTES:
            raise Fault("invalid", "event-too-large")
        ours = isinstance(e, dict) and ("signature_b64" in e or "event_version" in e)
        if not shape_ok(e, ours):
            raise Fault("invalid", "bad-envelope")
        if not ids.is_time(e["created_at"]):
            raise Fault("invalid", "bad-time")
        return self.ours(e) if ours else self.pith(e)

    def registry_signer(self, signer: dict[str, Any]) -> None:
        """Steps 6a, 6b (and §2.4's same checks)."""
        key = self.registry.get(signer["key_id"])
        if signer["key_id"] not in self.registry or key is None:
            raise Fault("invalid", "unknown-registry-key")
        if signer["public_key_fingerprint"] != ids.fingerprint(key):
            raise Fault("invalid", "fingerprint-mismatch")
        if "public_key_b64" in signer and signer["public_key_b64"] != self.registry_b64[signer["key_id"]]:
            raise Fault("invalid", "fingerprint-mismatch")

    def ours(self, e: dict[str, Any]) -> Verdict:
        if e["event_version"] != EVENT_VERSION:
            raise Fault("unverified", "unsupported-event-version")
        body = {k: v for k, v in e.items() if k != "event_id"}
        event_id = "sha256:" + hashlib.sha256(canon(body)).hexdigest()
        if e["event_id"] != event_id:
            raise Fault("invalid", "id-mismatch")
        signer = e["signer"]
        if signer["signer_type"] == "pith_registry":
            self.registry_signer(signer)
            public_key = self.registry[signer["key_id"]]
            trust, signer_key = "registry", "registry:" + signer["key_id"]
        elif signer["signer_type"] == "self_signed":
            if "public_key_b64" not in signer:
                raise Fault("invalid", "bad-key")
            public_key = ids.b64_canonical(signer["public_key_b64"], 32)
            if public_key is None:
                raise Fault("invalid", "bad-key")
            if signer["public_key_fingerprint"] != ids.fingerprint(public_key):
                raise Fault("invalid", "fingerprint-mismatch")
            if ids.is_blank(signer["key_id"]) or ids.is_blank(signer["signer_id"]):
                raise Fault("invalid", "bad-envelope")
            trust, signer_key = "self_signed", "ed25519:" + public_key.hex()
        else:
            raise Fault("invalid", "bad-envelope")
        assert public_key is not None
        signature = ids.b64_canonical(e["signature_b64"], 64)
        message = SIGNING_PREFIX + canon({k: v for k, v in body.items() if k != "signature_b64"})
        if signature is None or not verifies(signature, message, public_key):
            raise Fault("invalid", "bad-signature")
        verdict = Verdict("valid", "", event_id, trust, signer_key)
        if e["event_type"] not in KINDS:
            return verdict  # valid, of an unknown kind: listed, never folded
        if e["target"] != KINDS[e["event_type"]][0]:
            raise Fault("invalid", "wrong-target")
        verdict.facts = self.payload(e)
        if e["event_type"] == "author_attestation":
            strong = trust == "registry" and e["payload"].get("orcid") is not None
            verdict.facts["strength"] = "strong" if strong else "weak"
        return verdict

    def pith(self, e: dict[str, Any]) -> Verdict:
        """§2.4: only a registry's record_created can be checked, through its receipt."""
        signer = e["signer"]
        if e["event_type"] != "record_created" or signer["signer_type"] != "pith_registry":
            raise Fault("unverified", "unverifiable-signature")
        self.registry_signer(signer)
        if e["target"] != "record":
            raise Fault("invalid", "wrong-target")
        receipt = e["payload"].get("receipt")
        if receipt is None:
            raise Fault("unverified", "no-receipt")
        if not isinstance(receipt, dict) or not is_str(receipt.get("signature_b64")):
            raise Fault("unverified", "unreadable-receipt")
        facts = self.payload(e)
        identity = {
            "canonical_sha256": e["payload"]["canonical_sha256"],
            "receipt_key_id": receipt["key_id"],
            "receipt_signature_b64": receipt["signature_b64"],
        }
        event_id = "sha256:" + hashlib.sha256(PITH_RECORD_PREFIX + canon(identity)).hexdigest()
        return Verdict("valid", "", event_id, "registry", "registry:" + receipt["key_id"], False, facts)

    def payload(self, e: dict[str, Any]) -> dict[str, Any]:
        """Step 10: the JSON types of the named fields, then the kind's rules left to right; the facts."""
        kind, p = e["event_type"], e["payload"]
        for name, typ, required in KINDS[kind][1]:
            v = p.get(name)
            if (v is None and required) or (v is not None and not isinstance(v, typ)):
                raise Fault("invalid", "bad-payload")
        rule = getattr(self, "rule_" + kind)
        facts: dict[str, Any] = rule(e, p)
        return facts

    def rule_record_created(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        receipt = p.get("receipt")
        if receipt is not None:
            for k in ("kind", "key_id", "algorithm", "signed_at", "signature_b64"):
                if not is_str(receipt.get(k)):
                    raise Fault("invalid", "bad-payload")
            if receipt["kind"] != "pith_receipt" or receipt["algorithm"] != "ed25519":
                raise Fault("invalid", "bad-payload")
        record = p["canonical_record"]
        if not ids.is_record(record):
            raise Fault("invalid", "bad-record")
        if p["canonical_sha256"] != ids.digest(record).hex():
            raise Fault("invalid", "hash-mismatch")
        if ids.pith_number(record) != e["subject_pith_number"]:
            raise Fault("invalid", "record-subject-mismatch")
        facts: dict[str, Any] = {"receipt_key": None}
        if receipt is not None:
            key = self.registry.get(receipt["key_id"])
            if receipt["key_id"] not in self.registry or key is None:
                raise Fault("invalid", "unknown-receipt-key")
            signature = ids.b64_canonical(receipt["signature_b64"], 64)
            if signature is None or not verifies(signature, ids.digest(record), key):
                raise Fault("invalid", "bad-receipt")
            facts["receipt_key"] = receipt["key_id"]
        return facts

    def rule_graph_snapshot(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        return {}

    def rule_timestamp_anchor(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        data = ids.b64_canonical(p["ots_proof_b64"])
        try:
            if data is None:
                raise OtsError("not canonical base64")
            proof = Proof(data)
            if proof.file_hash_op != 0x08:
                raise OtsError("file hash op not sha256")
        except OtsError:
            raise Fault("invalid", "bad-proof") from None
        if ids.suffix_of(proof.digest) != e["subject_pith_number"][10:]:
            raise Fault("invalid", "proof-digest-mismatch")
        block = None
        if p.get("bitcoin_headers_b64") is not None:
            try:
                block = check_headers(p["bitcoin_headers_b64"], proof.kept, self.chain)
            except HeaderError:
                raise Fault("invalid", "bad-headers") from None
        return {
            "digest": proof.digest.hex(),
            "bitcoin_heights": sorted({a.value for _, a in proof.kept if a.kind == "bitcoin"}),
            "pending_calendars": sorted(
                {a.value.decode("ascii") for _, a in proof.kept if a.kind == "pending" and a.value}
            ),
            "bitcoin_block": block,
        }

    def rule_storage_attestation(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        m = WAYBACK.match(p["capture_url"])
        at = p["captured_at"]
        if m is None or not ids.is_time(at):
            raise Fault("invalid", "bad-payload")
        if re.sub("[^0-9]", "", at) != m.group(1):
            raise Fault("invalid", "bad-payload")
        if p.get("content_sha256") is not None and not ids.HEX64.match(p["content_sha256"]):
            raise Fault("invalid", "bad-payload")
        return {}

    def rule_author_attestation(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        if ids.is_blank(p["author_name"]):
            raise Fault("invalid", "bad-payload")
        orcid = p.get("orcid")
        if orcid is not None and not (ORCID.match(orcid) and orcid_checks(orcid)):
            raise Fault("invalid", "bad-orcid")
        return {}

    def rule_citation_signature(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        cited = p["cited_pith_number"]
        if not ids.LONG_PITH_NUMBER.match(cited) or cited == e["subject_pith_number"]:
            raise Fault("invalid", "bad-payload")
        if p["relation"] not in RELATIONS:
            raise Fault("invalid", "bad-relation")
        return {}

    def rule_replication_record(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        url = p["artifact_url"]
        if p["replication_type"] not in ("replication", "falsification", "formal_bridge"):
            raise Fault("invalid", "bad-payload")
        if p["outcome"] not in ("succeeded", "failed", "partial", "inconclusive"):
            raise Fault("invalid", "bad-payload")
        if len(url) > 2048 or not ARTIFACT_URL.match(url):
            raise Fault("invalid", "bad-payload")
        return {}

    def rule_integrity_finding(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        if p["severity"] not in ("info", "warning", "critical"):
            raise Fault("invalid", "bad-payload")
        return {}

    def rule_challenge(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        if not ids.EVENT_ID.match(p["challenged_event_id"]):
            raise Fault("invalid", "bad-payload")
        return {}

    def rule_revocation(self, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        if not ids.EVENT_ID.match(p["revoked_event_id"]):
            raise Fault("invalid", "bad-payload")
        return {}
