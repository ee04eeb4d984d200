"""apply through the CLI with its fast path (spec/adr/0020) on and forced off, against raw Ed25519 verify.

The papers workload of bench_suite.py (PAPERS papers x 20 events, one bundle a line), applied into a new
ledger by `pithledger apply FILE --batch-size 10000 -q --json`, with `--workers 0` and the default workers;
each configuration's events/s, its ratio to the raw 1-thread and 2-thread verify rates measured in the same
run (bench_suite.raw_verify, before and after: the best of each), and the CPU of all its processes (user +
sys of the command and its children) per event in units of one raw 1-thread verification. `--before BIN`
adds another pithledger executable (main's) as a third configuration.

`--shape events`: the same events one to a line (each its own bundle; a record_created one with its record).

    python bench/bench_fast_path.py [--papers 1000] [--reps 2] [--shape papers|events] [--before BIN]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_suite  # noqa: E402

HERE = Path(sys.executable).parent / "pithledger"


def _apply(binary: str, path: Path, work: Path, workers: str | None, slow: bool) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the command and its children, events new) of one apply."""
    ledger = Path(tempfile.mkdtemp(dir=work)) / "ledger"
    cmd = [binary, "--ledger", str(ledger), "apply", str(path), "--batch-size", "10000", "-q", "--json"]
    cmd += ["--workers", workers] if workers is not None else []
    env = {k: v for k, v in os.environ.items() if k != "PITHLEDGER_SLOW_PATH"} | (
        {"PITHLEDGER_SLOW_PATH": "1"} if slow else {}
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, check=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(ledger.parent)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(json.loads(done.stdout)["new"])


def workload(papers: int, shape: str) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
    """The workload's lines and (signer, signing message, signature) of each event (bench_suite's)."""
    if shape == "papers":
        return bench_suite.papers_workload(papers)
    bench_suite.numbers_for("main", papers)
    gen = bench_suite.Gen()
    try:
        parts = gen.run([("papers", "main", a, b, True) for a, b in bench_suite.chunks(0, papers, 50)])
    finally:
        gen.close()
    return b"".join(x for p in parts for x in p["events"]), [x for p in parts for x in p["verify"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--shape", choices=("papers", "events"), default="papers")
    ap.add_argument("--before", help="another pithledger executable to measure beside this one (main's)")
    args = ap.parse_args()
    configs = [("fast path", str(HERE), False), ("forced off", str(HERE), True)]
    if args.before:
        configs.insert(0, ("before", args.before, False))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data, items = workload(args.papers, args.shape)
        path = work / "papers.jsonl"
        path.write_bytes(data)
        raws = [bench_suite.raw_verify(items)]
        best: dict[tuple[str, str], tuple[float, float]] = {}
        for _ in range(args.reps):
            for workers in ("0", None):
                for name, binary, slow in configs:
                    wall, cpu, new = _apply(binary, path, work, workers, slow)
                    assert new == len(items), (name, new)
                    key = (name, workers or "default")
                    rate, units = new / wall, cpu / new
                    got = best.get(key)
                    best[key] = (max(rate, got[0]), min(units, got[1])) if got else (rate, units)
        raws.append(bench_suite.raw_verify(items))
    r1 = max(r["rate_1t"] for r in raws)
    r2 = max(r["rate_2t"] for r in raws)
    print(
        f"{len(items):,} events ({args.shape}); raw verify {r1:,.0f} ev/s 1 thread, {r2:,.0f} ev/s 2 threads (best of the run)"
    )
    print(f"{'configuration':<12} {'workers':<8} {'ev/s':>8} {'x raw 1T':>9} {'x raw 2T':>9} {'CPU units/ev':>13}")
    for (name, workers), (rate, seconds) in best.items():
        print(f"{name:<12} {workers:<8} {rate:8,.0f} {rate / r1:9.2f} {rate / r2:9.2f} {seconds * r1:13.2f}")


if __name__ == "__main__":
    main()
