"""What tests/unit/web/test_served_bytes.py and tests/e2e/web/test_served_bytes.py share: Pith's record document and
`_relayed`, the record_created a hostile relay delivers with every unsigned field rewritten."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.common import VECTORS

DOC = json.loads((VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json").read_text())


FORGED = "RECORD WITHDRAWN"


def _relayed(event: dict[str, Any]) -> dict[str, Any]:
    """The real record_created as a hostile relay delivers it: every field Pith's receipt leaves unsigned rewritten."""
    out = copy.deepcopy(event)
    out["created_at"] = "2031-01-01T00:00:00Z"
    out["signer"]["signer_id"] = FORGED
    out["payload"]["receipt"]["signed_at"] = FORGED
    out["payload"]["receipt"]["notice"] = FORGED
    out["payload"]["receipt"]["signature_status"] = FORGED
    return out
