"""Debian's Chromium as the browser tests start it (cut from tests/e2e/render/test_record_page.py)."""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("PITHLEDGER_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
