"""Issue #31 item 2: readers of `serve --accept-events` while one address POSTs bodies that are costly to
decode (spec/serve.md §8, the value cap). Readers GET state.json back to back, first alone, then while
one attacker (127.0.0.1, default limits) POSTs the attack body as fast as the server lets it (a 429 is
waited out for its Retry-After, so the attacker stays at the rate limit). Prints JSON: the readers'
answers per second and median latency in each phase (unloaded, attacked, unloaded again), the ratio of the
attacked rate to the mean unloaded one (target >= 0.5), the attacker's
statuses, and the machine's load average.

    .venv/bin/python bench/bench_action_cost.py [--seconds 15] [--readers 1] [--junk N] [--pretty]

The attack body: a signed author attestation whose payload gained ``"junk": [[],[],...]`` up to the
ledger's event limit (1 MiB, ~349,000 empty arrays; its id no longer matches: refused, costing the
attacker nothing). ``--junk N``: N empty arrays instead (e.g. just under the value cap, to measure what
a body the cap admits still costs); ``--pretty``: the body indented (strict decoding's slower path). Only 127.0.0.1 is contacted; everything lives in one temporary
directory, deleted at the end. Not run in CI.
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD_DOC = ROOT / "tests" / "vectors" / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
NUMBER = "pith:2025:" + SUFFIX


def attack_body(junk: int | None = None, pretty: bool = False) -> bytes:
    """A bundle of one signed event whose payload carries ``junk`` empty arrays (default: as many as the
    ledger's event limit admits)."""
    from pithledger.records.bundle import write_bundle
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import MAX_EVENT_BYTES, make_event
    from pithledger.records.keys import LocalKey

    key = LocalKey(name="mallory", seed=hashlib.sha256(b"bench action cost").digest())
    event = make_event("author_attestation", NUMBER, {"author_name": "Mallory"}, key, created_at="2026-06-01T00:00:00Z")
    if junk is None:
        empty = len(canonical_bytes(event | {"payload": {"author_name": "Mallory", "junk": []}}))
        junk = (MAX_EVENT_BYTES - empty) // 3  # "[]," each
    bundle = write_bundle(NUMBER, [event | {"payload": {"author_name": "Mallory", "junk": [[]] * junk}}])
    return json.dumps(bundle, indent=1).encode() if pretty else canonical_bytes(bundle)


def _reader(port: int, seconds: float, out: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    lat: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = time.perf_counter()
        conn.request("GET", f"/pith/{SUFFIX}/state.json")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
        lat.append(time.perf_counter() - s)
    out.put(lat)


def _attacker(port: int, body: bytes, stop: Any, out: Any) -> None:
    statuses: dict[int, int] = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        try:
            conn.request(
                "POST",
                f"/pith/{SUFFIX}/action/author_attestation",
                body=body,
                headers={"content-type": "application/json"},
            )
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException):  # the server closed the connection: open another
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        if resp.getheader("connection", "").lower() == "close":
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        if resp.status == 429:
            stop.wait(float(resp.getheader("retry-after") or 1))
    out.put(statuses)


def _phase(port: int, readers: int, seconds: float, body: bytes | None) -> dict[str, Any]:
    q: Any = mp.Queue()
    stop = mp.Event()
    attacker = None
    if body is not None:
        attacker = mp.Process(target=_attacker, args=(port, body, stop, q))
        attacker.start()
        time.sleep(0.5)  # the first attack bodies are on their way
    procs = [mp.Process(target=_reader, args=(port, seconds, q)) for _ in range(readers)]
    for p in procs:
        p.start()
    lat = [
        x for _ in procs for x in q.get(timeout=seconds + 120)
    ]  # before join: a child exits once its queue is flushed
    for p in procs:
        p.join()
    out: dict[str, Any] = {
        "gets_per_s": round(len(lat) / seconds, 1),
        "median_ms": round(statistics.median(lat) * 1000, 2),
        "max_ms": round(max(lat) * 1000, 1),
    }
    if attacker is not None:
        stop.set()
        out["attacker_statuses"] = q.get(timeout=180)
        attacker.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--junk", type=int, default=None, help="empty arrays in the attack payload (default: up to 1 MiB)")
    ap.add_argument("--pretty", action="store_true", help="indent the attack body (not msgspec's compact form)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-action-cost-"))
    env = dict(os.environ, XDG_DATA_HOME=str(tmp / "d"), XDG_CONFIG_HOME=str(tmp / "c"))
    env.pop("PITHLEDGER_LEDGER", None)
    server = None
    try:
        ledger = tmp / "L"
        subprocess.run(
            [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", str(RECORD_DOC)],
            capture_output=True,
            env=env,
            check=True,
        )
        body = attack_body(args.junk, args.pretty)
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
        load0 = os.getloadavg()[0]
        alone = _phase(port, args.readers, args.seconds, None)
        attacked = _phase(port, args.readers, args.seconds, body)
        after = _phase(port, args.readers, args.seconds, None)  # the machine is shared: unloaded on both sides
        unloaded = (alone["gets_per_s"] + after["gets_per_s"]) / 2
        result = {
            "attack_body_bytes": len(body),
            "unloaded": alone,
            "under_attack": attacked,
            "unloaded_after": after,
            "ratio": round(attacked["gets_per_s"] / unloaded, 3),
            "target": 0.5,
            "loadavg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
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
