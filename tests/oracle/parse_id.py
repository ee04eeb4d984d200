"""Identifier forms a user may type (spec/identifiers.md §5): the length bound, ASCII, trimming, the ABNF
(quoted literals in any ASCII case, `(?i:…)`; b32 either case; arXiv ids and `v` as written), the answer table."""

from __future__ import annotations

import re
from typing import Any

B32 = "[A-Za-z2-7]"
SUFFIX = f"(?:{B32}{{26}}|{B32}{{16}}|{B32}{{12}}|{B32}{{8}})"
SCHEME = "(?i:https?://)"
PITH_HOST = r"(?i:(?:www\.)?pith\.science)"
ARXIV_HOST = r"(?i:(?:www\.)?arxiv\.org)"
DOI_HOST = r"(?i:(?:dx\.)?doi\.org)"
TAIL = "[/?#][!-~]*"
ARXIV_ID = r"(?P<id>[0-9]{4}\.[0-9]{4,5}|(?P<archive>[a-z][a-z-]*)(?:\.[A-Z]{2})?/(?P<number>[0-9]{7}))"
VERSION = "(?:v(?P<version>[1-9][0-9]{0,3}))"

FORMS = [
    ("pith_number", f"(?i:pith:)(?P<year>[0-9]{{4}}):(?P<b32>{B32}{{26}})"),
    ("suffix", f"(?i:pith:)(?P<b32>{SUFFIX})"),
    ("suffix", f"(?P<b32>{SUFFIX})"),
    ("suffix", f"{SCHEME}{PITH_HOST}(?i:/pith/)(?P<b32>{B32}{{26}})(?:(?i:\\.json)|{TAIL})?"),
    ("suffix", f"{SCHEME}{PITH_HOST}(?i:/paper/)(?P<b32>{SUFFIX})(?:{TAIL})?"),
    ("arxiv", f"(?i:arXiv:)?{ARXIV_ID}{VERSION}?"),
    ("arxiv", f"{SCHEME}{ARXIV_HOST}(?i:/abs/){ARXIV_ID}{VERSION}?"),
    ("arxiv", f"{SCHEME}{ARXIV_HOST}(?i:/pdf/){ARXIV_ID}{VERSION}?(?i:\\.pdf)?"),
    ("doi", f"(?:(?i:doi:)|{SCHEME}{DOI_HOST}/)?(?i:10\\.48550/arXiv\\.){ARXIV_ID}"),
]
PATTERNS = [(kind, re.compile(pattern + r"\Z")) for kind, pattern in FORMS]
REFUSED = {"error": "malformed-id"}


def parse_id(text: str) -> dict[str, Any]:
    if len(text) > 200 or not text.isascii():
        return REFUSED
    text = text.strip(" \t\n\x0b\x0c\r")
    if not text:
        return REFUSED
    for kind, pattern in PATTERNS:
        m = pattern.match(text)
        if m is None:
            continue
        if kind == "pith_number":
            b32 = m["b32"].upper()
            return {"kind": kind, "value": f"pith:{m['year']}:{b32}", "suffix": b32, "version": None}
        if kind == "suffix":
            b32 = m["b32"].upper()
            return {"kind": kind, "value": b32, "suffix": b32, "version": None}
        value = f"{m['archive']}/{m['number']}" if m["archive"] else m["id"]
        version = int(m["version"]) if kind == "arxiv" and m["version"] else None
        return {"kind": kind, "value": value, "suffix": "", "version": version}
    return REFUSED
