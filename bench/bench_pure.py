"""Issue #23: the floor under `apply`'s rate on this box, the pure work per event of each stage, measured in one process.

    .venv/bin/python bench/bench_pure.py [--papers 2000] [--reps 5]

`bench_scaling.py` measures the CLI from outside; this measures what it cannot separate: the CPU per
event of each pure function that `apply --workers N` runs on its workers, called here on the same
workload (bench_suite.py's papers, P x 20 events, one bundle per line), without processes, pipes or a
writer. Each figure is the least of ``--reps`` timings (``time.process_time``) of the stage over the
first 4 regions of 4 MiB (~19,600 events). The values a stage returns are dropped as they are made, as
on the workers. Stages, in the order `apply` runs them:

- pass 1: a region's digest, strict decoding and the bundle checks (``_check_region``);
- pass 2: the digest compared, msgspec decoding, ``prepare`` (canonical bytes, ids) and, since the
  reading workers verify what they prepare, ``_check_copy`` (every step of verification: Ed25519 and
  the rest) of each event, encoded for the writer (``_reread_region(..., check=True)``);
- the same without verification, so that verification is the difference;
- Ed25519 alone: PyNaCl's verify of each event's signing message (what bench_suite's raw rate counts);
- derivation: each record's state from its stored inputs, compressed (``_derive_part``), from a ledger
  this script builds in place first.

From these, the floor: on C cores with a perfect hand-over and a free writer, ``apply`` could run at
most at ``C / (pure CPU per event)`` events per second; with the writer's serial CPU per event (measured
by bench_scaling.py) on top, at ``C / (pure + writer)``. Writes bench/results-pure.json.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_suite import PITHLEDGER, ROOT, code_state, papers_workload, raw_verify  # noqa: E402


def least(reps: int, work: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    from pithledger.ingest import bundles as _bundles
    from pithledger.store.ledger import Ledger
    from pithledger.store.views import _derive_part

    data, items = papers_workload(args.papers)
    regions = [r for _, r in _bundles._regions(io.BytesIO(data), "bench")][:4]
    n_events = sum(len(_bundles._fast(line, "x").events) for r in regions for line in r.splitlines() if line.strip())
    expected = [_bundles._Region(hashlib.sha256(r).digest(), True) for r in regions]

    def pass1() -> None:
        for r in regions:
            _bundles._check_region(r, 1, "bench")

    def pass2(check: bool) -> Callable[[], None]:
        def run() -> None:
            for r, e in zip(regions, expected):
                _bundles._reread_region(r, 1, "bench", e, False, check)

        return run

    import nacl.signing
    from bench_suite import KEYS

    vks = [nacl.signing.VerifyKey(k.public_key) for k in KEYS]
    signed = items[:n_events]

    def ed25519() -> None:
        for ki, msg, sig in signed:
            vks[ki].verify(msg, sig)

    with tempfile.TemporaryDirectory(prefix="bench_pure.") as tmp:
        f, ledger = Path(tmp) / "papers.jsonl", Path(tmp) / "L"
        f.write_bytes(data)
        subprocess.run([PITHLEDGER, "--ledger", str(ledger), "apply", str(f), "-q", "--workers", "0"], check=True)
        with Ledger(ledger, readonly=True) as led:
            txn = led._core._begin()
            subjects = list(led.subjects())
            inputs = [led._views._gather(txn, s) for s in subjects]
            txn.abort()
        derive_events = sum(len(i.own) for i in inputs)

        def derive() -> None:
            for i in inputs:
                _derive_part([i])

        per = {
            "pass1_check": least(args.reps, pass1) / n_events,
            "pass2_prepare": least(args.reps, pass2(False)) / n_events,
            "pass2_prepare_and_verify": least(args.reps, pass2(True)) / n_events,
            "ed25519_alone": least(args.reps, ed25519) / n_events,
            "derive": least(args.reps, derive) / derive_events,
        }
    us = {k: v * 1e6 for k, v in per.items()}
    us["verify_beyond_ed25519"] = us["pass2_prepare_and_verify"] - us["pass2_prepare"] - us["ed25519_alone"]
    total = us["pass1_check"] + us["pass2_prepare_and_verify"] + us["derive"]
    rv = raw_verify(items)
    out: dict[str, Any] = {
        "machine": {"code": code_state(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
        "events_timed": n_events,
        "reps": args.reps,
        "us_per_event": us,
        "pure_total_us": total,
        "raw_verify": rv,
        "floor_2_cores_ev_s": 2e6 / total,
        "floor_2_cores_over_raw_2t": 2e6 / total / rv["rate_2t"],
    }
    for k, v in us.items():
        print(f"{k:28s} {v:7.1f} us/event")
    print(f"pure work per event: {total:.1f} us; raw verify {rv['rate_1t']:,.0f}/s 1T, {rv['rate_2t']:,.0f}/s 2T")
    print(
        f"floor on 2 cores, hand-over and writer free: 2e6 / {total:.1f} = {2e6 / total:,.0f} ev/s "
        f"= {2e6 / total / rv['rate_2t']:.2f} x raw 2T"
    )
    (ROOT / "bench" / "results-pure.json").write_text(json.dumps(out, indent=1) + "\n")
    print("wrote bench/results-pure.json")


if __name__ == "__main__":
    main()
