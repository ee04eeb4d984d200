"""Pith's Agent API on a pithledger mirror (spec/serve.md §1, §2, §7): the record document has every key
path of Pith's own document with the same JSON type, the JSON Schema validates Pith's document and ours,
Pith's verification keys keep Pith's meaning, and an agent written for pith.science works by changing
only the host — on a served ledger (a real `pithledger serve`) and on a published tree served by
`python -m http.server`. Real data: Pith's record document for arXiv 2502.21231 (tests/vectors/), whose
receipt verifies under Pith's registry key, and the example bundles.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/web/test_agent_api.py."""

from __future__ import annotations

import json

import jsonschema

from helpers.agent_api import PITH_DOC, shape_problems
from pithledger.render import record_doc


def test_the_shape_check_catches_what_it_must() -> None:
    """The check itself: a missing nested key, a changed type and a wrong list item are all named."""
    broken = json.loads(json.dumps(PITH_DOC))
    del broken["graph_snapshot"]["verdict"]["strongest_claim"]
    broken["verification_status"]["citation_signatures"] = False
    broken["inbound_citations"]["sample"][3]["citing_title"] = None
    broken["receipt"] = None  # allowed: no receipt verifies
    assert shape_problems(PITH_DOC, PITH_DOC) == []
    assert sorted(shape_problems(PITH_DOC, broken)) == [
        "graph_snapshot.verdict.strongest_claim: missing",
        "inbound_citations.sample[].citing_title: Pith has string, ours null",
        "verification_status.citation_signatures: Pith has integer, ours boolean",
    ]


def test_a_hostile_registry_snapshot_and_a_flood_keep_pith_shape() -> None:
    """Pure builder, hostile state: a registry-signed snapshot whose values have the wrong types, and
    more events and citations than a document lists. The document keeps Pith's shape and the schema."""
    from helpers.pagekit import _state, _view

    evil = {
        "claims": {"count": "many", "items": {"x": 1}, "snapshot_sha256": 7},
        "verdict": "yes",
        "paper": {"title": "forged"},
        "builder_version": "pith-number-builder-x",
        "integrity": {"summary": {"critical": 3}},
        "extra": [1, 2],
    }
    snap = _view("graph_snapshot", {"graph_snapshot": evil}, trust="registry")
    cites = [
        _view(
            "citation_signature",
            {"cited_pith_number": "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY", "relation": "cites"},
            event_id=f"sha256:{i:064x}",
        )
        for i in range(300)
    ]
    inbound = [
        _view(
            "citation_signature",
            {"cited_pith_number": "x", "relation": "cites", "ref_index": r},
            citing_pith_number=f"pith:2020:{'A' * 26}",
            event_id=f"sha256:{i:064x}",
        )
        for i, r in enumerate([-1, 2**40, True, "3", 5] * 20)
    ]
    state = _state(graph_snapshots=[snap], citations=cites, inbound_citations=inbound)
    doc = record_doc.record_document(
        state,
        [],
        [],
        None,
        record_doc.inbound_rows(state, lambda n: None, lambda r: None),
        record_doc.Urls(base="https://m.example"),
    )
    assert shape_problems(PITH_DOC, doc) == []
    jsonschema.Draft202012Validator(json.loads(record_doc.schema_bytes())).validate(doc)
    graph = doc["graph_snapshot"]
    assert (
        graph["claims"] == {"count": 0, "items": [], "snapshot_sha256": ""}
        and graph["verdict"]["strongest_claim"] == ""
    )
    assert (
        graph["builder_version"] == "pith-number-builder-x"
        and graph["integrity"]["summary"]["critical"] == 3
        and graph["extra"] == [1, 2]
    )
    assert (
        graph["paper"]["title"] == "" and doc["verification_status"]["graph_snapshot"] is True
    )  # the paper is never the snapshot's say-so
    # no held copies were given: nothing is listed as signed, everything is still counted
    assert (
        doc["events"] == []
        and doc["pithledger_event_count"] == 301
        and doc["event_summary"]["citation_signature"] == 300
    )
    sample = doc["inbound_citations"]["sample"]
    assert doc["inbound_citations"]["count"] == 100 and len(sample) == record_doc.SAMPLE
    assert {s["ref_index"] for s in sample} == {None, 5} and all(
        s["citing_arxiv_id"] == "" for s in sample
    )  # citing record not held


def test_paper_serves_unchecked_display_text_marked_and_never_text_that_contradicts_the_hash() -> None:
    """spec/serve.md §2.1: authors (no hash) and Pith's excerpt are served and marked unchecked; a whole
    abstract or title whose hash differs is not served (mismatch); nothing supplied is "" and none."""
    from pithledger.records.display import DisplayMetadata, from_paper

    record = PITH_DOC["canonical_record"]
    paper = PITH_DOC["paper"]

    def served(meta: DisplayMetadata | None) -> tuple[dict[str, str], dict[str, str]]:
        block, claims = record_doc._paper(record, meta)
        return {k: block[k] for k in ("title", "authors_text", "abstract_excerpt")}, claims

    pith = from_paper(paper)  # what apply keeps of Pith's document
    assert served(pith) == (
        {k: paper[k] for k in ("title", "authors_text", "abstract_excerpt")},
        {"paper.title": "checked", "paper.authors_text": "unchecked", "paper.abstract_excerpt": "unchecked"},
    )
    forged = DisplayMetadata(title="Another title", authors=" Mallory,\n Eve ", abstract="Another abstract.")
    assert served(forged) == (
        {"title": "", "authors_text": "Mallory, Eve", "abstract_excerpt": ""},
        {"paper.title": "mismatch", "paper.authors_text": "unchecked", "paper.abstract_excerpt": "mismatch"},
    )
    assert served(None) == (
        {"title": "", "authors_text": "", "abstract_excerpt": ""},
        {"paper.title": "none", "paper.authors_text": "none", "paper.abstract_excerpt": "none"},
    )
