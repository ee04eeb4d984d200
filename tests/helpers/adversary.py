"""What an adversary sends a mirror: garbled copies of valid events, and junk that is no valid event.

Each mutation is named after what it does (transparency-dev style), so a failing property reads like a
sentence: "a copy with its event_id missing, arriving first, censored the valid event".
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

from pithledger.records import keys

L = 2**252 + 27742317777372353535851937790883648493  # the order of the Ed25519 base point
Event = dict[str, Any]


def _set(field: str, value: Any) -> Callable[[Event], None]:
    def mutate(e: Event) -> None:
        e[field] = value

    return mutate


def _drop(field: str) -> Callable[[Event], None]:
    def mutate(e: Event) -> None:
        e.pop(field, None)

    return mutate


def _malleate(e: Event) -> None:
    sig = bytearray(keys.b64decode_strict(e["signature_b64"]))
    s = (int.from_bytes(sig[32:], "little") + L).to_bytes(32, "little")
    e["signature_b64"] = keys.b64encode(bytes(sig[:32]) + s)


def _shift_time(e: Event) -> None:
    e["created_at"] = "1999" + e["created_at"][4:]


def _other_digits(e: Event) -> None:  # Arabic-Indic digits in the year
    e["created_at"] = "".join(
        chr(0x660 + int(c)) if c.isdigit() and i < 4 else c for i, c in enumerate(e["created_at"])
    )


def _fullwidth_digits(e: Event) -> None:
    e["created_at"] = "".join(chr(0xFF10 + int(c)) if c in "0123456789" else c for c in e["created_at"])


def _to_pith_envelope(e: Event) -> None:
    e.pop("signature_b64", None)
    e.pop("event_version", None)


def _registry_claim(e: Event) -> None:
    e["signer"] = {**e["signer"], "signer_type": "pith_registry"}


def _signer_without_key(e: Event) -> None:
    e["signer"] = {k: v for k, v in e["signer"].items() if k != "public_key_b64"}


#: name -> mutation of a signed event in our envelope. None of them leaves a valid event.
GARBLINGS: dict[str, Callable[[Event], None]] = {
    "wrong-event-id": _set("event_id", "sha256:" + "ab" * 32),
    "missing-event-id": _drop("event_id"),
    "null-event-id": _set("event_id", None),
    "event-id-an-integer": _set("event_id", 7),
    "null-signature": _set("signature_b64", None),
    "missing-signature": _drop("signature_b64"),
    "malleated-signature-s-plus-l": _malleate,
    "extra-unsigned-field": _set("relayed_by", "mallory"),
    "missing-event-version": _drop("event_version"),
    "newer-event-version": _set("event_version", "pithledger-event-v9"),
    "stripped-to-pith-envelope": _to_pith_envelope,
    "re-dated": _shift_time,
    "time-with-trailing-newline": lambda e: e.__setitem__("created_at", e["created_at"] + "\n"),
    "time-in-arabic-indic-digits": _other_digits,
    "time-in-fullwidth-digits": _fullwidth_digits,
    "claims-pith-registry": _registry_claim,
    "self-signed-without-public-key": _signer_without_key,
    "event-type-not-a-string": _set("event_type", ["citation_signature"]),
    "payload-null": _set("payload", None),
    "signer-null": _set("signer", None),
}


def garble(event: Event, how: str) -> Event:
    out = copy.deepcopy(event)
    GARBLINGS[how](out)
    return out


def replay_under(event: Event, subject: str) -> Event:
    """A replay of a signed event under another record (with its id recomputed, so only the signature fails)."""
    from pithledger.records.events import compute_event_id

    out = copy.deepcopy(event)
    out["subject_pith_number"] = subject
    out["event_id"] = compute_event_id(out)
    return out


def unsigned_pith_event(subject: str, kind: str = "graph_snapshot", n: int = 0) -> Event:
    """Something in Pith's envelope that nobody can check: never folded, kept as evidence."""
    return {
        "event_type": kind,
        "subject_pith_number": subject,
        "target": "graph" if kind == "graph_snapshot" else "record",
        "created_at": "2026-06-12T00:00:00Z",
        "signer": {
            "key_id": "pith-v1-2026-05",
            "public_key_fingerprint": "8d4b5ee74e4693bcd1df2446408b0d54",
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "payload": {"graph_snapshot": {"n": n}},
        "event_id": "sha256:" + hashlib.sha256(str(n).encode()).hexdigest(),
    }
