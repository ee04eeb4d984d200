"""The lingering close of `pithledger serve` (issue #31 item 4; spec/serve.md §4): figures over a real server.

    python bench/bench_serve_linger.py [TRIES]

Builds a ledger holding the test vector record in a temporary directory, serves it with --accept-events on
127.0.0.1, and prints JSON:
- ``clients``: for urllib.request, http.client and curl (when installed), with a 5 MB body sent with
  Content-Length and chunked, how many of TRIES (default 20) POSTs saw the 413, and the errors of the others;
- ``idle``: whether a connection is still drained after its client sent nothing for 3 s, and reset after 7 s
  (Limits.linger_timeout 5 s);
- ``trickle``: seconds until a client sending 1 KiB every 0.5 s without end is cut off (linger_time 30 s);
- ``flood``: bytes a client sending as fast as it can got in before it was cut off (linger_bytes 16 MiB,
  plus kernel buffers), and how long that took;
- ``loop``: /digest.json latency in ms (median, max of 50) idle; while 31 connections of one address flood
  lingering connections (the event loop drains them); and, for comparison, while 31 connections POST bodies
  of 1 MiB, within the cap (each read whole, then refused 400: what any client may do without lingering);
  with the server's CPU seconds meanwhile.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "vectors" / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
ACTION = "/pith/FHIBFT2FCAH6TNYKWKJEBOYM4L/action/author_attestation"
BIG = 5 * 1024 * 1024


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _body(chunked: bool) -> bytes | Iterator[bytes]:
    return (b" " * 65536 for _ in range(BIG // 65536)) if chunked else b" " * BIG


def _urllib(port: int, chunked: bool, _: Path) -> str:
    try:
        urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}{ACTION}", data=_body(chunked), method="POST"), timeout=60
        )
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except (urllib.error.URLError, OSError) as exc:
        return type(getattr(exc, "reason", exc)).__name__
    return "no error"


def _http_client(port: int, chunked: bool, _: Path) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", ACTION, body=_body(chunked))
        return str(conn.getresponse().status)
    except OSError as exc:
        return type(exc).__name__
    finally:
        conn.close()


def _curl(port: int, chunked: bool, big: Path) -> str:
    framing = ["-H", "Transfer-Encoding: chunked"] if chunked else []
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            *framing,
            "--data-binary",
            f"@{big}",
            f"http://127.0.0.1:{port}{ACTION}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout if out.stdout != "000" else out.stderr.strip()[:60]


def _oversized(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"POST {ACTION} HTTP/1.1\r\nHost: x\r\nContent-Length: {10**15}\r\n\r\n".encode())
    return sock


def _cut_off(sock: socket.socket, pause: float, block: bytes) -> tuple[float, int]:
    """Send ``block`` every ``pause`` s until the server cuts the connection: (seconds, bytes sent)."""
    start, sent = time.monotonic(), 0
    try:
        while time.monotonic() - start < 120:
            sock.sendall(block)
            sent += len(block)
            if pause:
                time.sleep(pause)
    except OSError:
        pass
    return time.monotonic() - start, sent


def _idle(port: int, seconds: float) -> str:
    with _oversized(port) as sock:
        sock.sendall(b" " * 65536)
        time.sleep(seconds)
        try:
            for _ in range(20):  # the first send after the close draws the reset, a later one fails
                sock.sendall(b" " * 1024)
                time.sleep(0.05)
        except OSError:
            return "reset"
        return "drained"


def _latencies(port: int, n: int = 50) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/digest.json")
        conn.getresponse().read()
        conn.close()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    tmp = Path(tempfile.mkdtemp(prefix="bench-linger-"))
    env = {**os.environ, "XDG_DATA_HOME": str(tmp / "data"), "XDG_CONFIG_HOME": str(tmp / "config")}
    cli = [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp / "L")]
    subprocess.run([*cli, "apply", str(RECORD)], check=True, capture_output=True, env=env)
    proc = subprocess.Popen(
        [
            *cli,
            "serve",
            "--port",
            "0",
            "--accept-events",
            "--post-rate",
            "10000",
            "--post-burst",
            "10000",
            "--post-total-rate",
            "10000",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    m = re.search(r":(\d+)/", proc.stderr.readline())
    assert m
    port = int(m[1])
    big = tmp / "big.json"
    big.write_bytes(b" " * BIG)
    out: dict[str, Any] = {"load": os.getloadavg(), "tries": tries}
    try:
        clients = {
            "urllib.request": _urllib,
            "http.client": _http_client,
            **({"curl": _curl} if shutil.which("curl") else {}),
        }
        out["clients"] = {}
        for name, fn in clients.items():
            for chunked in (False, True):
                seen: dict[str, int] = {}
                for _ in range(tries):
                    answer = fn(port, chunked, big)
                    seen[answer] = seen.get(answer, 0) + 1
                out["clients"][f"{name} {'chunked' if chunked else 'content-length'}"] = seen
        out["idle"] = {"3s": _idle(port, 3), "7s": _idle(port, 7)}
        with _oversized(port) as sock:
            seconds, _ = _cut_off(sock, 0.5, b" " * 1024)
        out["trickle_s"] = round(seconds, 1)
        with _oversized(port) as sock:
            seconds, sent = _cut_off(sock, 0, b" " * 65536)
        out["flood"] = {"bytes": sent, "s": round(seconds, 3)}

        idle = _latencies(port)
        stop = threading.Event()

        def flood() -> None:
            while not stop.is_set():
                try:
                    with _oversized(port) as sock:
                        _cut_off(sock, 0, b" " * 65536)
                except OSError:
                    pass

        def within() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            body = b" " * (1 << 20)
            while not stop.is_set():
                try:
                    conn.request("POST", ACTION, body=body)
                    conn.getresponse().read()
                except OSError:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.close()

        def under(target: Any) -> tuple[list[float], float, float]:
            stop.clear()
            threads = [threading.Thread(target=target, daemon=True) for _ in range(31)]
            for t in threads:
                t.start()
            time.sleep(1)
            cpu, start = _cpu(proc.pid), time.monotonic()
            busy = _latencies(port)
            cpu, wall = _cpu(proc.pid) - cpu, time.monotonic() - start
            stop.set()
            for t in threads:
                t.join(timeout=60)
            return busy, cpu, wall

        def figures(lat: list[float]) -> list[float]:
            return [round(statistics.median(lat) * 1e3, 2), round(max(lat) * 1e3, 2)]

        out["loop"] = {"idle_ms": figures(idle)}
        for name, target in (("lingering_flood", flood), ("bodies_within_cap", within)):
            busy, cpu, wall = under(target)
            out["loop"][name] = {"ms": figures(busy), "server_cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
