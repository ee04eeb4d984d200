"""A real `pithledger serve` over the example bundles, and the real command line beside it
(cut from tests/e2e/web/test_serve_http.py, which the page, badge, browser, agent and witness tests share)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from helpers import servekit
from helpers.clikit import _env
from helpers.common import ROOT

BUNDLES = ROOT / "bundles"
FZ7 = "FZ7AO632HBV3FATAUUZ6Y44Y3P"  # arXiv 2605.00424, with events of every kind
Y7E = "Y7E6GU4Z4U7GLKBD2HP5I5NPRX"  # arXiv 1709.09021, display metadata supplied

# What Pith's record page prints under "Verify this Pith Number yourself" (the part after jq).
PITH_SNIPPET = (
    "import sys,json,hashlib; b=json.dumps(json.loads(sys.stdin.read()), sort_keys=True, separators=(',',':'), "
    "ensure_ascii=False).encode(); print(hashlib.sha256(b).hexdigest())"
)


def pl(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, env=_env(tmp), timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


class Server(servekit.Server):
    def __init__(self, ledger: Path, tmp: Path, *extra: str) -> None:
        super().__init__(ledger, _env(tmp), *extra)


def example_site(tmp: Path) -> Iterator[tuple[Server, Path, Path]]:
    """A server over a ledger of bundles/ with the sample display metadata: (server, ledger, tmp)."""
    ledger = tmp / "ledger"
    pl(tmp, "--ledger", str(ledger), "apply", str(BUNDLES))
    pl(tmp, "--ledger", str(ledger), "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"))
    server = Server(ledger, tmp)
    yield server, ledger, tmp
    server.stop()
