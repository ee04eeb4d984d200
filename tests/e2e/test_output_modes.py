"""What `-o` writes gets the mode `open()` would give it (issue #31 item 7, spec/serve.md §7): 0644 under
the usual umask 022 for `event`, `export`, `prove` and `latex` (mkstemp's 0600 hid them from a web server or
a co-author's account), a stricter umask followed, a replaced file's mode kept; keys stay 0600. Real CLI
subprocesses, each started under the umask under test."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from helpers.common import PITH_RECORDS

from helpers.site import _env

A, B = PITH_RECORDS[0], PITH_RECORDS[1]
CITATION = json.dumps({"cited_pith_number": B["pith_number"], "relation": "uses_method"})


def run(tmp: Path, *args: str, umask: int) -> subprocess.CompletedProcess[str]:
    old = os.umask(umask)  # the child inherits it
    try:
        proc = subprocess.run([sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True,
                              env=_env(tmp), cwd=tmp, timeout=120)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    return proc


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _outputs(tmp: Path, umask: int) -> dict[str, Path]:
    """Every `-o` output, written under ``umask``: name -> path."""
    out = tmp / "out"
    out.mkdir()
    ledger = str(tmp / "ledger")
    run(tmp, "keys", "new", "alice", umask=umask)
    run(tmp, "event", "record_created", "--key", "alice", "--payload",
        json.dumps({"canonical_record": A["canonical_record"]}), "-o", str(out / "created.json"), umask=umask)
    run(tmp, "event", "citation_signature", "--key", "alice", "--subject", A["pith_number"], "--payload", CITATION,
        "-o", str(out / "event.json"), umask=umask)
    run(tmp, "--ledger", ledger, "apply", str(out / "created.json"), str(out / "event.json"), umask=umask)
    run(tmp, "--ledger", ledger, "export", A["pith_number"], "-o", str(out / "export.jsonl"), umask=umask)
    event_id = json.loads((out / "event.json").read_text())["events"][0]["event_id"]
    run(tmp, "--ledger", ledger, "prove", event_id, "--key", "alice", "-o", str(out / "proof.json"), umask=umask)
    run(tmp, "latex", "-o", str(out), umask=umask)
    return {"event": out / "event.json", "export": out / "export.jsonl", "prove": out / "proof.json",
            "latex": out / "pith.sty"}


def test_every_output_is_world_readable_under_umask_022_and_keys_stay_private(tmp_path: Path) -> None:
    files = _outputs(tmp_path, 0o022)
    assert {name: oct(mode(p)) for name, p in files.items()} == {name: "0o644" for name in files}
    assert mode(tmp_path / "xdg-config" / "pithledger" / "keys" / "alice.key.json") == 0o600
    assert not [p for p in files["event"].parent.iterdir() if p.name.endswith(".tmp")]  # no temporary left behind


def test_a_strict_umask_is_followed_and_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    files = _outputs(tmp_path, 0o077)
    assert {mode(p) for p in files.values()} == {0o600}
    # A file the user made private stays private when a command writes over it under umask 022.
    target = tmp_path / "private.json"
    target.write_text("old")
    target.chmod(0o600)
    run(tmp_path, "event", "citation_signature", "--key", "alice", "--subject", A["pith_number"], "--payload", CITATION,
        "-o", str(target), umask=0o022)
    assert mode(target) == 0o600 and json.loads(target.read_text())["events"]
