"""A full disk, as a user meets it (issue #41 §3, §10): on a real 3 MB tmpfs mounted for the test, every command
that opens or grows an LMDB environment (the ledger, its display metadata, pull's cache, fsck's scratch, a
backup) ends with a named error (``disk-full``) or does its work elsewhere, never dies of a signal (SIGBUS:
LMDB writes its lock file through a shared map, and a sparse page on a full tmpfs cannot be had) nor with a
traceback. Skipped only where this process may not mount (not root)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.clikit import _env
from helpers.common import ROOT

BUNDLES = ROOT / "bundles"
#: The file a backup's staging directory holds while it runs (spec/storage.md §9).
STAGING_MARK = ".pithledger-backup-staging"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs of the test's own, unmounted after it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave_kib: int) -> None:
    """Leave ``leave_kib`` KiB free on ``disk`` (one file takes the rest)."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    st = os.statvfs(disk)
    free = st.f_bfree * st.f_frsize - leave_kib * 1024
    if free > 0:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, free)
        finally:
            os.close(fd)


def _cli(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(cwd, **extra),
        timeout=120,
        check=False,
    )


def _named(done: subprocess.CompletedProcess[str], code: str = "disk-full", exit: int = 1) -> None:
    """The run ended by itself (no signal), with ``error[code]`` and no traceback."""
    assert done.returncode >= 0, f"killed by {signal.Signals(-done.returncode).name}: {done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert f"error[{code}]" in done.stderr, done.stderr
    assert done.returncode == exit, done.stderr


@pytest.mark.parametrize("free_kib", [0, 16, 48, 200])
def test_apply_into_a_new_ledger_on_a_full_disk_is_disk_full(disk: Path, tmp_path: Path, free_kib: int) -> None:
    """0 KiB: the lock file's first page (a SIGBUS before); 16: the new ledger's first commit (a DiskError
    traceback before); 48, 200: a batch and the derivation cut short (LMDB's EIO, "short write")."""
    _fill(disk, free_kib)
    done = _cli(tmp_path, "--ledger", str(disk / "L"), "apply", str(BUNDLES))
    _named(done)
    assert "KiB free" in done.stderr  # how much is left, by name of its disk


def test_display_metadata_on_a_full_disk_is_disk_full(disk: Path, tmp_path: Path) -> None:
    """The issue's case: a ledger filled its disk, then ``apply bundles/`` opens the display metadata's new
    environment (records/display.py): its lock file's page was a SIGBUS (exit 135, nothing on stderr)."""
    ledger = disk / "L"
    inputs = tmp_path / "in"
    inputs.mkdir()
    for bundle in sorted(BUNDLES.glob("*.json*")):
        shutil.copy(bundle, inputs)
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(inputs)).returncode == 0
    _fill(disk, 0)
    done = _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES))
    _named(done)
    assert "display metadata" in done.stderr


_OPEN_SIDECAR = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pithledger.errors import PithledgerError
    from pithledger.mirror.pull import PullCache
    from pithledger.store.sidecars import MetadataStore
    try:
        PullCache(Path(sys.argv[2])) if sys.argv[1] == "pull" else MetadataStore(Path(sys.argv[2]), readonly=False)
    except PithledgerError as exc:
        print(exc.code, exc.message)
