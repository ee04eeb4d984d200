"""The mirror's transparency log as stored (ledger/store/tlog_tables.py, spec/storage.md §2.2): the tree
arithmetic on a raw LMDB environment, then the ledger's write path, upgrade, fsck and rebuild.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/store/test_translog.py."""

from __future__ import annotations

import json  # noqa: E402
import shutil
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path
from typing import Any  # noqa: E402

import lmdb
import pytest

import pithledger.store.tlog_tables as T
from helpers.common import FIXTURES  # noqa: E402
from helpers.translog import NUMBER, REMEDY, assert_tlog_is_the_log, attestations, raw_put, record_created, small_ledger
from pithledger import store  # noqa: E402
from pithledger.errors import TlogNotBuilt
from pithledger.records.canonical import canonical_bytes  # noqa: E402
from pithledger.store import Ledger  # noqa: E402
from pithledger.store.rebuild import rebuild  # noqa: E402


def test_bad_input_through_the_cli_writes_no_tlog_entry(tmp_path: Path, cli: Any) -> None:
    led = tmp_path / "l"
    good = tmp_path / "good.json"
    good.write_bytes(
        canonical_bytes(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": NUMBER,
                "events": [record_created()],
            }
        )
    )
    assert cli("--ledger", str(led), "apply", str(good)).code == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        canonical_bytes(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": NUMBER,
                "events": attestations(3),
            }
        )
        + b"\n{not json\n"
    )
    done = cli("--ledger", str(led), "apply", str(bad))
    assert done.code == 1 and "events" not in done.out
    with Ledger(led, readonly=True) as ledger:
        assert ledger.tlog_size() == 1
        assert_tlog_is_the_log(ledger)


def write_lines(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_bytes(
        b"".join(
            canonical_bytes(
                {
                    "bundle_type": "pith_open_graph_bundle",
                    "bundle_version": "1.0",
                    "pith_number": e["subject_pith_number"],
                    "events": [e],
                }
            )
            + b"\n"
            for e in events
        )
    )
    return path


def apply_cmd(ledger: Path, data: Path, batch: int = 50) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pithledger.cli",
        "--ledger",
        str(ledger),
        "apply",
        "--batch-size",
        str(batch),
        "-q",
        str(data),
    ]


