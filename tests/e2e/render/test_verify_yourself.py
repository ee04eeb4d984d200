"""The record page's "Verify this Pith Number yourself — with pithledger" commands, run literally in a shell
in an empty directory, give the state_sha256 the page promises — for a record that others cite, whose
bundle lacks the inbound citations (issue #31 item 7, spec/serve.md §5). Once from `pithledger serve`, once
from a published tree served by `python3 -m http.server`, both on loopback."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.site import BUNDLES, Server, _env, pl

CITED = "GHGOR674YFXPXVI65Z7PPAT6KY"  # arXiv 1905.08204, cited by FZ7AO632's citation_signature in bundles/

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the page's commands use curl")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("verify-yourself")
    path = tmp / "ledger"
    pl(tmp, "--ledger", str(path), "apply", str(BUNDLES))
    state = json.loads(pl(tmp, "--ledger", str(path), "state", CITED).stdout)
    assert state["current"]["inbound_citations"], "the record must be cited by another"
    yield path


def _run_the_pages_commands(page: bytes, tmp: Path) -> tuple[str, str]:
    """The "with pithledger" block, run as written: (state_sha256 printed, state_sha256 promised)."""
    blocks = re.findall(r'<h3>([^<]*)</h3><pre class="snippet">(.*?)</pre>', page.decode(), re.S)
    commands = html.unescape(dict(blocks)["with pithledger"])
    promised = re.search(r"state_sha256: ([0-9a-f]{64})", commands)
    assert promised, commands
    footer = re.search(r"<footer>state_sha256 ([0-9a-f]{64})", page.decode())
    assert footer and footer[1] == promised[1]
    work = tmp / "verify-yourself"
    work.mkdir()
    env = _env(tmp) | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, (commands, proc.stdout[-2000:], proc.stderr[-2000:])
    got = json.loads(proc.stdout.splitlines()[-1])["state_sha256"]
    return got, promised[1]


def test_served_pages_commands_reproduce_the_promised_state_of_a_cited_record(ledger: Path, tmp_path: Path) -> None:
    server = Server(ledger, tmp_path)
    try:
        status, _, page = server.request(f"/pith/{CITED}", headers={"Accept": "text/html"})
        assert status == 200
        got, promised = _run_the_pages_commands(page, tmp_path)
    finally:
        server.stop()
    assert got == promised


def test_published_pages_commands_reproduce_the_promised_state_of_a_cited_record(ledger: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    # The static server binds port 0 and says which port it got (a free port picked beforehand could be
    # taken meanwhile by a test running in parallel); the tree is published under that address after.
    static = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(tree)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert static.stdout is not None
        listening = re.search(r"Serving HTTP on \S+ port (\d+)", static.stdout.readline())  # it listens
        assert listening
        port = int(listening[1])
        pl(tmp_path, "--ledger", str(ledger), "publish", str(tree), "--base-url", f"http://127.0.0.1:{port}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/pith/{CITED}/index.html", timeout=30) as resp:
            page = resp.read()
        got, promised = _run_the_pages_commands(page, tmp_path)
    finally:
        static.terminate()
        static.wait(timeout=20)
    assert got == promised
    # A record nobody cites: its export is its bundle, one file on disk.
    export, bundle = (
        tree / "pith" / "FZ7AO632HBV3FATAUUZ6Y44Y3P" / "export.jsonl",
        tree / "pith" / "FZ7AO632HBV3FATAUUZ6Y44Y3P" / "bundle.json",
    )
    assert os.path.samefile(export, bundle)
    assert (
        export.read_bytes()
        == pl(tmp_path, "--ledger", str(ledger), "export", "FZ7AO632HBV3FATAUUZ6Y44Y3P").stdout.encode()
    )
