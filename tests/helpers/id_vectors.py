"""What tests/unit/records/test_id_vectors.py and tests/e2e/records/test_id_vectors.py share: spec/vectors/ids/: every
typed identifier vector, accepted and refused."""

from __future__ import annotations

import json

from helpers.common import ROOT

NUMBER, ARXIV, VERSION = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P", "2605.00424", 2


VECTORS = ROOT / "spec" / "vectors" / "ids"


ALL = [v for name in ("accepted", "refused") for v in json.loads((VECTORS / f"{name}.json").read_text())["vectors"]]
