"""Pith Numbers, aliases, and parsing of every identifier form a user may type. Pure: no IO.

Rules and rationale: spec/identifiers.md.
"""

from __future__ import annotations

import base64
import re
from typing import Literal

import msgspec

from pithledger.errors import MalformedId

SUFFIX_LEN = 26
ARXIV_DOI_PREFIX = "10.48550/arxiv."

_B32 = "A-Z2-7"
_NEW_ARXIV = r"[0-9]{4}\.[0-9]{4,5}"
# Old-style ids: archive[.SUBJECT-CLASS]/YYMMNNN, e.g. math/0611599, hep-lat/0407033, math.GT/0309136.
_OLD_ARXIV = r"[a-z][a-z-]*(?:\.[A-Z]{2})?/[0-9]{7}"
ARXIV_ID_RE = re.compile(rf"^(?:{_NEW_ARXIV}|[a-z][a-z-]*/[0-9]{{7}})\Z")
PITH_NUMBER_RE = re.compile(rf"^pith:[0-9]{{4}}:[{_B32}]{{26}}\Z")


def suffix_of_digest(digest: bytes) -> str:
    """First 26 characters (130 bits) of the RFC 4648 base32 form of the 32-byte digest.

    Base32 maps each 5 bytes to 8 characters on its own, so the first 20 bytes give the first 32
    characters of the whole digest's form (the standard library's encoder is pure Python: a third of
    the work is a third of the time)."""
    return base64.b32encode(digest[:20]).decode("ascii")[:SUFFIX_LEN]


def pith_number(submitted_at: str, digest: bytes, *, suffix: str = "") -> str:
    return f"pith:{submitted_at[:4]}:{suffix or suffix_of_digest(digest)}"


def short_pith_number(digest: bytes, *, suffix: str = "") -> str:
    return f"pith:{(suffix or suffix_of_digest(digest))[:8]}"


def suffix_of_pith_number(number: str) -> str:
    return number.rsplit(":", 1)[-1]


def arxiv_doi(arxiv_id: str) -> str:
    return ARXIV_DOI_PREFIX + arxiv_id


def aliases(arxiv_id: str, version: int, suffix: str) -> dict[str, str]:
    """The six aliases of a record, keyed by alias kind, in Pith's (sorted) order."""
    return {
        "arxiv": arxiv_id,
        "arxiv_version": f"{arxiv_id}v{version}",
        "doi": arxiv_doi(arxiv_id),
        "pith_short_12": suffix[:12],
        "pith_short_16": suffix[:16],
        "pith_short_8": suffix[:8],
    }


# --- parsing what a user types ---------------------------------------------------------------------
# The grammar is spec/identifiers.md §5 (ABNF). Its literal words (schemes, hosts, paths, "pith:",
# "arXiv:", "doi:", "10.48550/arXiv.") ignore ASCII case, as URL schemes and hosts and DOIs do; base32
# may be typed in either case; an arXiv id is written as arXiv writes it (lower-case archive,
# upper-case subject class, lower-case v). The forms are disjoint, so the order they are tried in
# cannot change an answer, only which message a refusal gets.

IdKind = Literal["pith_number", "suffix", "arxiv", "doi"]

#: Longer input is refused before anything is read (the longest form without a tail has 56 characters).
MAX_ID_CHARS = 200
#: Trimmed at both ends, and nothing else: spec/events.md's ASCII white space (tab, LF, VT, FF, CR, space).
ID_WHITESPACE = " \t\n\v\f\r"


class ParsedId(msgspec.Struct, frozen=True):
    """A normalised identifier query.

    kind ``pith_number``: ``value`` is the long form and ``suffix`` its 26 chars.
    kind ``suffix``: ``suffix`` is an 8/12/16/26-char prefix of a record's suffix (``value`` echoes it).
    kind ``arxiv``/``doi``: ``value`` is the bare arXiv id; ``version`` is set when the user gave one.
    """

    kind: IdKind
    value: str
    suffix: str = ""
    version: int | None = None


_B32_ANY = "[A-Za-z2-7]"
_SUFFIX_ANY = rf"(?:{_B32_ANY}{{26}}|{_B32_ANY}{{16}}|{_B32_ANY}{{12}}|{_B32_ANY}{{8}})"
_ID = rf"(?P<id>{_NEW_ARXIV}|{_OLD_ARXIV})"
_VERSION = r"(?:v(?P<version>[1-9][0-9]{0,3}))?"
_SCHEME = r"(?i:https?://)"
_TAIL = r"(?:[/?#][!-~]*)?"
_FORM_PATTERNS: tuple[tuple[IdKind, str], ...] = (
    ("pith_number", rf"(?i:pith:)(?P<year>[0-9]{{4}}):(?P<suffix>{_B32_ANY}{{26}})"),
    ("suffix", rf"(?i:pith:)?(?P<suffix>{_SUFFIX_ANY})"),
    ("suffix", rf"{_SCHEME}(?i:(?:www\.)?pith\.science/pith/)(?P<suffix>{_B32_ANY}{{26}})(?:(?i:\.json)|{_TAIL})"),
    ("suffix", rf"{_SCHEME}(?i:(?:www\.)?pith\.science/paper/)(?P<suffix>{_SUFFIX_ANY}){_TAIL}"),
    ("arxiv", rf"(?i:arxiv:)?{_ID}{_VERSION}"),
    ("arxiv", rf"{_SCHEME}(?i:(?:www\.)?arxiv\.org/abs/){_ID}{_VERSION}"),
    ("arxiv", rf"{_SCHEME}(?i:(?:www\.)?arxiv\.org/pdf/){_ID}{_VERSION}(?i:\.pdf)?"),
    ("doi", rf"(?:(?i:doi:)|{_SCHEME}(?i:(?:dx\.)?doi\.org/))?(?i:10\.48550/arxiv\.){_ID}"),
)
_FORMS = tuple((kind, re.compile(pattern, re.ASCII)) for kind, pattern in _FORM_PATTERNS)


