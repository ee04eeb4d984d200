"""Read real Pith bundles, Pith's record documents and our own bundles; write bundles. Pure: values
in, values out.

A bundle carries one record and its events (spec/bundle.md). Structural faults refuse the whole
bundle; a structurally sound event that fails verification is the verifier's business, not ours.
Pith's record document (``pith_number_record``, what a record URL returns for JSON) is read as the
bundle of its record's Pith-envelope ``record_created`` event (:func:`pith_record_event`) plus its
``events``, and its ``paper`` block as display metadata (spec/bundle.md §5).
"""

from __future__ import annotations

from typing import Any

import msgspec

from pithledger.errors import (
    BundleError,
    BundleInconsistent,
    EventInvalid,
    EventTooLarge,
    PithledgerError,
    SubjectMismatch,
)
from pithledger.records import ids, keys
from pithledger.records.canonical import canonical_bytes, check_value
from pithledger.records.display import DisplayMetadata, from_paper
from pithledger.records.events import MAX_EVENT_BYTES, subject_of
from pithledger.records.model import TIME_FRACTION_RE, check_time, record_ids

BUNDLE_TYPE = "pith_open_graph_bundle"
BUNDLE_VERSION = "1.0"
#: Top-level keys this version interprets; any other key is kept and written back unchanged.
KNOWN_KEYS = frozenset(
    {
        "bundle_type",
        "bundle_version",
        "pith_number",
        "short_pith_number",
        "canonical_record",
        "canonical_sha256",
        "source",
        "source_aliases",
        "events",
    }
)


#: Pith's record document (spec/bundle.md §5).
RECORD_TYPE = "pith_number_record"
RECORD_SCHEMA_VERSION = "1.0"
#: The signer block of the event a record document becomes names the receipt's key; a document
#: whose receipt names no key (absent, null, unreadable) names this one. Unauthenticated either way.
RECORD_DOCUMENT_KEY_ID = "pith-v1-2026-05"


class Bundle(msgspec.Struct):
    pith_number: str
    events: list[dict[str, Any]]
    canonical_record: dict[str, Any] | None = None
    extra: dict[str, Any] = {}  # unknown top-level keys, kept verbatim
    # what batches close on (as well as events): its canonical bytes, or, read by apply, the bytes of the
    # document in the input (never fewer: canonical JSON has no whitespace and the fewest escapes)
    size: int = 0
    # a record document's paper block: display metadata, outside consensus (never logged or folded)
    display: DisplayMetadata | None = None


def read_bundle(value: Any) -> Bundle:
    """Check a strictly decoded bundle's structure and return it; raise a :class:`BundleError`."""
    if not isinstance(value, dict):
        raise BundleError("a bundle must be a JSON object")
    if _is_document(value):
        return _read_document(value)
    if value.get("bundle_type") != BUNDLE_TYPE:
        raise BundleError(_not_named(value, "bundle_type", BUNDLE_TYPE, "the document"), hint=_WHICH)
    if value.get("bundle_version") != BUNDLE_VERSION:
        if not isinstance(value.get("bundle_version"), str):
            raise BundleError(_not_named(value, "bundle_version", BUNDLE_VERSION, "the bundle"))
        raise BundleError(
            f"bundle_version {_shown(value.get('bundle_version'))} is not supported (this version reads {BUNDLE_VERSION!r})",
            hint="upgrade pithledger to read newer bundles",
        )
    number = value.get("pith_number")
    if not isinstance(number, str) or not ids.PITH_NUMBER_RE.match(number):
        raise BundleError(f"pith_number {str(number)[:60]!r} is not a long Pith Number (pith:YYYY:<26 chars>)")
    events = _events_of(value)
    record = value.get("canonical_record")
    if record is not None:
        _check_top_level(value, number, record)
    size = len(canonical_bytes({k: v for k, v in value.items() if k != "events"})) + _check_events(events, number)
    extra = {k: v for k, v in value.items() if k not in KNOWN_KEYS}
    return Bundle(pith_number=number, events=events, canonical_record=record, extra=extra, size=size)


def checked_bundle(value: dict[str, Any], size: int) -> Bundle:
    """The Bundle of a value :func:`read_bundle` has accepted before (the same bytes, decoded again),
    without checking it again; ``size``: the document's bytes in the input."""
    if _is_document(value):
        return _document_bundle(value, size)
    events = value.get("events", [])
    extra = {k: v for k, v in value.items() if k not in KNOWN_KEYS}
    return Bundle(
        pith_number=value["pith_number"],
        events=events,
        canonical_record=value.get("canonical_record"),
        extra=extra,
        size=size,
    )


def _events_of(value: dict[str, Any]) -> list[Any]:
    events = value.get("events", [])
    if not isinstance(events, list):
        raise BundleError("events must be a list")
    return events


def _check_events(events: list[Any], number: str) -> int:
    """Every event attributable to ``number`` and within the size limit; their canonical bytes."""
    size = 0
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
    return size


