"""apply on each executor of ledger/fanout.py, through the CLI (not run in CI).

    python bench/bench_fanout.py [N_EVENTS]

bench_apply.py's workload (50 records, then author attestations, N events in all, signed by one key),
written as JSON lines (one bundle per record), applied into a fresh ledger with ``--workers 0``, ``1``,
``2`` and on a Dask LocalCluster of 2 worker processes started here (``--scheduler``). Prints the wall
time, the rate, the CPU of the apply process and of its children, and checks every run's digest is equal.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids

ROOT = Path(__file__).parent.parent


def workload(n: int, path: Path) -> None:
    records = [
        json.loads(line) for line in (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_text().splitlines()
    ]
    key = LocalKey(name="bench", seed=hashlib.sha256(b"bench").digest())
    by_subject: dict[str, list[dict[str, object]]] = {}
    for i in range(n):  # as bench_apply.py
        r = records[i % len(records)]
        rid = record_ids(r)
        if i < len(records):
            e = make_event(
                "record_created",
                rid.pith_number,
                {"canonical_record": r, "canonical_sha256": rid.canonical_sha256},
                key,
                created_at="2026-06-01T00:00:00Z",
            )
        else:
            e = make_event(
                "author_attestation",
                rid.pith_number,
                {"author_name": f"author {i}"},
                key,
                created_at=f"2026-06-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
            )
        by_subject.setdefault(rid.pith_number, []).append(e)
    with path.open("wb") as out:
        for subject, events in by_subject.items():
            for k in range(0, len(events), 200):  # lines of at most 200 events
                out.write(canonical_bytes(write_bundle(subject, events[k : k + 200])) + b"\n")


def apply(tmp: Path, name: str, source: Path, *option: str) -> tuple[str, float, float, float]:
    ledger = tmp / name
    cmd = [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "-q", "apply", str(source), *option]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = usage.ru_utime + usage.ru_stime  # the apply process and the workers it waited for
    everything = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    digest = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "digest", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return digest, wall, own, everything


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        source = tmp / "workload.jsonl"
        workload(n, source)
        print(f"{n:,} events, {source.stat().st_size / 1e6:.1f} MB, {os.cpu_count()} cores")
        runs = [
            ("--workers 0", ("--workers", "0")),
            ("--workers 1", ("--workers", "1")),
            ("--workers 2", ("--workers", "2")),
        ]
        digests = set()
        for label, option in runs:
            digest, wall, own, everything = apply(tmp, label.replace(" ", ""), source, *option)
            digests.add(digest)
            print(
                f"apply {label:<24} {wall:6.2f} s  {n / wall:8,.0f} events/s  CPU {everything / n * 1e6:5.0f} µs/event (all processes)"
            )
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
            address = str(cluster.scheduler_address)
            digest, wall, own, everything = apply(tmp, "dask", source, "--scheduler", address)
            digests.add(digest)
            print(
                f"apply --scheduler (2 Dask workers) {wall:6.2f} s  {n / wall:8,.0f} events/s  "
                f"CPU {everything / n * 1e6:5.0f} µs/event (apply process and its children; Dask's workers not counted)"
            )
        print("digests equal" if len(digests) == 1 else f"DIGESTS DIFFER: {digests}")
        if len(digests) != 1:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
