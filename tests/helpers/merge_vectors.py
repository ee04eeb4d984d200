"""What the in-process and the end-to-end tests of merge vectors share (cut from tests/unit/merge/test_merge_vectors.py,
now split between tests/unit/ and tests/e2e/)."""

from __future__ import annotations

from helpers.common import ROOT

VECTORS = ROOT / "spec" / "vectors" / "merge"


FILES = sorted(VECTORS.glob("*.json"))