# --- Pith's record document (spec/bundle.md §5) -----------------------------------------------------

_WHICH = (
    "give a bundle ({bundle_type: pith_open_graph_bundle, bundle_version, pith_number, events}) or Pith's "
    "record document ({record_type: pith_number_record, schema_version, pith_number, canonical_record, ...}); see spec/bundle.md"
)


#: How a message names a JSON value's type.
_JSON_TYPES = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (list, "a list"), (dict, "an object"))


def _not_named(value: dict[str, Any], key: str, expected: str, what: str) -> str:
    """Why ``value[key]`` is not ``expected``, telling a missing key, a null, a value of another JSON type and
    another string apart (issue #41: a bundle without bundle_type said "bundle_type is None")."""
    if key not in value:
        looks = (
            " (it looks like a single event: a bundle holds events in its events list)" if "event_type" in value else ""
        )
        return f"{what} has no {key} (expected {expected!r}){looks}"
    got = value[key]
    if got is None:
        return f"{key} is null, not {expected!r}"
    if not isinstance(got, str):
        kind = next((name for t, name in _JSON_TYPES if isinstance(got, t)), type(got).__name__)
        try:
            shown = canonical_bytes(got).decode()  # as JSON (true, null, ["a"]), not as Python
        except PithledgerError:  # not JSON (a value built in-process)
            shown = _shown(got)
        shown = shown if len(shown) <= 100 else shown[:97] + "..."
        return f"{key} is {kind} ({shown}), not the string {expected!r}"
    return f"{key} is {_shown(got)}, not {expected!r}"


def _shown(value: Any) -> str:
    """A value as a message names it: its repr, cut (a hostile document's strings are long)."""
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _is_document(value: dict[str, Any]) -> bool:
    """A record document names its record_type and no bundle_type (a value naming both is read, and
    refused, as a bundle)."""
    return "record_type" in value and "bundle_type" not in value


def _read_document(value: dict[str, Any]) -> Bundle:
    if value.get("record_type") != RECORD_TYPE:
        raise BundleError(_not_named(value, "record_type", RECORD_TYPE, "the document"), hint=_WHICH)
    if value.get("schema_version") != RECORD_SCHEMA_VERSION:
        if not isinstance(value.get("schema_version"), str):
            raise BundleError(_not_named(value, "schema_version", RECORD_SCHEMA_VERSION, "the record document"))
        raise BundleError(
            f"record document schema_version {_shown(value.get('schema_version'))} is not supported "
            f"(this version reads {RECORD_SCHEMA_VERSION!r})",
            hint="upgrade pithledger to read newer record documents",
        )
    number = value.get("pith_number")
    if not isinstance(number, str) or not ids.PITH_NUMBER_RE.match(number):
        raise BundleError(f"pith_number {str(number)[:60]!r} is not a long Pith Number (pith:YYYY:<26 chars>)")
    record = value.get("canonical_record")
    if not isinstance(record, dict):
        raise BundleError("a record document must carry its canonical_record (an object)")
    _check_top_level(value, number, record, aliases_key="aliases")
    events = _events_of(value)
    created = pith_record_event(value)
    created_size = len(canonical_bytes(created))
    if created_size > MAX_EVENT_BYTES:  # a huge receipt: refused as the same event in a bundle is
        raise EventTooLarge(
            f"the record_created event of the document (its record and receipt) is larger than {MAX_EVENT_BYTES:,} bytes"
        )
    try:  # the receipt sits one level deeper in the event than in the document: the event must decode strictly too
        check_value(created, surrogates=False)
    except PithledgerError as exc:
        raise BundleError(
            f"the record_created event of the document: {exc.message}",
            hint="the receipt lies one level deeper in its event than in the document, and an event nests at most 64 levels (spec/bundle.md §5)",
        ) from None
    size = _check_events(events, number)
    try:
        display = from_paper(value.get("paper"))
    except PithledgerError as exc:
        raise BundleError(
            f"paper: {exc.message}",
            hint="a record document's paper block holds strings: "
            "title, authors_text, abstract_excerpt (spec/bundle.md §5)",
        ) from None
    size += len(canonical_bytes({k: v for k, v in value.items() if k != "events"}))
    return Bundle(pith_number=number, events=[created, *events], canonical_record=record, size=size, display=display)


def _document_bundle(value: dict[str, Any], size: int) -> Bundle:
    """:func:`_read_document` of a document it accepted before, without checking it again."""
    display = from_paper(value.get("paper"))
    return Bundle(
        pith_number=value["pith_number"],
        events=[pith_record_event(value), *value.get("events", [])],
        canonical_record=value["canonical_record"],
        size=size,
        display=display,
    )


