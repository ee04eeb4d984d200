"""A loopback server that speaks ONLY Pith's paths (no /pithledger/ layout), for tests of `pull`:

``/pith-mirrors.json``, ``/pith/<suffix>/bundle.json``, ``/.well-known/pith/<suffix>/bundle.json`` and
``/api/pith-number/resolve?arxiv=|doi=|pith=...&json=true``. HTTP/1.1 keep-alive (Content-Length
framing), ETags (sha256 of the body) with If-None-Match -> 304. It counts accepted connections and
requests per path, and can misbehave per record (``faults``).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes
from pithledger.store import Ledger


def bundles_of(ledger_path: Path) -> dict[str, bytes]:
    """Every record's bundle (what `pithledger export` gives first), by 26-character suffix."""
    out: dict[str, bytes] = {}
    with Ledger(ledger_path, readonly=True) as ledger:
        for number in ledger.subjects():
            out[ids.suffix_of_pith_number(number)] = canonical_bytes(ledger.export(number))
    return out


class PithSite:
    """``bundles``: suffix -> bundle bytes. ``faults``: suffix -> one of "hang", "500", "garbage",
    "oversize", "missing" (404 on both paths), "no-primary" (404 on /pith/, served on /.well-known/),
    or "other:<suffix>" (serves another record's bundle). ``resolve``: ID text -> long Pith Number
    overrides (lies). ``mirrors``: the manifest's mirror list (default: this server alone)."""

    def __init__(
        self,
        bundles: dict[str, bytes],
        *,
        faults: dict[str, str] | None = None,
        resolve: dict[str, str] | None = None,
        etags: bool = True,
    ) -> None:
        self.bundles = dict(bundles)
        self.faults = dict(faults or {})
        self.resolve_override = dict(resolve or {})
        self.etags = etags
        self.mirrors: list[dict[str, Any]] | None = None
        self.manifest_bytes: bytes | None = None
        self.connections = 0
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.aliases: dict[str, str] = {}
        for suffix, data in self.bundles.items():
            doc = json.loads(data)
            number = doc["pith_number"]
            for a in doc.get("source_aliases", []):
                self.aliases[f"{a['alias_kind']}:{a['alias_value']}".lower()] = number
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # head and body are two writes: no 40 ms wait for a delayed ACK between them

            def setup(self) -> None:
                with site.lock:
                    site.connections += 1
                super().setup()

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                site.handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PithSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def manifest(self) -> bytes:
        if self.manifest_bytes is not None:
            return self.manifest_bytes
        b = self.base_url
        mirrors = self.mirrors or [
            {
                "name": "test",
                "mirror_type": "https",
                "base_url": b,
                "status": "primary",
                "bundle_pattern": f"{b}/pith/{{suffix}}/bundle.json",
                "well_known_pattern": f"{b}/.well-known/pith/{{suffix}}/bundle.json",
                "public_key": {"key_id": "not-trusted", "public_key_b64": "AAAA"},
            }
        ]
        return json.dumps(
            {"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0", "mirrors": mirrors}
        ).encode()

    # --- answering ---------------------------------------------------------------------------

    def _send(
        self,
        h: http.server.BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        *,
        etag: bool = False,
        length: int | None = None,
    ) -> None:
        tag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        if etag and self.etags and status == 200 and h.headers.get("If-None-Match") == tag:
            h.send_response(304)
            h.send_header("ETag", tag)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body) if length is None else length))
        if etag and self.etags and status == 200:
            h.send_header("ETag", tag)
        h.end_headers()
        h.wfile.write(body)

    def handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        parts = urllib.parse.urlsplit(h.path)
        path = parts.path
        with self.lock:
            self.requests[path] += 1
        if path == "/pith-mirrors.json":
            return self._send(h, 200, self.manifest())
        if path == "/api/pith-number/resolve":
            return self._resolve(h, urllib.parse.parse_qs(parts.query))
        for prefix, well_known in (("/pith/", False), ("/.well-known/pith/", True)):
            if path.startswith(prefix) and path.endswith("/bundle.json"):
                return self._bundle(h, path[len(prefix) : -len("/bundle.json")], well_known)
        self._send(h, 404, b'{"error":"not-found"}')

    def _bundle(self, h: http.server.BaseHTTPRequestHandler, suffix: str, well_known: bool) -> None:
        fault = self.faults.get(suffix, "")
        if suffix not in self.bundles or fault == "missing" or (fault == "no-primary" and not well_known):
            return self._send(h, 404, b'{"error":"not-found"}')
        if fault == "hang":
            self.release.wait(20)
            return None
        if fault == "500":
            return self._send(h, 500, b'{"error":"internal"}')
        if fault == "garbage":
            return self._send(h, 200, b"\x00{not json at all", etag=True)
        if fault == "oversize":
            return self._send(h, 200, b"{}", length=65 * 1024 * 1024)  # declared over the cap: refused before the body
        if fault.startswith("other:"):
            return self._send(h, 200, self.bundles[fault[6:]], etag=True)
        self._send(h, 200, self.bundles[suffix], etag=True)

    def _resolve(self, h: http.server.BaseHTTPRequestHandler, query: dict[str, list[str]]) -> None:
        if query.get("json") != ["true"]:
            return self._send(h, 400, b'{"error":"json=true expected"}')
        for kind in ("arxiv", "doi", "pith"):
            if kind in query:
                text = query[kind][0]
                break
        else:
            return self._send(h, 400, b'{"error":"no id"}')
        number = self.resolve_override.get(text)
        if number is None:
            if kind == "pith":
                short = text.split(":", 1)[-1].upper()
                found = sorted({n for n in self.aliases.values() if n.rsplit(":", 1)[-1].startswith(short)})
                number = found[0] if len(found) == 1 else None
            elif kind == "arxiv":
                number = self.aliases.get(
                    ("arxiv_version:" if "v" in text.rsplit(".", 1)[-1] else "arxiv:") + text.lower()
                )
            else:
                number = self.aliases.get("doi:" + text.lower())
        if number is None:
            return self._send(h, 404, b'{"error":"not-found"}')
        self._send(h, 200, msgspec.json.encode({"pith_number": number, "json": True}))