def _bare_arxiv_id(arxiv_id: str) -> str:
    # math.GT/0309136 -> math/0309136: the subject class is not part of the identifier.
    if "/" in arxiv_id:
        archive, number = arxiv_id.split("/")
        return archive.split(".")[0] + "/" + number
    return arxiv_id


def parse_id(text: str) -> ParsedId:
    """Normalise any identifier form a user may type (spec/identifiers.md §5); raise
    :class:`MalformedId` otherwise.

    Accepted: ``pith:YYYY:<26>``, ``pith:<8|12|16|26>``, a bare 8/12/16/26-char suffix (any case),
    Pith's record and paper URLs, an arXiv id (new or old style, optional ``arXiv:`` prefix, optional
    ``vN``), an arxiv.org abs/pdf URL, and the arXiv DOI (optional ``doi:`` or doi.org URL prefix).
    """
    if len(text) > MAX_ID_CHARS:
        raise MalformedId(f"the identifier is longer than {MAX_ID_CHARS} characters ({text[:40]!r}...)")
    if not text.isascii():
        # Every identifier form is ASCII; upper-casing other scripts could turn them into ASCII ("ﬀ" -> "FF"),
        # and Unicode white space (NBSP, em space) is not trimmed: the input is refused as it is.
        raise MalformedId(f"{text!r} holds characters outside ASCII; no identifier form does")
    body = text.strip(ID_WHITESPACE)
    if not body:
        raise MalformedId("the identifier is empty")
    for kind, pattern in _FORMS:
        if m := pattern.fullmatch(body):
            if kind == "pith_number":
                suffix = m["suffix"].upper()
                return ParsedId(kind="pith_number", value=f"pith:{m['year']}:{suffix}", suffix=suffix)
            if kind == "suffix":
                suffix = m["suffix"].upper()
                return ParsedId(kind="suffix", value=suffix, suffix=suffix)
            version = int(m["version"]) if kind == "arxiv" and m["version"] else None
            return ParsedId(kind=kind, value=_bare_arxiv_id(m["id"]), version=version)
    raise MalformedId(_refusal(body, text))


def _refusal(body: str, original: str) -> str:
    """What a refused identifier looks like it was meant to be, for the message (the code is always
    ``malformed-id``)."""
    if m := _DOI_PREFIX.match(body):  # doi:, a doi.org URL, or a bare 10.xxx name
        doi = body[m.end() :]
        if not doi.lower().startswith(ARXIV_DOI_PREFIX):
            return f"{original!r} is not an arXiv DOI (expected {ARXIV_DOI_PREFIX}<arXiv id>)"
        if re.fullmatch(rf"{_ID}v[0-9]+", doi[len(ARXIV_DOI_PREFIX) :], re.ASCII):
            return f"{original!r}: an arXiv DOI names no version (expected {ARXIV_DOI_PREFIX}<id> without vN)"
        return (
            f"{original!r} is not an arXiv DOI (expected {ARXIV_DOI_PREFIX}<arXiv id>, e.g. 10.48550/arXiv.2502.21231)"
        )
    low = body.lower()
    if low.startswith("pith:"):
        return (
            f"{original!r} is not a Pith Number (expected pith:YYYY:<26 base32 chars>, "
            "or pith: and 8, 12, 16 or 26 of them)"
        )
    if re.match(rf"{_SCHEME}(?i:(?:www\.)?pith\.science/)", body, re.ASCII):
        return (
            f"{original!r} is not a Pith URL this version reads (expected https://pith.science/pith/<26 chars>[/...], "
            "or https://pith.science/paper/<8, 12, 16 or 26 chars>)"
        )
    if "://" in low:
        return (
            f"{original!r} is not an identifier URL this version reads (expected https://pith.science/pith/<26 chars>, "
            "https://pith.science/paper/<suffix>, https://arxiv.org/abs/<arXiv id>, https://arxiv.org/pdf/<arXiv id>, "
            "or https://doi.org/10.48550/arXiv.<arXiv id>)"
        )
    if re.fullmatch(r"[A-Za-z2-7]{4,40}", body, re.ASCII) and re.search("[A-Za-z]", body):
        return (
            f"{original!r} has {len(body)} characters: expected a Pith suffix of 8, 12, 16 or 26 base32 characters "
            "(A-Z, 2-7; e.g. FZ7AO632), or an arXiv id"
        )
    return f"{original!r} is not an arXiv id (expected e.g. 2502.21231, 0704.0001, math/0611599, optionally with v1..v9999)"


_DOI_PREFIX = re.compile(rf"(?:(?i:doi:)|{_SCHEME}(?i:(?:dx\.)?doi\.org/))?(?=10\.)", re.ASCII)
