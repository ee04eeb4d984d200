"""What the in-process and the end-to-end tests of id vectors share (cut from tests/unit/records/test_id_vectors.py,
now split between tests/unit/ and tests/e2e/)."""

from __future__ import annotations

import json

from helpers.common import ROOT

NUMBER, ARXIV, VERSION = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P", "2605.00424", 2


VECTORS = ROOT / "spec" / "vectors" / "ids"


ALL = [v for name in ("accepted", "refused") for v in json.loads((VECTORS / f"{name}.json").read_text())["vectors"]]
