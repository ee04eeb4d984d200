"""Peak memory of the 10^6 growth step, per process: 700 000 events (35 000 papers of the issue #12 workload,
~600 MB of JSON lines) applied in one run into a 300 000-event ledger, through the CLI.

    /tmp/benchv/bin/python bench/bench_growth_step.py [--batch-size 10000 ...] [--keep DIR]
    /tmp/benchv/bin/python bench/bench_growth_step.py --base-papers 0 --papers 60000     # 1.2 M events, ~1 GB

Samples /proc/<pid>/status (VmRSS, RssAnon, RssFile, VmHWM) of the CLI process and of every worker process
it starts, every 10 ms; prints each process's high-water mark and `/usr/bin/time`'s maximum (the largest
single process, which is what bench_suite.py reports). ~5 min on 2 cores; data in one temporary directory.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_suite as B  # noqa: E402  (bench/ is on sys.path when run as a script)
from _measure import process_tree  # noqa: E402


def measure(cmd: list[str]) -> tuple[float, str, dict[int, dict[str, int]]]:
    proc = subprocess.Popen([B.GNU_TIME, "-f", "%M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict[int, dict[str, int]] = collections.defaultdict(lambda: {"rss": 0, "anon": 0, "file": 0, "hwm": 0})
    t0 = time.perf_counter()
    while proc.poll() is None:
        for pid in process_tree(proc.pid)[1:]:  # [0] is /usr/bin/time
            try:
                with open(f"/proc/{pid}/status") as fh:
                    st = dict(line.split(":", 1) for line in fh)
                kb = {
                    k: int(st[f].split()[0])
                    for k, f in (("rss", "VmRSS"), ("anon", "RssAnon"), ("file", "RssFile"), ("hwm", "VmHWM"))
                }
            except (OSError, KeyError, ValueError):
                continue
            p = peaks[pid]
            if kb["rss"] > p["rss"]:
                p.update(rss=kb["rss"], anon=kb["anon"], file=kb["file"])
            p["hwm"] = max(p["hwm"], kb["hwm"])
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    return wall, err.strip().splitlines()[-1] if err.strip() else "?", dict(peaks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, nargs="+", default=[10_000])
    ap.add_argument("--keep", type=Path, help="keep the generated files and ledgers here")
    ap.add_argument(
        "--base-papers", type=int, default=15_000, help="papers (x 20 events) in the ledger before the step"
    )
    ap.add_argument("--papers", type=int, default=35_000, help="papers (x 20 events) applied in the measured run")
    args = ap.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="pithledger-growth-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        base, inc = tmp / "base.jsonl", tmp / "inc.jsonl"
        nb, ni = args.base_papers, args.papers
        B.numbers_for("growth", nb + ni)
        gen = B.Gen()
        for f, (a, b) in ((base, (0, nb)), (inc, (nb, nb + ni))):
            with f.open("wb") as fh:
                for part in gen.run([("papers", "growth", x, y, False) for x, y in B.chunks(a, b, 250)]):
                    fh.writelines(part["papers"])
        gen.close()
        ledger0 = tmp / "L0"
        if nb:
            subprocess.run(
                [B.PITHLEDGER, "--ledger", str(ledger0), "apply", str(base), "-q", "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        base.unlink()
        print(
            f"base ledger: {20 * nb:,} events; increment: {20 * ni:,} events, {inc.stat().st_size / 1e6:.0f} MB of JSON lines",
            flush=True,
        )
        for bs in args.batch_size:
            ledger = tmp / f"L-{bs}"
            shutil.rmtree(ledger, ignore_errors=True)
            if nb:
                shutil.copytree(ledger0, ledger)
            wall, gnu_max_kb, peaks = measure(
                [B.PITHLEDGER, "--ledger", str(ledger), "apply", str(inc), "--batch-size", str(bs), "-q", "--json"]
            )
            print(
                f"--batch-size {bs}: {wall:.1f} s = {20 * ni / wall:,.0f} ev/s; /usr/bin/time max {int(gnu_max_kb) / 1024:.0f} MiB"
            )
            for pid, p in sorted(peaks.items(), key=lambda kv: -kv[1]["hwm"])[:4]:
                print(
                    f"  pid {pid}: high-water {p['hwm'] / 1024:.0f} MiB; largest sample {p['rss'] / 1024:.0f} MiB "
                    f"({p['anon'] / 1024:.0f} anon / {p['file'] / 1024:.0f} file)",
                    flush=True,
                )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
