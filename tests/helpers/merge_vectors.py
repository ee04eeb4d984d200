"""What tests/unit/merge/test_merge_vectors.py and tests/e2e/merge/test_merge_vectors.py share: spec/vectors/merge/:
the conformance vector files."""

from __future__ import annotations

from helpers.common import ROOT

VECTORS = ROOT / "spec" / "vectors" / "merge"


FILES = sorted(VECTORS.glob("*.json"))
