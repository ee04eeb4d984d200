"""Issue #31: Ctrl-C anywhere in the first seconds of an ``apply`` ends it: no hang, no traceback, exit 130.

    .venv/bin/python bench/bench_interrupt.py [--runs 50] [--spread 3.0] [--papers 1000] [--workers N] [--keep]

Workload: bench_suite.py's papers shape (P papers x 20 events, default 1 000 papers = 20 000 events, one
bundle per paper per line), written once. Then ``--runs`` times: ``pithledger --ledger L apply FILE`` (the
project's console script, a real subprocess in its own session, so its own process group), into a fresh
empty ledger; after ``t_i = spread * (i + 0.5) / runs`` seconds (evenly over 0 .. spread, so the start-up,
the imports, the pool start and the first batches are each hit) SIGINT goes to the whole process group,
as a terminal's Ctrl-C does. Each run is checked:

- it ends within ``--timeout`` seconds (else: a hang; the group is SIGKILLed and the run counted as hung);
- no "Traceback" on stderr; exit 130 with one line on stderr starting "interrupted" (or exit 0 when it
  finished before the signal);
- the same apply again exits 0, and ``pithledger fsck`` on the ledger exits 0 (``fsck: ok``);
- no process of its group is left behind.

Prints one line per run and a summary (also as JSON with --json-out FILE). The timing is wall clock on
whatever machine runs it: note the load (``uptime``) beside the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent


def _pithledger() -> str:
    for cand in (ROOT / ".venv" / "bin" / "pithledger", Path(sys.executable).parent / "pithledger"):
        if cand.is_file():
            return str(cand)
    raise SystemExit("no pithledger console script next to this Python or in .venv/")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


def one(exe: str, data: Path, ledger: Path, delay: float, timeout: float, workers: int | None) -> dict[str, Any]:
    extra = ["--workers", str(workers)] if workers is not None else []
    cmd = [exe, "--ledger", str(ledger), "apply", str(data), "-q", *extra]
    # SIGINT as from a terminal, even when this script runs in the background with it ignored
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t0 = time.monotonic()
    time.sleep(max(0.0, delay - (time.monotonic() - t0)))
    sent = proc.poll() is None
    if sent:
        os.killpg(proc.pid, signal.SIGINT)
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    wall = time.monotonic() - t0
    # workers die with their parent; give them the watchdog's half second, bounded
    deadline = time.monotonic() + 5
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = _group_alive(proc.pid)
    if leftover:
        os.killpg(proc.pid, signal.SIGKILL)
    text = err.decode(errors="replace")
    r: dict[str, Any] = {
        "delay": round(delay, 3),
        "sent": sent,
        "rc": proc.returncode,
        "hung": hung,
        "wall": round(wall, 2),
        "traceback": "Traceback" in text,
        "leftover": leftover,
        "stderr_tail": text.strip().splitlines()[-1][:160] if text.strip() else "",
    }
    rerun = subprocess.run(
        [exe, "--ledger", str(ledger), "apply", str(data), "-q", "--json", *extra], capture_output=True, timeout=600
    )
    r["rerun_rc"] = rerun.returncode
    fsck = subprocess.run([exe, "--ledger", str(ledger), "fsck"], capture_output=True, timeout=600)
    r["fsck_rc"] = fsck.returncode
    r["fsck"] = fsck.stdout.decode().strip()[:80] or fsck.stderr.decode().strip()[-160:]
    expected_rc = (130, 0) if sent else (0,)
    # exit 130 says so in one line; exit 0 (finished before the signal) says nothing with -q
    r["one_line"] = (
        (len(text.strip().splitlines()) == 1 and text.startswith("interrupted")) if proc.returncode == 130 else True
    )
    r["ok"] = (
        not hung
        and not r["traceback"]
        and proc.returncode in expected_rc
        and r["one_line"]
        and not leftover
        and rerun.returncode == 0
        and fsck.returncode == 0
    )
    if not r["ok"]:
        r["stderr"] = text[-3000:]
    return r


def workload(tmp: Path, papers: int) -> Path:
    from bench_suite import papers_workload  # the issue #12 shape

    f = tmp / f"papers-{papers}.jsonl"
    if not f.exists():
        lines, _ = papers_workload(papers)
        f.write_bytes(lines)
    return f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--spread", type=float, default=3.0, help="signals land evenly over 0 .. SPREAD seconds")
    ap.add_argument("--papers", type=int, default=1000, help="20 events each")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds after which a run counts as hung")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--data", type=Path, default=None, help="reuse (or write) the workload here")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    exe = _pithledger()
    tmp = Path(tempfile.mkdtemp(prefix="bench-interrupt-"))
    try:
        t = time.monotonic()
        data = args.data if args.data is not None and args.data.exists() else workload(tmp, args.papers)
        if args.data is not None and not args.data.exists():
            shutil.copy(data, args.data)
        print(
            f"workload: {data} ({data.stat().st_size / 1e6:.1f} MB, {args.papers * 20:,} events) in {time.monotonic() - t:.1f} s; "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        results = []
        for i in range(args.runs):
            delay = args.spread * (i + 0.5) / args.runs
            ledger = tmp / f"ledger-{i}"
            r = one(exe, data, ledger, delay, args.timeout, args.workers)
            results.append(r)
            print(
                f"{i:3d} t={r['delay']:.2f}s rc={r['rc']} wall={r['wall']:.1f}s hung={r['hung']} tb={r['traceback']} "
                f"leftover={r['leftover']} rerun={r['rerun_rc']} fsck={r['fsck_rc']} {'ok' if r['ok'] else 'FAIL'}: "
                f"{r['stderr_tail']}",
                flush=True,
            )
            if not args.keep:
                shutil.rmtree(ledger, ignore_errors=True)
        summary = {
            "runs": len(results),
            "ok": sum(r["ok"] for r in results),
            "hung": sum(r["hung"] for r in results),
            "traceback": sum(r["traceback"] for r in results),
            "exit_130": sum(r["rc"] == 130 for r in results),
            "exit_0": sum(r["rc"] == 0 for r in results),
            "not_one_line": sum(not r["one_line"] for r in results),
            "leftover": sum(r["leftover"] for r in results),
            "rerun_failed": sum(r["rerun_rc"] != 0 for r in results),
            "fsck_failed": sum(r["fsck_rc"] != 0 for r in results),
            "spread_s": args.spread,
            "events": args.papers * 20,
            "load_end": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(summary))
        if args.json_out:
            args.json_out.write_text(json.dumps({"summary": summary, "runs": results}, indent=1) + "\n")
        sys.exit(0 if summary["ok"] == summary["runs"] else 1)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
