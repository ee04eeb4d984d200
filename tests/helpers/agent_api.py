"""What tests/unit/web/test_agent_api.py and tests/e2e/web/test_agent_api.py share: Pith's own record document
(tests/vectors) and `shape_problems`, which names every key path whose JSON type ours does not match."""

from __future__ import annotations

import json
from typing import Any

from helpers.common import TESTS
from pithledger.render import record_doc

VECTORS = TESTS / "vectors"

PITH_DOC: dict[str, Any] = json.loads((VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json").read_text())


#: Where our document may hold null for a value Pith's has (spec/serve.md §2): no receipt verifies here,
#: or a citation does not carry its reference index.
NULLABLE = {"receipt", "inbound_citations.sample[].ref_index"}


def jtype(value: Any) -> str:
    return record_doc._json_type(value)


def shape_problems(pith: Any, ours: Any, path: str = "") -> list[str]:
    """Every key path of Pith's value that ours lacks or holds with another JSON type (objects
    recursively; each of our list items against Pith's first item, where both lists have items)."""
    if jtype(ours) == "null" and path in NULLABLE:
        return []
    if jtype(pith) != jtype(ours):
        return [f"{path or '.'}: Pith has {jtype(pith)}, ours {jtype(ours)}"]
    out: list[str] = []
    if isinstance(pith, dict):
        for k, v in pith.items():
            sub = f"{path}.{k}" if path else k
            if k not in ours:
                out.append(f"{sub}: missing")
            else:
                out += shape_problems(v, ours[k], sub)
    elif isinstance(pith, list) and pith:
        for item in ours:
            out += shape_problems(pith[0], item, f"{path}[]")
    return out
