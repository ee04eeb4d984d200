"""Display metadata: titles, authors and abstracts kept beside records, OUTSIDE consensus.

A canonical record carries only the hashes of its title and abstract (``title_canon_sha256``,
``abstract_canon_sha256``). People want to read the words, so a mirror may be *supplied* them (from
the arXiv snapshot ``mint`` reads, or from Pith's record JSON) and show them — but never as fact:
each field is shown with its check against the record's hash (``match`` / ``mismatch``), ``excerpt``
for an abstract supplied as an excerpt (Pith's record document cuts it, so its hash cannot match), or
``unchecked`` where the record holds no hash for it (authors). Rules: spec/serve.md §6.

Everything here is pure (no IO). The sidecar LMDB environment that keeps the metadata,
``<ledger>/display-metadata/``, is ledger/store/sidecars.py's ``MetadataStore``: never read by the
reducer, the digests, export, audit or fsck, so it cannot change a state byte or a digest.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pithledger.errors import MetadataError, PithledgerError
from pithledger.records.canonical import text_sha256
from pithledger.records.mint import mint
from pithledger.records.model import parse_record

SIDECAR = "display-metadata"
#: Longest field kept (characters): arXiv's longest abstracts are ~5,000; anything longer is refused.
MAX_TITLE = 2_000
MAX_AUTHORS = 20_000
MAX_ABSTRACT = 20_000
MAP_SIZE = 1 << 30

Check = Literal["match", "mismatch", "excerpt", "unchecked"]
#: ``DisplayMetadata.source`` of a paper block read from Pith's record document (``pith_number_record``).
FROM_RECORD_DOCUMENT = "pith-record-document"


class DisplayMetadata(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What was supplied about one canonical record (keyed by its arXiv id and version)."""

    title: str | None = None
    authors: str | None = None
    abstract: str | None = None
    source: str = ""  # "arxiv-snapshot" | "pith-record-json" | "pith-record-document"
    # the abstract is an excerpt (Pith's ``paper.abstract_excerpt``): a hash that differs says nothing
    abstract_excerpt: bool = False


class FieldView(msgspec.Struct, frozen=True):
    name: str  # "title" | "authors" | "abstract"
    value: str | None  # None: not supplied
    check: Check
    expected_sha256: str | None  # the record's hash for the field (None for authors)


ENCODER = msgspec.json.Encoder(order="sorted")  # a kept DisplayMetadata's bytes (store/sidecars.py)
DECODER = msgspec.json.Decoder(DisplayMetadata)


def check(meta: DisplayMetadata | None, record: dict[str, Any]) -> list[FieldView]:
    """Each field with its check against the record's hashes, using mint's text canonicalisation
    (:func:`pithledger.records.canonical.text_sha256`). A field that was not supplied is ``unchecked``; an
    abstract supplied as an excerpt whose hash differs is ``excerpt`` (unchecked), not ``mismatch``,
    which would read as tampering."""
    md = record.get("metadata", {})
    out = []
    for name, key in (("title", "title_canon_sha256"), ("authors", None), ("abstract", "abstract_canon_sha256")):
        value = getattr(meta, name) if meta is not None else None
        expected = md.get(key) if key else None
        status: Check = "unchecked"
        if value is not None and isinstance(expected, str):
            if text_sha256(value) == expected:
                status = "match"
            else:
                status = "excerpt" if name == "abstract" and meta is not None and meta.abstract_excerpt else "mismatch"
        out.append(
            FieldView(
                name=name, value=value, check=status, expected_sha256=expected if isinstance(expected, str) else None
            )
        )
    return out


