"""arXiv bulk-metadata records -> Pith canonical records. Pure: no IO.

Input: one object of arXiv's metadata snapshot (the JSON-lines file arXiv publishes for bulk
mirroring) with ``id``, ``title``, ``abstract``, ``categories``, ``license``, ``versions``.
Rules: spec/identifiers.md §3.
"""

from __future__ import annotations

import re
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any

from pithledger.errors import MetadataError, PithledgerError
from pithledger.records import ids
from pithledger.records.canonical import text_sha256
from pithledger.records.model import parse_record

_VERSION_RE = re.compile(r"^v([1-9][0-9]{0,3})\Z")


def _field(meta: dict[str, Any], name: str, typ: type, *, nullable: bool = False) -> Any:
    if name not in meta:
        raise MetadataError(f"field {name!r} is missing")
    value = meta[name]
    if value is None and nullable:
        return None
    if not isinstance(value, typ):
        raise MetadataError(f"field {name!r} must be a {typ.__name__}, not {type(value).__name__}")
    return value


def _utc(created: str) -> str:
    try:
        when = parsedate_to_datetime(created)
    except (TypeError, ValueError):
        when = None
    if when is None or when.tzinfo is None:
        raise MetadataError(
            f"version date {created!r} is not an RFC 2822 date with a zone (e.g. 'Mon, 2 Apr 2007 19:18:42 GMT')"
        )
    # RFC 2822 parsers read years below 100 as 19xx/20xx; arXiv writes four digits, and "0001" is not 2001.
    if not re.search(rf"(?<![0-9]){when.year:04d}(?![0-9])", created):
        raise MetadataError(f"version date {created!r} has no four-digit year (read as {when.year})")
    try:
        utc = when.astimezone(timezone.utc)
    except OverflowError:  # e.g. 'Fri, 31 Dec 9999 23:59:59 -2359' lies past year 9999 in UTC
        raise MetadataError(f"version date {created!r} is out of range") from None
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def mint(meta: Any) -> dict[str, Any]:
    """Build the canonical record (as a JSON value) for one arXiv metadata object."""
    if not isinstance(meta, dict):
        raise MetadataError("the metadata is not a JSON object")
    arxiv_id = _field(meta, "id", str).strip()
    if not ids.ARXIV_ID_RE.match(arxiv_id):
        raise MetadataError(f"id {arxiv_id!r} is not an arXiv id")
    title = _field(meta, "title", str)
    abstract = _field(meta, "abstract", str)
    categories = _field(meta, "categories", str).split()
    if not categories:
        raise MetadataError("field 'categories' is empty")
    license_ = _field(meta, "license", str, nullable=True) or ""
    versions = _field(meta, "versions", list)
    numbers: dict[int, str] = {}
    for entry in versions:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("version"), str)
            or not isinstance(entry.get("created"), str)
        ):
            raise MetadataError('each entry of \'versions\' must be {"version": "vN", "created": "<RFC 2822 date>"}')
        m = _VERSION_RE.match(entry["version"])
        if not m:
            raise MetadataError(f"version {entry['version']!r} is not of the form vN")
        numbers[int(m[1])] = entry["created"]
    if 1 not in numbers:
        raise MetadataError("'versions' has no v1 entry; the v1 submission time dates the record")
    primary = categories[0]
    record = {
        "metadata": {
            "abstract_canon_sha256": text_sha256(abstract),
            "cross_cats_sorted": sorted(set(categories[1:]) - {primary}),
            "license": license_,
            "primary_cat": primary,
            "submitted_at": _utc(numbers[1]),
            "title_canon_sha256": text_sha256(title),
        },
        "schema_version": "1.0",
        "source": {"id": arxiv_id, "kind": "arxiv", "version": max(numbers)},
    }
    try:
        parse_record(record)
    except PithledgerError as exc:  # pragma: no cover - mint builds only valid records
        raise MetadataError(exc.message) from None
    return record
