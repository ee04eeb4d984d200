"""`state` answered without typer (cli/_fast.py) says exactly what the full command line says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.common import ROOT

BUNDLES = ROOT / "bundles"
FULL = "import sys; sys.argv[0] = 'pithledger'; from pithledger.cli import full; full()"


def run(args: list[str], cwd: Path, full: bool) -> tuple[int, str, str]:
    cmd = [sys.executable, "-c", FULL, *args] if full else [sys.executable, "-m", "pithledger.cli", *args]
    env = {k: v for k, v in os.environ.items() if k != "PITHLEDGER_LEDGER"} | {"XDG_DATA_HOME": str(cwd / "xdg")}
    proc = subprocess.run(cmd, capture_output=True, cwd=cwd, env=env, timeout=60)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture(scope="module")
def ledger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fast")
    subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(root / "L"), "apply", str(BUNDLES)],
        capture_output=True,
        check=True,
        timeout=120,
    )
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

    for args in (
        ["state"],
        ["state", "a", "b"],
        ["state", "X", "--view"],
        ["--help"],
        ["state", "--", "X"],
        ["--ledger", "", "state", "X"],
        ["log"],
        ["--ledger"],
    ):
        assert _parse(args) is None, args
    assert run(["--ledger", "L", "state", "2605.00424", "--view"], ledger_dir, full=False)[1].startswith(
        "pith:2026:FZ7AO632"
    )


#: What `state` must not import: the merge algorithm, the writer's code, the transparency log, the bundle
#: and event code (issue #23: `state` stays within 2 x the bare import of lmdb, msgspec and nacl).
NOT_FOR_STATE = (
    "pithledger.merge",
    "pithledger.records.events",
    "pithledger.records.bundle",
    "pithledger.store.tlog_tables",
    "pithledger.tlog.tiles",
    "pithledger.tlog.note",
    "pithledger.store.log",
    "pithledger.store.views",
    "pithledger.store.rebuild",
    "pithledger.store.fsck",
    "pithledger.fanout",
    "typer",
)
LOADED = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(sorted(sys.modules)) + '\\n')); "
    "sys.argv = ['pithledger'] + sys.argv[1:]; from pithledger.cli import main; main()"
)


def _loaded(args: list[str], cwd: Path) -> tuple[str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", LOADED, *args],
        capture_output=True,
        cwd=cwd,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "PITHLEDGER_LEDGER"} | {"XDG_DATA_HOME": str(cwd / "xdg")},
    )
    err = proc.stderr.decode()
    return proc.stdout.decode(), set(err.rsplit("LOADED ", 1)[1].split())


@pytest.mark.parametrize("ident", ["2605.00424", "FZ7AO632", "hello"])
def test_state_imports_nothing_of_the_writer_or_the_merge(ledger_dir: Path, ident: str) -> None:
    _, loaded = _loaded(["--ledger", "L", "state", ident], ledger_dir)
    assert "pithledger.store.lookup" in loaded  # the path under test
    assert not loaded.intersection(NOT_FOR_STATE), sorted(loaded.intersection(NOT_FOR_STATE))


def test_the_state_of_a_record_whose_derivation_is_pending_is_computed_from_its_events(tmp_path: Path) -> None:
    """A killed apply leaves batches committed and their derivation pending: `state` answers from the
    events held (a full ledger handle), exactly as the full command line, and as once they are derived
    (by its long Pith Number: the lookup indexes are those of the last finished run)."""
    import json

    from pithledger.records.bundle import read_bundle
    from pithledger.store import Ledger

    with Ledger(tmp_path / "L", create=True) as ledger:
        for f in sorted(BUNDLES.glob("*.json")):
            ledger.apply_batch([read_bundle(json.loads(f.read_text()))], defer=True)
        assert ledger.pending()
    fast = run(["--ledger", "L", "state", "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"], tmp_path, full=False)
    assert fast[0] == 0 and fast == run(
        ["--ledger", "L", "state", "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"], tmp_path, full=True
    )
    _, loaded = _loaded(["--ledger", "L", "state", "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"], tmp_path)
    assert "pithledger.merge" in loaded  # (computed from the events: the fallback was taken)
    with Ledger(tmp_path / "L") as ledger:
        ledger.finish()
    assert run(["--ledger", "L", "state", "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"], tmp_path, full=False) == fast
