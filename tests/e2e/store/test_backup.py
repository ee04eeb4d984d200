"""``backup DEST`` and ``export --all`` (issue #33 item 5, spec/storage.md §5 and §9), through the real
command line: a copy made while another process applies is consistent and restores; an existing DEST and
a full disk are named errors that leave nothing behind; the whole-ledger export applied to an empty
ledger gives the same digest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.common import Result
from helpers.eventpool import ALICE, BOB, P, pool, t
from pithledger.records.bundle import write_bundle
from pithledger.records.events import make_event

BUNDLES = Path(__file__).resolve().parents[3] / "bundles"


def write_jsonl(path: Path, bundles: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(b) + "\n" for b in bundles))
    return path


def pool_bundles() -> list[dict[str, Any]]:
    """The event pool (records, citations between them, revocations, an orphan, invalid and unverified
    copies), one event a bundle."""
    return [write_bundle(str(e.get("subject_pith_number")), [e]) for e in pool()]


def citations(n: int) -> list[dict[str, Any]]:
    """``n`` distinct signed citations between the pool's records, 100 a bundle (each of one citing record)."""
    events = [
        make_event(
            "citation_signature",
            P[i // 100 % 3],
            {"cited_pith_number": P[(i // 100 + 1) % 3], "relation": "cites"},
            (ALICE, BOB)[i % 2],
            created_at=f"{t(5 + i // 86400 % 20)[:11]}{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        for i in range(n)
    ]
    return [write_bundle(events[i]["subject_pith_number"], events[i : i + 100]) for i in range(0, n, 100)]


def digest(cli: Any, ledger: Path) -> str:
    r = cli("--ledger", str(ledger), "digest")
    assert r.code == 0, r.err
    return r.out


def states(cli: Any, ledger: Path) -> list[str]:
    return [cli("--ledger", str(ledger), "state", p).out for p in P]


def leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.backup-"))


def test_a_backup_while_another_process_applies_is_consistent_and_restores(cli: Any, tmp_path: Path) -> None:
    ledger, copy = tmp_path / "L", tmp_path / "B"
    assert cli(
        "--ledger", str(ledger), "apply", str(BUNDLES), str(write_jsonl(tmp_path / "pool.jsonl", pool_bundles()))
    ).code in (0, 1)
    big = write_jsonl(tmp_path / "big.jsonl", citations(20_000))
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    apply = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", "--batch-size", "500", str(big)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        r = cli("--ledger", str(ledger), "backup", str(copy), "--json")
    finally:
        out, err = apply.communicate(timeout=300)
    assert r.code == 0, r.err
    done = r.json()
    assert done["verified"] is True and done["backup"] == str(copy)
    assert sorted(p.name for p in copy.iterdir()) == ["data.mdb", "display-metadata"]
    assert leftovers(tmp_path, "B") == []
    assert apply.returncode == 0, err.decode()
    # restore: the copy is a ledger; fsck (which finishes a pending derivation the copy held, as the next
    # writer would) finds nothing, and what the apply added after the snapshot catches it up
    check = cli("--ledger", str(copy), "fsck")
    assert check.code == 0, check.out + check.err
    assert int(cli("--ledger", str(copy), "log", "--json").out.count("\n")) == done["events"]
    assert cli("--ledger", str(copy), "apply", str(big)).code == 0
    assert digest(cli, copy) == digest(cli, ledger)
    assert states(cli, copy) == states(cli, ledger)


def test_an_existing_destination_is_refused_and_nothing_changes(cli: Any, tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert cli("--ledger", str(ledger), "apply", str(BUNDLES)).code == 0
    before = digest(cli, ledger)
    other = tmp_path / "other"
    assert cli("--ledger", str(other), "apply", str(BUNDLES / "demo-1709.09021.json")).code == 0
    empty, afile = tmp_path / "empty", tmp_path / "afile"
    empty.mkdir()
    afile.write_text("mine\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    for dest in (other, empty, afile, link):
        snapshot = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} if dest.is_dir() else None
        r = cli("--ledger", str(ledger), "backup", str(dest))
        assert r.code == 1 and "error[backup-exists]" in r.err and "Traceback" not in r.err, r.err
        if snapshot is not None:
            assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == snapshot
        assert leftovers(tmp_path, dest.name) == []
    assert afile.read_text() == "mine\n" and link.is_symlink() and not link.exists()
    assert digest(cli, ledger) == before


def test_a_backup_carries_the_remembered_checkpoints(cli: Any, tmp_path: Path) -> None:
    ledger, copy = tmp_path / "L", tmp_path / "B"
    assert cli("--ledger", str(ledger), "apply", str(BUNDLES)).code == 0
    memory = ledger / "checkpoints"
    (memory / "evidence").mkdir(parents=True)
    name = "ab" * 32
    (memory / f"{name}.json").write_bytes(b'{"memory_type":"pithledger_seen_checkpoint"}\n')
    (memory / f"{name}.lock").write_bytes(b"")
    (memory / "evidence" / "fork-1.json").write_bytes(b"{}\n")
    (memory / "evidence" / ".fork-2.json.tmp").write_bytes(b"{")  # a write under way: not a backup's
    r = cli("--ledger", str(ledger), "backup", str(copy))
    assert r.code == 0, r.err
    assert (copy / "checkpoints" / f"{name}.json").read_bytes() == (memory / f"{name}.json").read_bytes()
    assert (copy / "checkpoints" / "evidence" / "fork-1.json").read_bytes() == b"{}\n"
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == [f"{name}.json", "evidence"]
    assert sorted(p.name for p in (copy / "checkpoints" / "evidence").iterdir()) == ["fork-1.json"]


def test_a_full_disk_leaves_no_destination(cli: Any, tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert cli("--ledger", str(ledger), "apply", str(BUNDLES)).code == 0
    before = digest(cli, ledger)
    disk = tmp_path / "disk"
    disk.mkdir()
    # smaller than the compacted copy (about 330 KB): LMDB's copy meets ENOSPC half way
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        r: Result = cli("--ledger", str(ledger), "backup", str(disk / "B"))
        # named as every full disk is (spec/storage.md §7.4): which disk, its free space, about what the copy needs
        assert r.code == 1 and "error[disk-full]" in r.err and "Traceback" not in r.err, r.err
        assert f"the disk holding {disk} is full" in r.err
        assert list(disk.iterdir()) == []  # no DEST, no temporary directory
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert digest(cli, ledger) == before


def test_export_all_applied_to_an_empty_ledger_gives_the_same_digest(cli: Any, tmp_path: Path) -> None:
    ledger, again = tmp_path / "L", tmp_path / "again"
    inputs = write_jsonl(tmp_path / "pool.jsonl", pool_bundles() + citations(300))
    cli("--ledger", str(ledger), "apply", str(BUNDLES), str(inputs))
    out = tmp_path / "all.jsonl"
    r = cli("--ledger", str(ledger), "export", "--all", "-o", str(out))
    assert r.code == 0, r.err
    assert out.read_bytes() == cli("--ledger", str(ledger), "export", "--all").out.encode()
    lines = out.read_text().splitlines()
    assert len(lines) == len({json.loads(line)["pith_number"] for line in lines})  # one bundle a record (all small)
    # every valid event once: no record's bundle repeats another's (citations are their citer's own events)
    ids = [json.dumps(e, sort_keys=True) for line in lines for e in json.loads(line)["events"]]
    assert len(ids) == len(set(ids))
    cli("--ledger", str(again), "apply", str(out))
    assert digest(cli, again) == digest(cli, ledger)
    assert states(cli, again) == states(cli, ledger)
    assert cli("--ledger", str(again), "export", "--all").out == out.read_text()


@pytest.mark.parametrize("args", [("export",), ("export", "--all", P[0])])
def test_export_takes_an_id_or_all(cli: Any, tmp_path: Path, args: tuple[str, ...]) -> None:
    assert cli("--ledger", str(tmp_path / "L"), "apply", str(BUNDLES)).code == 0
    r = cli("--ledger", str(tmp_path / "L"), *args)
    assert r.code == 2 and "error[usage]" in r.err
