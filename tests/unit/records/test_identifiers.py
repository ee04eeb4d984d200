"""Pith Numbers and aliases, recomputed from real Pith records; every identifier form a user types."""

from __future__ import annotations

import copy
import hashlib

import pytest

import pithledger
from helpers.common import PITH_RECORDS
from pithledger.errors import MalformedId, SchemaError
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.ids import ParsedId, parse_id
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids


@pytest.mark.parametrize("vector", PITH_RECORDS, ids=[v["pith_number"] for v in PITH_RECORDS])
def test_real_record_reproduces_every_identifier(vector: dict) -> None:
    got = record_ids(vector["canonical_record"])
    # The pith number carries 130 bits of the digest; vectors taken from state pages lack the rest.
    assert got.pith_number == vector["pith_number"]
    assert got.short_pith_number == vector["short"]
    if vector["canonical_sha256"] is not None:
        assert got.canonical_sha256 == vector["canonical_sha256"]
    if vector["aliases"] is not None:
        assert got.aliases == vector["aliases"]
    assert list(got.aliases) == sorted(got.aliases)  # Pith lists aliases sorted by kind


def test_key_order_of_the_record_does_not_matter() -> None:
    record = PITH_RECORDS[0]["canonical_record"]
    reordered = {k: record[k] for k in reversed(list(record))}
    assert canonical_bytes(reordered) == canonical_bytes(record)
    assert record_ids(reordered).pith_number == PITH_RECORDS[0]["pith_number"]


def test_year_comes_from_submitted_at_not_from_the_arxiv_id() -> None:
    # arXiv 1701.02363 was submitted 2016-12-29: its Pith Number is pith:2016:... (PITH-FORMAT §2).
    record = copy.deepcopy(PITH_RECORDS[0]["canonical_record"])
    record["source"]["id"] = "1701.02363"
    record["metadata"]["submitted_at"] = "2016-12-29T10:00:00Z"
    assert record_ids(record).pith_number.startswith("pith:2016:")


def test_old_style_id_keeps_its_slash_in_the_doi() -> None:
    record = copy.deepcopy(PITH_RECORDS[0]["canonical_record"])
    record["source"] = {"id": "math/0611599", "kind": "arxiv", "version": 3}
    got = record_ids(record)
    assert got.aliases["doi"] == "10.48550/arxiv.math/0611599"
    assert got.aliases["arxiv_version"] == "math/0611599v3"


def test_empty_license_is_a_valid_record() -> None:
    """``mint`` writes ``""`` for a paper without a license (spec/identifiers.md §3), so such a record has
    its own identifiers and verifies like any other; a null license is not a record (schema-error)."""
    record = copy.deepcopy(PITH_RECORDS[0]["canonical_record"])
    record["metadata"]["license"] = ""
    got = pithledger.record_ids(record)
    assert b'"license":""' in canonical_bytes(record)
    assert got.canonical_sha256 == hashlib.sha256(canonical_bytes(record)).hexdigest()
    assert got.pith_number != PITH_RECORDS[0]["pith_number"]  # the license is hashed: another record
    assert got.short_pith_number == "pith:" + got.pith_number.rsplit(":", 1)[1][:8]
    key = LocalKey(name="license-test", seed=hashlib.sha256(b"empty license").digest())
    created = make_event(
        "record_created",
        got.pith_number,
        {"canonical_record": record, "canonical_sha256": got.canonical_sha256},
        key,
        created_at="2026-06-01T12:00:00Z",
    )
    bundle = write_bundle(got.pith_number, [created], canonical_record=record)
    [verdict] = pithledger.verify_bundle(canonical_bytes(bundle))
    assert (verdict.status, verdict.event_type, verdict.subject) == ("valid", "record_created", got.pith_number)
    assert verdict.facts["canonical_sha256"] == got.canonical_sha256
    record["metadata"]["license"] = None
    with pytest.raises(SchemaError):
        pithledger.record_ids(record)


@pytest.mark.parametrize("field", ["source", "metadata", "schema_version"])
def test_any_changed_field_changes_the_pith_number(field: str) -> None:
    record = copy.deepcopy(PITH_RECORDS[1]["canonical_record"])
    if field == "source":
        record["source"]["version"] += 1
    elif field == "metadata":
        record["metadata"]["primary_cat"] = "cs.XX"
    else:
        return  # only "1.0" is admitted; covered by the schema tests below
    assert record_ids(record).pith_number != PITH_RECORDS[1]["pith_number"]


