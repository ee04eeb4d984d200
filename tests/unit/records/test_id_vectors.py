"""spec/vectors/ids/: every typed identifier and its answer, through the parser, `pithledger state`
and a running `pithledger serve` (spec/identifiers.md §5)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from helpers.id_vectors import ALL
from pithledger.errors import MalformedId
from pithledger.records.ids import parse_id

# The one record the test ledger holds (bundles/demo-2605.00424-every-kind.json), which the vectors name.


def test_the_vectors_cover_every_rule_of_the_grammar() -> None:
    names = [v["name"] for v in ALL]
    assert len(names) == len(set(names))
    accepted = [v for v in ALL if "kind" in v["answer"]]
    assert {v["answer"]["kind"] for v in accepted} == {"pith_number", "suffix", "arxiv", "doi"}
    for needle in (
        "pith-url",
        "paper-url",
        "arxiv-abs-url",
        "arxiv-pdf-url",
        "doi-org",
        "old-style",
        "version",
        "space",
        "no-break",
        "200",
    ):
        assert any(needle in n for n in names), needle
    # both answers for the forms the grammar bounds: some accepted, some refused
    for needle in ("pith-url", "arxiv-version", "doi", "bare-suffix", "arxiv-old-style"):
        assert any(needle in v["name"] for v in accepted) and any(
            needle in v["name"] and v not in accepted for v in ALL
        ), needle


@pytest.mark.parametrize("vector", ALL, ids=[v["name"] for v in ALL])
def test_parser_gives_every_vectors_answer(vector: dict[str, Any]) -> None:
    try:
        got: dict[str, Any] = msgspec.structs.asdict(parse_id(vector["input"]))
    except MalformedId as exc:
        got = {"error": exc.code}
        assert exc.message and "Traceback" not in exc.message
    assert got == vector["answer"]
