"""JSON values compare as JSON, never with Python's `True == 1`: a verdict that one implementation
reaches by Python equality and another by JSON equality is a consensus split (bundle refusal is
all-or-nothing, spec/bundle.md §3).

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/records/test_json_types.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from helpers.json_types import demo


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
