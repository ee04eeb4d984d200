"""`state ID --view`: a summary a person can read, which marks claims as claims."""

from __future__ import annotations

from pathlib import Path

from helpers.common import ROOT

BUNDLES = ROOT / "bundles"


def test_view_shows_numbers_badges_claims_with_what_was_checked_and_citations_both_ways(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES))
    out = cli("--ledger", "L", "state", "2605.00424", "--view").out
    assert out.startswith("pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P   present")
    assert "short  pith:FZ7AO632" in out and "doi 10.48550/arxiv.2605.00424" in out
    assert "no Pith receipt" in out and "timestamp: bitcoin anchor claimed" in out and "storage: capture claimed" in out
    assert (
        "Bitcoin height 948000 claimed" in out
        and "NOT checked against the chain" in out
        and "the capture is NOT fetched" in out
    )
    assert "cites    extends      pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY" in out
    cited = cli("--ledger", "L", "state", "1905.08204", "--view").out
    assert "cited by extends      pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P" in cited


def test_json_stays_the_consensus_bytes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES))
    plain = cli("--ledger", "L", "state", "2605.00424").out
    assert cli("--ledger", "L", "--json", "state", "2605.00424", "--view").out == plain
