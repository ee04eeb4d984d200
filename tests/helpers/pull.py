"""What tests/unit/mirror/test_pull.py and tests/e2e/mirror/test_pull.py share: The `truth` fixture (a ledger of
bundles/ and every record's bytes) and `same_as_truth`, which compares a pulled ledger with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.common import ROOT
from helpers.pith_site import bundles_of
from pithledger.store import Ledger

BUNDLES = ROOT / "bundles"


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ledger filled by `apply bundles/` (the real records and the demo events), each record's
    bundle, arXiv id and state bytes, and the ledger's digest."""
    path = tmp_path_factory.mktemp("truth") / "ledger"
    with Ledger(path, create=True) as ledger:
        from pithledger.records.bundle import read_bundle
        from pithledger.records.canonical import strict_decode

        bundles = []
        for f in sorted(BUNDLES.iterdir()):
            if f.suffix == ".json":
                bundles.append(read_bundle(strict_decode(f.read_bytes())))
            elif f.suffix == ".jsonl":
                bundles += [read_bundle(strict_decode(line)) for line in f.read_bytes().splitlines() if line.strip()]
        ledger.apply_batch(bundles)
        states = {n: ledger.state_bytes(n) for n in ledger.subjects()}
        root = ledger.root()
    served = bundles_of(path)
    arxiv = {json.loads(b)["pith_number"]: json.loads(b)["canonical_record"]["source"]["id"] for b in served.values()}
    return {"path": path, "bundles": served, "states": states, "root": root, "arxiv": arxiv}


def same_as_truth(ledger: Ledger, truth: dict[str, Any], numbers: set[str] | None = None) -> None:
    numbers = set(truth["states"]) if numbers is None else numbers
    assert set(ledger.subjects()) == numbers
    for n in numbers:
        assert ledger.state_bytes(n) == truth["states"][n], n
