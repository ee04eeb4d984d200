"""Load test of the action endpoints (`serve --accept-events`, spec/serve.md §8) on loopback: POSTed
events accepted per second and POST latency (p50, p99), while GET clients read state.json and the
record page back to back.

    .venv/bin/python bench/bench_actions.py [--events 3000] [--posters 16] [--getters 2] [--seconds 60] [--spread]

The ledger holds Pith's receipted record FHIBFT2FCAH6TNYKWKJEBOYM4L (tests/vectors); ``--events``
distinct author attestations about it are signed beforehand (real Ed25519, 64 keys) and POSTed by
``--posters`` threads, each on its own keep-alive connection (http.client), one event per request;
``--getters`` processes GET state.json and the HTML page meanwhile. Rate limits are lifted
(--post-rate etc. set high) so the writer, not the limiter, is measured. Every POST must answer 201;
at the end the ledger is checked (`fsck`) and must hold every event. Only 127.0.0.1 is contacted;
everything lives in one temporary directory, deleted at the end. Not run in CI.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD_DOC = ROOT / "tests" / "vectors" / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
NUMBER = "pith:2025:" + SUFFIX


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, env=env, check=True
    )


def _events(n: int, numbers: list[str]) -> list[tuple[str, bytes]]:
    from pithledger.records.bundle import write_bundle
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import make_event
    from pithledger.records.keys import LocalKey

    keys = [LocalKey(name=f"k{i}", seed=hashlib.sha256(f"bench actions {i}".encode()).digest()) for i in range(64)]
    out = []
    for i in range(n):
        number = numbers[i % len(numbers)]
        ev = make_event(
            "author_attestation",
            number,
            {"author_name": f"Author {i}"},
            keys[i % 64],
            created_at=f"2026-06-{1 + i // 86400 % 28:02d}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        out.append((number.rsplit(":", 1)[1], canonical_bytes(write_bundle(number, [ev]))))
    return out


def _getter(port: int, stop: Any, out: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    paths = [f"/pith/{SUFFIX}/state.json", f"/pith/{SUFFIX}"]
    while not stop.is_set():
        conn.request("GET", paths[n % 2])
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
        n += 1
    out.put(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--posters", type=int, default=16)
    ap.add_argument("--getters", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0, help="upper bound of the POST phase")
    ap.add_argument(
        "--spread",
        action="store_true",
        help="also apply bundles/demo-50-records.jsonl and spread the events over all 51 records",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-actions-"))
    env = dict(os.environ, XDG_DATA_HOME=str(tmp / "d"), XDG_CONFIG_HOME=str(tmp / "c"))
    env.pop("PITHLEDGER_LEDGER", None)
    server = None
    try:
        ledger = tmp / "L"
        _cli("--ledger", str(ledger), "apply", str(RECORD_DOC), env=env)
        numbers = [NUMBER]
        if args.spread:
            demo = ROOT / "bundles" / "demo-50-records.jsonl"
            _cli("--ledger", str(ledger), "apply", str(demo), env=env)
            numbers += [json.loads(line)["pith_number"] for line in demo.read_text().splitlines() if line.strip()]
        t0 = time.monotonic()
        bodies = _events(args.events, numbers)
        print(f"signed {len(bodies):,} events in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pithledger.cli",
                "--ledger",
                str(ledger),
                "serve",
                "--port",
                "0",
                "--accept-events",
                "--post-rate",
                "100000",
                "--post-burst",
                "100000",
                "--post-total-rate",
                "100000",
                "--post-wait",
                "30",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert server.stderr is not None
        m = re.search(r":(\d+)/", server.stderr.readline())
        assert m
        port = int(m[1])
        stop = mp.Event()
        queue: Any = mp.Queue()
        getters = [mp.Process(target=_getter, args=(port, stop, queue)) for _ in range(args.getters)]
        for g in getters:
            g.start()
        time.sleep(0.5)
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        lock = threading.Lock()
        todo = iter(bodies)
        deadline = time.monotonic() + args.seconds

        def poster() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            while time.monotonic() < deadline:
                with lock:
                    nxt = next(todo, None)
                if nxt is None:
                    return
                suffix, body = nxt
                s = time.perf_counter()
                conn.request(
                    "POST",
                    f"/pith/{suffix}/action/author_attestation",
                    body=body,
                    headers={"content-type": "application/json"},
                )
                resp = conn.getresponse()
                resp.read()
                took = time.perf_counter() - s
                with lock:
                    latencies.append(took)
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1

        start = time.monotonic()
        threads = [threading.Thread(target=poster) for _ in range(args.posters)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.monotonic() - start
        stop.set()  # the getters ran from 0.5 s before the POSTs until now
        gets = sum(queue.get(timeout=60) for _ in getters)
        for g in getters:
            g.join()
        accepted = statuses.get(201, 0)
        lat = sorted(latencies)
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
        state = json.loads(_cli("--ledger", str(ledger), "state", SUFFIX, env=env).stdout)
        held = json.loads(_cli("--ledger", str(ledger), "digest", "--json", env=env).stdout)["events"] - len(numbers)
        del state
        server.terminate()
        server.wait(timeout=30)
        server = None
        fsck = _cli("--ledger", str(ledger), "fsck", env=env).stdout.strip()
        result = {
            "events_posted": len(lat),
            "statuses": statuses,
            "accepted_per_s": round(accepted / elapsed, 1),
            "p50_ms": round(p(0.50), 1),
            "p99_ms": round(p(0.99), 1),
            "max_ms": round(lat[-1] * 1000, 1),
            "seconds": round(elapsed, 2),
            "posters": args.posters,
            "getters": args.getters,
            "gets_per_s_meanwhile": round(gets / (elapsed + 0.5), 1),
            "records": len(numbers),
            "events_held": held,
            "fsck": fsck,
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        }
        print(json.dumps(result, indent=1))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
