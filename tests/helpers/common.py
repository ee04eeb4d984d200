"""The real Pith vectors and fixtures, and what the ``cli`` fixture (tests/conftest.py) returns."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pithledger.store import StoreTuning

#: tests/ and the repository: the test files live at different depths, so they name paths from these.
TESTS = Path(__file__).parent.parent
ROOT = TESTS.parent
VECTORS = TESTS / "vectors"
FIXTURES = TESTS / "fixtures"
SPEC_VECTORS = ROOT / "spec" / "vectors"

#: Examples for properties that build real LMDB ledgers per example (each costs milliseconds).
LMDB_EXAMPLES = 40 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 1000


def derive_on_workers(on: bool = True, **more: Any) -> StoreTuning:
    """The tuning (``Ledger(..., tuning=)``) with which a ledger derives every finishing step's states,
    and fsck checks the log and the states, on worker processes in parts of two (the path big runs
    take), instead of in place (the path of small ones); ``on`` False: the defaults. ``more``: other
    fields to set."""
    from pithledger.store import StoreTuning

    return StoreTuning(parallel_states=1, derive_part_records=2, fsck_part=2, **more) if on else StoreTuning(**more)


def load_jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (VECTORS / name).read_text().splitlines() if line.strip()]


PITH_RECORDS = load_jsonl("pith-records.jsonl")
PITH_RECEIPTS = load_jsonl("pith-receipts.jsonl")
TEXT_CANON = load_jsonl("text-canon.jsonl")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)