""")


@pytest.mark.parametrize("which", ["pull", "display"])
def test_a_sidecar_opened_on_a_full_disk_is_disk_full(disk: Path, tmp_path: Path, which: str) -> None:
    ledger = disk / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1709.09021.json")).returncode == 0
    _fill(disk, 0)
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_SIDECAR, which, str(ledger)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert done.stdout.startswith("disk-full "), done.stdout


@pytest.mark.parametrize("free_kib", [0, 32, 48, 64])
def test_fsck_whose_scratch_fills_its_disk_goes_on_in_the_temporary_directory(
    disk: Path, tmp_path: Path, free_kib: int
) -> None:
    """fsck's scratch beside the ledger filled the disk at 32-64 KiB free (`mdb_txn_commit: Input/output
    error`, exit 1: a verdict of faults it never found); it now moves to the system's temporary directory,
    as a scratch that cannot be made there does (0 KiB)."""
    ledger = disk / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES)).returncode == 0
    _fill(disk, free_kib)
    done = _cli(tmp_path, "--ledger", str(ledger), "fsck")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fsck: ok"), done.stdout


def test_fsck_that_cannot_check_exits_3_not_1(disk: Path, tmp_path: Path) -> None:
    """A ledger whose lock file is gone, on a full disk: opening it needs a page of a new lock file (a
    SIGBUS before). fsck names it and exits 3 (could not check), not 1 (faults found); so does a missing ledger."""
    ledger = disk / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES)).returncode == 0
    (ledger / "lock.mdb").unlink()
    _fill(disk, 0)
    _named(_cli(tmp_path, "--ledger", str(ledger), "fsck"), exit=3)
    _named(_cli(tmp_path, "--ledger", str(tmp_path / "none"), "fsck"), code="no-ledger", exit=3)


@pytest.mark.parametrize("free_kib", [4, 16, 48])
def test_verify_log_whose_scratch_disk_fills_is_disk_full_not_a_traceback(
    disk: Path, tmp_path: Path, free_kib: int
) -> None:
    """verify-log's scratch (in TMPDIR) on a disk with 16 KiB left: its second table's open_db commits, and
    that commit's EIO escaped as `lmdb.Error: mdb_txn_commit: Input/output error`, a traceback; 4 and 48 KiB
    were named already. Now every step of its opening is named as disk-full."""
    ledger, tree = tmp_path / "L", tmp_path / "pub"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES)).returncode == 0
    assert _cli(tmp_path, "keys", "new", "k").returncode == 0
    assert _cli(tmp_path, "--ledger", str(ledger), "publish", "--key", "k", str(tree)).returncode == 0
    _fill(disk, free_kib)
    _named(_cli(tmp_path, "verify-log", str(tree), TMPDIR=str(disk)))


def test_backup_to_a_full_disk_is_disk_full_and_leaves_nothing(disk: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES)).returncode == 0
    _fill(disk, 64)
    done = _cli(tmp_path, "--ledger", str(ledger), "backup", str(disk / "copy"))
    _named(done)
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_a_killed_backups_directory_is_cleared_by_the_next_backup(tmp_path: Path) -> None:
    """A backup killed half way leaves its temporary directory (no one else removes it); the next backup
    beside it removes it once its process is gone and its lock free — and never a running backup's."""
    ledger = tmp_path / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES)).returncode == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".old.backup-{dead.pid}-abc123"  # as a killed backup leaves it
    (stale / "checkpoints").mkdir(parents=True)
    (stale / "data.mdb").write_bytes(b"\0" * 4096)
    (stale / STAGING_MARK).touch()
    live = tmp_path / f".other.backup-{os.getpid()}-xyz789"  # a running backup's (this process is alive)
    live.mkdir()
    foreign = tmp_path / ".notes.backup-kept"  # not named as ours
    foreign.mkdir()
    done = _cli(tmp_path, "--ledger", str(ledger), "--json", "backup", str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    assert not stale.exists()
    assert live.is_dir() and foreign.is_dir()
    assert f'"cleared":[".old.backup-{dead.pid}-abc123"]' in done.stdout.replace(" ", "")


def test_a_users_directory_named_like_a_killed_backups_is_never_cleared(tmp_path: Path) -> None:
    """Only what a backup made is cleared: a directory of the user's whose name has the form (a dead pid, a
    suffix: `.photos.backup-2023-jan`) but no staging mark, and a symlink so named to a marked directory, are
    left with all they hold. Before, the next backup rmtree'd both user directories (exit 0, "cleared")."""
    ledger = tmp_path / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1709.09021.json")).returncode == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    mine = [tmp_path / ".photos.backup-2023-jan", tmp_path / f".bashrc.backup-{dead.pid}-old"]
    for path in mine:
        path.mkdir()
        (path / "kept.txt").write_text("the user's")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / STAGING_MARK).touch()
    (elsewhere / "kept.txt").write_text("the user's")
    (tmp_path / f".link.backup-{dead.pid}-abc123").symlink_to(elsewhere)
    done = _cli(tmp_path, "--ledger", str(ledger), "--json", "backup", str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    assert '"cleared":[]' in done.stdout.replace(" ", ""), done.stdout
    for path in (*mine, elsewhere):
        assert (path / "kept.txt").read_text() == "the user's"
    assert not (tmp_path / "copy" / STAGING_MARK).exists()  # the mark never reaches the backup


def test_a_read_only_ledger_is_named_so_not_sent_to_fsck(disk: Path, tmp_path: Path) -> None:
    """A ledger on a disk mounted read-only: a writer's open said `ledger-error` and "run fsck", which
    finds nothing; it is `read-only-ledger`, with what to do; a reader still reads it."""
    ledger = disk / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1709.09021.json")).returncode == 0
    if subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=False).returncode != 0:
        pytest.skip("cannot remount read-only here")
    done = _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1905.08204.json"))
    _named(done, code="read-only-ledger")
    assert "fsck" not in done.stderr
    assert _cli(tmp_path, "--ledger", str(ledger), "log").returncode == 0


def test_a_reader_refused_another_users_ledger_is_told_what_a_reader_needs(tmp_path: Path) -> None:
    """A ledger owned by another user, read by a process without root's file-permission override: LMDB's
    readers write their slot in lock.mdb, so state and digest are refused too. Before, their hint said
    "reading commands work as they are" (and to back it up, which opens it the same way); it now says what a
    reader needs. fsck of it could not check: exit 3, not 1."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to run a command without CAP_DAC_OVERRIDE")
    ledger = tmp_path / "L"
    assert _cli(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1709.09021.json")).returncode == 0
    for path in (ledger, *ledger.rglob("*")):
        os.chown(path, 65534, 65534)
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    for args, exit in ((("digest",), 1), (("state", "1709.09021"), 1), (("fsck",), 3)):
        done = subprocess.run(
            [*drop, sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_env(tmp_path),
            timeout=120,
            check=False,
        )
        _named(done, code="read-only-ledger", exit=exit)
        assert "reader slot" in done.stderr and "reading commands work as they are" not in done.stderr, done.stderr