BAD_RECORDS = {
    "unknown-field": lambda r: r.update(extra=1),
    "missing-metadata": lambda r: r.pop("metadata"),
    "schema-version-2": lambda r: r.update(schema_version="2.0"),
    "version-as-string": lambda r: r["source"].update(version="1"),
    "kind-not-arxiv": lambda r: r["source"].update(kind="doi"),
    "id-not-arxiv": lambda r: r["source"].update(id="hello"),
    "submitted-at-with-offset": lambda r: r["metadata"].update(submitted_at="2019-05-20T16:41:20+00:00"),
    "submitted-at-impossible-day": lambda r: r["metadata"].update(submitted_at="2019-02-30T16:41:20Z"),
    "title-hash-uppercase": lambda r: r["metadata"].update(title_canon_sha256="A" * 64),
    "cross-cats-not-a-list": lambda r: r["metadata"].update(cross_cats_sorted="cs.AI"),
    "cross-cats-holds-a-number": lambda r: r["metadata"].update(cross_cats_sorted=[1]),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_malformed_record_is_rejected_with_a_schema_error(name: str) -> None:
    record = copy.deepcopy(PITH_RECORDS[1]["canonical_record"])
    BAD_RECORDS[name](record)
    with pytest.raises(SchemaError):
        record_ids(record)


# --- parsing what a user types ---------------------------------------------------------------------

V = PITH_RECORDS[0]  # pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P, arXiv 2605.00424v2
SUFFIX = V["pith_number"].split(":")[-1]

GOOD_FORMS = [
    (V["pith_number"], ParsedId("pith_number", V["pith_number"], SUFFIX)),
    (V["pith_number"].lower(), ParsedId("pith_number", V["pith_number"], SUFFIX)),
    (V["short"], ParsedId("suffix", SUFFIX[:8], SUFFIX[:8])),
    ("pith:" + SUFFIX, ParsedId("suffix", SUFFIX, SUFFIX)),
    (SUFFIX[:8], ParsedId("suffix", SUFFIX[:8], SUFFIX[:8])),
    (SUFFIX[:12].lower(), ParsedId("suffix", SUFFIX[:12], SUFFIX[:12])),
    (SUFFIX[:16], ParsedId("suffix", SUFFIX[:16], SUFFIX[:16])),
    (SUFFIX, ParsedId("suffix", SUFFIX, SUFFIX)),
    (f"https://pith.science/pith/{SUFFIX}", ParsedId("suffix", SUFFIX, SUFFIX)),
    (f"https://pith.science/pith/{SUFFIX}/bundle.json", ParsedId("suffix", SUFFIX, SUFFIX)),
    ("2605.00424", ParsedId("arxiv", "2605.00424")),
    ("2605.00424v2", ParsedId("arxiv", "2605.00424", version=2)),
    ("arXiv:2605.00424v1", ParsedId("arxiv", "2605.00424", version=1)),
    ("https://arxiv.org/abs/2605.00424v2", ParsedId("arxiv", "2605.00424", version=2)),
    ("0704.0001", ParsedId("arxiv", "0704.0001")),
    ("math/0611599", ParsedId("arxiv", "math/0611599")),
    ("hep-lat/0407033v2", ParsedId("arxiv", "hep-lat/0407033", version=2)),
    ("math.GT/0309136", ParsedId("arxiv", "math/0309136")),
    ("10.48550/arxiv.2605.00424", ParsedId("doi", "2605.00424")),
    ("10.48550/arXiv.2605.00424", ParsedId("doi", "2605.00424")),
    ("https://doi.org/10.48550/arXiv.2605.00424", ParsedId("doi", "2605.00424")),
    ("10.48550/arxiv.math/0611599", ParsedId("doi", "math/0611599")),
    ("  2605.00424  ", ParsedId("arxiv", "2605.00424")),
]


@pytest.mark.parametrize(("text", "expected"), GOOD_FORMS, ids=[t for t, _ in GOOD_FORMS])
def test_every_form_a_user_types_is_understood(text: str, expected: ParsedId) -> None:
    assert parse_id(text) == expected


BAD_FORMS = {
    "empty": "",
    "pith-year-short": "pith:26:FZ7AO632HBV3FATAUUZ6Y44Y3P",
    "pith-suffix-25-chars": "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3",
    "pith-suffix-with-digit-1": "pith:FZ7AO631",
    "bare-suffix-9-chars": "FZ7AO632H",
    "arxiv-three-digit-number": "2605.004",
    "arxiv-version-zero": "2605.00424v0",
    "other-doi": "10.1000/xyz123",
    "doi-with-version": "10.48550/arxiv.2605.00424v2",
    "old-style-short-number": "math/061159",
    "words": "hello world",
}


@pytest.mark.parametrize("name", sorted(BAD_FORMS))
def test_malformed_id_says_what_was_expected(name: str) -> None:
    with pytest.raises(MalformedId) as info:
        parse_id(BAD_FORMS[name])
    assert "expected" in info.value.message or "expected" in info.value.hint or "empty" in info.value.message


def test_unsorted_cross_categories_are_hashed_as_given() -> None:
    # A record is its hash: a list in another order is another record, not an error.
    record = copy.deepcopy(PITH_RECORDS[0]["canonical_record"])
    record["metadata"]["cross_cats_sorted"] = list(reversed(record["metadata"]["cross_cats_sorted"]))
    assert record_ids(record).pith_number != PITH_RECORDS[0]["pith_number"]
