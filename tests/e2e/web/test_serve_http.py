"""`pithledger serve` over HTTP: the real command, a real uvicorn server on 127.0.0.1, a real LMDB
ledger built by applying bundles/ (spec/serve.md)."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.clikit import _env, _pithledger
from helpers.eventpool import ALICE, P, bundles_of, pool, t
from helpers.site import BUNDLES, FZ7, PITH_SNIPPET, Y7E, Server, example_site, pl
from pithledger.audit import DEPTH
from pithledger.records.events import make_event
from pithledger.store import Ledger


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    yield from example_site(tmp_path_factory.mktemp("serve"))


def test_ld_json_reproduces_the_canonical_hash_as_pith_snippet_does(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    status, headers, body = server.request(f"/pith/{FZ7}", headers={"Accept": "application/ld+json"})
    assert status == 200 and headers["content-type"] == "application/ld+json"
    doc = json.loads(body)
    state = json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)
    expect = state["current"]["canonical_sha256"]
    # `jq -c '.canonical_record'` then Pith's own python3 one-liner, over the served bytes
    compact = json.dumps(doc["canonical_record"], separators=(",", ":"), ensure_ascii=False)
    out = subprocess.run(
        [sys.executable, "-c", PITH_SNIPPET], input=compact, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == expect == doc["canonical_sha256"]
    digest = bytes.fromhex(out)
    year = doc["canonical_record"]["metadata"]["submitted_at"][:4]
    assert f"pith:{year}:" + base64.b32encode(digest).decode()[:26] == doc["pith_number"] == state["pith_number"]
    assert doc["short_pith_number"] == f"pith:{FZ7[:8]}"


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="the shell pipeline needs curl and jq")
def test_the_readme_pipeline_in_a_shell(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    pipeline = (
        f"curl -sH 'Accept: application/ld+json' {server.base}/pith/{FZ7} | jq -c '.canonical_record' | "
        f'python3 -c "{PITH_SNIPPET}"'
    )
    out = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, check=True).stdout.strip()
    assert out == json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)["current"]["canonical_sha256"]


@pytest.mark.parametrize(
    "accept,kind",
    [
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "html"),  # a browser
        ("*/*", "html"),
        ("", "html"),
        ("application/json", "json"),
        ("application/ld+json", "ld"),
        ("application/json;q=0.9, text/html;q=0.5", "json"),
        ("text/html;q=0.1, application/ld+json", "ld"),
        ("application/json;q=0", "html"),
        ("image/png", "html"),
        ("garbage;;;,,,q=x/y", "html"),
        ("application/json;q=abc", "html"),
        ("a/" + "b" * 5000, "html"),
    ],
)
def test_content_negotiation(site: tuple[Server, Path, Path], accept: str, kind: str) -> None:
    server = site[0]
    status, headers, body = server.request(f"/pith/{FZ7}", headers={"Accept": accept} if accept else {})
    assert status == 200
    assert headers["vary"] == "Accept"
    if kind == "html":
        assert headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in headers["content-security-policy"]
        assert b"pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P" in body
    else:
        assert headers["content-type"] == ("application/ld+json" if kind == "ld" else "application/json")
        assert json.loads(body)["pith_number"] == "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


def test_state_and_bundle_are_the_ledger_bytes_with_content_addressed_etags(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    status, headers, body = server.request(f"/pith/{FZ7}/state.json")
    assert status == 200 and headers["content-type"] == "application/json"
    assert body == pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout.encode()
    assert headers["etag"] == '"' + hashlib.sha256(body).hexdigest() + '"'
    assert headers["cache-control"] == "public, max-age=60"
    assert headers["access-control-allow-origin"] == "*"
    status, h304, body304 = server.request(f"/pith/{FZ7}/state.json", headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body304 == b"" and h304["etag"] == headers["etag"]
    status, _, _ = server.request(f"/pith/{FZ7}/state.json", headers={"If-None-Match": '"00"'})
    assert status == 200
    exported = pl(tmp, "--ledger", str(ledger), "export", FZ7).stdout.splitlines()[0]
    for path in (f"/pith/{FZ7}/bundle.json", f"/.well-known/pith/{FZ7}/bundle.json"):
        status, headers, body = server.request(path)
        assert status == 200 and json.loads(body) == json.loads(exported)
        assert headers["etag"] == '"' + hashlib.sha256(body).hexdigest() + '"'


def test_head_has_the_headers_of_get_and_no_body(site: tuple[Server, Path, Path]) -> None:
    server = site[0]
    for path in (f"/pith/{FZ7}", f"/pith/{FZ7}/state.json", "/pith-mirrors.json", "/"):
        s1, h1, b1 = server.request(path)
        s2, h2, b2 = server.request(path, method="HEAD")
        assert s1 == s2 == 200 and b2 == b""
        assert h2["etag"] == h1["etag"] and h2["content-length"] == str(len(b1))


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND"])
def test_no_write_endpoints(site: tuple[Server, Path, Path], method: str) -> None:
    status, headers, body = site[0].request(f"/pith/{FZ7}/state.json", method=method, body=b"{}")
    assert status == 405
    assert headers["allow"] == "GET, HEAD, OPTIONS"
    assert json.loads(body)["error"] == "method-not-allowed"


def test_cors_preflight(site: tuple[Server, Path, Path]) -> None:
    status, headers, body = site[0].request(
        f"/pith/{FZ7}/state.json",
        method="OPTIONS",
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "GET"},
    )
    assert status == 204 and body == b""
    assert headers["access-control-allow-origin"] == "*"
    assert "GET" in headers["access-control-allow-methods"]


@pytest.mark.parametrize(
    "ident",
    [
        "2605.00424",
        "2605.00424v2",
        "arXiv:2605.00424",
        "10.48550/arxiv.2605.00424",
        "pith:FZ7AO632",
        "FZ7AO632",
        "fz7ao632hbv3",
        "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P",
        FZ7.lower(),
        "https://arxiv.org/abs/2605.00424",
    ],
)
def test_resolver_redirects_any_id_form_to_the_record(site: tuple[Server, Path, Path], ident: str) -> None:
    server = site[0]
    from urllib.parse import quote

    for path in (f"/resolve?id={quote(ident, safe='')}", f"/?id={quote(ident, safe='')}"):
        status, headers, _ = server.request(path)
        assert status == 302, path
        assert headers["location"] == f"/pith/{FZ7}"
    if "/" not in ident:
        status, headers, _ = server.request(f"/pith/{quote(ident, safe=':')}")
        assert (status, headers.get("location")) == ((200, None) if ident == FZ7 else (302, f"/pith/{FZ7}"))


@pytest.mark.parametrize(
    "ident",
    [
        "//evil.example/x",
        "https://evil.example/pith/FZ7AO632",
        "http://evil.example",
        "/\\evil.example",
        "javascript:alert(1)",
        "%0d%0aLocation:%20http://evil",
    ],
)
def test_resolver_never_redirects_off_site(site: tuple[Server, Path, Path], ident: str) -> None:
    from urllib.parse import quote

    status, headers, body = site[0].request(f"/resolve?id={quote(ident, safe='')}")
    assert status in (400, 404) and "location" not in headers
    assert json.loads(body)["error"] in ("malformed-id", "not-found")


@pytest.mark.parametrize(
    "path,status,code",
    [
        ("/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA", 404, "not-found"),
        ("/pith/AAAAAAAA", 404, "not-found"),
        ("/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/state.json", 404, "not-found"),
        ("/pith/2605.00424/state.json", 404, "not-found"),
        ("/pith/notanid!", 400, "malformed-id"),
        ("/pith/..%2F..%2F..%2Fetc%2Fpasswd", 400, "malformed-id"),
        ("/pith/../../etc/passwd", 404, "not-found"),
        ("/.well-known/pith/..%2Fdata.mdb/bundle.json", 404, "not-found"),
        ("/pith/" + "A" * 300, 400, "malformed-id"),
        ("/nothing-here", 404, "not-found"),
        ("/resolve", 400, "usage"),
        ("/?" + "q=" + "x" * 10_000, 400, "request-too-long"),
        ("/pith/" + "B" * 2000, 400, "request-too-long"),
        ("/events.json?since=-1", 400, "usage"),
        ("/events.json?limit=abc", 400, "usage"),
    ],
)
def test_errors_are_json_with_a_code(site: tuple[Server, Path, Path], path: str, status: int, code: str) -> None:
    got, headers, body = site[0].request(path)
    if path == "/pith/../../etc/passwd":  # http.client sends it verbatim; the server must not walk out
        assert got in (400, 404) and b"root:" not in body
        return
    assert got == status, body
    assert headers["content-type"] == "application/json"
    doc = json.loads(body)
    assert doc["error"] == code and isinstance(doc["message"], str) and doc["message"]
    assert headers["cache-control"] == "no-store"


def test_manifest_key_digest_and_log(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    manifest = json.loads(server.request("/pith-mirrors.json")[2])
    assert manifest["manifest_type"] == "pith_mirror_manifest" and manifest["manifest_version"] == "1.0"
    mirror = manifest["mirrors"][0]
    assert mirror["base_url"] == server.base
    assert mirror["state_pattern"] == server.base + "/pith/{suffix}/state.json"
    assert mirror["well_known_pattern"] == server.base + "/.well-known/pith/{suffix}/bundle.json"
    key = json.loads(server.request("/pith-signing-key.json")[2])["keys"][0]
    assert key["key_id"] == "pith-v1-2026-05"
    assert key["public_key_b64"] == "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="
    assert key["fingerprint_sha256_hex"] == "8d4b5ee74e4693bcd1df2446408b0d54"
    digest = json.loads(server.request("/digest.json")[2])
    cli = json.loads(pl(tmp, "--ledger", str(ledger), "--json", "digest").stdout)
    assert (digest["events_root"], digest["states_root"], digest["events"]) == (
        cli["events_root"],
        cli["states_root"],
        cli["events"],
    )
    page = json.loads(server.request("/events.json?since=0&limit=10")[2])
    assert [e["seq"] for e in page["events"]] == list(range(10)) and page["next"] == "/events.json?since=10&limit=10"
    events = json.loads(server.request(f"/pith/{FZ7}/events.json")[2])
    assert events["pith_number"] == f"pith:2026:{FZ7}" and len(events["events"]) >= 10


def test_index_page_lists_records_and_roots(site: tuple[Server, Path, Path]) -> None:
    server = site[0]
    status, headers, body = server.request("/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    html = body.decode()
    digest = json.loads(server.request("/digest.json")[2])
    assert digest["events_root"] in html and digest["states_root"] in html
    assert len(re.findall(r'href="pith/[A-Z2-7]{26}"', html)) == 50  # the 50 records, newest first
    assert "Identitas: A Better Way To Be Meaningless" in html  # the supplied title matches its hash
    status, _, body = server.request("/?id=0000.00000")
    assert status == 404 and b"no record of arXiv 0000.00000" in body


def test_display_metadata_is_checked_against_the_record_hashes(site: tuple[Server, Path, Path]) -> None:
    doc = json.loads(site[0].request(f"/pith/{Y7E}", headers={"Accept": "application/json"})[2])
    checks = {f["name"]: f["check"] for f in doc["display_metadata"]}
    assert checks == {"title": "match", "authors": "unchecked", "abstract": "mismatch"}


def test_display_metadata_changes_no_state_or_digest(tmp_path: Path) -> None:
    ledger = tmp_path / "l"
    pl(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES))
    before = (
        pl(tmp_path, "--ledger", str(ledger), "state", Y7E).stdout,
        pl(tmp_path, "--ledger", str(ledger), "digest").stdout,
        pl(tmp_path, "--ledger", str(ledger), "export", Y7E).stdout,
    )
    pl(tmp_path, "--ledger", str(ledger), "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"))
    after = (
        pl(tmp_path, "--ledger", str(ledger), "state", Y7E).stdout,
        pl(tmp_path, "--ledger", str(ledger), "digest").stdout,
        pl(tmp_path, "--ledger", str(ledger), "export", Y7E).stdout,
    )
    assert before == after
    assert pl(tmp_path, "--ledger", str(ledger), "fsck").returncode == 0


def test_it_reads_while_apply_writes(tmp_path: Path) -> None:
    """A read-only server keeps answering while `apply` commits in another process, and shows the new
    events without a restart (LMDB readers never wait for the writer)."""
    ledger = tmp_path / "l"
    pl(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-50-records.jsonl"))
    server = Server(ledger, tmp_path)
    try:
        first = server.request(f"/pith/{FZ7}/state.json")
        assert first[0] == 200
        first_page = server.request(f"/pith/{FZ7}")
        first_badge = server.request(f"/pith/{FZ7}/badge.svg")
        assert first_badge[0] == 200 and b"not attested" in first_badge[2]
        first_doc = json.loads(server.request(f"/pith/{Y7E}", headers={"Accept": "application/json"})[2])
        apply = subprocess.Popen(
            [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", str(BUNDLES)],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        statuses = []
        while apply.poll() is None:
            statuses.append(server.request(f"/pith/{FZ7}/state.json")[0])
            statuses.append(server.request(f"/pith/{FZ7}")[0])
        assert apply.returncode == 0
        assert set(statuses) <= {200}
        after = server.request(f"/pith/{FZ7}/state.json")
        assert after[0] == 200 and after[1]["etag"] != first[1]["etag"]
        assert len(json.loads(after[2])["current"]["author_attestations"]) == 1
        page = server.request(f"/pith/{FZ7}")  # a cached page follows the state
        assert (
            page[1]["etag"] != first_page[1]["etag"]
            and b"Josiah Carberry" in page[2]
            and b"Josiah Carberry" not in first_page[2]
        )
        badge = server.request(f"/pith/{FZ7}/badge.svg")  # so does a cached badge
        assert b"claimed" in badge[2] and b"not attested" not in badge[2] and badge[1]["etag"] != first_badge[1]["etag"]
        # display metadata supplied while serving shows at once (and the cached record JSON follows it)
        assert {f["check"] for f in first_doc["display_metadata"]} == {"unchecked"}
        pl(tmp_path, "--ledger", str(ledger), "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"))
        doc = json.loads(server.request(f"/pith/{Y7E}", headers={"Accept": "application/json"})[2])
        assert [f["check"] for f in doc["display_metadata"]] == ["match", "unchecked", "mismatch"]
    finally:
        server.stop()


def test_keep_alive_requests_are_not_delayed(site: tuple[Server, Path, Path]) -> None:
    """TCP_NODELAY: without it a keep-alive response's second write waits for a delayed ACK (~40 ms)."""
    conn = http.client.HTTPConnection("127.0.0.1", site[0].port, timeout=30)
    times = []
    for _ in range(6):
        t = time.perf_counter()
        conn.request("GET", f"/pith/{FZ7}/state.json")
        conn.getresponse().read()
        times.append(time.perf_counter() - t)
    conn.close()
    assert sorted(times)[3] < 0.030, times


