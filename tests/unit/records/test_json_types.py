"""JSON values compare as JSON, never with Python's `True == 1`: a verdict that one implementation
reaches by Python equality and another by JSON equality is a consensus split (bundle refusal is
all-or-nothing, spec/bundle.md §3)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pithledger.records.bundle import read_bundle
from pithledger.errors import BundleInconsistent
from helpers.common import ROOT

DEMO = ROOT / "bundles" / "demo-1905.08204.json"  # a real version-1 record and two events


def demo() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(DEMO.read_text())
    assert value["source"]["version"] == 1 and type(value["source"]["version"]) is int
    return value


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


def test_apply_refuses_the_whole_bundle_and_writes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = demo()
    bad = copy.deepcopy(bundle)
    bad["source"]["version"] = True
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "good.json").write_text(json.dumps(bundle))
    verified = cli("verify", "bad.json")
    assert verified.code == 1 and "error[bundle-inconsistent]" in verified.err + verified.out, verified.err
    applied = cli("--ledger", "L", "apply", "bad.json")
    assert applied.code == 1 and "error[bundle-inconsistent]" in applied.err and "Traceback" not in applied.err
    assert cli("--ledger", "L", "state", "1905.08204").code == 1  # nothing of it was written
    assert cli("--ledger", "L", "apply", "good.json").code == 0
    assert cli("--ledger", "L", "state", "1905.08204").json()["pith_number"] == "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"
