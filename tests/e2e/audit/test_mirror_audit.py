"""Digests, publish, sync and audit — over directories and a real HTTP server on 127.0.0.1.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/audit/test_mirror_audit.py."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.common import ROOT
from helpers.eventpool import pool
from helpers.ledgers import ledger_with
from pithledger.audit import compare
from pithledger.mirror.publish import Published, publish, sync


@pytest.fixture
def serve() -> Iterator:  # type: ignore[type-arg]
    servers = []

    def start(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_sync_and_audit_over_http(tmp_path: Path, serve) -> None:  # type: ignore[no-untyped-def]
    events = pool()
    with ledger_with(tmp_path / "a", events) as a:
        publish(a, tmp_path / "pub")
        url = serve(tmp_path / "pub")
        with ledger_with(tmp_path / "b", events[:10]) as b:
            before = compare(b, Published(url))
            assert not before.consistent
            sync(b, url)
            assert compare(b, Published(url)).consistent and compare(a, b).consistent


def test_cli_audit_sign_and_verify(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = ROOT / "bundles"
    cli("--ledger", "A", "apply", str(root))
    cli("--ledger", "B", "apply", str(root / "demo-50-records.jsonl"))
    ok = cli("audit", "A", "A")
    assert ok.code == 0 and ok.out.startswith("consistent:")
    bad = cli("audit", "A", "B")
    assert bad.code == 1 and "DIVERGENT pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P events-differ; B lacks sha256:" in bad.out
    cli("keys", "new", "auditor")
    signed = cli("audit", "A", "B", "--sign", "auditor")
    assert signed.code == 1
    (tmp_path / "report.json").write_text(signed.out)
    v = cli("verify", "report.json")
    assert v.code == 0 and "valid      audit report signed by auditor" in v.out
    report = json.loads(signed.out)
    report["consistent"] = True
    (tmp_path / "forged.json").write_text(json.dumps(report))
    f = cli("verify", "forged.json")
    assert f.code == 1 and "error[bad-signature]" in f.err


def test_cli_publish_sync_digest(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = ROOT / "bundles"
    cli("--ledger", "A", "apply", str(root))
    cli("keys", "new", "mirror")
    assert cli("--ledger", "A", "publish", "pub", "--key", "mirror", "--base-url", "https://m.example").code == 0
    manifest = json.loads((tmp_path / "pub" / "pith-mirrors.json").read_text())
    assert manifest["mirrors"][0]["public_key"]["key_id"] == "mirror"
    assert manifest["mirrors"][0]["bundle_pattern"] == "https://m.example/pith/{suffix}/bundle.json"
    assert (tmp_path / "pub" / ".well-known" / "pith" / "FZ7AO632HBV3FATAUUZ6Y44Y3P" / "bundle.json").is_file()
    s = cli("--ledger", "C", "sync", "pub")
    assert s.code == 0 and "65 new events" in s.out  # Pith's record document's event too
    assert (
        cli("--ledger", "A", "digest", "--json").json()["states_root"]
        == cli("--ledger", "C", "digest", "--json").json()["states_root"]
    )
    assert cli("audit", "pub", "C").code == 0
