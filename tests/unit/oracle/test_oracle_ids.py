"""The oracle's identifier grammar (spec/identifiers.md §5, from the ABNF) beside pithledger's `parse_id` on
generated input: fragments of every form joined in any order and case, with white space and stray characters
around them. Both must give the same answer (or both refuse with malformed-id)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from oracle.parse_id import parse_id as oracle_parse_id

from pithledger.errors import MalformedId
from pithledger.records.ids import parse_id

FRAGMENTS = [
    "pith:", "PITH:", "2026:", "0000:", "FZ7AO632HBV3FATAUUZ6Y44Y3P", "fz7ao632hbv3fatauuz6y44y3p", "FZ7AO632",
    "FZ7AO632HBV3", "FZ7AO632HBV3FATA", "FZ7AO6321", "https://", "http://", "HTTPS://", "www.", "dx.", "export.",
    "pith.science", "arxiv.org", "doi.org", "/pith/", "/paper/", "/abs/", "/pdf/", ".json", ".pdf", "/bundle.json",
    "?tab=x", "#a", "arXiv:", "arxiv:", "doi:", "10.48550/arXiv.", "10.48550/ARXIV.", "2605.00424", "0704.0001",
    "2605.0042", "math/0611599", "Math/0611599", "math.GT/0309136", "math.gt/0309136", "hep-lat/0407033", "v1", "v2",
    "V2", "v0", "v9999", "v10000", "/", ".", ":", " ", "\t", "\n", "\x0b", "\xa0", "\x00", "\x7f", "ﬀ", "x",
]  # fmt: skip
inputs = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join),
    st.text(st.characters(max_codepoint=0x7F), max_size=30),
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(0, 210)).map(lambda t: t[0] * t[1]),
)


def code_answer(text: str) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = msgspec.structs.asdict(parse_id(text))
    except MalformedId as exc:
        return {"error": exc.code}
    return answer


@given(inputs)
def test_typed_identifiers_get_the_same_answer(text: str) -> None:
    assert oracle_parse_id(text) == code_answer(text)


def test_the_fragments_reach_every_kind_and_refusals() -> None:
    samples = [
        "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P",
        "https://www.pith.science/paper/FZ7AO632",
        "arXiv:math.GT/0309136v2",
        "https://dx.doi.org/10.48550/arXiv.2605.00424",
        "10.48550/arXiv.2605.00424v2",
    ]
    answers = [oracle_parse_id(s) for s in samples]
    assert [a.get("kind", a.get("error")) for a in answers] == ["pith_number", "suffix", "arxiv", "doi", "malformed-id"]
    assert answers == [code_answer(s) for s in samples]
