"""Crashes, concurrency, a full disk and hostile input: nothing lost, nothing half-written, nothing forged.

The long variants run by hand:  PITHLEDGER_LONG_TESTS=1 pytest tests/e2e/store/test_apply_atomicity.py
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from helpers.common import FIXTURES, PITH_RECORDS, ROOT
from helpers.eventpool import ALICE
from pithledger.records.bundle import read_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import make_event
from pithledger.store import Ledger

LONG = os.environ.get("PITHLEDGER_LONG_TESTS") == "1"
CRASH_TRIALS = 150 if LONG else 10
BATCH = 100
RECORD = PITH_RECORDS[0]
NUMBER = RECORD["pith_number"]


@lru_cache(maxsize=1)
def workload() -> list[dict[str, Any]]:
    """A record_created event, then attestations: one event per bundle, so batches are exact."""
    events = [
        make_event(
            "record_created",
            NUMBER,
            {"canonical_record": RECORD["canonical_record"], "canonical_sha256": RECORD["canonical_sha256"]},
            ALICE,
            created_at="2026-01-01T00:00:00Z",
        )
    ]
    events += [
        make_event(
            "author_attestation",
            NUMBER,
            {"author_name": f"author {i}"},
            ALICE,
            created_at=f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        )
        for i in range(2999)
    ]
    return events


def write_input(path: Path, events: list[dict[str, Any]]) -> Path:
    lines = [
        canonical_bytes(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": e["subject_pith_number"],
                "events": [e],
            }
        )
        for e in events
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def apply_cmd(ledger: Path, *files: Path, batch: int = BATCH) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pithledger.cli",
        "--ledger",
        str(ledger),
        "apply",
        "--batch-size",
        str(batch),
        *map(str, files),
    ]


def states(path: Path) -> dict[str, bytes]:
    with Ledger(path) as ledger:
        return {s: ledger.state_bytes(s) for s in ledger.subjects()}


def test_sigkill_at_random_moments_leaves_a_prefix_of_whole_batches(tmp_path: Path) -> None:
    events = workload()
    data = write_input(tmp_path / "input.jsonl", events)
    reference = tmp_path / "reference"
    start = time.monotonic()
    assert subprocess.run(apply_cmd(reference, data), capture_output=True).returncode == 0
    full_run = time.monotonic() - start  # kill moments spread over a whole run on this machine
    expected = states(reference)
    rnd = random.Random(7)
    outcomes = {"killed-before-first-commit": 0, "killed-mid-run": 0, "finished": 0}
    corrupt = 0
    for trial in range(CRASH_TRIALS):
        ledger = tmp_path / f"trial{trial}"
        proc = subprocess.Popen(apply_cmd(ledger, data), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.1, 1.1 * full_run))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (ledger / "data.mdb").exists():
            with Ledger(ledger) as led:
                # a kill mid-run leaves derivation pending (spec/storage.md §3.1): the next writer finishes it
                led.finish()
                problems = led.fsck()
                logged = [e.event for e in led.log()]
                finished = {s: led.state_bytes(s) for s in led.subjects()}
            if logged:  # ... into exactly the states of the logged prefix applied at once
                with Ledger(tmp_path / f"prefix{trial}", create=True) as prefix:
                    prefix.apply_batch(
                        [read_bundle(strict_decode(line)) for line in data.read_bytes().splitlines()[: len(logged)]]
                    )
                    assert finished == {s: prefix.state_bytes(s) for s in prefix.subjects()}
            corrupt += bool(problems)
            assert problems == [], problems
            # exactly the first k whole batches of the input, in input order
            assert len(logged) % BATCH == 0 or len(logged) == len(events)
            assert logged == [canonical_bytes(e) for e in events[: len(logged)]]
            key = (
                "finished"
                if len(logged) == len(events)
                else "killed-mid-run"
                if logged
                else "killed-before-first-commit"
            )
        else:
            key = "killed-before-first-commit"
        outcomes[key] += 1
        rerun = subprocess.run(apply_cmd(ledger, data), capture_output=True)
        assert rerun.returncode == 0, rerun.stderr
        assert states(ledger) == expected
    assert corrupt == 0
    assert outcomes["killed-mid-run"] >= 1, outcomes  # the trials did hit the apply while it wrote
    print(f"crash trials: {CRASH_TRIALS}, outcomes {outcomes}, corrupt ledgers {corrupt}")


READER = """
import json, sys, time
from pithledger.store import Ledger
from pithledger.errors import NoLedger, NotFound
seen = set()
deadline = time.time() + 60
while time.time() < deadline:
    try:
        with Ledger(sys.argv[1], readonly=True) as ledger:
            while time.time() < deadline:
                try:
                    seen.add(json.loads(ledger.state_bytes(sys.argv[2]))["event_count"])
                except NotFound:
                    seen.add(0)
                if sys.stdin.closed or __import__("os").path.exists(sys.argv[3]):
                    break
        break
    except NoLedger:
        time.sleep(0.01)
