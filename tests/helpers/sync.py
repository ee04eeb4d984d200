"""What tests/unit/mirror/test_sync.py and tests/e2e/mirror/test_sync.py share: A published pool with one citation
garbled (a lying source) and the path of a record's published bundle."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.adversary import garble
from helpers.eventpool import P, pool
from helpers.ledgers import ledger_with
from pithledger.mirror.publish import publish, record_dir
from pithledger.records.canonical import canonical_bytes


def bundle_path(pub: Path, number: str) -> Path:
    return pub / record_dir(number) / "bundle.json"


def publish_with_a_garbled_citation(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    """Publish the pool at tmp_path/pub, then garble one citation in P[2]'s published bundle (a lying source)."""
    citation = next(e for e in pool() if e["event_type"] == "citation_signature" and e["subject_pith_number"] == P[2])
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
    path = bundle_path(tmp_path / "pub", P[2])
    bundle = json.loads(path.read_text())
    bundle["events"] = [garble(e, "wrong-event-id") if e == citation else e for e in bundle["events"]]
    path.write_bytes(canonical_bytes(bundle) + b"\n")
    return citation
