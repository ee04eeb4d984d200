"""Hot record (issue #23 item 4): 20 runs of `pithledger apply` of 1 000 new events each into ONE record.

    python bench/bench_hot_record.py --pithledger before=/tmp/hot-main/.venv/bin/pithledger \
                                     --pithledger after=.venv/bin/pithledger [--runs 20] [--json OUT]

Each ``--pithledger LABEL=PATH`` names a CLI to time (default: this checkout's ``.venv/bin/pithledger``).
The runs are interleaved (run k of every CLI, then run k+1), each CLI into its own empty ledger, so a
loaded machine slows all of them alike. Every run is one subprocess
``pithledger --ledger DIR apply FILE.jsonl --batch-size 10000 -q --json``, timed by wall clock; the
writer's CPU is the apply process's own user+system time (``/proc/PID/stat``, sampled every 5 ms until
it exits: up to 5 ms short), and the CPU of all processes is what ``wait4`` reports (the writer and the
worker processes it reaped).

Workload of one run (1 000 events, created_at later with every run, shuffled within the run): 150
timestamp anchors (OpenTimestamps proofs bound to the record's digest), 200 author attestations, 150
storage attestations, 100 replication records, 100 integrity findings, 48 graph snapshots (4 signers
re-signing: each new one supersedes the signer's last), 52 outbound citations (a few re-signed: the
later relation supersedes), and 200 citations of the hot record by other records (inbound; 20 of them
re-signed by a citer of an earlier run, which supersedes its citation there). Run 1 also carries the
record_created (instead of one attestation). No revocation: a revocation of a held event makes a run
derive the record in full (spec/merge.md §10). At the end every CLI's state of the hot record and digest
roots are compared byte for byte. On a loaded machine one run's time is noisy: the table also gives the
median writer CPU of the first three and the last three runs, and a least-squares line through all of them.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import json
import os
import random
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

import bench_suite as bs  # noqa: E402  (the workload helpers: keys, records, make_event wrappers)

from pithledger.records import ots as _ots  # noqa: E402
from pithledger.records.events import OUTCOMES, RELATIONS, REPLICATION_TYPES, SEVERITIES  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
CITERS_PER_RUN = 200
RESIGNED_PER_RUN = 20


def _when(run: int, i: int) -> str:
    t = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=run, seconds=i)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _run_lines(args: tuple[int, str, str, list[str]]) -> list[bytes]:
    """The JSON lines of run ``k``: the hot record's bundle, then one bundle per citing record."""
    k, hot, canon, citers = args
    rng = random.Random(f"hot-record run {k}")
    kinds = (
        ["timestamp_anchor"] * 150
        + ["author_attestation"] * 200
        + ["storage_attestation"] * 150
        + ["replication_record"] * 100
        + ["integrity_finding"] * 100
        + ["graph_snapshot"] * 48
        + ["citation_signature"] * 52
    )
    rng.shuffle(kinds)
    own: list[dict[str, Any]] = []
    if k == 0:
        own.append(
            bs._ev(
                "record_created",
                hot,
                {"canonical_record": bs.mint("hot", 0), "canonical_sha256": canon},
                0,
                _when(0, 0),
            )
        )
        kinds = kinds[1:]
    for i, kind in enumerate(kinds):
        ki = rng.randrange(64)
        when = _when(k, 1 + rng.randrange(80_000))  # out of order within the run
        p: dict[str, Any]
        if kind == "timestamp_anchor":
            proof = _ots.build(
                bytes.fromhex(canon),
                [f"https://cal{rng.randrange(4)}.example.org"],
                [800_000 + 1000 * k + i] if rng.random() < 0.7 else [],
            )
            p = {"ots_proof_b64": base64.b64encode(proof).decode()}
        elif kind == "author_attestation":
            p = {"author_name": f"{rng.choice(bs.FIRST)} {rng.choice(bs.LAST)} {k}-{i}", "orcid": bs._orcid(rng)}
        elif kind == "storage_attestation":
            t = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=rng.randrange(30 * 86400))
            p = {
                "capture_url": f"https://web.archive.org/web/{t:%Y%m%d%H%M%S}/https://arxiv.org/abs/hot{k}-{i}",
                "captured_at": f"{t:%Y-%m-%dT%H:%M:%SZ}",
                "content_sha256": hashlib.sha256(f"{k} {i}".encode()).hexdigest(),
            }
        elif kind == "replication_record":
            p = {
                "replication_type": rng.choice(REPLICATION_TYPES),
                "outcome": rng.choice(OUTCOMES),
                "artifact_url": f"https://zenodo.org/records/{rng.randrange(10**7, 10**8)}/files/hot-{k}-{i}.tar.gz",
            }
        elif kind == "integrity_finding":
            p = {
                "finding_type": rng.choice(bs.FINDINGS),
                "severity": rng.choice(SEVERITIES),
                "description": f"hot-record note {k}-{i}: " + " ".join(rng.sample(bs.SENTENCES, 2)),
            }
        elif kind == "graph_snapshot":
            ki = rng.randrange(4)  # 4 signers re-signing their snapshot
            p = {"graph_snapshot": {"claims": {"count": rng.randrange(1000)}, "run": k, "i": i}}
        else:  # outbound: the hot record cites records of earlier runs' citers; one signer in 8 re-signs
            ki = rng.randrange(8)
            p = {"cited_pith_number": citers[rng.randrange(len(citers))], "relation": rng.choice(RELATIONS)}
        own.append(bs._ev(kind, hot, p, ki, when))
    lines = [bs.bundle_line(hot, own, bs.mint("hot", 0) if k == 0 else None)]
    mine = citers[k * CITERS_PER_RUN : (k + 1) * CITERS_PER_RUN]
    earlier = citers[: k * CITERS_PER_RUN]
    resign = rng.sample(earlier, RESIGNED_PER_RUN) if earlier else mine[:RESIGNED_PER_RUN]
    for j, citer in enumerate(mine[: CITERS_PER_RUN - RESIGNED_PER_RUN] + resign):
        ki = int(hashlib.sha256(citer.encode()).digest()[0]) % 64  # a citer's one signer: a re-signing supersedes
        e = bs._ev(
            "citation_signature",
            citer,
            {"cited_pith_number": hot, "relation": rng.choice(RELATIONS)},
            ki,
            _when(k, 90_000 + j),
        )
        lines.append(bs.bundle_line(citer, [e], None))
    return lines


