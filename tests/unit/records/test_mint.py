"""`mint`: arXiv bulk-metadata objects -> canonical records, following every rule of PITH-FORMAT §2."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest

from helpers.common import PITH_RECORDS, TEXT_CANON
from pithledger.errors import MetadataError
from pithledger.records.canonical import canonical_bytes, text_sha256
from pithledger.records.mint import mint
from pithledger.records.model import record_ids

RECORDS_BY_SUFFIX = {r["pith_number"].split(":")[-1]: r for r in PITH_RECORDS}
TITLED = [
    (RECORDS_BY_SUFFIX[suffix], v["text"])
    for v in TEXT_CANON
    for suffix in RECORDS_BY_SUFFIX
    if v["kind"] == "title" and suffix in v["source"]
]
ABSTRACT = next(v for v in TEXT_CANON if v["kind"] == "abstract")


def rfc2822(iso: str, *, shift_hours: int = 0) -> str:
    when = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(hours=shift_hours)
    return format_datetime(when, usegmt=True)


def snapshot_line(record: dict[str, Any], title: str) -> dict[str, Any]:
    """The object arXiv's metadata snapshot holds for this record, as arXiv writes it."""
    md, src = record["metadata"], record["source"]
    return {
        "id": src["id"],
        "submitter": "A. Author",
        "authors": "A. Author, B. Author",
        # the snapshot wraps long titles with a newline and two spaces
        "title": title.replace(" ", "\n  ", 1),
        "comments": None,
        "doi": None,
        "abstract": "  " + ABSTRACT["text"] + "\n",
        "categories": " ".join([md["primary_cat"], *reversed(md["cross_cats_sorted"])]),
        "license": md["license"] or None,
        "versions": [
            {"version": f"v{n}", "created": rfc2822(md["submitted_at"], shift_hours=24 * (n - 1))}
            for n in range(src["version"], 0, -1)
        ],
        "update_date": "2024-01-01",
    }


@pytest.mark.parametrize(("vector", "title"), TITLED, ids=[v["pith_number"] for v, _ in TITLED])
def test_mint_reproduces_real_records(vector: dict[str, Any], title: str) -> None:
    record = vector["canonical_record"]
    minted = mint(snapshot_line(record, title))
    # Every field is Pith's, but the abstract: no real abstract text of these records is at hand.
    expected = copy.deepcopy(record)
    expected["metadata"]["abstract_canon_sha256"] = ABSTRACT["canon_sha256"]
    assert minted == expected
    assert minted["metadata"]["title_canon_sha256"] == record["metadata"]["title_canon_sha256"]
    assert record_ids(minted).pith_number.startswith(vector["pith_number"][:10])


def test_at_least_twenty_real_titles_are_checked() -> None:
    assert len(TITLED) >= 20


def test_submitted_at_is_v1_in_utc_even_from_another_zone() -> None:
    line = snapshot_line(PITH_RECORDS[0]["canonical_record"], "T")
    line["versions"] = [
        {"version": "v2", "created": "Tue, 3 Apr 2007 10:00:00 GMT"},
        {"version": "v1", "created": "Mon, 2 Apr 2007 21:18:42 +0200"},
    ]
    record = mint(line)
    assert record["metadata"]["submitted_at"] == "2007-04-02T19:18:42Z"
    assert record["source"]["version"] == 2


def test_old_style_id_null_license_and_primary_repeated_in_categories() -> None:
    line = snapshot_line(PITH_RECORDS[0]["canonical_record"], "T")
    line.update(id="math/0611599", license=None, categories="math.GT math.AG math.GT cs.LG math.AG")
    record = mint(line)
    assert record["source"]["id"] == "math/0611599"
    assert record["metadata"]["license"] == ""
    assert record["metadata"]["primary_cat"] == "math.GT"
    assert record["metadata"]["cross_cats_sorted"] == ["cs.LG", "math.AG"]
    assert record_ids(record).aliases["doi"] == "10.48550/arxiv.math/0611599"


def test_real_abstract_hash() -> None:
    line = snapshot_line(PITH_RECORDS[0]["canonical_record"], "T")
    assert mint(line)["metadata"]["abstract_canon_sha256"] == ABSTRACT["canon_sha256"] == text_sha256(ABSTRACT["text"])


BAD = {
    "not-an-object": lambda m: ["list"],
    "missing-title": lambda m: {k: v for k, v in m.items() if k != "title"},
    "title-not-string": lambda m: {**m, "title": 5},
    "bad-id": lambda m: {**m, "id": "arxiv-1234"},
    "empty-categories": lambda m: {**m, "categories": "  "},
    "no-v1": lambda m: {**m, "versions": [{"version": "v2", "created": "Tue, 3 Apr 2007 10:00:00 GMT"}]},
    "version-not-vN": lambda m: {**m, "versions": [{"version": "1", "created": "Tue, 3 Apr 2007 10:00:00 GMT"}]},
    "date-unparseable": lambda m: {**m, "versions": [{"version": "v1", "created": "yesterday"}]},
    "date-without-zone": lambda m: {**m, "versions": [{"version": "v1", "created": "Tue, 3 Apr 2007 10:00:00"}]},
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_unusable_metadata_is_named(name: str) -> None:
    line = snapshot_line(PITH_RECORDS[0]["canonical_record"], "T")
    with pytest.raises(MetadataError):
        mint(BAD[name](line))


def test_minted_bytes_are_canonical() -> None:
    record = mint(snapshot_line(PITH_RECORDS[0]["canonical_record"], "T"))
    assert canonical_bytes(record).startswith(b'{"metadata":{"abstract_canon_sha256":')
