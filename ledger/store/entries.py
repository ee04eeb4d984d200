"""What the log and the evidence area hold, and what a batch reports: log entries, evidence entries
and their accounting (Usage, EvidenceLimits), rejections and batch results, with their encodings;
and what the workers hand the writer to commit (Copy, Prepared, _Checked: spec/storage.md "The
serial path").
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

import pithledger.store.tlog_tables as tlog_tables
from pithledger.merge import Entry
from pithledger.records import fast
from pithledger.records.bundle import Bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.display import DisplayMetadata
from pithledger.records.events import Verdict, check_event, claimed_event_id, is_pithledger_envelope, valid_verdict
from pithledger.store.env import _event_key, _json_decoder
from pithledger.store.lookup import Usage as Usage  # re-exported: defined where `state` reads it (lookup.py)
from pithledger.store.lookup import _usage_decoder as _usage_decoder


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


# --- what the workers hand the writer ---------------------------------------------------------------


class Copy(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One offered event as the writer needs it (:func:`prepare`): computed from the event value by a
    pure function, on a worker process for apply's input, so the writer decodes and encodes nothing."""

    copy: bytes  # sha256 of its canonical bytes: its evidence key (spec/storage.md §2.1)
    data: bytes  # its canonical bytes: what is verified, and what the log or the evidence holds
    claimed_id: str  # the recomputed id of our envelope, else ""
    held_key: bytes | None  # the ids key of claimed_id when the declared event_id equals it (if held: a duplicate)
    # what verifying ``data`` yields (:func:`_check_copy`), when the worker that prepared it verified it
    # too (apply's reading workers: spec/storage.md §3.2); None: the batch has it verified
    checked: _Checked | None = None


class Prepared(msgspec.Struct, array_like=True):
    """A bundle as the writer needs it: each event as a :class:`Copy`, the unknown top-level fields as
    canonical bytes; a record document's record and paper block only for apply's display metadata."""

    pith_number: str
    events: list[Copy]
    extra: bytes = b""  # canonical bytes of the unknown top-level fields; b"": none
    size: int = 0  # as Bundle.size: what batches close on
    canonical_record: dict[str, Any] | None = None
    display: DisplayMetadata | None = None


def prepare(bundle: Bundle, *, check: bool = False, known: bool = False) -> Prepared:
    """Everything of ``bundle`` the writer needs, with nothing left to decode or encode. Pure: apply
    runs it on its reading workers (ledger/ingest/bundles.py), every other caller of Batch.add in place.
    ``check``: verify each copy here as well (:func:`_check_copy`; ``known``: as the batch's
    ``signatures_verified`` would, which its caller must then pass), so that the batch need not hand
    it to a worker again (apply's reading workers for input that is mostly new, rebuild's)."""
    copies = []
    for event in bundle.events:
        cid = claimed_event_id(event)
        data = canonical_bytes(event)  # encoded once: the copy's key and, if new, its log bytes
        copies.append(
            Copy(
                hashlib.sha256(data).digest(),
                data,
                cid,
                _event_key(cid) if cid and event.get("event_id") == cid else None,
                _check_copy(data, cid, known) if check else None,
            )
        )
    return Prepared(
        bundle.pith_number,
        copies,
        canonical_bytes(bundle.extra) if bundle.extra else b"",
        bundle.size,
        bundle.canonical_record,
        bundle.display,
    )


def prepare_line(line: fast.Line, size: int, *, check: bool = False) -> Prepared:
    """:func:`prepare` of a bundle line read on the fast path (spec/adr/0020): the same Prepared, with
    each event's bytes, id and (``check``) verification taken from the one decode of the line.
    ``size``: the line's bytes."""
    copies = []
    for envelope in line.events:
        data = fast.event_bytes(envelope)
        event = fast.Event(data, envelope)
        cid = fast.event_id(event)
        copies.append(
            Copy(
                event.sha256,
                data,
                cid,
                _event_key(cid) if envelope.event_id == cid else None,
                _check_copy(data, cid, False, event) if check else None,
            )
        )
    return Prepared(line.pith_number, copies, b"", size, line.canonical_record, None)


class _Checked(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What verifying one copy yields, as the writer stores it (``_check_copy``, below)."""

    key: bytes | None  # valid: its ids key; None: not valid
    value: bytes  # valid: its log entry encoded at sequence 0 (see _log_value); else its evidence entry
    citing: bool = False  # valid, and a citation or a revocation (finishing recomputes what its record cites)
    verdict: Verdict | None = None  # not valid: its verdict, what is reported
    tlog: bytes = b""  # valid: its transparency-log entry (tlog_tables.entry_of_event)


def _check_copy(data: bytes, cid: str, known: bool, decoded: fast.Event | None = None) -> _Checked:
    """What the writer stores for one offered copy: its verdict, and for a valid one its ids key, its
    log entry's bytes and its transparency-log entry, for another its evidence entry's. ``data``: its
    canonical bytes; ``cid``: its recomputed id or ""; ``known``: the caller vouches that the Ed25519
    signature of these exact bytes verified before (rebuild). The copy is verified from its canonical
    bytes (what the log and the evidence hold, what fsck re-verifies), decoded plainly: they are the
    encoding of a strictly decoded value. The fast path (``decoded``: ``data`` already read on it) gives a
    valid copy's result from one typed decode; anything it does not take is verified as before."""
    if cid and fast.ENABLED:
        read = decoded or fast.read_event(data)
        facts = fast.verify(read, cid, known) if read is not None else None
        if read is not None and facts is not None:  # valid, our envelope: served as held (tlog_tables.served_bytes)
            return _Checked(
                _event_key(cid),
                _entry_encoder.encode(LogEntry(seq=0, event=data, facts=facts)),
                "cited" in facts or "revokes" in facts,
                tlog=tlog_tables.entry_bytes(cid, read.envelope.subject_pith_number, read.sha256.hex()),
            )
    event = _json_decoder.decode(data)
    v = check_event(event, event_id=cid or None, size=len(data), signature_known_good=known)
    if v.status == "valid":
        entry = LogEntry(seq=0, event=data, facts=v.facts, event_id="" if is_pithledger_envelope(event) else v.event_id)
        return _Checked(
            _event_key(v.event_id),
            _entry_encoder.encode(entry),
            "cited" in v.facts or "revokes" in v.facts,
            tlog=tlog_tables.entry_of_event(v.event_id, v.subject, event, data),
        )
    return _Checked(None, _entry_encoder.encode(EvidenceEntry(event=data, verdict=v)), verdict=v)


# One bytes object crosses the pipe for a chunk (decoded in one call), not a pickle of small objects.
_checked_encoder = msgspec.msgpack.Encoder()
_checked_decoder = msgspec.msgpack.Decoder(list[_Checked])
_int_encoder = msgspec.msgpack.Encoder()


def _log_value(seq: int, zero_seq_entry: bytes) -> bytes:
    """The log entry of a verified copy at ``seq``: its entry encoded at sequence 0 (a msgpack array of
    four whose second byte is that 0) with ``seq`` in its place, the bytes of encoding it at ``seq``."""
    return b"\x94" + _int_encoder.encode(seq) + zero_seq_entry[2:]
