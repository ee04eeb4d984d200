"""The static resolve index of a published tree: what lets ``pull`` resolve an arXiv id, a DOI or a short
Pith Number from a tree any static host serves (spec/serve.md §7.1), where ``serve`` answers a query.

``publish`` writes one JSON file per shard under ``pithledger/resolve/`` and names them in its manifest's
``resolve_pattern``; ``pull`` reads the one shard an ID falls in. Two families of shards:

- ``pith/<AB>``: the present records whose suffix starts with the two characters ``AB`` (at most 1 024
  files), each with whether a Pith receipt vouches for it: a short form (8, 12, 16 characters) is looked up
  in the shard of its first two, and chosen among the records it starts, as ``Ledger.resolve`` chooses;
- ``arxiv/<key>``: the arXiv ids whose lower-case form minus its last three characters is ``key`` (``/``
  written ``_``: ``2605.00``, ``math_0611``, so at most 1 000 papers a shard), each with what ``resolve``
  answers for it without a version (and for its DOI) and for each version held.

Shards are rebuilt from the ledger's own lookup indexes, never edited from what the directory holds, so an
alias that changed (a record no longer present, a receipt that arrived, a new version) leaves its shard
with the next publish that touches it. Reading a shard (:func:`read_shard`, :func:`lookup`) is pure; the
index is hostile input to ``pull``, which still checks the bundle an answer leads to.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pithledger.errors import CannotWrite
from pithledger.files import read_regular, write_if_changed
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes

if TYPE_CHECKING:
    from pithledger.store import Ledger

INDEX_DIR = "pithledger/resolve"
INDEX_TYPE = "pith_resolve_index"
INDEX_VERSION = "1"
#: Written last by a publish that built the whole index: a tree without it (or of another version) gets a full build.
META_FILE = f"{INDEX_DIR}/index.json"
#: The manifest's ``resolve_pattern`` (after the base URL): ``{shard}`` is ``pith/<AB>`` or ``arxiv/<key>``.
PATTERN = "/" + INDEX_DIR + "/{shard}.json"
PITH_SHARD_CHARS = 2
ARXIV_SHARD_DROP = 3
#: A shard's body is refused above this (``pull``): 2.6 M records make shards of about 130 KiB.
MAX_SHARD = 2 * 1024 * 1024
_ARXIV_KEY_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}\Z", re.ASCII)
_PITH_KEY_RE = re.compile(r"[A-Z2-7]{2}\Z", re.ASCII)


class BadShard(ValueError):
    """A shard document that is not what this version writes (its message says how)."""


def pith_shard(suffix: str) -> str:
    return "pith/" + suffix[:PITH_SHARD_CHARS].upper()


def arxiv_shard(arxiv_id: str) -> str | None:
    """The shard of an arXiv id (any case; the subject class of an old-style id already dropped), None
    for a string that is no arXiv id (a self-signed record may claim one; no ID a user types reaches it)."""
    low = arxiv_id.lower()
    if not ids.ARXIV_ID_RE.match(low):
        return None
    key = low[:-ARXIV_SHARD_DROP].replace("/", "_")
    return "arxiv/" + key if _ARXIV_KEY_RE.match(key) else None


def shard_of(q: ids.ParsedId) -> str | None:
    """The shard an ID's answer is in: short forms by their suffix, arXiv ids and DOIs by their id."""
    if q.kind == "suffix":
        return pith_shard(q.suffix)
    if q.kind in ("arxiv", "doi"):
        return arxiv_shard(q.value)
    return None


def _doc(shard: str, body: dict[str, Any]) -> bytes:
    return canonical_bytes({"index_type": INDEX_TYPE, "index_version": INDEX_VERSION, "shard": shard} | body) + b"\n"


def shard_bytes(ledger: Ledger, shard: str) -> bytes | None:
    """The file of ``shard`` as the ledger's lookup indexes give it now; None when it would be empty."""
    kind, _, key = shard.partition("/")
    if kind == "pith":
        records = ledger.suffix_candidates(key)
        return _doc(shard, {"records": [[n, reg] for n, reg in records]}) if records else None
    prefix = key.replace("_", "/")
    entries: dict[str, dict[str, str | None]] = {}
    for arxiv_id in ledger.arxiv_ids(prefix):
        if arxiv_shard(arxiv_id) == shard and (answers := ledger.arxiv_resolutions(arxiv_id)):
            entries[arxiv_id] = answers
    return _doc(shard, {"ids": entries}) if entries else None


def _meta() -> bytes:
    return (
        canonical_bytes(
            {
                "index_type": INDEX_TYPE,
                "index_version": INDEX_VERSION,
                "pattern": PATTERN,
                "pith_shard_chars": PITH_SHARD_CHARS,
                "arxiv_shard_drop": ARXIV_SHARD_DROP,
            }
        )
        + b"\n"
    )


