"""Apply's fast path: one typed decode per event where it is certain to read what the slow path reads.
Pure: no IO. The rules are spec/adr/0020-one-decode-fast-path.md.

A bundle line is decoded once with msgspec into typed Structs (the top level, each event's envelope with
its signer; the payload an object, which the payload rules convert to its kind's Struct as they do on
today's path) and taken on the fast path only when encoding that value again, with keys sorted, gives the
line back byte for byte. Then the line is canonical JSON, and the one decode stands for the strict reading
(canonical.strict_decode: no duplicate key, float, integer out of range, lone surrogate, escape other than
the canonical ones, nesting too deep, invalid UTF-8 or trailing byte) and each event's encoding is its
canonical bytes. The event id and the signing message are cut from those bytes. Anything else — Pith's
envelope, an unknown field or kind, a null where a field may be absent, a non-canonical line, any step of
spec/events.md §2.2 that fails — returns None here, and the caller takes today's path for the whole line
(reading) or the event (verifying), so refusals, codes and messages are always the slow path's.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
from typing import Any, NamedTuple

import msgspec

from pithledger.errors import PithledgerError
from pithledger.records import events as ev
from pithledger.records import ids, keys
from pithledger.records.bundle import BUNDLE_TYPE, BUNDLE_VERSION, read_bundle
from pithledger.records.canonical import MAX_DEPTH, MAX_SAFE_INTEGER
from pithledger.records.model import TIME_RE

#: False: every line and event takes today's path. Tests only (the differential tests compare both
#: ways); the environment variable is read when the module is imported, by every worker process too.
ENABLED = not os.environ.get("PITHLEDGER_SLOW_PATH")
#: Lines and events taken on the fast path by this process (tests read it: a differential test that
#: only ever ran the slow path would prove nothing).
taken = {"lines": 0, "events": 0}


class _Float(Exception):
    """A JSON number with a fraction or an exponent (never leaves this module)."""


def _no_float(text: str) -> Any:
    raise _Float


# Only values a line can carry: absent fields stay absent (UNSET, or omit_defaults for a None default),
# unknown ones are refused, so re-encoding gives back exactly the members that were read.
class _Signer(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    key_id: str
    public_key_b64: str | None = None  # an explicit null re-encodes as absent: not the input, slow path
    public_key_fingerprint: str
    signer_id: str
    signer_type: str


class Envelope(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Our envelope (event_version and signature_b64 present), every field with its JSON type; the
    payload is converted to its kind's Struct by the payload rules (events.payload_facts)."""

    created_at: str
    event_id: str
    event_type: str
    event_version: str
    payload: dict[str, Any]
    signature_b64: str
    signer: _Signer
    subject_pith_number: str
    target: str


