"""Issue #43: what `apply` costs per event, in units of one Ed25519 check, for every process, through the CLI.

    .venv/bin/python bench/bench_apply_cost.py                      # 2 000 papers x 20 events, ~4 min on 2 cores
    .venv/bin/python bench/bench_apply_cost.py --papers 500 --step 250 --reps 1   # a smoke run, ~1 min
    .venv/bin/python bench/bench_apply_cost.py --pithledger /path/to/other/.venv/bin/pithledger   # another checkout

The unit is one PyNaCl ``VerifyKey.verify`` on one thread, measured in the same run on the workload's own
signing messages (the shared box swings raw rates up to 5x, so only ratios measured together mean anything).

1. **Per event, per process.** Each arrival shape is applied to an empty ledger by
   ``pithledger --ledger L apply FILE --batch-size 10000 -q --json [--workers N]`` in a subprocess:
   ``papers`` (one bundle of 20 events per paper per line, the bulk shape) with the default workers and with
   ``--workers 0``, and ``events`` (one event per line, shuffled) with the default workers. For each: the wall
   rate against the raw 1-thread and 2-thread verify rates, and the CPU (user + system) of the whole process
   tree (``os.wait4``: the CLI process and every worker it reaped) and of the writer's own process (its
   ``/proc/PID/stat`` sampled every 5 ms, the last sample before it exits), in units per event. "Net of
   start-up" subtracts the CPU of the same command on a one-paper input (interpreter start, imports, forks).
2. **Citing held against citing absent.** A ledger of ``--papers`` papers is built once; a step of ``--step``
   new papers (20 events each, 8 citations each) is then applied to two copies of it: in one their citations
   name papers the ledger holds, in the other papers it does not (the same events but for the cited number).
   The CPU of the process tree of each, and their ratio (issue #43: <= 1.33).

Results: a table on stdout and bench/results-apply-cost.json. Data lives in one temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench_suite as B  # noqa: E402  (bench/ is on sys.path when run as a script)

from pithledger.records.canonical import canonical_bytes

_TICK = os.sysconf("SC_CLK_TCK")


def _own_cpu(pid: int) -> float | None:
    """User + system CPU seconds of the process ``pid`` itself (not its children), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15 of stat)


