"""Pith Numbers, aliases, and parsing of every identifier form a user may type. Pure: no IO.

Rules and rationale: spec/identifiers.md.
"""

from __future__ import annotations

import base64
import re
from typing import Literal

import msgspec

from .errors import MalformedId

SUFFIX_LEN = 26
SHORT_LENGTHS = (8, 12, 16)
#: The alias kinds Pith lists for every record, in the order Pith lists them (sorted by kind).
ALIAS_KINDS = ("arxiv", "arxiv_version", "doi", "pith_short_12", "pith_short_16", "pith_short_8")
ARXIV_DOI_PREFIX = "10.48550/arxiv."

_B32 = "A-Z2-7"
_NEW_ARXIV = r"[0-9]{4}\.[0-9]{4,5}"
# Old-style ids: archive[.SUBJECT-CLASS]/YYMMNNN, e.g. math/0611599, hep-lat/0407033, math.GT/0309136.
_OLD_ARXIV = r"[a-z][a-z-]*(?:\.[A-Z]{2})?/[0-9]{7}"
ARXIV_ID_RE = re.compile(rf"^(?:{_NEW_ARXIV}|[a-z][a-z-]*/[0-9]{{7}})\Z")
_ARXIV_ANY = re.compile(rf"^(?P<id>{_NEW_ARXIV}|{_OLD_ARXIV})(?:v(?P<version>[1-9][0-9]{{0,3}}))?\Z")
PITH_NUMBER_RE = re.compile(rf"^pith:[0-9]{{4}}:[{_B32}]{{26}}\Z")
_PITH_LONG = re.compile(rf"^pith:(?P<year>[0-9]{{4}}):(?P<suffix>[{_B32}]{{26}})\Z")
_PITH_SHORT = re.compile(rf"^pith:(?P<suffix>[{_B32}]{{8}}|[{_B32}]{{12}}|[{_B32}]{{16}}|[{_B32}]{{26}})\Z")
_SUFFIX = re.compile(rf"^(?:[{_B32}]{{8}}|[{_B32}]{{12}}|[{_B32}]{{16}}|[{_B32}]{{26}})\Z")


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

IdKind = Literal["pith_number", "suffix", "arxiv", "doi"]


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


def _strip_prefix(text: str, prefixes: tuple[str, ...]) -> str:
    low = text.lower()
    for prefix in prefixes:
        if low.startswith(prefix):
            return text[len(prefix):]
    return text


def _parse_arxiv(text: str, original: str) -> ParsedId:
    m = _ARXIV_ANY.match(text)
    if not m:
        if re.fullmatch(rf"[{_B32}]{{4,40}}", text.upper()) and re.search("[A-Za-z]", text):
            raise MalformedId(
                f"{original!r} has {len(text)} characters: expected a Pith suffix of 8, 12, 16 or 26 characters "
                "(e.g. FZ7AO632), or an arXiv id"
            )
        raise MalformedId(f"{original!r} is not an arXiv id (expected e.g. 2502.21231, 0704.0001, math/0611599)")
    arxiv_id = m["id"]
    if "/" in arxiv_id:
        # math.GT/0309136 -> math/0309136: the subject class is not part of the identifier.
        archive, number = arxiv_id.split("/")
        arxiv_id = archive.split(".")[0] + "/" + number
    version = int(m["version"]) if m["version"] else None
    return ParsedId(kind="arxiv", value=arxiv_id, version=version)


def parse_id(text: str) -> ParsedId:
    """Normalise any identifier form a user may type; raise :class:`MalformedId` otherwise.

    Accepted: ``pith:YYYY:<26>``, ``pith:<8|12|16|26>``, a bare 8/12/16/26-char suffix (any case),
    the Pith page URL, an arXiv id (new or old style, optional ``arXiv:`` prefix, optional ``vN``),
    an arxiv.org abs/pdf URL, and the arXiv DOI (optional ``doi:`` or doi.org URL prefix).
    """
    original = text
    text = text.strip()
    if not text:
        raise MalformedId("the identifier is empty")
    if not text.isascii():
        # Every identifier form is ASCII; upper-casing other scripts could turn them into ASCII ("ﬀ" -> "FF").
        raise MalformedId(f"{original!r} holds characters outside ASCII; no identifier form does")
    text = _strip_prefix(text, ("https://www.pith.science/pith/", "https://pith.science/pith/"))
    text = text.split("/", 1)[0] if re.match(rf"^[{_B32}a-z2-7]{{26}}/", text) else text
    low = text.lower()

    if low.startswith("pith:"):
        upper = "pith:" + text[5:].upper()
        if m := _PITH_LONG.match(upper):
            return ParsedId(kind="pith_number", value=upper, suffix=m["suffix"])
        if m := _PITH_SHORT.match(upper):
            return ParsedId(kind="suffix", value=m["suffix"], suffix=m["suffix"])
        raise MalformedId(
            f"{original!r} is not a Pith Number (expected pith:YYYY:<26 base32 chars>, or pith: and 8, 12, 16 or 26 of them)"
        )

    doi = _strip_prefix(text, ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "doi:"))
    if doi.startswith("10."):
        if not doi.lower().startswith(ARXIV_DOI_PREFIX):
            raise MalformedId(f"{original!r} is not an arXiv DOI (expected {ARXIV_DOI_PREFIX}<arXiv id>)")
        parsed = _parse_arxiv(doi[len(ARXIV_DOI_PREFIX):], original)
        if parsed.version is not None:
            raise MalformedId(f"{original!r}: an arXiv DOI names no version (expected {ARXIV_DOI_PREFIX}<id> without vN)")
        return ParsedId(kind="doi", value=parsed.value)

    if _SUFFIX.match(text.upper()):
        return ParsedId(kind="suffix", value=text.upper(), suffix=text.upper())

    text = _strip_prefix(text, ("https://arxiv.org/abs/", "https://arxiv.org/pdf/", "http://arxiv.org/abs/", "arxiv:"))
    if text.endswith(".pdf"):
        text = text[:-4]
    return _parse_arxiv(text, original)
