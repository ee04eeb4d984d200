"""Load test of `pithledger serve` on loopback: requests/s and latency (p50, p99) for a record's
state.json and its HTML page, idle and while an `apply` of a generated workload runs in another process;
and the ASGI stack comparison behind spec/adr/0007 (same app and ledger, three stacks).

    .venv/bin/python bench/bench_serve.py [--papers 400] [--apply-papers 3000] [--seconds 6] [--clients 2] [--rounds 2]

Bounded: every measuring phase stops after ``--seconds`` or ``--max-requests`` requests, whichever comes
first; the apply is killed if it outlives the run. Only 127.0.0.1 is ever contacted. Not run in CI.

Workload: bench_suite.py's generator (real Pith records varied, 20 signed events per paper: captures,
author claims, 8 citations, replications, findings; 64 demo keys). The base ledger holds ``--papers``
papers (tag "main"); during the load phases `pithledger apply` ingests ``--apply-papers`` more (tag
"growth", in files of 500 papers, one after another) through the real CLI. Clients: ``--clients``
processes, each one keep-alive HTTP/1.1 connection (http.client) sending requests back to back over 50
records of the base ledger. Server, clients and apply share this machine's cores: the figures are what
one 2-core machine does with all three on it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_suite as bs  # noqa: E402  (the workload generators)

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable


def _pl(*args: str) -> list[str]:
    return [PY, "-m", "pithledger.cli", *args]


def start(cmd: list[str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line}{proc.stderr.read()}")
    return proc, int(m[1])


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _client(args: tuple[int, list[str], float, int, dict[str, str]]) -> tuple[list[int], int, float, float]:
    """One keep-alive connection, requests back to back until the deadline or the count. Returns
    (latencies in ns, non-200 count, start, end)."""
    import http.client

    port, paths, deadline, max_requests, headers = args
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat: list[int] = []
    bad = 0
    t0 = time.time()
    i = 0
    while time.time() < deadline and i < max_requests:
        path = paths[i % len(paths)]
        s = time.perf_counter_ns()
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        lat.append(time.perf_counter_ns() - s)
        if resp.status != 200:
            bad += 1
        i += 1
    conn.close()
    return lat, bad, t0, time.time()


def load(
    port: int, paths: list[str], seconds: float, clients: int, max_requests: int, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    deadline = time.time() + seconds
    with mp.get_context("fork").Pool(clients) as pool:
        parts = pool.map(
            _client,
            [
                (port, paths[k::clients] or paths, deadline, max_requests // clients, headers or {})
                for k in range(clients)
            ],
        )
    lat = sorted(x for p in parts for x in p[0])
    window = max(p[3] for p in parts) - min(p[2] for p in parts)
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] / 1e6  # noqa: E731
    return {
        "requests": len(lat),
        "non_200": sum(p[1] for p in parts),
        "seconds": round(window, 2),
        "req_per_s": round(len(lat) / window, 1),
        "p50_ms": round(q(0.50), 2),
        "p99_ms": round(q(0.99), 2),
        "max_ms": round(lat[-1] / 1e6, 2),
        "mean_ms": round(statistics.mean(lat) / 1e6, 2),
    }


RAW_APP = """
import sys, uvicorn
from pathlib import Path
from pithledger.web.serve import Site, etag_of, bind, url_of
site = Site(Path(sys.argv[1]), base_url="http://127.0.0.1")
async def app(scope, receive, send):
    suffix = scope["path"].split("/")[2]
    body = site.state_bytes(site.subject(suffix)) + b"\\n"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"),
                (b"etag", etag_of(body).encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
sock = bind("127.0.0.1", 0)
print("serving at " + url_of(sock) + "/", file=sys.stderr, flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", http="httptools", loop="asyncio")).run(sockets=[sock])
"""

H11_APP = """
import sys
from pathlib import Path
from pithledger.web.serve import run
run(Path(sys.argv[1]), port=0, http="h11")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=400)
    ap.add_argument("--apply-papers", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--max-requests", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the stack comparison")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    R: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "args": vars(a)}
    gen = bs.Gen()
    try:
        t = time.perf_counter()
        bs.numbers_for("main", a.papers)
        bs.numbers_for("growth", a.apply_papers)
        base = [
            x
            for p in gen.run([("papers", "main", x, y, False) for x, y in bs.chunks(0, a.papers, 50)])
            for x in p["papers"]
        ]
        (tmp / "base.jsonl").write_bytes(b"".join(base))
        files = []
        for k, (x, y) in enumerate(bs.chunks(0, a.apply_papers, 500)):
            lines = [
                z
                for p in gen.run([("papers", "growth", u, v, False) for u, v in bs.chunks(x, y, 50)])
                for z in p["papers"]
            ]
            f = tmp / f"growth-{k}.jsonl"
            f.write_bytes(b"".join(lines))
            files.append(f)
        gen.close()
        print(
            f"workload generated in {time.perf_counter() - t:.0f} s: base {a.papers} papers ({20 * a.papers:,} events), "
            f"apply {a.apply_papers} papers ({20 * a.apply_papers:,} events) in {len(files)} files",
            flush=True,
        )
        ledger = tmp / "ledger"
        subprocess.run(
            _pl("--ledger", str(ledger), "apply", str(tmp / "base.jsonl"), "-q"), check=True, stdout=subprocess.DEVNULL
        )
        suffixes = [n.rsplit(":", 1)[1] for n in bs._NUMBERS["main"][:50]]
        state_paths = [f"/pith/{s}/state.json" for s in suffixes]
        page_paths = [f"/pith/{s}" for s in suffixes]

        # 1. the stack comparison (idle ledger, state.json)
        R["stacks"] = {}
        stacks = (
            ("starlette+uvicorn(httptools)", _pl("--ledger", str(ledger), "serve", "--port", "0")),
            ("starlette+uvicorn(h11)", [PY, "-c", H11_APP, str(ledger)]),
            ("raw ASGI+uvicorn(httptools)", [PY, "-c", RAW_APP, str(ledger)]),
        )
        for rnd in range(a.rounds):  # rounds alternate the stacks, so drift hits each alike
            for name, cmd in stacks:
                proc, port = start(cmd)
                try:
                    load(port, state_paths, 1.0, a.clients, a.max_requests)  # warm up
                    got = load(port, state_paths, a.seconds, a.clients, a.max_requests)
                finally:
                    stop(proc)
                R["stacks"].setdefault(name, []).append(got)
                print(f"stack {name:<30} round {rnd + 1} state.json {got}", flush=True)

        # 2. the served figures: idle, then while apply runs
        proc, port = start(_pl("--ledger", str(ledger), "serve", "--port", "0"))
        try:
            load(port, state_paths, 1.0, a.clients, a.max_requests)
            R["idle"] = {
                "state.json": load(port, state_paths, a.seconds, a.clients, a.max_requests),
                "page": load(port, page_paths, a.seconds, a.clients, a.max_requests),
            }
            print(f"idle   state.json {R['idle']['state.json']}\nidle   page       {R['idle']['page']}", flush=True)
            applied: dict[str, Any] = {"files": 0, "start": time.time()}
            apply_done = threading.Event()
            current: list[subprocess.Popen[bytes]] = []

            def run_apply() -> None:
                for f in files:
                    if apply_done.is_set():
                        break
                    p = subprocess.Popen(
                        _pl("--ledger", str(ledger), "apply", str(f), "-q", "--json"), stdout=subprocess.PIPE
                    )
                    current[:] = [p]
                    out, _ = p.communicate()
                    if p.returncode == 0:
                        applied["files"] += 1
                        applied["new"] = applied.get("new", 0) + json.loads(out)["new"]
                applied["end"] = time.time()
                apply_done.set()

            worker = threading.Thread(target=run_apply, daemon=True)
            worker.start()
            time.sleep(0.5)
            during = {"state.json": load(port, state_paths, a.seconds, a.clients, a.max_requests)}
            during["page"] = load(port, page_paths, a.seconds, a.clients, a.max_requests)
            still = not apply_done.is_set()
            apply_done.set()
            for p in current:
                if p.poll() is None:
                    p.wait(timeout=600)
            worker.join(timeout=600)
            during["apply"] = {
                "files_applied": applied["files"],
                "new_events": applied.get("new", 0),
                "seconds": round(applied.get("end", time.time()) - applied["start"], 1),
                "still_running_when_load_ended": still,
            }
            R["during_apply"] = during
            print(
                f"apply  state.json {during['state.json']}\napply  page       {during['page']}\napply  {during['apply']}",
                flush=True,
            )
        finally:
            stop(proc)
        out = Path(__file__).parent / "results-serve.json"
        out.write_text(json.dumps(R, indent=2) + "\n")
        print(f"wrote {out}")
    finally:
        gen.close()
        if not a.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