def test_a_killed_apply_leaves_log_and_tlog_agreeing(tmp_path: Path) -> None:
    """SIGKILL lands while the apply writes: the test watches the ledger (read-only, as any reader may) and kills
    the writer once some but not all batches are committed, so how loaded the machine is does not decide it."""
    data = write_lines(tmp_path / "in.jsonl", [record_created()] + attestations(1500))
    killed_mid_run = 0
    for trial, wanted in enumerate((300, 700, 100, 1100)):
        if killed_mid_run >= 2:
            break
        led = tmp_path / f"l{trial}"
        proc = subprocess.Popen(apply_cmd(led, data), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and _logged(led) < wanted:
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not (led / "data.mdb").exists():
            continue
        with Ledger(led) as ledger:
            logged = ledger.counts()["events"]
            killed_mid_run += 0 < logged < 1501
            assert_tlog_is_the_log(ledger)
            ledger.finish()
            assert ledger.fsck() == []
        assert subprocess.run(apply_cmd(led, data), capture_output=True).returncode == 0
        with Ledger(led, readonly=True) as ledger:
            assert ledger.tlog_size() == 1501
            assert_tlog_is_the_log(ledger)
    assert killed_mid_run >= 1  # the kills did land while the apply wrote


def _logged(ledger: Path) -> int:
    """How many events a reader sees in the ledger now (0 while it is not yet created)."""
    try:
        with Ledger(ledger, readonly=True) as held:
            return int(held.counts()["events"])
    except Exception:  # not created yet, or created but not yet complete: nothing logged to see
        return 0


def test_two_writers_in_two_processes(tmp_path: Path) -> None:
    led = tmp_path / "l"
    events = [record_created()] + attestations(800)
    a = write_lines(tmp_path / "a.jsonl", events[:500])
    b = write_lines(tmp_path / "b.jsonl", events[300:])  # overlapping: each dedups against the other
    assert (
        subprocess.run(
            apply_cmd(led, write_lines(tmp_path / "first.jsonl", events[:1])), capture_output=True
        ).returncode
        == 0
    )
    procs = [
        subprocess.Popen(apply_cmd(led, f, batch=40), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for f in (a, b)
    ]
    for p in procs:
        assert p.wait(timeout=300) in (0,), p.stderr.read() if p.stderr else b""
    with Ledger(led, readonly=True) as ledger:
        assert ledger.tlog_size() == 801
        assert_tlog_is_the_log(ledger)
        assert ledger.fsck() == []


def test_fsck_names_a_tampered_hash_through_the_cli(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "l"
    small_ledger(path)
    raw_put(path, T.HASHES_DB, T.position(2, 3).to_bytes(8, "big"), b"\x01" * 32)
    done = cli("--ledger", str(path), "fsck")
    assert done.code == 1
    assert f"MISMATCH transparency log hash at level 2, index 3 differs from its recomputation{REMEDY}\n" in done.out
    assert "fsck: 1 problem " in done.err
    repaired = cli("--ledger", str(path), "fsck", "--repair")  # fsck repairs no tlog: it names it, and says rebuild
    assert repaired.code == 1 and "level 2, index 3" in repaired.out


def tlog_of(path: Path) -> tuple[list[bytes], bytes]:
    with Ledger(path, readonly=True) as ledger:
        return ledger.tlog_entries(0, ledger.tlog_size()), ledger.tlog_root()


def test_rebuild_reproduces_the_tlog(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "l"
    small_ledger(path)
    before = tlog_of(path)
    done = rebuild(path, force=True)
    assert done["tlog"] == {
        "old_size": len(before[0]),
        "size": len(before[0]),
        "extends_old": True,
        "first_difference": None,
    }
    assert done["tlog_history_changed"] is False
    assert tlog_of(path) == before
    out = cli("--ledger", str(path), "rebuild", "--force")
    assert out.code == 0 and "WARNING" not in out.out + out.err and tlog_of(path) == before


def test_rebuild_says_loudly_when_the_published_history_changes(tmp_path: Path, cli: Any) -> None:
    """An event the log held that is no longer valid (here: its bytes altered in the log, as a new
    merge version that refuses it would see it) leaves the rebuilt log: the tlog is not an extension."""
    path = tmp_path / "l"
    small_ledger(path)
    old_entries, _ = tlog_of(path)
    import msgspec

    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        log = env.open_db(b"log", txn=txn, create=False)
        seq, event, facts, eid = msgspec.msgpack.decode(txn.get((30).to_bytes(8, "big"), db=log))
        value = json.loads(event)
        value["created_at"] = "2026-12-31T00:00:00Z"  # its signature no longer verifies
        txn.put((30).to_bytes(8, "big"), msgspec.msgpack.encode([seq, canonical_bytes(value), facts, eid]), db=log)
    env.close()
    out = cli("--json", "--ledger", str(path), "rebuild", "--force", "--reverify")
    assert out.code == 0, out.err
    doc = out.json()
    assert doc["tlog_history_changed"] is True
    assert doc["tlog"]["first_difference"] == 30 and doc["tlog"]["extends_old"] is False
    new_entries, _ = tlog_of(path)
    assert new_entries[:30] == old_entries[:30] and len(new_entries) == len(old_entries) - 1
    # the human output says so, naming the index and what the operator must do
    assert cli("--ledger", str(tmp_path / "l.v3-backup"), "fsck").code == 1  # the backup is the tampered one
    again = tmp_path / "again"
    import shutil

    shutil.copytree(tmp_path / "l.v3-backup", again)
    text = cli("--ledger", str(again), "rebuild", "--force", "--reverify")
    assert text.code == 0
    assert "WARNING" in text.err and "entry 30" in text.err and "new origin" in text.err


LAYOUT4 = FIXTURES / "layout4-ledger.tar.gz"  # made by main at 1ce2eb0 (tests/fixtures/make_layout4_ledger.py)


def layout4(tmp_path: Path) -> Path:
    """A layout-4 ledger of this merge version: the fixture (layout 4, written under merge v2 by main at 1ce2eb0)
    rebuilt under this version, then taken back to layout 4 — layout 5 less its two tlog databases, exactly what
    the in-place upgrade adds (spec/storage.md §2). Under v3 no older ledger is upgraded in place: each is rebuilt
    (its merge version changed), so the upgrade is exercised on the shape it would meet."""
    with tarfile.open(LAYOUT4) as tar:
        tar.extractall(tmp_path, filter="data")
    path = tmp_path / "ledger"
    rebuild(path)
    for old in tmp_path.glob("ledger.*-backup"):
        shutil.rmtree(old)
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        for name in (T.ENTRIES_DB, T.HASHES_DB):
            txn.drop(env.open_db(name, txn=txn, create=False), delete=True)
        txn.put(b"layout_version", b"4", db=env.open_db(b"meta", txn=txn, create=False))
    env.close()
    return path


def layout_of(path: Path) -> bytes:
    env = lmdb.open(str(path), max_dbs=32, readonly=True)
    with env.begin() as txn:
        layout = bytes(txn.get(b"layout_version", db=env.open_db(b"meta", txn=txn, create=False)))
    env.close()
    return layout


def test_a_layout_4_ledger_is_read_as_it_is_and_upgraded_by_the_first_writer(tmp_path: Path, cli: Any) -> None:
    path = layout4(tmp_path)
    assert layout_of(path) == b"4"
    with Ledger(path, readonly=True) as reader:
        counts = reader.counts()
        assert counts["events"] == 65 and counts["pending"] == 0
        states = {s: reader.state_bytes(s) for s in reader.subjects()}
        with pytest.raises(TlogNotBuilt, match="layout 4"):
            reader.tlog_size()
        with pytest.raises(TlogNotBuilt):
            reader.tlog_index("sha256:" + "00" * 32)
        assert reader.fsck() == []  # a reader checks what there is: the tlog is not built yet, not damaged
    assert cli("--ledger", str(path), "log").code == 0  # queries read it read-only ...
    assert layout_of(path) == b"4"  # ... and write nothing
    with Ledger(path) as writer:
        assert writer.layout == store.LAYOUT_VERSION
        assert {s: writer.state_bytes(s) for s in writer.subjects()} == states
        assert_tlog_is_the_log(writer)
        assert writer.fsck() == []
    assert layout_of(path) == b"5"


def test_a_whole_view_reader_upgrades_a_layout_4_ledger(tmp_path: Path, cli: Any) -> None:
    path = layout4(tmp_path)
    done = cli("--ledger", str(path), "fsck")
    assert done.code == 0, done.out + done.err
    assert layout_of(path) == b"5"
    with Ledger(path, readonly=True) as reader:
        assert_tlog_is_the_log(reader)


KILLED_UPGRADE = """
import os, sys
from pathlib import Path
from pithledger import store
import pithledger.store.tlog_tables as tlog_tables
appended = 0
original = tlog_tables.Appender.append
def append(self, entry):
    global appended
    appended += 1
    if appended == 35:  # in the 4th transaction of the upgrade: the process dies before it commits
        os._exit(9)
    return original(self, entry)
tlog_tables.Appender.append = append
store.Ledger(Path(sys.argv[1]), tuning=store.StoreTuning(upgrade_chunk=10))
"""


def test_a_killed_upgrade_is_upgraded_again_by_the_next_writer(tmp_path: Path) -> None:
    path = layout4(tmp_path)
    died = subprocess.run([sys.executable, "-c", KILLED_UPGRADE, str(path)], capture_output=True)
    assert died.returncode == 9, died.stderr
    assert layout_of(path) == b"4"  # the upgrade is not done ...
    env = lmdb.open(str(path), max_dbs=32, readonly=True)
    with env.begin() as txn:
        assert (
            txn.stat(env.open_db(T.ENTRIES_DB, txn=txn, create=False))["entries"] == 30
        )  # ... 3 steps of 10 were committed
    env.close()
    with Ledger(path, readonly=True) as reader:  # a reader never sees the partial tlog
        with pytest.raises(TlogNotBuilt):
            reader.tlog_root()
    with Ledger(path) as writer:
        assert_tlog_is_the_log(writer)
        assert writer.fsck() == []
    assert layout_of(path) == b"5"


def test_a_reader_opened_before_the_upgrade_sees_the_tlog_once_it_is_committed(tmp_path: Path) -> None:
    path = layout4(tmp_path)
    with Ledger(path, readonly=True) as reader:
        with pytest.raises(TlogNotBuilt):
            reader.tlog_size()
        upgraded = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pithledger.store import Ledger; Ledger(sys.argv[1]).close()",
                str(path),
            ],
            capture_output=True,
        )
        assert upgraded.returncode == 0, upgraded.stderr
        assert reader.tlog_size() == 65
        assert_tlog_is_the_log(reader)
