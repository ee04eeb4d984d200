"""Shared by tests/e2e/mirror/test_tlog_publish.py and tests/e2e/tlog/test_tlog_commands.py: the real command line in
subprocesses with a private key directory, ledgers grown batch by batch with really signed events,
a real `serve` on loopback, and a tampering proxy in front of one."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import servekit
from helpers.common import ROOT
from helpers.eventpool import ALICE, IDS, RECS, P
from pithledger.records.bundle import write_bundle
from pithledger.records.events import make_event

BUNDLES = ROOT / "bundles"
SUBJECT = P[0]


def env(tmp: Path) -> dict[str, str]:
    out = dict(os.environ)
    out["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    out["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    out["PITHLEDGER_KEYS"] = str(tmp / "keys")
    out.pop("PITHLEDGER_LEDGER", None)
    out.pop("PITHLEDGER_LOG_KEY", None)
    return out


def pl(tmp: Path, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args],
        capture_output=True,
        text=True,
        env=env(tmp),
        timeout=300,
        input=input,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def attestations(n: int, start: int, subject: str = SUBJECT, signer: Any = ALICE) -> list[dict[str, Any]]:
    """``n`` distinct valid events about ``subject`` (its record_created first when ``start`` is 0)."""
    out: list[dict[str, Any]] = []
    if start == 0:
        out.append(
            make_event(
                "record_created",
                subject,
                {"canonical_record": RECS[0], "canonical_sha256": IDS[0].canonical_sha256},
                signer,
                created_at="2026-06-01T00:00:00Z",
            )
        )
    for i in range(start, start + n):
        out.append(
            make_event(
                "author_attestation",
                subject,
                {"author_name": f"Author {i}"},
                signer,
                created_at=f"2026-06-02T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
            )
        )
    return out


def grow(tmp: Path, ledger: Path, n: int, start: int, *, name: str = "") -> None:
    """Apply ``n`` more events (see :func:`attestations`) to ``ledger``."""
    path = tmp / f"grow-{name or ledger.name}-{start}.json"
    path.write_text(json.dumps(write_bundle(SUBJECT, attestations(n, start))))
    pl(tmp, "--ledger", str(ledger), "apply", str(path))


def base_ledger(tmp: Path, name: str = "ledger") -> Path:
    """A ledger holding bundles/ (65 events, one a Pith-envelope record_created)."""
    ledger = tmp / name
    pl(tmp, "--ledger", str(ledger), "apply", str(BUNDLES))
    return ledger


def vkey_of(tmp: Path, ledger: Path, key: str, *extra: str) -> str:
    doc = json.loads(pl(tmp, "--ledger", str(ledger), "checkpoint", "--key", key, "--json", *extra).stdout)
    vkey: str = doc["log_key"]
    return vkey


class Server(servekit.Server):
    def __init__(self, ledger: Path, tmp: Path, *extra: str) -> None:
        super().__init__(ledger, env(tmp), *extra)

    def request(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:  # type: ignore[override]
        return self.raw_request(path, method)  # tile and checkpoint paths exactly as given: no normalising


class TamperingProxy:
    """A loopback HTTP server that forwards every GET to ``upstream`` and passes each answer through
    ``mutate(path, body) -> body``: a hostile mirror in front of an honest ``serve``."""

    def __init__(self, upstream: int, mutate: Callable[[str, bytes], bytes]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
                conn.request("GET", self.path)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                if resp.status == 200:
                    body = mutate(self.path, body)
                self.send_response(resp.status)
                self.send_header("content-type", resp.getheader("content-type") or "application/octet-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