print(json.dumps(sorted(seen)))
"""


def test_readers_in_other_processes_never_see_a_partial_batch(tmp_path: Path) -> None:
    data = write_input(tmp_path / "input.jsonl", workload())
    ledger, done = tmp_path / "ledger", tmp_path / "done"
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(ledger), NUMBER, str(done)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    writer = subprocess.run(apply_cmd(ledger, data), capture_output=True)
    done.touch()
    seen = set()
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, err
        seen.update(json.loads(out))
    assert writer.returncode == 0, writer.stderr
    assert seen and all(count % BATCH == 0 for count in seen), sorted(seen)
    assert len(seen) > 2  # the readers did run while batches landed


def test_queries_never_wait_for_a_writer(tmp_path: Path) -> None:
    import lmdb

    ledger = tmp_path / "ledger"
    subprocess.run(
        apply_cmd(ledger, write_input(tmp_path / "in.jsonl", workload()[:10])), check=True, capture_output=True
    )
    env = lmdb.open(str(ledger), max_dbs=16)
    held = env.begin(write=True)  # another process in the middle of a batch
    try:
        start = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "state", NUMBER],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and json.loads(r.stdout)["event_count"] == 10
        assert time.monotonic() - start < 30
    finally:
        held.abort()
        env.close()


def test_two_writers_at_once_both_land_and_nothing_breaks(tmp_path: Path) -> None:
    events = workload()
    first = write_input(tmp_path / "first.jsonl", events[:1700])
    second = write_input(tmp_path / "second.jsonl", events[1300:])  # overlapping: duplicates race
    ledger = tmp_path / "ledger"
    procs = [
        subprocess.Popen(apply_cmd(ledger, f, batch=50), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for f in (first, second)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with Ledger(ledger) as led:
        assert led.fsck() == []
        assert led.counts()["events"] == len(events)
    reference = tmp_path / "reference"
    subprocess.run(apply_cmd(reference, write_input(tmp_path / "all.jsonl", events)), check=True, capture_output=True)
    assert states(ledger) == states(reference)


def test_a_full_disk_is_a_clear_error_the_ledger_unchanged_and_apply_resumable(tmp_path: Path) -> None:
    data = write_input(tmp_path / "input.jsonl", workload())
    ledger = tmp_path / "ledger"

    def small_disk() -> None:  # the file-size limit makes writes past 600 kB fail, as a full disk does
        resource.setrlimit(resource.RLIMIT_FSIZE, (600_000, 600_000))

    full = subprocess.run(apply_cmd(ledger, data), preexec_fn=small_disk, capture_output=True, text=True)
    assert full.returncode == 1
    assert full.stderr.startswith("error[ledger-error]: the batch was not written")
    assert "free space" in full.stderr and "Traceback" not in full.stderr
    with Ledger(ledger) as led:
        led.finish()  # the batches committed before the disk filled left their derivation pending
        assert led.fsck() == []
        partial = led.counts()["events"]
    assert partial % BATCH == 0 and partial < len(workload())
    resumed = subprocess.run(apply_cmd(ledger, data), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{partial} duplicate" in resumed.stdout
    with Ledger(ledger) as led:
        assert led.counts()["events"] == len(workload()) and led.fsck() == []


# --- hostile input through the real command line ------------------------------------------------------

EXPECTED = json.loads((FIXTURES / "bundles" / "expected.json").read_text())
HOSTILE = sorted(name for name in EXPECTED if not name.startswith("valid-"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def base_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("base") / "ledger"
    root = ROOT / "bundles"
    assert run("--ledger", str(path), "apply", str(root), cwd=path.parent).returncode == 0
    return path


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_bundle_is_named_exits_1_and_forges_nothing(name: str, base_ledger: Path, tmp_path: Path) -> None:
    import shutil

    ledger = tmp_path / "ledger"
    shutil.copytree(base_ledger, ledger)
    before = states(ledger)
    r = run("--ledger", str(ledger), "apply", str(FIXTURES / "bundles" / name), cwd=tmp_path)
    assert "Traceback" not in r.stderr
    after = states(ledger)
    want = EXPECTED[name]
    if "error" in want:  # refused whole: nothing written
        assert r.returncode == 1 and r.stderr.startswith(f"error[{want['error']}]")
        assert after == before
        return
    status = want["events"][-1]["status"]
    assert r.returncode == (1 if status == "invalid" else 0)
    if status == "invalid":
        assert f"[{want['events'][-1]['reason']}]" in r.stdout
    for subject, raw in after.items():  # no state's current view changed: the event is evidence only
        if subject in before:
            assert json.loads(raw)["current"] == json.loads(before[subject])["current"], subject


def test_gigabytes_of_whitespace_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "whitespace.json"
    with open(path, "wb") as fh:  # 65 MiB of spaces without a newline: larger than any one document
        fh.truncate(0)
        chunk = b" " * (1 << 20)
        for _ in range(65):
            fh.write(chunk)
    r = run("--ledger", str(tmp_path / "l"), "apply", str(path), cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error[document-too-large]")
    assert not (tmp_path / "l").exists()


def test_huge_string_and_number_are_named(tmp_path: Path) -> None:
    event = dict(workload()[1])
    event["payload"] = {"author_name": "x" * 2_000_000}
    (tmp_path / "big.json").write_bytes(
        canonical_bytes(
            {"bundle_type": "pith_open_graph_bundle", "bundle_version": "1.0", "pith_number": NUMBER, "events": [event]}
        )
    )
    r = run("--ledger", str(tmp_path / "l"), "apply", "big.json", cwd=tmp_path)
    assert r.returncode == 1 and "larger than 1,048,576 bytes" in r.stderr
    (tmp_path / "num.json").write_text(
        '{"bundle_type":"pith_open_graph_bundle","bundle_version":"1.0","pith_number":"%s","events":[],"n":%s}'
        % (NUMBER, "9" * 5000)
    )
    r = run("--ledger", str(tmp_path / "l"), "apply", "num.json", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error[integer-out-of-range]")
