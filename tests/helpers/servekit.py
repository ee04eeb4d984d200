"""`pithledger serve` in its own process on a free loopback port, for the tests that talk HTTP to it.
Each test module gives it the environment its CLI runs in (its own XDG and key directories)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


class Server:
    def __init__(self, ledger: Path, env: dict[str, str], *extra: str, timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "serve", "--port", "0", *extra],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"at http://127\.0\.0\.1:(\d+)/", line)
        assert m, line + (self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(m[1])
        self.base = f"http://127.0.0.1:{self.port}"
        self.timeout = timeout

    def request(
        self, path: str, method: str = "GET", headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def raw_request(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """A request with no header but Host: the path exactly as given, nothing added."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            conn.endheaders()
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def json(self, path: str) -> Any:
        status, _, body = self.request(path)
        assert status == 200, (path, status, body[:300])
        return json.loads(body)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            self.proc.wait()
