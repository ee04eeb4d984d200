"""Adversarial review (rev-a) of ``backup DEST`` (spec/storage.md §9): faults found, each a failing test
until fixed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BUNDLES = Path(__file__).resolve().parents[3] / "bundles"
MEMORY = "a" * 64  # a remembered checkpoint's file name stem (checkpoints/<sha256 hex>.json)


def _ledger(cli: Any, tmp_path: Path) -> Path:
    ledger = tmp_path / "L"
    assert cli("--ledger", str(ledger), "apply", str(BUNDLES)).code == 0
    return ledger


def test_a_backup_into_the_ledger_directory_never_copies_itself(cli: Any, tmp_path: Path) -> None:
    """``cd L && pithledger --ledger . backup snap``: the temporary directory was built inside L, where the
    sidecar scan took it (it holds a data.mdb) for a sidecar of L and copied it into itself; and the DEST
    left in L was then a "sidecar" carried by every later backup (each one nesting all the earlier)."""
    ledger = _ledger(cli, tmp_path)
    before = sorted(p.name for p in ledger.iterdir())
    r = cli("--ledger", str(ledger), "backup", str(ledger / "snap"), "--json")
    assert r.code != 0 and "backup-failed" in r.err, (r.code, r.out, r.err)
    assert sorted(p.name for p in ledger.iterdir()) == before  # nothing written into the ledger


def test_a_backup_does_not_wait_without_bound_for_a_sync_holding_an_origin_lock(cli: Any, tmp_path: Path) -> None:
    """A sync holds its origin's lock (checkpoints/<hash>.lock) for its whole run, up to --deadline (an hour by
    default, a hanging source). Backup took that lock with no time limit to copy the remembered checkpoint:
    the backup of a ledger being synced from a slow source waited as long as the sync, silently."""
    ledger = _ledger(cli, tmp_path)
    (ledger / "checkpoints").mkdir()
    (ledger / "checkpoints" / f"{MEMORY}.json").write_text("{}\n")
    fd = os.open(ledger / "checkpoints" / f"{MEMORY}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a sync run of that origin does, from its check to its end
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "backup", str(tmp_path / "B")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("backup still waiting for a sync's origin lock after 20 s") from None
    finally:
        os.close(fd)
    assert proc.returncode == 0 or b"error[" in proc.stderr


def test_a_backup_never_creates_files_outside_the_ledger_through_a_lock_symlink(cli: Any, tmp_path: Path) -> None:
    """checkpoints/<hash>.lock a symlink to a path outside the ledger: backup (which must only read the ledger,
    and refuses symlinked memory files) opened it with O_CREAT, following the link, and created the target."""
    ledger = _ledger(cli, tmp_path)
    (ledger / "checkpoints").mkdir()
    (ledger / "checkpoints" / f"{MEMORY}.json").write_text("{}\n")
    outside = tmp_path / "outside" / "created-by-backup"
    outside.parent.mkdir()
    (ledger / "checkpoints" / f"{MEMORY}.lock").symlink_to(outside)
    started = time.monotonic()
    cli("--ledger", str(ledger), "backup", str(tmp_path / "B"))
    assert time.monotonic() - started < 60
    assert not outside.exists()
