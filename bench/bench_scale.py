"""Issue #36: one ledger grown in steps through the CLI, and at each size the apply rate of the step, the memory
of apply and of every whole-ledger command, data.mdb bytes per event and `state` latency.

    .venv/bin/python bench/bench_scale.py 400000 1200000 2000000 3000000     # ledger sizes (events)
    .venv/bin/python bench/bench_scale.py --smoke                          # tiny sizes, ~1 minute
    (matplotlib for the plot: pip install -r bench/requirements.txt)

Workload: bench/bench_suite.py's papers (20 events per paper: record_created, 3 storage, 4 author
attestations, 8 citations of other papers of the ledger, 2 replications, 2 integrity findings; 64 signers),
generated on all cores before each step, one bundle per paper per line. Each step is applied in one run of
`pithledger apply FILE --batch-size 10000`; just before it, the raw 1-thread Ed25519 verify rate (PyNaCl) is
measured on 20 000 of the step's own signatures, and the step's rate is reported as a ratio to it. After each
step: `state` latency (median), data.mdb size, and each whole-ledger command — fsck, fsck --reverify, digest,
export --all, publish (a fresh tree, with a signed log), verify-log and audit (ledger against that tree),
rebuild --force (in place; its backup is removed) — run once, timed, with the peak RssAnon and RssFile of its
process and of every worker process it starts, sampled from /proc every 20 ms. Writes bench/results-scale.json
(or results-scale-smoke.json) and bench/scale.png. Data lives in one temporary directory (--keep DIR to keep).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_suite as B  # noqa: E402
from _measure import process_tree, rss_kib  # noqa: E402

HERE = Path(__file__).resolve().parent
TAG = "growth"


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 7200) -> dict[str, Any]:
    """Run ``cmd`` (stdout discarded), timing it and sampling RssAnon/RssFile (KiB) of it and of every
    process it starts. Returns wall, rc, stderr's tail, the command's own peaks and the largest and
    summed (at one instant) peaks over all its processes, in MiB."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peaks: dict[int, list[int]] = {}
    total = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = [0, 0]
            for pid in process_tree(proc.pid):
                got = rss_kib(pid)
                if got is not None:
                    a, f = got
                    p = peaks.setdefault(pid, [0, 0])
                    p[0], p[1] = max(p[0], a), max(p[1], f)
                    now[0], now[1] = now[0] + a, now[1] + f
            total[0], total[1] = max(total[0], now[0]), max(total[1], now[1])
            done.wait(0.02)

    t = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    wall = time.perf_counter() - t
    done.set()
    sampler.join()
    own = peaks.get(proc.pid, [0, 0])
    others = [v for pid, v in peaks.items() if pid != proc.pid]
    mib = 1024.0
    return {
        "wall": wall,
        "rc": proc.returncode,
        "err": err.decode(errors="replace")[-800:],
        "anon_mb": own[0] / mib,
        "file_mb": own[1] / mib,
        "worker_anon_mb": max((v[0] for v in others), default=0) / mib,
        "worker_file_mb": max((v[1] for v in others), default=0) / mib,
        "all_anon_mb": total[0] / mib,
        "all_file_mb": total[1] / mib,
        "processes": len(peaks),
    }


def raw_verify_1t(items: list[tuple[int, bytes, bytes]]) -> float:
    import nacl.signing

    vks = [nacl.signing.VerifyKey(k.public_key) for k in B.KEYS]
    best = 0.0
    for _ in range(2):
        t = time.perf_counter()
        for ki, msg, sig in items:
            vks[ki].verify(msg, sig)
        best = max(best, len(items) / (time.perf_counter() - t))
    return best


def generate(gen: B.Gen, a: int, b: int, out: Path) -> list[tuple[int, bytes, bytes]]:
    """Papers a..b-1 as JSON lines into ``out``; returns (signer, message, signature) of up to 20 000 of them."""
    verify: list[tuple[int, bytes, bytes]] = []
    with out.open("wb") as fh:
        for part in gen.run([("papers", TAG, x, y, len(verify) < 20_000) for x, y in B.chunks(a, b, 100)]):
            fh.writelines(part["papers"])
            verify += part["verify"][: 20_000 - len(verify)]
    return verify