def _text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # authors as a list of names, or of {"name": ...}
        parts = [v.get("name") if isinstance(v, dict) else v for v in value]
        names = [p for p in parts if isinstance(p, str)]
        if len(names) != len(parts):
            raise MetadataError(f"field {name!r} must be a string or a list of names")
        value = ", ".join(names)
    if not isinstance(value, str):
        raise MetadataError(f"field {name!r} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise MetadataError(f"field {name!r} is longer than {limit:,} characters")
    return value


def record_key(record: dict[str, Any]) -> str:
    """Where a record's display metadata is kept: its arXiv id and version (``arxiv_version`` alias),
    not its hash, so that supplied text which does not hash to the record is still found and shown as
    a mismatch."""
    src = record["source"]
    return f"{src['id']}v{src['version']}"


def from_arxiv(meta: Any) -> tuple[str, DisplayMetadata]:
    """(key of the record ``mint`` builds from it, its display metadata)."""
    record = mint(meta)
    return record_key(record), DisplayMetadata(
        title=_text(meta.get("title"), "title", MAX_TITLE),
        authors=_text(meta.get("authors"), "authors", MAX_AUTHORS),
        abstract=_text(meta.get("abstract"), "abstract", MAX_ABSTRACT),
        source="arxiv-snapshot",
    )


def from_paper(paper: Any) -> DisplayMetadata | None:
    """The display metadata of a Pith record document's ``paper`` block: ``title``, ``authors_text``
    and ``abstract_excerpt`` (an excerpt: :func:`check` says ``excerpt``, never ``mismatch``); its
    other keys are ignored. None when it carries none of the three; :class:`MetadataError` for a
    block that is not an object or a field that is not a string within the limits."""
    if paper is None:
        return None
    if not isinstance(paper, dict):
        raise MetadataError(f"paper must be an object, not {type(paper).__name__}")
    for name in ("title", "authors_text", "abstract_excerpt"):  # Pith's are strings: no list of names here
        if not isinstance(paper.get(name), (str, type(None))):
            raise MetadataError(f"field {name!r} must be a string, not {type(paper[name]).__name__}")
    meta = DisplayMetadata(
        title=_text(paper.get("title"), "title", MAX_TITLE),
        authors=_text(paper.get("authors_text"), "authors_text", MAX_AUTHORS),
        abstract=_text(paper.get("abstract_excerpt"), "abstract_excerpt", MAX_ABSTRACT),
        source=FROM_RECORD_DOCUMENT,
        abstract_excerpt=paper.get("abstract_excerpt") is not None,
    )
    if meta.title is None and meta.authors is None and meta.abstract is None:
        return None
    return meta


def from_pith_json(doc: Any) -> tuple[str, DisplayMetadata]:
    """Pith's record document (``record_type`` ``pith_number_record``: its ``paper`` block, read by
    :func:`from_paper`), or any object with a ``canonical_record`` and ``title``/``authors``/``abstract``
    at the top level (spec/serve.md §6)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("canonical_record"), dict):
        raise MetadataError("a Pith record document must be an object with a canonical_record")
    try:
        parse_record(doc["canonical_record"])
    except PithledgerError as exc:
        raise MetadataError(exc.message) from None
    meta: DisplayMetadata | None
    if "paper" in doc:
        meta = from_paper(doc["paper"])
    else:
        meta = DisplayMetadata(
            title=_text(doc.get("title"), "title", MAX_TITLE),
            authors=_text(doc.get("authors"), "authors", MAX_AUTHORS),
            abstract=_text(doc.get("abstract"), "abstract", MAX_ABSTRACT),
            source="pith-record-json",
        )
    if meta is None or (meta.title is None and meta.authors is None and meta.abstract is None):
        raise MetadataError("the document carries no title, authors or abstract")
    return record_key(doc["canonical_record"]), meta


def combine(old: DisplayMetadata | None, new: DisplayMetadata, record: dict[str, Any]) -> DisplayMetadata:
    """What ``apply`` keeps when a record document supplies ``new`` for a record that has ``old``: each
    field from ``new``, except where ``old``'s matches the record's hash and ``new``'s does not (a full
    abstract from the arXiv snapshot is not replaced by Pith's excerpt of it)."""
    if old is None:
        return new
    before = {f.name: f.check for f in check(old, record)}
    after = {f.name: f.check for f in check(new, record)}
    keep = {name for name in ("title", "abstract") if before[name] == "match" and after[name] != "match"}
    if not keep:
        return new
    return DisplayMetadata(
        title=old.title if "title" in keep else new.title,
        authors=new.authors if new.authors is not None else old.authors,
        abstract=old.abstract if "abstract" in keep else new.abstract,
        source=new.source,
        abstract_excerpt=old.abstract_excerpt if "abstract" in keep else new.abstract_excerpt,
    )


def parse_any(doc: Any) -> tuple[str, DisplayMetadata]:
    """An arXiv snapshot object (has ``versions``) or a Pith record document (has ``canonical_record``)."""
    if isinstance(doc, dict) and "canonical_record" in doc:
        return from_pith_json(doc)
    return from_arxiv(doc)
