"""Issue #36: the memory of the whole-ledger commands does not grow with the ledger. fsck and rebuild --force
run through the CLI on a ledger A and on a ledger B of 10 x its events; the peak anonymous memory of the
command's process and of its workers on B stays within a small margin of A's. Before, fsck held every
expected index entry in Python sets (~400 bytes per citation): B's peak was A's plus ~50 MiB.
(fsck --reverify reads the ledger as fsck does; only its workers verify signatures too.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import scale
from helpers.clikit import _env

#: Records (of 20 events) of ledger A; B has ten times as many. A holds more than one of rebuild's batches
#: (10 000 events), and enough log entries and records that every pass of both runs on the workers.
RECORDS = 600
#: What B's peak may exceed A's by: allocator arenas and one more part in flight, not a per-event share. Loose
#: enough for a busy CI machine (B measured A + 5 MiB for fsck, A + 11 MiB for rebuild), tight enough for what
#: it guards: fsck's per-event sets made B A + 50 MiB.
MARGIN_KIB = 8 * 1024


def _ledger(tmp: Path, name: str, records: int) -> Path:
    bundles = tmp / f"{name}.jsonl"
    scale.papers(bundles, records)
    path = tmp / name
    got = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "apply", str(bundles), "-q", "--json"],
        capture_output=True,
        text=True,
        env=_env(tmp),
        timeout=300,
    )
    assert got.returncode == 0, got.stderr
    bundles.unlink()
    return path


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("scale")
    return tmp, _ledger(tmp, "A", RECORDS), _ledger(tmp, "B", 10 * RECORDS)


def _within(small: tuple[int, int], big: tuple[int, int]) -> bool:
    return big[0] <= small[0] * 1.2 + MARGIN_KIB


@pytest.mark.parametrize("command", [["fsck"], ["rebuild", "--force"]], ids=" ".join)
def test_peak_anonymous_memory_does_not_grow_with_the_ledger(
    ledgers: tuple[Path, Path, Path], command: list[str]
) -> None:
    tmp, a, b = ledgers
    runs = {}
    for path in (a, b):
        runs[path] = run = scale.peak_memory(["--ledger", str(path), *command], _env(tmp))
        assert run["rc"] == 0, run["err"]
        if command[0] == "fsck":
            assert run["out"].startswith("fsck: ok"), run["out"]
    small, big = runs[a], runs[b]
    seen = f"A {small['main']} workers {small['workers']}, B {big['main']} workers {big['workers']} (KiB anon, file)"
    print(" ".join(command), seen)
    assert _within(small["main"], big["main"]), seen
    assert _within(small["workers"], big["workers"]), seen
