"""Identifiers (spec/identifiers.md §2, §4, §6) and the ASCII grammar of spec/events.md §2."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime
from typing import Any

from .canon import canon

# spec/events.md §2: ASCII only, whole string (`[0-9]`, never `\d`; `\Z`, never `$`).
TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z\Z")
LONG_PITH_NUMBER = re.compile(r"pith:[0-9]{4}:[A-Z2-7]{26}\Z")
EVENT_ID = re.compile(r"sha256:[0-9a-f]{64}\Z")
HEX64 = re.compile(r"[0-9a-f]{64}\Z")
NEW_ARXIV_ID = re.compile(r"[0-9]{4}\.[0-9]{4,5}\Z")
OLD_ARXIV_ID = re.compile(r"[a-z][a-z-]*/[0-9]{7}\Z")
BLANK = re.compile(r"[\t\n\x0b\x0c\r ]*\Z")

RECORD_KEYS = {"metadata", "schema_version", "source"}
METADATA_KEYS = {
    "abstract_canon_sha256",
    "cross_cats_sorted",
    "license",
    "primary_cat",
    "submitted_at",
    "title_canon_sha256",
}
SOURCE_KEYS = {"id", "kind", "version"}


def is_time(value: Any) -> bool:
    """Whole-second UTC `YYYY-MM-DDThh:mm:ssZ` naming a real proleptic-Gregorian time, years 0001–9999,
    seconds 00–59."""
    if not isinstance(value, str):
        return False
    m = TIME.match(value)
    if m is None:
        return False
    try:
        datetime(*(int(g) for g in m.groups()))  # rejects year 0, month 13, 24:00, second 60, 30 February
    except ValueError:
        return False
    return True


def is_blank(value: str) -> bool:
    return BLANK.match(value) is not None


def b64_canonical(value: Any, size: int | None = None) -> bytes | None:
    """The bytes of `value` if it is the one canonical standard base64 spelling (padding, no white space,
    zero pad bits, spec/identifiers.md §6) of `size` bytes; else None."""
    if not isinstance(value, str) or not value.isascii():
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        return None
    if base64.b64encode(raw).decode("ascii") != value:
        return None
    if size is not None and len(raw) != size:
        return None
    return raw


def is_record(record: Any) -> bool:
    """A canonical record of schema "1.0" (spec/identifiers.md §2): exactly these fields and types."""
    if not isinstance(record, dict) or set(record) != RECORD_KEYS:
        return False
    meta, source = record["metadata"], record["source"]
    if record["schema_version"] != "1.0":
        return False
    if not isinstance(source, dict) or set(source) != SOURCE_KEYS:
        return False
    if source["kind"] != "arxiv" or not isinstance(source["id"], str):
        return False
    if not (NEW_ARXIV_ID.match(source["id"]) or OLD_ARXIV_ID.match(source["id"])):
        return False
    version = source["version"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= 9999:
        return False
    if not isinstance(meta, dict) or set(meta) != METADATA_KEYS:
        return False
    if not is_time(meta["submitted_at"]):
        return False
    for key in ("abstract_canon_sha256", "title_canon_sha256"):
        if not isinstance(meta[key], str) or not HEX64.match(meta[key]):
            return False
    if not isinstance(meta["primary_cat"], str) or meta["primary_cat"] == "":
        return False
    if not isinstance(meta["license"], str):
        return False
    cats = meta["cross_cats_sorted"]
    return isinstance(cats, list) and all(isinstance(c, str) for c in cats)


def digest(record: Any) -> bytes:
    return hashlib.sha256(canon(record)).digest()


def suffix_of(raw_digest: bytes) -> str:
    return base64.b32encode(raw_digest).decode("ascii")[:26]


def pith_number(record: dict[str, Any]) -> str:
    return "pith:" + record["metadata"]["submitted_at"][:4] + ":" + suffix_of(digest(record))


def aliases(record: dict[str, Any]) -> list[dict[str, str]]:
    """The six aliases of §4, sorted by kind, each dated by the record's `submitted_at` (spec/merge.md §4)."""
    sid, version = record["source"]["id"], record["source"]["version"]
    suffix = suffix_of(digest(record))
    values = {
        "arxiv": sid,
        "arxiv_version": f"{sid}v{version}",
        "doi": "10.48550/arxiv." + sid,
        "pith_short_12": suffix[:12],
        "pith_short_16": suffix[:16],
        "pith_short_8": suffix[:8],
    }
    at = record["metadata"]["submitted_at"]
    return [{"alias_kind": k, "alias_value": values[k], "created_at": at} for k in sorted(values)]


def fingerprint(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:32]


# spec/identifiers.md §6: the built-in registry key, pinned by the merge version.
PITH_REGISTRY = {"pith-v1-2026-05": "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="}
