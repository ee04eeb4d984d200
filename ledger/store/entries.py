"""What the log and the evidence area hold, and what a batch reports: log entries, evidence entries
and their accounting (Usage, EvidenceLimits), rejections and batch results, with their encodings.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..events import Verdict, copy_sha256, valid_verdict
from ..merge import Entry
from .env import _json_decoder


class LogEntry(msgspec.Struct, frozen=True, array_like=True):
    """One log record: the event's canonical bytes exactly as received and the facts verification
    found; the rest of its (valid) verdict is rebuilt from the event (spec/storage.md §2)."""

    seq: int
    event: bytes
    facts: dict[str, Any]
    event_id: str = ""  # only for a Pith-envelope event, whose ledger id is not in the event itself

    @property
    def verdict(self) -> Verdict:
        return valid_verdict(_json_decoder.decode(self.event), self.facts, self.event_id)

    def entry(self) -> Entry:
        event = _json_decoder.decode(self.event)
        return Entry(event=event, verdict=valid_verdict(event, self.facts, self.event_id))


class Rejection(msgspec.Struct, frozen=True):
    """One offer of an input that cannot be folded, as apply and sync report it (every time)."""

    copy_sha256: str  # sha256 of the copy as received: its evidence key
    subject: str
    event_type: str
    declared_event_id: str
    status: str  # "invalid" | "unverified"
    reason: str
    message: str
    kept: bool  # held as evidence; False when an evidence cap was reached


class EvidenceEntry(msgspec.Struct, frozen=True):
    event: bytes  # canonical bytes of the copy as received
    verdict: Verdict


class Usage(msgspec.Struct, frozen=True, array_like=True):
    entries: int = 0
    bytes: int = 0


class EvidenceLimits(msgspec.Struct, frozen=True):
    """Caps on the evidence area (spec/storage.md §2.1). Local policy, never consensus."""

    per_record_entries: int = 256
    per_record_bytes: int = 16 * 1024 * 1024
    total_entries: int = 1_000_000
    total_bytes: int = 2 * 1024 * 1024 * 1024


class BatchResult(msgspec.Struct):
    new: int = 0
    duplicate: int = 0
    invalid: int = 0
    unverified: int = 0
    touched: list[str] = []
    rejected: list[Rejection] = []


_entry_encoder = msgspec.msgpack.Encoder()
_entry_decoder = msgspec.msgpack.Decoder(LogEntry)
_evidence_decoder = msgspec.msgpack.Decoder(EvidenceEntry)
_usage_decoder = msgspec.msgpack.Decoder(Usage)
