"""`pithledger serve` under hostility (issue #20 §2): figures before/after, over a real `serve` process.

    python bench/bench_serve_hostile.py LEDGER SUFFIX

LEDGER: any ledger; SUFFIX: a record's 26-character suffix (a hot one: e.g. flooded with 600 valid
integrity findings of 100 kB each). Prints JSON: the page's size and latency (cold, warm), the latency of
/digest.json while 4 clients fetch the page's JSON (uncached) in a loop, what another client gets while
one client holds 1,000 half-sent requests, and the server's CPU and RSS for one 32 MiB header value.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _proc_stat(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def _get(port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, int, float]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, len(resp.read()), time.perf_counter() - start
    finally:
        conn.close()


def main() -> None:
    ledger, suffix = sys.argv[1], sys.argv[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", ledger, "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    m = re.search(r":(\d+)/", proc.stderr.readline())
    assert m
    port = int(m[1])
    out: dict[str, Any] = {}
    try:
        status, size, cold = _get(port, f"/pith/{suffix}")
        warm = min(_get(port, f"/pith/{suffix}")[2] for _ in range(3))
        out["page"] = {"status": status, "bytes": size, "cold_s": round(cold, 3), "warm_s": round(warm, 4)}

        # cheap requests while heavy ones build (the record JSON, each time with a new Accept: no cache hit
        # is forced by varying nothing, so use the bundle, which is built on every request)
        stop = threading.Event()

        def heavy() -> None:
            while not stop.is_set():
                _get(port, f"/pith/{suffix}/bundle.json")

        workers = [threading.Thread(target=heavy, daemon=True) for _ in range(4)]
        for w in workers:
            w.start()
        time.sleep(0.5)
        lat = sorted(_get(port, "/digest.json")[2] for _ in range(20))
        stop.set()
        for w in workers:
            w.join(60)
        out["digest_while_4_bundle_loops"] = {"p50_s": round(lat[10], 4), "max_s": round(lat[-1], 4)}

        # slowloris: 1,000 half-sent requests from 127.0.0.2, then another client from 127.0.0.1
        held = []
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.2", 0))
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            held.append(s)
        statuses = [_get(port, "/digest.json", timeout=10)[0] for _ in range(5)]
        out["other_client_while_1000_half_sent"] = statuses
        for s in held:
            s.close()
        time.sleep(1.5)

        # one 32 MiB header value
        cpu0, rss0 = _proc_stat(proc.pid)
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall(b"GET /digest.json HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        start = time.perf_counter()
        try:
            while sent < 32 * 1024 * 1024:
                s.sendall(b"a" * 65536)
                sent += 65536
            s.sendall(b"\r\n\r\n")
            answer = s.recv(200)
        except OSError:
            answer = b"(reset)"
        s.close()
        time.sleep(0.5)
        cpu1, rss1 = _proc_stat(proc.pid)
        out["header_32MiB"] = {
            "answer": answer[:40].decode("latin-1"),
            "client_sent": sent,
            "wall_s": round(time.perf_counter() - start, 2),
            "server_cpu_s": round(cpu1 - cpu0, 2),
            "server_rss_growth_MiB": round((rss1 - rss0) / 2**20, 1),
        }
    finally:
        proc.terminate()
        proc.wait(30)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
