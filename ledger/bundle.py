"""Read real Pith bundles and our own; write bundles. Pure: values in, values out.

A bundle carries one record and its events (spec/bundle.md). Structural faults refuse the whole
bundle; a structurally sound event that fails verification is the verifier's business, not ours.
"""

from __future__ import annotations

from typing import Any

import msgspec

from . import ids
from .errors import BundleError, BundleInconsistent, EventTooLarge, PithledgerError, SubjectMismatch
from .events import MAX_EVENT_BYTES, EventInvalid, subject_of
from .canonical import canonical_bytes
from .model import record_ids

BUNDLE_TYPE = "pith_open_graph_bundle"
BUNDLE_VERSION = "1.0"
#: Top-level keys this version interprets; any other key is kept and written back unchanged.
KNOWN_KEYS = frozenset(
    {"bundle_type", "bundle_version", "pith_number", "short_pith_number", "canonical_record",
     "canonical_sha256", "source", "source_aliases", "events"}
)


class Bundle(msgspec.Struct):
    pith_number: str
    events: list[dict[str, Any]]
    canonical_record: dict[str, Any] | None = None
    extra: dict[str, Any] = {}  # unknown top-level keys, kept verbatim
    # what batches close on (as well as events): its canonical bytes, or, read by apply, the bytes of the
    # document in the input (never fewer: canonical JSON has no whitespace and the fewest escapes)
    size: int = 0


def read_bundle(value: Any) -> Bundle:
    """Check a strictly decoded bundle's structure and return it; raise a :class:`BundleError`."""
    if not isinstance(value, dict):
        raise BundleError("a bundle must be a JSON object")
    if value.get("bundle_type") != BUNDLE_TYPE:
        raise BundleError(f"bundle_type is {value.get('bundle_type')!r}, not {BUNDLE_TYPE!r}")
    if value.get("bundle_version") != BUNDLE_VERSION:
        raise BundleError(
            f"bundle_version {value.get('bundle_version')!r} is not supported (this version reads {BUNDLE_VERSION!r})",
            hint="upgrade pithledger to read newer bundles",
        )
    number = value.get("pith_number")
    if not isinstance(number, str) or not ids.PITH_NUMBER_RE.match(number):
        raise BundleError(f"pith_number {str(number)[:60]!r} is not a long Pith Number (pith:YYYY:<26 chars>)")
    events = value.get("events", [])
    if not isinstance(events, list):
        raise BundleError("events must be a list")
    record = value.get("canonical_record")
    if record is not None:
        _check_top_level(value, number, record)
    size = len(canonical_bytes({k: v for k, v in value.items() if k != "events"}))
    for i, event in enumerate(events):
        try:
            subject = subject_of(event)
        except EventInvalid as exc:
            raise BundleError(f"events[{i}]: {exc.message}") from None
        if subject != number:
            raise SubjectMismatch(f"events[{i}] is about {subject}, but the bundle is about {number}")
        event_size = len(canonical_bytes(event))
        if event_size > MAX_EVENT_BYTES:
            raise EventTooLarge(f"events[{i}] is larger than {MAX_EVENT_BYTES:,} bytes")
        size += event_size
    extra = {k: v for k, v in value.items() if k not in KNOWN_KEYS}
    return Bundle(pith_number=number, events=events, canonical_record=record, extra=extra, size=size)


def checked_bundle(value: dict[str, Any], size: int) -> Bundle:
    """The Bundle of a value :func:`read_bundle` has accepted before (the same bytes, decoded again),
    without checking it again; ``size``: the document's bytes in the input."""
    events = value.get("events", [])
    extra = {k: v for k, v in value.items() if k not in KNOWN_KEYS}
    return Bundle(pith_number=value["pith_number"], events=events, canonical_record=value.get("canonical_record"), extra=extra, size=size)


def _check_top_level(value: dict[str, Any], number: str, record: Any) -> None:
    try:
        rid = record_ids(record)
    except PithledgerError as exc:
        raise BundleInconsistent(f"canonical_record: {exc.message}") from None
    if rid.pith_number != number:
        raise BundleInconsistent(f"canonical_record hashes to {rid.pith_number}, not the bundle's {number}")
    expect = {"canonical_sha256": rid.canonical_sha256, "short_pith_number": rid.short_pith_number, "source": record["source"]}
    for key, want in expect.items():
        # JSON equality, not Python's: True == 1 would let "version": true pass for version 1 (spec/bundle.md §1)
        if key in value and canonical_bytes(value[key]) != canonical_bytes(want):
            raise BundleInconsistent(f"{key} is {value[key]!r:.120}, but the record gives {want!r}")
    if "source_aliases" in value:
        aliases = value["source_aliases"]
        if not isinstance(aliases, list) or not all(
            isinstance(a, dict) and isinstance(a.get("alias_kind"), str) and isinstance(a.get("alias_value"), str) for a in aliases
        ):
            raise BundleInconsistent("source_aliases must be a list of {alias_kind, alias_value, created_at} objects with string values")
        got = {a.get("alias_kind"): a.get("alias_value") for a in aliases}
        if got != rid.aliases or len(aliases) != len(rid.aliases):
            raise BundleInconsistent("source_aliases do not match the aliases derived from canonical_record")


def write_bundle(
    pith_number: str,
    events: list[dict[str, Any]],
    *,
    canonical_record: dict[str, Any] | None = None,
    aliases_created_at: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A bundle in Pith's shape. With a record, the derived top-level fields are filled in."""
    out: dict[str, Any] = dict(extra or {})
    out.update(bundle_type=BUNDLE_TYPE, bundle_version=BUNDLE_VERSION, pith_number=pith_number)
    if canonical_record is not None:
        rid = record_ids(canonical_record)
        out.update(
            short_pith_number=rid.short_pith_number,
            canonical_record=canonical_record,
            canonical_sha256=rid.canonical_sha256,
            source=canonical_record["source"],
        )
        if aliases_created_at is not None:
            out["source_aliases"] = [
                {"alias_kind": k, "alias_value": v, "created_at": aliases_created_at} for k, v in rid.aliases.items()
            ]
    out["events"] = events
    return out