def _cpu_sampler(pid: int, out: dict[str, float], done: threading.Event) -> None:
    while not done.is_set():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out["writer"] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            pass
        done.wait(0.005)


def _fit(ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and value at the first point of ``ys`` against 0, 1, 2, ... (robust to one noisy run)."""
    xs = range(len(ys))
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-9)
    return slope, my - slope * mx


def apply(cli: str, ledger: Path, f: Path) -> dict[str, Any]:
    cpu: dict[str, float] = {}
    done = threading.Event()
    t = time.perf_counter()
    p = subprocess.Popen(
        [cli, "--ledger", str(ledger), "apply", str(f), "--batch-size", "10000", "-q", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    sampler = threading.Thread(target=_cpu_sampler, args=(p.pid, cpu, done), daemon=True)
    sampler.start()
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    if p.returncode != 0:
        sys.exit(f"{cli} apply {f} exited {p.returncode}: {err.decode(errors='replace')[-2000:]}")
    doc = json.loads(out)
    return {
        "wall": wall,
        "writer_cpu": cpu.get("writer", 0.0),
        "all_cpu": ru.ru_utime + ru.ru_stime,
        "new": doc.get("new"),
        "invalid": doc.get("invalid"),
        "unverified": doc.get("unverified"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pithledger", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    clis = dict(s.split("=", 1) for s in a.pithledger) or {"this": bs.PITHLEDGER}
    tmp = Path(tempfile.mkdtemp(prefix="bench-hot-"))
    try:
        bs.numbers_for("hot", 1)
        bs.numbers_for("citer", CITERS_PER_RUN * a.runs)
        hot, canon, citers = bs._NUMBERS["hot"][0], bs._CANON["hot"][0], bs._NUMBERS["citer"]
        import multiprocessing as mp

        t = time.perf_counter()
        with mp.get_context("fork").Pool(os.cpu_count() or 1) as pool:
            runs = pool.map(_run_lines, [(k, hot, canon, citers) for k in range(a.runs)])
        files = []
        for k, lines in enumerate(runs):
            files.append(tmp / f"run-{k + 1:02d}.jsonl")
            files[-1].write_bytes(b"".join(lines))
        print(
            f"workload: {a.runs} runs x 1 000 events into {hot} ({time.perf_counter() - t:.1f} s to sign)", flush=True
        )
        results: dict[str, list[dict[str, Any]]] = {label: [] for label in clis}
        for k, f in enumerate(files):
            for label, cli in clis.items():
                r = apply(cli, tmp / f"L-{label}", f)
                if r["new"] != 1000:
                    sys.exit(f"{label} run {k + 1}: new={r['new']} invalid={r['invalid']} unverified={r['unverified']}")
                results[label].append(r)
                print(
                    f"  run {k + 1:2d} {label:>8}: {r['wall']:.3f} s wall, writer CPU {r['writer_cpu']:.2f} s, "
                    f"all CPU {r['all_cpu']:.2f} s",
                    flush=True,
                )
        states = {
            label: subprocess.run(
                [cli, "--ledger", str(tmp / f"L-{label}"), "state", hot], capture_output=True, check=True
            ).stdout
            for label, cli in clis.items()
        }
        roots = {
            label: subprocess.run(
                [cli, "--ledger", str(tmp / f"L-{label}"), "digest", "--json"], capture_output=True, check=True
            ).stdout
            for label, cli in clis.items()
        }
        same = len(set(states.values())) == 1 and len(set(roots.values())) == 1
        print()
        n = len(files)
        print(
            f"| CLI | run 1 wall | run {n} wall | ratio | run 1 writer CPU | run {n} writer CPU | ratio | "
            f"median writer CPU of runs 1-3 / {n - 2}-{n} |"
        )
        print("|---|---|---|---|---|---|---|---|")
        summary: dict[str, Any] = {}
        for label, rs in results.items():
            first, last = rs[0], rs[-1]
            head, tail = (
                statistics.median(r["writer_cpu"] for r in rs[:3]),
                statistics.median(r["writer_cpu"] for r in rs[-3:]),
            )
            summary[label] = {
                "first_wall": first["wall"],
                "last_wall": last["wall"],
                "ratio": last["wall"] / first["wall"],
                "first_writer_cpu": first["writer_cpu"],
                "last_writer_cpu": last["writer_cpu"],
                "writer_ratio": last["writer_cpu"] / max(first["writer_cpu"], 1e-9),
                "median_writer_ratio": tail / max(head, 1e-9),
                "runs": rs,
            }
            slope, run1 = _fit([r["writer_cpu"] for r in rs])
            summary[label] |= {
                "fit_run1_writer_cpu": run1,
                "fit_writer_cpu_per_run": slope,
                "fit_ratio": (run1 + (n - 1) * slope) / max(run1, 1e-9),
            }
            s = summary[label]
            print(
                f"| {label} | {s['first_wall']:.2f} s | {s['last_wall']:.2f} s | {s['ratio']:.2f} x | "
                f"{s['first_writer_cpu']:.2f} s | {s['last_writer_cpu']:.2f} s | {s['writer_ratio']:.2f} x | "
                f"{head:.2f} / {tail:.2f} s = {s['median_writer_ratio']:.2f} x |"
            )
        for label, s in summary.items():
            print(
                f"{label}: least-squares line through the {n} runs' writer CPU: {s['fit_run1_writer_cpu']:.2f} s at run 1, "
                f"+{1000 * s['fit_writer_cpu_per_run']:.0f} ms a run (per 1 000 events held), run {n} / run 1 = {s['fit_ratio']:.2f} x"
            )
        print(
            f"\nstate of the hot record ({len(next(iter(states.values()))):,} bytes) and digest roots "
            f"{'identical' if same else 'DIFFER'} across CLIs"
        )
        if a.json:
            a.json.write_text(json.dumps({"clis": clis, "summary": summary, "identical": same}, indent=1))
        if not same:
            sys.exit(1)
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
