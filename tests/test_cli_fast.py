"""`state` answered without typer (cli/_fast.py) says exactly what the full command line says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BUNDLES = Path(__file__).parent.parent / "bundles"
FULL = "import sys; sys.argv[0] = 'pithledger'; from pithledger.cli import full; full()"


def run(args: list[str], cwd: Path, full: bool) -> tuple[int, str, str]:
    cmd = [sys.executable, "-c", FULL, *args] if full else [sys.executable, "-m", "pithledger.cli", *args]
    env = {k: v for k, v in os.environ.items() if k != "PITHLEDGER_LEDGER"} | {"XDG_DATA_HOME": str(cwd / "xdg")}
    proc = subprocess.run(cmd, capture_output=True, cwd=cwd, env=env, timeout=60)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture(scope="module")
def ledger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fast")
    subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(root / "L"), "apply", str(BUNDLES)],
                   capture_output=True, check=True, timeout=120)
    return root


CASES = [
    ["--ledger", "L", "state", "2605.00424"],
    ["state", "2605.00424", "--ledger", "L"],
    ["state", "--ledger=L", "FZ7AO632", "--json"],
    ["-q", "--ledger", "L", "state", "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"],
    ["--ledger", "L", "state", "2605.00424v1"],  # not-found naming the versions held
    ["--ledger", "L", "state", "hello"],  # malformed-id
    ["--ledger", "L", "state", "pith:1999:AAAAAAAAAAAAAAAAAAAAAAAAAA"],
    ["--ledger", "nowhere", "state", "2605.00424"],  # no-ledger
    ["state", "2605.00424"],  # the default ledger (absent here)
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_fast_state_equals_the_full_command_line(ledger_dir: Path, args: list[str]) -> None:
    assert run(args, ledger_dir, full=False) == run(args, ledger_dir, full=True)


def test_other_shapes_go_to_the_full_command_line(ledger_dir: Path) -> None:
    from pithledger.cli._fast import _parse

    for args in (["state"], ["state", "a", "b"], ["state", "X", "--view"], ["--help"], ["state", "--", "X"],
                 ["--ledger", "", "state", "X"], ["log"], ["--ledger"]):
        assert _parse(args) is None, args
    assert run(["--ledger", "L", "state", "2605.00424", "--view"], ledger_dir, full=False)[1].startswith("pith:2026:FZ7AO632")