def test_port_in_use_is_a_named_error(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    proc = pl(tmp, "--ledger", str(ledger), "serve", "--port", str(server.port), check=False)
    assert proc.returncode == 1
    assert (
        proc.stderr.startswith("error[port-in-use]: port") and "hint:" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_no_ledger_is_a_named_error(tmp_path: Path) -> None:
    proc = pl(tmp_path, "--ledger", str(tmp_path / "none"), "serve", "--port", "0", check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("error[no-ledger]") and "Traceback" not in proc.stderr


def test_bad_base_url_is_a_usage_error(tmp_path: Path) -> None:
    proc = pl(tmp_path, "serve", "--base-url", "javascript:alert(1)", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error[usage]")


def test_the_command_line_does_not_load_the_server_stack() -> None:
    code = (
        "import sys, pithledger.cli, pithledger.cli.app, pithledger.cli._fast, pithledger.mirror.publish; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'httptools')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_base_url_names_this_mirror(tmp_path: Path) -> None:
    ledger = tmp_path / "l"
    pl(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-50-records.jsonl"))
    server = Server(ledger, tmp_path, "--base-url", "https://mirror.example.org/", "--name", "example <mirror>")
    try:
        manifest: dict[str, Any] = json.loads(server.request("/pith-mirrors.json")[2])
        assert manifest["mirrors"][0]["base_url"] == "https://mirror.example.org"
        assert manifest["mirrors"][0]["name"] == "example <mirror>"
        html = server.request(f"/pith/{FZ7}")[2].decode()
        assert "curl -sH &#x27;Accept: application/ld+json&#x27; https://mirror.example.org/pith/" + FZ7 in html
        assert "example &lt;mirror&gt;" in html and "example <mirror>" not in html
        t0 = time.monotonic()
        server.request("/", headers={"Host": "evil.example"})
        assert "evil.example" not in server.request(f"/pith/{FZ7}", headers={"Host": "evil.example"})[2].decode()
        assert time.monotonic() - t0 < 10
    finally:
        server.stop()


def test_publish_writes_the_same_page_for_static_hosts(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    out = tmp / "pub"
    pl(tmp, "--ledger", str(ledger), "publish", str(out))
    static = (out / "pith" / FZ7 / "index.html").read_text()
    served = server.request(f"/pith/{FZ7}")[2].decode()
    # the same renderer: the same sections and numbers; links relative to each page
    for text in (f"pith:2026:{FZ7}", "Record completeness", "Receipt and verification", "Timeline (", "Cites (1)"):
        assert text in static and text in served
    assert f'href="../../pith/{FZ7}/bundle.json"' in static and f'href="../pith/{FZ7}/bundle.json"' in served
    assert 'http-equiv="Content-Security-Policy"' in static
    assert f"curl -s $MIRROR/pith/{FZ7}/bundle.json" in static  # a static host cannot negotiate: the bundle path
    index = (out / "index.html").read_text()
    assert len(re.findall(r'href="pith/[A-Z2-7]{26}/index.html"', index)) == 50
    assert json.loads((out / "pith-signing-key.json").read_text())["keys"][0]["key_id"] == "pith-v1-2026-05"
    # readers of a published tree ignore the pages: audit still finds the two mirrors consistent
    assert pl(tmp, "audit", str(ledger), str(out)).returncode == 0


def test_a_damaged_record_is_a_json_500_and_the_rest_is_served(tmp_path: Path) -> None:
    import lmdb

    ledger = tmp_path / "l"
    pl(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES))
    env = lmdb.open(str(ledger), max_dbs=32)
    with env.begin(write=True) as txn:
        txn.put(f"pith:2026:{FZ7}".encode(), b"not zlib", db=env.open_db(b"state", txn=txn))
    env.close()
    server = Server(ledger, tmp_path)
    try:
        for path in (f"/pith/{FZ7}/state.json", f"/pith/{FZ7}"):
            status, headers, body = server.request(path)
            assert status == 500 and headers["content-type"] == "application/json", body
            assert json.loads(body)["error"] in ("ledger-error", "server-error")
        assert server.request(f"/pith/{Y7E}/state.json")[0] == 200
    finally:
        server.stop()


def test_a_live_server_is_a_mirror_sync_and_audit_can_read(site: tuple[Server, Path, Path]) -> None:
    """/pithledger/... answers the published layout (spec/audit.md §4) from the live ledger: the same
    bytes publish writes, so `sync` and `audit` take the server's URL as a source."""
    server, ledger, tmp = site
    out = tmp / "pub-layout"
    pl(tmp, "--ledger", str(ledger), "publish", str(out))
    # the static resolve index (pithledger/resolve/) is publish's alone: serve resolves live (spec/audit.md §4)
    files = sorted(p for p in (out / "pithledger").rglob("*.json") if "resolve" not in p.relative_to(out).parts)
    assert len(files) > 50
    for f in files[:: max(1, len(files) // 40)] + [out / "pithledger" / "digest.json"]:
        status, _, body = server.request("/" + str(f.relative_to(out)))
        assert status == 200 and body == f.read_bytes(), f
    assert server.request("/pithledger/nodes/root-" + "0" * 24 + ".json")[0] == 404
    assert server.request("/pithledger/nodes/..%2F..%2Fdata.mdb")[0] == 404
    assert server.request("/pithledger/records/2026/" + FZ7 + "/bundle-9.json")[0] == 404
    copy = tmp / "synced"
    synced = pl(tmp, "--ledger", str(copy), "sync", server.base, check=False)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert pl(tmp, "audit", server.base, str(ledger)).returncode == 0
    assert pl(tmp, "audit", str(copy), str(ledger)).returncode == 0


def test_a_node_whose_bucket_holds_pending_work_is_503_until_finished(tmp_path: Path) -> None:
    """While an apply is running (or after one was killed) a bucket's stored leaves lag its records' events:
    its node is not answered (503 derivation-pending, Retry-After), never answered inconsistent."""
    ledger = tmp_path / "ledger"
    with Ledger(ledger, create=True) as led:
        led.apply_batch(bundles_of(pool()))
        late = make_event("author_attestation", P[0], {"author_name": "Late Author"}, ALICE, created_at=t(20))
        led.apply_batch(bundles_of([late]), defer=True)  # as a killed apply leaves it
    bucket = P[0].rsplit(":", 1)[1][:DEPTH]
    server = Server(ledger, tmp_path)
    try:
        status, headers, body = server.request(f"/pithledger/nodes/{bucket}-{'0' * 24}.json")
        assert status == 503 and headers["retry-after"] == "30"
        assert json.loads(body)["error"] == "derivation-pending"
        pl(tmp_path, "--ledger", str(ledger), "digest")  # a whole-view reader finishes the work
        status, _, body = server.request(f"/pithledger/nodes/{bucket}-{'0' * 24}.json")
        assert status == 404 and json.loads(body)["error"] == "not-found"  # answered again: only the tag is stale
    finally:
        server.stop()


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_on_every_interface_needs_a_base_url(tmp_path: Path, host: str) -> None:
    """Bound to a wildcard address, the bound address is no URL anyone can follow: every link, the
    manifest and the record documents would advertise http://0.0.0.0:PORT. Refused before binding."""
    r = _pithledger("--ledger", str(tmp_path / "L"), "serve", "--host", host, "--port", "0", cwd=tmp_path)
    assert r.returncode == 2 and "error[usage]" in r.stderr and "--base-url" in r.stderr, r.stderr
    assert "serving" not in r.stderr
