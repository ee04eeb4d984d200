"""Transparency log cost (issue #22: appending to the log adds <= 10 % to `apply` on the bench workload).

    .venv/bin/python bench/bench_tlog_cost.py --base /path/to/main/.venv/bin/pithledger [--papers 2000] [--reps 5]
    .venv/bin/python bench/bench_tlog_cost.py --append-only      # the tlog's own work, in process

Generates bench_suite's papers workload (papers x 20 events, one bundle per paper per line, JSON lines),
then times `pithledger --ledger DIR apply FILE --batch-size 10000 -q --json` into an empty ledger with the
baseline's CLI (`--base`: a checkout of main before the tlog) and this checkout's, interleaved
(A B B A A B ...: the machine is shared, so both see the same load), wall clock around the process.
Prints every run (wall clock, and CPU time: user + system of the process and the workers it waited for,
from wait4), the medians and the ratios branch / baseline. CPU time is the steadier figure on a shared
machine: other processes stretch a run's wall clock, much less the CPU it uses.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite as S  # noqa: E402  (the workload generator)


def append_only(n: int = 40_000, batch: int = 10_000) -> None:
    """CPU time of the tlog's part of the write path alone: entry bytes and Appender.append of ``n``
    entries in write transactions of ``batch`` into a raw LMDB environment (best of 3)."""
    import hashlib

    import lmdb

    import pithledger.store.tlog_tables as tlog_tables

    ids = ["sha256:" + hashlib.sha256(b"%d" % i).hexdigest() for i in range(n)]
    shas = [hashlib.sha256(b"event %d" % i).hexdigest() for i in range(n)]
    with tempfile.TemporaryDirectory() as d:
        env = lmdb.open(d, max_dbs=4, map_size=1 << 30)
        dbs = tlog_tables.TlogDbs(env.open_db(tlog_tables.ENTRIES_DB), env.open_db(tlog_tables.HASHES_DB))
        best = float("inf")
        for _ in range(3):
            with env.begin(write=True) as txn:
                txn.drop(dbs.entries, delete=False)
                txn.drop(dbs.hashes, delete=False)
            t = time.process_time()
            for start in range(0, n, batch):
                with env.begin(write=True) as txn:
                    appender = tlog_tables.Appender(txn, dbs)
                    for i in range(start, min(n, start + batch)):
                        appender.append(
                            tlog_tables.entry_bytes(ids[i], "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L", shas[i])
                        )
            best = min(best, time.process_time() - t)
        with env.begin() as txn:
            pages = {
                name: sum(txn.stat(db)[k] for k in ("branch_pages", "leaf_pages", "overflow_pages"))
                * txn.stat(db)["psize"]
                for name, db in (("tlog", dbs.entries), ("tlogh", dbs.hashes))
            }
        env.close()
    print(
        f"tlog append: {best / n * 1e6:.1f} us CPU per event (best of 3, {n:,} entries in batches of {batch:,}); "
        f"disk {pages['tlog'] / n:.0f} B/event (tlog) + {pages['tlogh'] / n:.0f} B/event (tlogh)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="the baseline's pithledger executable")
    ap.add_argument("--append-only", action="store_true", help="measure only the tlog's own work, in process")
    ap.add_argument("--papers", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if args.append_only:
        append_only()
        return
    if not args.base:
        ap.error("--base is required (or --append-only)")
    mine = S.PITHLEDGER
    tmp = Path(tempfile.mkdtemp(prefix="bench_tlog."))
    try:
        S.numbers_for("main", args.papers)
        gen = S.Gen()
        parts = gen.run([("papers", "main", a, b, False) for a, b in S.chunks(0, args.papers, 50)])
        gen.close()
        f = tmp / "papers.jsonl"
        f.write_bytes(b"".join(x for p in parts for x in p["papers"]))
        events = 20 * args.papers
        print(f"workload: {args.papers:,} papers x 20 = {events:,} events, {f.stat().st_size:,} bytes", flush=True)
        walls: dict[str, list[float]] = {"base": [], "tlog": []}
        cpus: dict[str, list[float]] = {"base": [], "tlog": []}
        for rep in range(args.reps):
            order = [("base", args.base), ("tlog", mine)]
            for label, exe in order if rep % 2 == 0 else order[::-1]:
                led = tmp / f"L-{label}"
                out, err = tmp / "out", tmp / "err"
                t = time.perf_counter()
                with out.open("wb") as o, err.open("wb") as e:
                    proc = subprocess.Popen(
                        [exe, "--ledger", str(led), "apply", str(f), "--batch-size", "10000", "-q", "--json"],
                        stdout=o,
                        stderr=e,
                    )
                    _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode != 0 or json.loads(out.read_text())["new"] != events:
                    sys.exit(f"{label} apply failed ({proc.returncode}): {err.read_text()[-2000:]}")
                cpu = usage.ru_utime + usage.ru_stime
                walls[label].append(wall)
                cpus[label].append(cpu)
                print(
                    f"  rep {rep} {label}: {wall:.2f} s wall ({events / wall:,.0f} ev/s), {cpu:.2f} s CPU "
                    f"({cpu / events * 1e6:.0f} us/event)",
                    flush=True,
                )
                shutil.rmtree(led)
        for what, runs in (("wall", walls), ("CPU", cpus)):
            base, tlog = statistics.median(runs["base"]), statistics.median(runs["tlog"])
            pairs = [b / a for a, b in zip(runs["base"], runs["tlog"])]
            print(
                f"median apply {what}: baseline {base:.2f} s, with the tlog {tlog:.2f} s: ratio {tlog / base:.3f} "
                f"(per-pair ratios {', '.join(f'{r:.3f}' for r in pairs)}; their median {statistics.median(pairs):.3f})"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