def pith_record_event(doc: dict[str, Any]) -> dict[str, Any]:
    """The Pith-envelope ``record_created`` event a record document stands for, built from it
    deterministically (spec/bundle.md §5): its canonical record and receipt (verbatim; left out when
    absent or null), about its ``pith_number``, signed — in the unauthenticated signer block — by
    ``pith.science`` under the receipt's key. Its ``created_at`` is the receipt's ``signed_at`` cut to
    the second, or, without a readable one, the record's ``submitted_at``. Nothing else of the document
    goes in: the event is verified, identified and folded as the same record in a Pith bundle."""
    record = doc.get("canonical_record")
    receipt = doc.get("receipt")
    payload: dict[str, Any] = {"canonical_record": record, "canonical_sha256": doc.get("canonical_sha256")}
    if payload["canonical_sha256"] is None:
        try:
            payload["canonical_sha256"] = record_ids(record).canonical_sha256
        except PithledgerError:
            pass  # left null: the event is invalid (bad-payload), as the same event in a bundle
    if receipt is not None:
        payload["receipt"] = receipt
    fields = receipt if isinstance(receipt, dict) else {}
    key_id = fields.get("key_id")
    if not isinstance(key_id, str):
        key_id = RECORD_DOCUMENT_KEY_ID
    registry = keys.PITH_REGISTRY_KEYS.get(key_id)
    # the registry key's own fingerprint; for a key no registry holds (the event is then invalid,
    # unknown-registry-key) the receipt's, if any
    fingerprint = registry.fingerprint if registry is not None else fields.get("public_key_fingerprint")
    return {
        "created_at": _document_time(receipt, record),
        "event_type": "record_created",
        "payload": payload,
        "signer": {
            "key_id": key_id,
            "public_key_fingerprint": fingerprint if isinstance(fingerprint, str) else "",
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "subject_pith_number": doc.get("pith_number"),
        "target": "record",
    }


def served_pith_record_event(event: dict[str, Any]) -> dict[str, Any]:
    """The form in which a mirror serves and exports a VALID Pith-envelope ``record_created`` event
    (spec/bundle.md §6): built only from what its receipt authenticates — the canonical record, its
    digest, the receipt's key and signature — by :func:`pith_record_event`, with the receipt's
    unauthenticated ``signed_at`` empty (so ``created_at`` is the record's own ``submitted_at``) and no
    other receipt field. Every copy of the event (spec/events.md §2.3) gives these same bytes, so what a
    mirror serves does not depend on which copy reached it first, and no relay's text is shown as Pith's.
    It verifies as, and has the ledger id of, the copy it stands for."""
    payload = event["payload"]
    receipt = payload["receipt"]
    return pith_record_event(
        {
            "pith_number": event["subject_pith_number"],
            "canonical_record": payload["canonical_record"],
            "canonical_sha256": payload["canonical_sha256"],
            "receipt": {
                "algorithm": "ed25519",
                "key_id": receipt["key_id"],
                "kind": "pith_receipt",
                "signature_b64": receipt["signature_b64"],
                "signed_at": "",
            },
        }
    )


def _document_time(receipt: Any, record: Any) -> Any:
    """The receipt's ``signed_at`` (``YYYY-MM-DDThh:mm:ss[.f]Z``) cut to the second; else the record's
    ``submitted_at`` (whole-second UTC, authenticated by the record's hash)."""
    signed_at = receipt.get("signed_at") if isinstance(receipt, dict) else None
    if isinstance(signed_at, str) and TIME_FRACTION_RE.match(signed_at):
        whole = signed_at[:19] + "Z"
        try:
            check_time(whole, "signed_at")
            return whole
        except PithledgerError:
            pass
    metadata = record.get("metadata") if isinstance(record, dict) else None
    return metadata.get("submitted_at") if isinstance(metadata, dict) else None


def _check_top_level(value: dict[str, Any], number: str, record: Any, *, aliases_key: str = "source_aliases") -> None:
    try:
        rid = record_ids(record)
    except PithledgerError as exc:
        raise BundleInconsistent(f"canonical_record: {exc.message}") from None
    if rid.pith_number != number:
        raise BundleInconsistent(f"canonical_record hashes to {rid.pith_number}, not the bundle's {number}")
    expect = {
        "canonical_sha256": rid.canonical_sha256,
        "short_pith_number": rid.short_pith_number,
        "source": record["source"],
    }
    for key, want in expect.items():
        # JSON equality, not Python's: True == 1 would let "version": true pass for version 1 (spec/bundle.md §1)
        if key in value and canonical_bytes(value[key]) != canonical_bytes(want):
            raise BundleInconsistent(f"{key} is {_shown(value[key])}, but the record gives {want!r}")
    if aliases_key in value:
        aliases = value[aliases_key]
        if not isinstance(aliases, list) or not all(
            isinstance(a, dict) and isinstance(a.get("alias_kind"), str) and isinstance(a.get("alias_value"), str)
            for a in aliases
        ):
            raise BundleInconsistent(
                f"{aliases_key} must be a list of {{alias_kind, alias_value, created_at}} objects with string values"
            )
        got = {a.get("alias_kind"): a.get("alias_value") for a in aliases}
        if got != rid.aliases or len(aliases) != len(rid.aliases):
            raise BundleInconsistent(f"{aliases_key} do not match the aliases derived from canonical_record")


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
