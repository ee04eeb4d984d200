"""The real entry point in a subprocess with its own XDG directories, and junk ledgers to feed it (cut from
the issue #20 hardening tests, now in tests/e2e/ and tests/unit/ by feature)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.adversary import unsigned_pith_event
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PITHLEDGER_LEDGER", "PITHLEDGER_KEYS")}
    return env | {"XDG_DATA_HOME": str(tmp_path / "xdg-data"), "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")} | extra


def _pith(n: int) -> str:
    import base64
    import hashlib

    return "pith:2026:" + base64.b32encode(hashlib.sha256(b"hardening %d" % n).digest()).decode()[:26]


def _junk(path: Path, subjects: int, per: int, first: int = 0) -> int:
    """A .jsonl file of Pith-envelope events nobody can check (kept as evidence), one subject a bundle."""
    with path.open("wb") as fh:
        for s in range(first, first + subjects):
            events = [unsigned_pith_event(_pith(s), n=s * 100_000 + i) for i in range(per)]
            fh.write(canonical_bytes(write_bundle(_pith(s), events)) + b"\n")
    return subjects * per


def _pithledger(*args: str, cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(cwd),
        timeout=120,
        **kw,
    )


def _lines(screen: str) -> list[str]:
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    return [x for x in re.split(r"[\r\n]", plain) if x.strip()]


KINDS = [
    "author_attestation",
    "challenge",
    "citation_signature",
    "graph_snapshot",
    "integrity_finding",
    "record_created",
    "replication_record",
    "revocation",
    "storage_attestation",
    "timestamp_anchor",
]


def usage_error(r: Any, command: str | None = None) -> None:
    assert r.code == 2, (r.code, r.err)
    assert r.err.startswith("error[usage]: "), r.err
    assert "\nhint: " in r.err
    if command is not None:
        assert f"hint: run 'pithledger{' ' + command if command else ''} --help'" in r.err, r.err
    assert "╭" not in r.err and "Traceback" not in r.err and "Usage:" not in r.err