class _Top(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A bundle's top level: the keys bundle.read_bundle knows (an unknown one: slow path)."""

    bundle_type: Any = msgspec.UNSET
    bundle_version: Any = msgspec.UNSET
    canonical_record: Any = msgspec.UNSET
    canonical_sha256: Any = msgspec.UNSET
    events: list[Envelope] | msgspec.UnsetType = msgspec.UNSET
    pith_number: Any = msgspec.UNSET
    short_pith_number: Any = msgspec.UNSET
    source: Any = msgspec.UNSET
    source_aliases: Any = msgspec.UNSET


_event_decoder = msgspec.json.Decoder(Envelope, float_hook=_no_float)
_top_decoder = msgspec.json.Decoder(_Top, float_hook=_no_float)
_encoder = msgspec.json.Encoder(order="sorted")  # canonical.canonical_bytes' encoder
_DECODE_ERRORS = (msgspec.DecodeError, _Float, RecursionError)
_TOP_FIELDS = _Top.__struct_fields__
_PLAIN_TOP = {"bundle_type", "bundle_version", "pith_number"}


class Event:
    """One event read on the fast path: its canonical bytes (the input's) and its envelope; the cuts of
    its id and signing message, and the SHA-256 of its bytes, made once (:func:`event_id`, :func:`verify`)."""

    __slots__ = ("_at", "data", "envelope", "sha256")

    def __init__(self, data: bytes, envelope: Envelope) -> None:
        self.data, self.envelope = data, envelope
        self.sha256 = hashlib.sha256(data).digest()  # its copy digest (evidence key), and its tlog entry's
        self._at = -1  # where its event_id member starts (:func:`event_id`)


class Line(NamedTuple):
    """A bundle line read on the fast path: what bundle.read_bundle gives of it, its events' envelopes."""

    pith_number: str
    canonical_record: dict[str, Any] | None
    events: list[Envelope]


def _admitted(value: Any, max_depth: int) -> bool:
    """Whether an untyped part lies in the admitted value space: no float, every integer within
    +/-MAX_SAFE_INTEGER, containers nested at most ``max_depth`` deep (the part itself counting one)."""
    if type(value) is str:  # most top-level fields
        return True
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        t = type(item)
        if t is dict or t is list:
            if depth > max_depth:
                return False
            stack.extend((sub, depth + 1) for sub in (item.values() if t is dict else item))
        elif t is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif t is float:
            return False
    return True


def _taken(envelope: Envelope, depth: int) -> bool:
    """Whether a decoded envelope stays on the fast path: a kind this version folds, and a payload in the
    admitted value space (``depth``: where the event sits in its document; its payload one level below)."""
    return envelope.event_type in ev.KNOWN_KINDS and _admitted(envelope.payload, MAX_DEPTH - depth)


def event_bytes(envelope: Envelope) -> bytes:
    """The canonical bytes of an event of a line read on the fast path: those of the line."""
    return _encoder.encode(envelope)


def read_event(data: bytes) -> Event | None:
    """``data`` (one event's canonical bytes, a document of its own) read on the fast path, or None:
    then today's path reads it."""
    try:
        envelope = _event_decoder.decode(data)
        if _encoder.encode(envelope) != data:
            return None
    except _DECODE_ERRORS:
        return None
    return Event(data, envelope) if _taken(envelope, 1) else None


def read_line(line: bytes) -> Line | None:
    """A bundle line read on the fast path, or None (then today's reading decides, and names any fault).
    Not None only when the strict reading and read_bundle accept the line: the line is then canonical
    JSON (its re-encoding is the line, spec/adr/0020), read_bundle accepts its top level, and every
    event is of our envelope and a known kind, about the bundle's record and within the size limit."""
    if not ENABLED:
        return None
    try:
        top = _top_decoder.decode(line)
        if top.events is msgspec.UNSET or _encoder.encode(top) != line:
            return None
    except _DECODE_ERRORS:
        return None
    value: dict[str, Any] = {}
    for name in _TOP_FIELDS:
        got = getattr(top, name)
        if got is not msgspec.UNSET and name != "events":
            if not _admitted(got, MAX_DEPTH - 1):
                return None
            value[name] = got
    if value.keys() == _PLAIN_TOP:  # read_bundle's checks of a bundle without a record (the most common line)
        number, record = value["pith_number"], None
        if value["bundle_type"] != BUNDLE_TYPE or value["bundle_version"] != BUNDLE_VERSION:
            return None
        if type(number) is not str or not ids.PITH_NUMBER_RE.match(number):
            return None
    else:
        value["events"] = []
        try:
            bundle = read_bundle(value)  # the top level's checks, as today (events: below)
        except PithledgerError:
            return None
        number, record = bundle.pith_number, bundle.canonical_record
    for envelope in top.events:
        if envelope.subject_pith_number != number or not _taken(envelope, 3):
            return None
    if len(line) > ev.MAX_EVENT_BYTES and any(len(event_bytes(e)) > ev.MAX_EVENT_BYTES for e in top.events):
        return None
    taken["lines"] += 1
    return Line(number, record, top.events)


def _segment(name: bytes, value: str) -> bytes:
    return b',"' + name + b'":' + _encoder.encode(value)


def event_id(event: Event) -> str:
    """The recomputed id (events.compute_event_id): the hash of the event's bytes without its event_id
    member. Sorted, that member follows created_at's, and no string's bytes can hold ``,"event_id":``
    (a quote inside a string is escaped), so the first such run is the member."""
    data, cut = event.data, _segment(b"event_id", event.envelope.event_id)
    event._at = at = data.find(cut)
    return "sha256:" + hashlib.sha256(b"".join((data[:at], data[at + len(cut) :]))).hexdigest()


def _signing_message(event: Event) -> bytes | None:
    """events.signing_message: the bytes without the event_id and signature_b64 members. Sorted,
    signature_b64 follows the payload (which may hold such a key: a receipt's, any other) and only the
    signer, subject and target follow it, whose keys are known and whose strings cannot hold a bare quote:
    its member is the last ``,"signature_b64":`` run."""
    data, cut = event.data, _segment(b"event_id", event.envelope.event_id)
    at = event._at if event._at >= 0 else data.find(cut)
    sig = _segment(b"signature_b64", event.envelope.signature_b64)
    to = data.rfind(b',"signature_b64":')
    if to < at or data[to : to + len(sig)] != sig:  # pragma: no cover - the argument above
        return None
    return b"".join((ev.SIGNING_DOMAIN, data[:at], data[at + len(cut) : to], data[to + len(sig) :]))


@functools.lru_cache(maxsize=4096)
def _real_day(day: str) -> bool:
    try:
        datetime.date(int(day[0:4]), int(day[5:7]), int(day[8:10]))
    except ValueError:
        return False
    return True


def _time_ok(value: str) -> bool:
    """model.check_time of a value TIME_RE matched: a real calendar day (remembered: events of a run
    share few days), hours below 24, minutes and seconds below 60."""
    return _real_day(value[:10]) and value[11:13] < "24" and value[14:16] < "60" and value[17:19] < "60"


def verify(event: Event, eid: str, known: bool = False) -> dict[str, Any] | None:
    """The facts of an event that passes every step of spec/events.md §2.2 (``eid``: :func:`event_id`;
    ``known``: its signature verified before, as events.check_event's ``signature_known_good``), or
    None when any step fails: then today's path verifies it, and says why."""
    e = event.envelope
    if len(event.data) > ev.MAX_EVENT_BYTES or not ids.PITH_NUMBER_RE.match(e.subject_pith_number):  # 1, 2
        return None
    if not TIME_RE.match(e.created_at) or not _time_ok(e.created_at):  # 3
        return None
    if e.event_version != ev.EVENT_VERSION or e.event_id != eid:  # 4, 5
        return None
    kind = e.event_type
    if e.target != ev.TARGETS[kind]:  # 9 (a known kind: _taken)
        return None
    s = e.signer
    try:
        public_key, trust, _ = ev.typed_signer_key(  # 6
            s.key_id, s.public_key_fingerprint, s.signer_id, s.signer_type, s.public_key_b64
        )
        signature = keys.b64decode_strict(e.signature_b64, length=keys.SIGNATURE_LEN, what="signature_b64")  # 7
        facts = ev.payload_facts(kind, e.subject_pith_number, e.payload, trust)  # 10: today's function
    except PithledgerError:
        return None
    if not known:
        message = _signing_message(event)
        if message is None or not keys.signature_ok(public_key, message, signature):  # 7
            return None
    taken["events"] += 1
    return facts
