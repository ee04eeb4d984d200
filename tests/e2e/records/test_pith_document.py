"""Pith's record document (``pith_number_record``, what pith.science/pith/<suffix> returns for JSON) is
read wherever a bundle is: it is its record's Pith-receipted record_created event, checked, identified
and folded exactly as the same record in a Pith bundle; its paper block is display metadata
(spec/bundle.md §5, spec/serve.md §6). The document is the real one, verbatim (tests/vectors).

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/records/test_pith_document.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers.common import FIXTURES
from helpers.pith_document import (
    BUNDLES,
    DOC,
    DOC_PATH,
    EVENT_ID,
    EXPECTED,
    MUTATIONS,
    NUMBER,
    RECORD,
    pith_bundle,
    pith_bundle_event,
)
from pithledger.records.canonical import canonical_bytes
from pithledger.records.display import check, from_pith_json
from pithledger.render import pages
from pithledger.store import open_settled
from pithledger.store.sidecars import MetadataStore


def write(path: Path, value: Any) -> Path:
    path.write_bytes(canonical_bytes(value))
    return path


def roots(path: Path) -> tuple[Any, dict[str, int]]:
    """The ledger's digest roots and counts (what `pithledger digest` prints), read in place."""
    with open_settled(path) as ledger:
        return ledger.root(), ledger.counts()


def test_apply_of_the_document_equals_apply_of_the_same_record_as_a_pith_bundle(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("--ledger", "D", "apply", str(DOC_PATH))
    assert r.code == 0 and "1 new, 0 duplicate, 0 invalid, 0 unverified; 1 record touched" in r.out, r.out + r.err
    state = cli("--ledger", "D", "state", "2502.21231")
    doc_state = json.loads(state.out)
    assert doc_state["pith_number"] == NUMBER and doc_state["current"]["verification_status"]["pith_receipt"] is True
    assert (
        doc_state["current"]["record_receipts"] == ["pith-v1-2026-05"]
        and doc_state["current"]["canonical_record"] == RECORD
    )
    write(tmp_path / "bundle.json", pith_bundle())
    write(
        tmp_path / "other.json",
        pith_bundle(pith_bundle_event(created_at="2030-01-01T00:00:00Z", signer_id="a Pith mirror")),
    )
    for ledger, name in (("B", "bundle.json"), ("O", "other.json")):
        assert cli("--ledger", ledger, "apply", name).code == 0
        assert cli("--ledger", ledger, "state", NUMBER).out == state.out
        assert roots(tmp_path / ledger) == roots(tmp_path / "D")
    again = cli("--ledger", "O", "apply", "--json", str(DOC_PATH)).json()  # the same event: a duplicate
    assert (again["new"], again["duplicate"]) == (0, 1)
    ids = {json.loads(cli("verify", "--json", f).out)["event_id"] for f in (str(DOC_PATH), "bundle.json", "other.json")}
    assert ids == {EVENT_ID}


def test_apply_reads_the_document_from_stdin_and_from_json_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "D", "apply", str(DOC_PATH))
    r = cli("--ledger", "S", "apply", "-", input=DOC_PATH.read_bytes())
    assert r.code == 0 and "1 new" in r.out, r.err
    other = (BUNDLES / "demo-1709.09021.json").read_bytes()
    (tmp_path / "mix.jsonl").write_bytes(canonical_bytes(DOC) + b"\n" + canonical_bytes(json.loads(other)) + b"\n")
    r = cli("--ledger", "J", "apply", "mix.jsonl")
    assert r.code == 0 and "applied 2 events from 2 bundles: 2 new" in r.out, r.out + r.err
    for ledger in ("S", "J"):
        assert cli("--ledger", ledger, "state", NUMBER).out == cli("--ledger", "D", "state", NUMBER).out
    assert MetadataStore(tmp_path / "J").get(RECORD) == MetadataStore(tmp_path / "S").get(RECORD) is not None


def test_verify_prints_the_record_verdict_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("verify", str(DOC_PATH))
    assert r.code == 0 and r.out == f"valid      {EVENT_ID} record_created {NUMBER} (registry)\n"
    r = cli("verify", str(FIXTURES / "bundles" / "record-document-tampered-receipt.json"))
    assert r.code == 1 and r.out.startswith("invalid") and "[bad-receipt]" in r.out
    r = cli("verify", "-", input=canonical_bytes({**DOC, "receipt": None}))
    assert r.code == 0 and r.out.startswith("unverified") and "[no-receipt]" in r.out


def test_apply_keeps_the_paper_block_and_metadata_reads_the_document(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    paper = DOC["paper"]
    assert cli("--ledger", "L", "apply", str(DOC_PATH)).code == 0
    kept = MetadataStore(tmp_path / "L").get(RECORD)
    assert kept is not None and (kept.title, kept.authors, kept.abstract) == (
        paper["title"],
        paper["authors_text"],
        paper["abstract_excerpt"],
    )
    fields = {f.name: f.check for f in check(kept, RECORD)}
    assert fields == {"title": "match", "authors": "unchecked", "abstract": "excerpt"}  # an excerpt, not a mismatch
    html = pages.record_page(
        json.loads(cli("--ledger", "L", "state", NUMBER).out),
        pages.RecordFacts(receipts=[], signers=[]),
        kept,
        pages.Links(),
        mirror="m",
    )
    assert f'<h1 id="title">{paper["title"]}</h1>' in html and "unchecked: excerpt" in html and ">mismatch<" not in html
    # metadata reads the document (into a ledger that holds only another record)
    assert cli("--ledger", "M", "apply", str(BUNDLES / "demo-1709.09021.json")).code == 0
    r = cli("--ledger", "M", "--json", "metadata", str(DOC_PATH))
    assert r.code == 0 and r.json() == {"kept": 1, "failed": 0, "records_with_metadata": 1, "errors": []}, r.err
    assert MetadataStore(tmp_path / "M").get(RECORD) == kept
    assert from_pith_json(DOC) == ("2502.21231v1", kept)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger holding another record (nothing about the document's)."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("base") / "L"
    subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "apply", str(BUNDLES / "demo-1709.09021.json")],
        check=True,
        capture_output=True,
    )
    return path


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutated_document_gives_its_exact_error_and_writes_nothing(
    name: str, base: Path, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    ledger = tmp_path / "L"
    shutil.copytree(base, ledger)
    before = roots(ledger)
    path = str(FIXTURES / "bundles" / f"{name}.json")
    r = cli("--ledger", str(ledger), "apply", path)
    code, said = MUTATIONS[name]
    want = EXPECTED[f"{name}.json"]
    assert r.code == code and "Traceback" not in r.err
    if "error" in want:
        assert r.err.startswith(f"{said}{path}: {want['message']}\nhint: "), r.err
    else:
        assert r.out.startswith(said + want["events"][-1]["message"] + " (copy sha256:"), r.out
    assert roots(ledger) == before  # no event, record or state changed
    assert not (ledger / "display-metadata").exists()  # and its paper block was not kept
