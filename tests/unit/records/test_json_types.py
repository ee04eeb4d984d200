"""JSON values compare as JSON, never with Python's `True == 1`: a verdict that one implementation
reaches by Python equality and another by JSON equality is a consensus split (bundle refusal is
all-or-nothing, spec/bundle.md §3)."""

from __future__ import annotations

import pytest

from helpers.json_types import demo
from pithledger.errors import BundleInconsistent
from pithledger.records.bundle import read_bundle

MUTANTS = {
    "source-version-true": lambda b: b["source"].update(version=True),
    "source-version-as-string": lambda b: b["source"].update(version="1"),
    "source-version-in-a-list": lambda b: b["source"].update(version=[1]),
    "source-kind-true": lambda b: b["source"].update(kind=True),
    "short-pith-number-true": lambda b: b.update(short_pith_number=True),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_top_level_field_of_another_json_type_is_inconsistent(name: str) -> None:
    bundle = demo()
    MUTANTS[name](bundle)
    with pytest.raises(BundleInconsistent):
        read_bundle(bundle)


def test_the_same_source_in_another_key_order_is_consistent() -> None:
    bundle = demo()
    bundle["source"] = dict(reversed(list(bundle["source"].items())))
    assert read_bundle(bundle).pith_number == "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"
