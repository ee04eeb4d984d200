"""`serve --base-url https://host/mirror` behind a proxy that serves it under a path (issue #31 item 7,
spec/serve.md §2): every redirect the server emits (/resolve, /?id=, short ids under /pith/, /paper/, the
resolver without json=true, the search boxes' target) and every link in its pages and JSON keeps the
path. Once with requests as nginx forwards them (the prefix stripped), once through a real nginx
(`location /mirror/ { proxy_pass http://127.0.0.1:PORT/; }`) followed with a real client."""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from helpers.nginxkit import NGINX
from helpers.nginxkit import reserved_port as _reserved_port
from helpers.site import BUNDLES, FZ7, Server, pl

PREFIX = "/mirror"

#: Requests that redirect to FZ7's page, as a client sends them: every identifier route, the search boxes'
#: target as a browser submits it (Accept: text/html), short forms under /pith/, the resolver without json=true.
REDIRECTS = [
    ("/resolve?id=2605.00424", {}),
    ("/resolve/2605.00424", {}),
    ("/resolve?id=pith:FZ7AO632", {}),
    ("/resolve?id=2605.00424", {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}),
    ("/?id=FZ7AO632", {"Accept": "text/html"}),
    ("/index.html?q=2605.00424", {"Accept": "text/html"}),
    ("/pith/FZ7AO632", {}),
    ("/pith/pith:FZ7AO632", {}),
    ("/pith/FZ7AO632HBV3", {}),
    ("/pith/10.48550/arxiv.2605.00424", {}),
    ("/paper/FZ7AO632", {}),
    ("/paper/2605.00424", {}),
    ("/api/pith-number/resolve?arxiv=2605.00424", {}),
    ("/api/pith-number/resolve?pith=FZ7AO632&json=false", {}),
]


class Proxied:
    def __init__(self, server: Server, proxy_port: int) -> None:
        self.server, self.proxy_port = server, proxy_port


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    """A server whose --base-url is the nginx address below, with its path."""
    tmp = tmp_path_factory.mktemp("prefix")
    ledger = tmp / "ledger"
    pl(tmp, "--ledger", str(ledger), "apply", str(BUNDLES))
    with _reserved_port() as held:
        port = int(held.getsockname()[1])
        server = Server(ledger, tmp, "--base-url", f"http://127.0.0.1:{port}{PREFIX}/")
        yield Proxied(server, port)
        server.stop()


def test_every_redirect_keeps_the_base_urls_path(proxied: Proxied) -> None:
    """The requests as nginx forwards them (its prefix stripped): each Location is under the prefix."""
    for path, headers in REDIRECTS:
        status, got, _ = proxied.server.request(path, headers=headers)
        assert status == 302 and got["location"] == f"{PREFIX}/pith/{FZ7}", (path, headers, status, got.get("location"))
    # Starlette's slash redirects were built from Host (an address behind the proxy, or a forged one).
    for path in ("/digest.json/", "/pith-mirrors.json/", "/checkpoint/", "/index.html/", "/pithledger/digest.json/"):
        status, got, _ = proxied.server.request(path, headers={"Host": "evil.example"})
        assert status == 404 and "location" not in got, (path, status, got.get("location"))
    _, _, body = proxied.server.request("/events.json?limit=1")
    assert re.search(rb'"next":"/mirror/events\.json\?since=1&limit=1"', body), body[:300]


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.forms: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and name in ("href", "src", "action"):
                (self.forms if tag == "form" else self.refs).append(value)


def _refs(body: bytes) -> _Refs:
    parser = _Refs()
    parser.feed(body.decode())
    return parser


def test_pages_link_and_search_within_the_prefix(proxied: Proxied) -> None:
    """No link, image or form in the pages leaves the prefix: each is relative (or absolute under the base URL)."""
    for path in ("/", f"/pith/{FZ7}", "/resolve?id=nonsense-id"):
        _, _, body = proxied.server.request(path, headers={"Accept": "text/html"})
        refs = _refs(body)
        assert refs.forms, path
        for ref in refs.refs + refs.forms:
            assert not ref.startswith("/") or ref.startswith(f"{PREFIX}/"), (path, ref)


# --- through a real nginx ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nginx(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if NGINX is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is missing: CI installs it (apt-get install -y nginx)")
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    tmp = tmp_path_factory.mktemp("nginx")
    (tmp / "logs").mkdir()
    conf = tmp / "nginx.conf"
    conf.write_text(f"""
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/logs/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{proxied.proxy_port} reuseport;
        location {PREFIX}/ {{ proxy_max_temp_file_size 0; proxy_pass http://127.0.0.1:{proxied.server.port}/; }}
    }}
}}
""")
    proc = subprocess.Popen(
        [NGINX, "-p", str(tmp), "-c", str(conf), "-e", f"{tmp}/logs/error.log"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{proxied.proxy_port}{PREFIX}/"
    deadline = time.monotonic() + 30
    while True:  # wait until nginx answers (a poll, not a sleep that decides the outcome)
        try:
            with urllib.request.urlopen(base + "digest.json", timeout=5) as resp:
                assert resp.status == 200
            break
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"nginx did not start: {proc.communicate()[1].decode()[-2000:]}") from None
            time.sleep(0.05)
    yield base
    proc.terminate()
    proc.wait(timeout=20)


def test_behind_nginx_redirects_and_the_search_box_reach_the_record(nginx: str) -> None:
    page_url = f"{nginx}pith/{FZ7}"
    for path, headers in REDIRECTS:
        request = urllib.request.Request(urljoin(nginx, path.lstrip("/")), headers=headers)
        with urllib.request.urlopen(request, timeout=30) as resp:  # follows the 302
            assert resp.status == 200 and resp.url == page_url, (path, resp.url)
            assert f"pith:2026:{FZ7}".encode() in resp.read()
    # The search box of the index, submitted as a browser does: its action resolved against the page's URL.
    with urllib.request.urlopen(nginx, timeout=30) as resp:
        forms = _refs(resp.read()).forms
    target = urljoin(nginx, forms[0]) + "?id=2605.00424"
    with urllib.request.urlopen(urllib.request.Request(target, headers={"Accept": "text/html"}), timeout=30) as resp:
        assert resp.url == page_url and resp.status == 200
        refs = _refs(resp.read())
    # Every link and form on the record page stays under the prefix and answers.
    for ref in refs.refs + refs.forms:
        url = urljoin(page_url, ref)
        if urlsplit(url).netloc != urlsplit(nginx).netloc or "#" in ref:
            continue
        assert urlsplit(url).path.startswith(f"{PREFIX}/"), ref
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                assert resp.status == 200, ref
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and ref in refs.forms, (ref, exc.code)  # a form's target without its query