def run_cpu(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``: its wall time, the CPU of its whole process tree (wait4) and of its own process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    own = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            got = _own_cpu(p.pid)
            if got is not None and p.returncode is None:
                own[0] = max(own[0], got)
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = p.stdout.read() if p.stdout else b""  # the output is small (--json): read it before reaping
    err = p.stderr.read() if p.stderr else b""
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` exited {p.returncode}: {err.decode(errors='replace')[-2000:]}")
    return {
        "wall": wall,
        "cpu_tree": usage.ru_utime + usage.ru_stime,
        "cpu_own": own[0],
        "doc": json.loads(out) if out.strip() else None,
    }


def apply_cmd(pithledger: str, ledger: Path, f: Path, workers: int | None) -> list[str]:
    cmd = [pithledger, "--ledger", str(ledger), "apply", str(f), "--batch-size", "10000", "-q", "--json"]
    return cmd + (["--workers", str(workers)] if workers is not None else [])


# --- the citing step ------------------------------------------------------------------------------------


def _step_task(args: tuple[int, int, str]) -> list[bytes]:
    """Papers a..b of the step, their 8 citations naming papers of ``pool`` (a tag of bench_suite)."""
    a, b, pool_tag = args
    pool = B._NUMBERS[pool_tag]
    out = []
    for i in range(a, b):
        rec, evs, kis = B.paper_events("growth", i)
        rng = random.Random(f"step:{i}")
        number = B._NUMBERS["growth"][i]
        fixed = []
        for e, ki in zip(evs, kis):
            if e["event_type"] == "citation_signature":
                payload = dict(e["payload"], cited_pith_number=pool[rng.randrange(len(pool))])
                e = B._ev("citation_signature", number, payload, ki, e["created_at"])
            fixed.append(e)
        out.append(B.bundle_line(number, fixed, rec))
    return out


def step_lines(papers: int, pool_tag: str) -> bytes:
    import multiprocessing as mp

    with mp.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        parts = pool.map(_step_task, [(a, b, pool_tag) for a, b in B.chunks(0, papers, 50)])
    return b"".join(line for part in parts for line in part)


# --- the run ----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", type=int, default=2000, help="papers (x 20 events) of the workload and base ledger")
    ap.add_argument("--step", type=int, default=1000, help="papers (x 20 events) of the citing step")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each measurement (the median is reported)")
    ap.add_argument("--pithledger", default=B.PITHLEDGER, help="the CLI to measure (default: the project venv's)")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results-apply-cost.json"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="apply-cost-"))
    R: dict[str, Any] = {
        "papers": args.papers,
        "step": args.step,
        "pithledger": args.pithledger,
        "code": B.code_state(),
        "cpu": B._cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        measure_all(args, tmp, R)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.write_text(json.dumps(R, indent=1) + "\n")
    print(f"\nwritten: {args.out}")


def measure_all(args: argparse.Namespace, tmp: Path, R: dict[str, Any]) -> None:
    print(f"generating {args.papers:,} papers x 20 events ...", flush=True)
    lines, verify = B.papers_workload(args.papers)
    papers_f = tmp / "papers.jsonl"
    papers_f.write_bytes(lines)
    events = len(verify)
    # one event per line, shuffled (a record_created line carries its record): as bench_suite's `events`
    one = []
    for line in lines.splitlines():
        doc = json.loads(line)
        for e in doc["events"]:
            rec = doc.get("canonical_record") if e["event_type"] == "record_created" else None
            one.append(B.bundle_line(doc["pith_number"], [e], rec))
    random.Random(43).shuffle(one)
    events_f = tmp / "events.jsonl"
    events_f.write_bytes(b"".join(one))
    empty_f = tmp / "one.jsonl"  # start-up: the same command on one paper (an empty input is refused)
    empty_f.write_bytes(lines.splitlines(keepends=True)[0])

    raw = B.raw_verify(verify)
    unit = 1 / raw["rate_1t"]
    R["raw"] = raw
    R["unit_us"] = unit * 1e6
    print(f"raw verify: {raw['rate_1t']:,.0f}/s 1-thread, {raw['rate_2t']:,.0f}/s 2-thread; unit {unit * 1e6:.1f} us")

    def startup(workers: int | None) -> dict[str, float]:
        got = [run_cpu(apply_cmd(args.pithledger, tmp / f"empty-{n}", empty_f, workers)) for n in range(3)]
        return {k: statistics.median(g[k] for g in got) for k in ("cpu_tree", "cpu_own", "wall")}

    R["startup"] = {"default": startup(None), "workers0": startup(0)}
    R["shapes"] = {}
    for name, f, workers in (
        ("papers", papers_f, None),
        ("events", events_f, None),
        ("papers --workers 0", papers_f, 0),
    ):
        reps = []
        for n in range(args.reps):
            ledger = tmp / f"L-{name.replace(' ', '')}-{n}"
            got = run_cpu(apply_cmd(args.pithledger, ledger, f, workers))
            if got["doc"]["new"] != events:
                raise SystemExit(f"{name}: new={got['doc']['new']}, expected {events}")
            shutil.rmtree(ledger)
            reps.append(got)
        wall = statistics.median(r["wall"] for r in reps)
        tree = statistics.median(r["cpu_tree"] for r in reps)
        own = statistics.median(r["cpu_own"] for r in reps)
        base = R["startup"]["workers0" if workers == 0 else "default"]
        R["shapes"][name] = row = {
            "reps": reps,
            "rate": events / wall,
            "ratio_1t": events / wall / raw["rate_1t"],
            "ratio_2t": events / wall / raw["rate_2t"],
            "units_tree": tree / events / unit,
            "units_tree_net": (tree - base["cpu_tree"]) / events / unit,
            "units_writer": own / events / unit,
            "units_writer_net": (own - base["cpu_own"]) / events / unit,
        }
        print(
            f"{name:20} {row['rate']:8,.0f} ev/s  x{row['ratio_1t']:.2f} raw-1t  x{row['ratio_2t']:.2f} raw-2t  "
            f"CPU {row['units_tree']:.2f} units/event (net {row['units_tree_net']:.2f}), "
            f"writer {row['units_writer']:.2f} (net {row['units_writer_net']:.2f})",
            flush=True,
        )

    # 2. citing held against citing absent
    print(f"citing step: {args.step:,} papers citing held / absent papers, on a {args.papers:,}-paper ledger ...")
    B.numbers_for("growth", args.step)
    B.numbers_for("probe", args.papers)  # never applied: absent
    held_f, absent_f = tmp / "held.jsonl", tmp / "absent.jsonl"
    held_f.write_bytes(step_lines(args.step, "main"))
    absent_f.write_bytes(step_lines(args.step, "probe"))
    assert len(held_f.read_bytes()) == len(absent_f.read_bytes())  # the same events but the cited numbers
    base = tmp / "base"
    run_cpu(apply_cmd(args.pithledger, base, papers_f, None))
    step_events = 20 * args.step
    got: dict[str, list[dict[str, Any]]] = {"held": [], "absent": []}
    for n in range(args.reps):
        for which, f in (("held", held_f), ("absent", absent_f)):  # interleaved: the box's swings hit both
            ledger = tmp / f"step-{which}"
            shutil.copytree(base, ledger)
            subprocess.run(["sync"], check=False)
            r = run_cpu(apply_cmd(args.pithledger, ledger, f, None))
            if r["doc"]["new"] != step_events:
                raise SystemExit(f"step {which}: new={r['doc']['new']}, expected {step_events}")
            shutil.rmtree(ledger)
            got[which].append(r)
    held = statistics.median(r["cpu_tree"] for r in got["held"])
    absent = statistics.median(r["cpu_tree"] for r in got["absent"])
    R["citing"] = {
        "reps": got,
        "held_cpu": held,
        "absent_cpu": absent,
        "ratio": held / absent,
        "held_units": held / step_events / unit,
        "absent_units": absent / step_events / unit,
    }
    print(
        f"citing held: {held:.2f} s CPU ({held / step_events / unit:.2f} units/event); absent: {absent:.2f} s "
        f"({absent / step_events / unit:.2f}); ratio {held / absent:.2f} (target <= 1.33)"
    )
    R["rusage_self_children"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    R["canonical_event_bytes"] = statistics.mean(len(canonical_bytes(json.loads(x))) for x in one[:2000])


if __name__ == "__main__":
    sys.exit(main())
