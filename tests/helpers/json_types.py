"""What tests/unit/records/test_json_types.py and tests/e2e/records/test_json_types.py share: A real version-1 record
and its events (`demo`), whose integers must stay integers."""

from __future__ import annotations

import json
from typing import Any

from helpers.common import ROOT

DEMO = ROOT / "bundles" / "demo-1905.08204.json"  # a real version-1 record and two events


def demo() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(DEMO.read_text())
    assert value["source"]["version"] == 1 and type(value["source"]["version"]) is int
    return value
