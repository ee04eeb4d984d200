"""`publish` as a new user meets it (issue #20 §6): files a web server running as another user can read,
one copy of each file on disk, and a tree holding a directory, FIFO or symlink where a file goes is a named
error — never a traceback, never a hang. The real command line over a real ledger of bundles/."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.site import BUNDLES, FZ7, _env

FZ7_NUMBER = f"pith:2026:{FZ7}"


def run(tmp: Path, *args: str, umask: int = 0o022, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    old = os.umask(umask)  # the child inherits it
    try:
        return subprocess.run(
            [sys.executable, "-m", "pithledger.cli", *args],
            capture_output=True,
            text=True,
            env=_env(tmp),
            timeout=timeout,
        )
    finally:
        os.umask(old)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("publish-files")
    path = tmp / "ledger"
    assert run(tmp, "--ledger", str(path), "apply", str(BUNDLES)).returncode == 0
    yield path


def _publish(ledger: Path, out: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return run(out.parent, "--ledger", str(ledger), "publish", str(out), umask=umask)


def _modes(root: Path) -> set[tuple[str, int]]:
    return {("dir" if p.is_dir() else "file", stat.S_IMODE(p.stat().st_mode)) for p in root.rglob("*")}


def test_files_are_world_readable_under_the_usual_umask_and_follow_a_strict_one(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "tree"
    proc = _publish(ledger, out)
    assert proc.returncode == 0, proc.stderr
    assert _modes(out) == {("dir", 0o755), ("file", 0o644)}
    strict = tmp_path / "strict"
    assert _publish(ledger, strict, umask=0o077).returncode == 0
    assert _modes(strict) == {("dir", 0o700), ("file", 0o600)}


def test_one_copy_of_each_bundle_and_state_on_disk(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "tree"
    assert _publish(ledger, out).returncode == 0
    own = out / "pithledger" / "records" / "2026" / FZ7
    for same in (
        [
            own / "bundle.json",
            out / "pith" / FZ7 / "bundle.json",
            out / ".well-known" / "pith" / FZ7 / "bundle.json",
            out / "pith" / FZ7 / "export.jsonl",
        ],  # nobody cites FZ7: its export is its bundle
        [own / "state.json", out / "pith" / FZ7 / "state.json"],
        [out / "pith" / FZ7 / "events.json", out / "api" / "pith-number" / FZ7 / "events.json"],
    ):
        assert len({p.stat().st_ino for p in same}) == 1, same
        assert same[0].stat().st_nlink == len(same)
    # the bytes are those the ledger exports
    exported = run(tmp_path, "--ledger", str(ledger), "export", FZ7).stdout.splitlines()[0]
    assert (out / "pith" / FZ7 / "bundle.json").read_text() == exported + "\n"
    # a second publish changes nothing and keeps the links
    again = _publish(ledger, out)
    assert again.returncode == 0 and "0 records written" in again.stdout, again.stdout
    assert (own / "bundle.json").stat().st_nlink == 4


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
@pytest.mark.parametrize(
    "rel", [f"pith/{FZ7}/bundle.json", f"pith/{FZ7}/state.json", "index.html", "pithledger/digest.json"]
)
def test_something_else_where_a_file_goes_is_a_named_error(ledger: Path, tmp_path: Path, kind: str, rel: str) -> None:
    out = tmp_path / "tree"
    target = out / rel
    target.parent.mkdir(parents=True)
    if kind == "directory":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "elsewhere").write_text("not the mirror's")
        target.symlink_to(tmp_path / "elsewhere")
    proc = _publish(ledger, out)  # a FIFO opened for reading or writing would block here until the timeout
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error[cannot-write]: "), proc.stderr
    assert str(target) in proc.stderr and "Traceback" not in proc.stderr
    assert "hint: " in proc.stderr
    # nothing there was replaced or followed
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    elif kind == "symlink":
        assert target.is_symlink() and (tmp_path / "elsewhere").read_text() == "not the mirror's"
    else:
        assert target.is_dir()


def test_a_file_where_a_directory_goes_is_a_named_error(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "tree"
    out.mkdir()
    (out / "pith").write_text("a file")
    proc = _publish(ledger, out)
    assert proc.returncode == 1 and proc.stderr.startswith("error[cannot-write]: "), proc.stderr
    assert "Traceback" not in proc.stderr
