"""Typed models (msgspec Structs) of the documents pithledger reads and writes.

Hashes are always taken over the document *as received* (its strictly decoded value), never over a
re-serialised Struct, so a field a newer writer adds can never change an identifier under our feet.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, Literal

import msgspec

from pithledger.errors import SchemaError
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes

HEX64_RE = re.compile(r"^[0-9a-f]{64}\Z")
#: Whole-second UTC, the form of every ``created_at`` and ``submitted_at``.
TIME_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
#: Pith's receipt ``signed_at`` carries microseconds; admitted there only.
TIME_FRACTION_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z\Z")


def check_time(value: str, what: str, *, fraction: bool = False) -> None:
    pattern = TIME_FRACTION_RE if fraction else TIME_RE
    if not pattern.match(value):
        form = "YYYY-MM-DDThh:mm:ss[.ffffff]Z" if fraction else "YYYY-MM-DDThh:mm:ssZ (whole-second UTC)"
        raise SchemaError(f"{what} {value!r} is not of the form {form}")
    try:  # the pattern fixed every position; datetime() checks month lengths and leap years
        datetime(
            int(value[0:4]), int(value[5:7]), int(value[8:10]), int(value[11:13]), int(value[14:16]), int(value[17:19])
        )
    except ValueError:
        raise SchemaError(f"{what} {value!r} is not a real calendar time") from None


class Source(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    kind: Literal["arxiv"]
    version: int


class Metadata(msgspec.Struct, forbid_unknown_fields=True):
    abstract_canon_sha256: str
    cross_cats_sorted: list[str]
    license: str
    primary_cat: str
    submitted_at: str
    title_canon_sha256: str


class CanonicalRecord(msgspec.Struct, forbid_unknown_fields=True):
    """Pith canonical record, schema "1.0" (spec/identifiers.md §2)."""

    metadata: Metadata
    schema_version: Literal["1.0"]
    source: Source


def _convert(value: Any, typ: type[Any], what: str) -> Any:
    try:
        return msgspec.convert(value, typ, strict=True)
    except msgspec.ValidationError as exc:
        raise SchemaError(f"{what}: {exc}") from None


def parse_record(value: Any) -> CanonicalRecord:
    """Validate a strictly decoded canonical record and return it typed."""
    rec: CanonicalRecord = _convert(value, CanonicalRecord, "canonical record")
    if not ids.ARXIV_ID_RE.match(rec.source.id):
        raise SchemaError(f"canonical record: source.id {rec.source.id!r} is not a new- or old-style arXiv id")
    if not 1 <= rec.source.version <= 9999:
        raise SchemaError(f"canonical record: source.version {rec.source.version} is not in 1..9999")
    md = rec.metadata
    check_time(md.submitted_at, "canonical record: metadata.submitted_at")
    for name in ("title_canon_sha256", "abstract_canon_sha256"):
        if not HEX64_RE.match(getattr(md, name)):
            raise SchemaError(f"canonical record: metadata.{name} is not 64 lowercase hex characters")
    if not md.primary_cat:
        raise SchemaError("canonical record: metadata.primary_cat is empty")
    # cross_cats_sorted is taken as hashed: a record *is* its hash, and refusing a real record over how
    # Pith ordered a list would break interoperability for nothing (mint always writes it sorted).
    return rec


class RecordIds(msgspec.Struct):
    """Everything derived from a canonical record's bytes (what `pithledger ids` prints)."""

    canonical_sha256: str
    pith_number: str
    short_pith_number: str
    aliases: dict[str, str]


def record_ids(value: Any) -> RecordIds:
    """Validate a canonical record value and derive its identifiers from its canonical bytes."""
    rec = parse_record(value)
    digest = hashlib.sha256(canonical_bytes(value)).digest()
    suffix = ids.suffix_of_digest(digest)
    return RecordIds(
        canonical_sha256=digest.hex(),
        pith_number=ids.pith_number(rec.metadata.submitted_at, digest, suffix=suffix),
        short_pith_number=ids.short_pith_number(digest, suffix=suffix),
        aliases=ids.aliases(rec.source.id, rec.source.version, suffix),
    )