def state_latency(pl: str, ledger: Path, number: str, runs: int) -> float:
    subprocess.run([pl, "--ledger", str(ledger), "state", number], stdout=subprocess.DEVNULL, check=True)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([pl, "--ledger", str(ledger), "state", number], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


#: What --publish-upto leaves out above that size: a fresh publish writes (and fsyncs) a file per record,
#: ~1 700 events/s on the bench box, and the two commands that read its tree.
PUBLISHED = ("publish", "verify-log", "audit")


def whole_ledger(pl: str, ledger: Path, tmp: Path, env: dict[str, str], skip: set[str]) -> dict[str, Any]:
    """Each whole-ledger command on ``ledger``, measured (a command that fails is recorded with its rc)."""
    pub = tmp / "pub"
    export = tmp / "export.jsonl"
    L = [pl, "--ledger", str(ledger), "-q"]
    cmds: list[tuple[str, list[str]]] = [
        ("fsck", [*L, "fsck"]),
        ("fsck --reverify", [*L, "fsck", "--reverify"]),
        ("digest", [*L, "digest"]),
        ("export --all", [*L, "export", "--all", "-o", str(export)]),
        ("publish", [*L, "publish", str(pub), "--key", "bench"]),
        ("verify-log", [pl, "-q", "verify-log", str(pub)]),
        ("audit", [pl, "-q", "audit", str(ledger), str(pub)]),
        ("rebuild --force", [*L, "rebuild", "--force"]),
    ]
    out: dict[str, Any] = {}
    for name, cmd in cmds:
        if name.split()[0] in skip or name in skip:
            continue
        shutil.rmtree(pub, ignore_errors=True) if name == "publish" else None
        r = measure(cmd, env)
        out[name] = r
        flag = "" if r["rc"] == 0 else f"  !! exit {r['rc']}: {r['err'].strip()[-300:]}"
        print(
            f"    {name:<16} {r['wall']:7.1f} s  anon {r['anon_mb']:6.0f} MiB  file {r['file_mb']:6.0f} MiB"
            f"  (workers: anon {r['worker_anon_mb']:.0f}, file {r['worker_file_mb']:.0f}; all: anon {r['all_anon_mb']:.0f}){flag}",
            flush=True,
        )
        if name == "rebuild --force":
            for backup in ledger.parent.glob(ledger.name + ".*-backup*"):
                shutil.rmtree(backup)
    export.unlink(missing_ok=True)
    shutil.rmtree(pub, ignore_errors=True)
    return out


def plot(results: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot)")
        return
    pts = results["points"]
    x = [p["ledger_events"] / 1e6 for p in pts]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 5))
    ax1.plot(x, [p["apply"]["rate_x_raw_1t"] for p in pts], "o-", label="apply step")
    for name in ("fsck", "fsck --reverify", "rebuild --force"):
        if all(name in p["commands"] for p in pts):
            ax1.plot(
                x,
                [p["ledger_events"] / p["commands"][name]["wall"] / p["raw_verify_1t"] for p in pts],
                "s--",
                label=name,
            )
    ax1.set(xlabel="ledger (M events)", ylabel="rate / raw 1-thread Ed25519 verify rate", title="Rates")
    ax1.axhline(1.0, color="grey", lw=0.5)
    ax1.legend(fontsize=7)
    names = ["apply", *dict.fromkeys(k for p in pts for k in p["commands"])]
    for name in names:
        got = [(xi, p["apply"] if name == "apply" else p["commands"].get(name)) for xi, p in zip(x, pts)]
        got = [(xi, r) for xi, r in got if r]
        ax2.plot([xi for xi, _ in got], [r["anon_mb"] for _, r in got], "o-", label=name)
        ax3.plot([xi for xi, _ in got], [r["file_mb"] for _, r in got], "o-", label=name)
    ax2.set(xlabel="ledger (M events)", ylabel="MiB", title="Peak anonymous RSS (command's process)")
    ax3.set(xlabel="ledger (M events)", ylabel="MiB", title="Peak file-backed RSS (command's process)")
    ax2.axhline(250, color="red", lw=0.5)
    ax2.legend(fontsize=7)
    ax3.legend(fontsize=7)
    ax2.set_ylim(bottom=0)
    ax3.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def table(results: dict[str, Any]) -> str:
    """bench/README.md's tables (markdown) of a results file."""
    pts = results["points"]
    out = [
        "| ledger | apply step | × raw 1T | raw 1T | apply anon / file (largest process) | data.mdb | `state` | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in pts:
        a = p["apply"]
        out.append(
            f"| {p['ledger_events'] / 1e6:.1f} M | {a['rate']:,.0f} ev/s | {a['rate_x_raw_1t']:.2f} | {p['raw_verify_1t']:,.0f}/s "
            f"| {a['anon_mb']:.0f} / {a['file_mb']:.0f} MiB (workers {a['worker_anon_mb']:.0f} / {a['worker_file_mb']:.0f}) "
            f"| {p['bytes_per_event']:,.0f} B/event | {1000 * p['state_s']:.0f} ms | {p['load_before_apply'][0]:.1f} |"
        )
    names = list(dict.fromkeys(k for p in pts for k in p["commands"]))
    out += ["", "| command | " + " | ".join(f"{p['ledger_events'] / 1e6:.1f} M" for p in pts) + " |"]
    out.append("|---|" + "---|" * len(pts))
    for name in names:
        cells = []
        for p in pts:
            r = p["commands"].get(name)
            if r is None:
                cells.append("—")
                continue
            rate = p["ledger_events"] / r["wall"] / p["raw_verify_1t"]
            cells.append(
                f"{r['wall']:.1f} s ({rate:.2f} × raw 1T), anon {r['anon_mb']:.0f} MiB, file {r['file_mb']:.0f} MiB"
                + ("" if r["rc"] == 0 else f", exit {r['rc']}")
            )
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=int, help="ledger sizes in events (multiples of 20)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (20 000 and 60 000 events), ~1 minute")
    ap.add_argument("--keep", type=Path, help="keep the ledger in this directory")
    ap.add_argument("--skip", nargs="*", default=[], help="commands not to run (e.g. publish audit)")
    ap.add_argument("--state-runs", type=int, default=7)
    ap.add_argument(
        "--publish-upto", type=int, default=0, help="run publish, verify-log and audit only up to this size (0: always)"
    )
    ap.add_argument("--report", type=Path, help="print the tables of this results file, plot it, and stop")
    args = ap.parse_args()
    if args.report:
        results = json.loads(args.report.read_text())
        print(table(results))
        plot(results, args.report.with_name("scale.png"))
        return
    sizes = [20_000, 60_000] if args.smoke else sorted(args.sizes)
    if not sizes:
        ap.error("give ledger sizes, or --smoke")
    pl = B.PITHLEDGER
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    ledger = (args.keep or tmp) / "L"
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"))
    env.pop("PITHLEDGER_LEDGER", None)
    subprocess.run([pl, "keys", "new", "bench"], env=env, check=True, stdout=subprocess.DEVNULL)
    B.numbers_for(TAG, sizes[-1] // 20)
    gen = B.Gen()
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "host": {"cpus": os.cpu_count(), "cpu": B._cpu_name(), "python": platform.python_version()},
        "code": B.code_state(),
        "points": [],
    }
    prev = 0
    try:
        for size in sizes:
            a, b = prev // 20, size // 20
            step = tmp / "step.jsonl"
            t = time.perf_counter()
            sample = generate(gen, a, b, step)
            gen_s = time.perf_counter() - t
            raw = raw_verify_1t(sample)
            load = os.getloadavg()
            r = measure([pl, "--ledger", str(ledger), "apply", str(step), "--batch-size", "10000", "-q", "--json"], env)
            step.unlink()
            n = 20 * (b - a)
            r |= {"events": n, "rate": n / r["wall"], "rate_x_raw_1t": n / r["wall"] / raw}
            mdb = (ledger / "data.mdb").stat()
            point: dict[str, Any] = {
                "ledger_events": size,
                "gen_s": gen_s,
                "raw_verify_1t": raw,
                "load_before_apply": load,
                "apply": r,
                "data_mdb_bytes": mdb.st_size,
                "bytes_per_event": mdb.st_size / size,
                "state_s": state_latency(pl, ledger, B._NUMBERS[TAG][b // 2], args.state_runs),
            }
            print(
                f"{size:>10,} events: apply +{n:,} at {r['rate']:,.0f} ev/s = {r['rate_x_raw_1t']:.2f} x raw 1T "
                f"({raw:,.0f}/s), anon {r['anon_mb']:.0f} MiB (all {r['all_anon_mb']:.0f}), file {r['file_mb']:.0f} MiB, "
                f"{point['bytes_per_event']:,.0f} B/event, state {1000 * point['state_s']:.0f} ms, load {load[0]:.2f}",
                flush=True,
            )
            skip = set(args.skip) | (set(PUBLISHED) if args.publish_upto and size > args.publish_upto else set())
            point["commands"] = whole_ledger(pl, ledger, tmp, env, skip)
            point["load_after"] = os.getloadavg()
            results["points"].append(point)
            prev = size
            name = "results-scale-smoke.json" if args.smoke else "results-scale.json"
            (HERE / name).write_text(json.dumps(results, indent=1) + "\n")
    finally:
        gen.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    plot(results, HERE / ("scale-smoke.png" if args.smoke else "scale.png"))


if __name__ == "__main__":
    main()