def _on_disk(directory: Path) -> set[str]:
    """The shards a publish wrote earlier (regular files of the shard name shapes only)."""
    found: set[str] = set()
    for kind, pattern in (("pith", _PITH_KEY_RE), ("arxiv", _ARXIV_KEY_RE)):
        folder = directory / INDEX_DIR / kind
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            key = name[: -len(".json")] if name.endswith(".json") else ""
            if pattern.match(key) and _is_file(folder / name):
                found.add(f"{kind}/{key}")
    return found


def _is_file(path: Path, root: Path | None = None) -> bool:
    """A regular file, reached (below ``root``) through real directories only: nothing is followed."""
    try:
        if root is not None:
            for parent in path.relative_to(root).parents:
                if str(parent) != "." and not stat.S_ISDIR(os.lstat(root / parent).st_mode):
                    return False
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a whole index of this version (a publish then rebuilds only what it touches)."""
    meta = _meta()
    return read_regular(directory / META_FILE, len(meta)) == meta


def update(
    ledger: Ledger, directory: Path, numbers: Iterable[str], arxiv_ids: Iterable[str], *, full: bool
) -> tuple[int, int]:
    """Rebuild the shards of the records ``numbers`` and of ``arxiv_ids`` (those of the records that
    changed), or, ``full``, every shard; remove those left empty. (shards written, shards removed)."""
    if full:
        shards = _on_disk(directory) | {pith_shard(n.rsplit(":", 1)[-1]) for n in ledger.subjects()}
        shards |= {s for a in ledger.arxiv_ids() if (s := arxiv_shard(a)) is not None}
    else:
        shards = {pith_shard(n.rsplit(":", 1)[-1]) for n in numbers}
        shards |= {s for a in arxiv_ids if (s := arxiv_shard(a)) is not None}
    written = removed = 0
    for shard in sorted(shards):
        rel = f"{INDEX_DIR}/{shard}.json"
        data = shard_bytes(ledger, shard)
        if data is not None:
            written += write_if_changed(directory, rel, data)
        elif _is_file(directory / rel, directory):
            try:
                (directory / rel).unlink()
            except OSError as exc:
                raise CannotWrite(f"cannot remove {directory / rel}: {exc.strerror}") from None
            removed += 1
    write_if_changed(directory, META_FILE, _meta())
    return written, removed


# --- reading (pull) ------------------------------------------------------------------------------------


def read_shard(doc: Any, shard: str) -> Any:
    """The entries of a decoded shard document, checked: for ``pith/``, a list of (long Pith Number,
    registry); for ``arxiv/``, {arXiv id: {"" or version: long Pith Number or None}}. Raises
    :class:`BadShard` for anything else (another shard's document included)."""
    if not isinstance(doc, dict) or doc.get("index_type") != INDEX_TYPE or doc.get("index_version") != INDEX_VERSION:
        raise BadShard(f"not a {INDEX_TYPE} of version {INDEX_VERSION}")
    if doc.get("shard") != shard:
        raise BadShard(f"it is the shard {str(doc.get('shard'))[:80]!r}, not {shard!r}")
    if shard.startswith("pith/"):
        records = doc.get("records")
        if not isinstance(records, list):
            raise BadShard("its records are not a list")
        out: list[tuple[str, bool]] = []
        for item in records:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not ids.PITH_NUMBER_RE.match(item[0])
                or not isinstance(item[1], bool)
            ):
                raise BadShard("a record is not [long Pith Number, true|false]")
            out.append((item[0], item[1]))
        return out
    entries = doc.get("ids")
    if not isinstance(entries, dict):
        raise BadShard("its ids are not an object")
    for answers in entries.values():
        if not isinstance(answers, dict) or not all(
            v is None or (isinstance(v, str) and ids.PITH_NUMBER_RE.match(v)) for v in answers.values()
        ):
            raise BadShard("an id's answers are not long Pith Numbers (or null)")
    return entries


def empty_shard(shard: str) -> Any:
    """The entries of a shard that lists nothing (what an absent shard means)."""
    return [] if shard.startswith("pith/") else {}


def lookup(q: ids.ParsedId, entries: Any) -> tuple[str | None, str]:
    """(the long Pith Number the shard gives for ``q``, or None and why not)."""
    if q.kind == "suffix":
        found = [(n, reg) for n, reg in entries if ids.suffix_of_pith_number(n).startswith(q.suffix)]
        pool = [n for n, reg in found if reg] or [n for n, _ in found]
        if len(pool) == 1:
            return pool[0], ""
        if not pool:
            return None, "not in the mirror's resolve index"
        return None, f"{len(pool)} records start with {q.suffix} (ambiguous): name one by its long Pith Number"
    answers = entries.get(q.value.lower())
    key = "" if q.kind == "doi" or q.version is None else str(q.version)
    if not isinstance(answers, dict) or key not in answers:
        return None, "not in the mirror's resolve index"
    number = answers[key]
    if number is None:
        return None, "several records claim it (ambiguous): name one by its long Pith Number"
    return number, ""
