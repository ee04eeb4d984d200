"""Shared fixtures: the real Pith vectors and a runner for the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pithledger.store import StoreTuning

VECTORS = Path(__file__).parent / "vectors"
FIXTURES = Path(__file__).parent / "fixtures"
SPEC_VECTORS = Path(__file__).parent.parent / "spec" / "vectors"

# Property depth: "ci" keeps the suite quick; "deep" is for a long run by hand:
#   HYPOTHESIS_PROFILE=deep pytest tests
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
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


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the real ``pithledger`` entry point in a subprocess, isolated from the user's files."""
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    env.pop("PITHLEDGER_KEYS", None)

    def run(*args: str, input: bytes | None = None, cwd: Path | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", *args],
            input=input,
            capture_output=True,
            env=env,
            cwd=cwd or tmp_path,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run
