"""What `-o` writes gets the mode `open()` would give it (issue #31 item 7, spec/serve.md §7): 0644 under
the usual umask 022 for `event`, `export`, `prove` and `latex` (mkstemp's 0600 hid them from a web server or
a co-author's account), a stricter umask followed, a replaced file's mode kept; keys stay 0600. Real CLI
subprocesses, each started under the umask under test."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.clikit import _env, _pithledger
from helpers.common import PITH_RECORDS
from helpers.site import BUNDLES

A, B = PITH_RECORDS[0], PITH_RECORDS[1]
CITATION = json.dumps({"cited_pith_number": B["pith_number"], "relation": "uses_method"})


def run(tmp: Path, *args: str, umask: int) -> subprocess.CompletedProcess[str]:
    old = os.umask(umask)  # the child inherits it
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", *args],
            capture_output=True,
            text=True,
            env=_env(tmp),
            cwd=tmp,
            timeout=120,
        )
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
    run(
        tmp,
        "event",
        "record_created",
        "--key",
        "alice",
        "--payload",
        json.dumps({"canonical_record": A["canonical_record"]}),
        "-o",
        str(out / "created.json"),
        umask=umask,
    )
    run(
        tmp,
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        A["pith_number"],
        "--payload",
        CITATION,
        "-o",
        str(out / "event.json"),
        umask=umask,
    )
    run(tmp, "--ledger", ledger, "apply", str(out / "created.json"), str(out / "event.json"), umask=umask)
    run(tmp, "--ledger", ledger, "export", A["pith_number"], "-o", str(out / "export.jsonl"), umask=umask)
    event_id = json.loads((out / "event.json").read_text())["events"][0]["event_id"]
    run(tmp, "--ledger", ledger, "prove", event_id, "--key", "alice", "-o", str(out / "proof.json"), umask=umask)
    run(tmp, "latex", "-o", str(out), umask=umask)
    return {
        "event": out / "event.json",
        "export": out / "export.jsonl",
        "prove": out / "proof.json",
        "latex": out / "pith.sty",
    }


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
    run(
        tmp_path,
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        A["pith_number"],
        "--payload",
        CITATION,
        "-o",
        str(target),
        umask=0o022,
    )
    assert mode(target) == 0o600 and json.loads(target.read_text())["events"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    assert _pithledger("--ledger", "L", "apply", str(BUNDLES), cwd=root).returncode == 0
    return root


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["digest"],
        ["log"],
        ["state", "2605.00424"],
        ["state", "2605.00424", "--view"],
        ["export", "2605.00424"],
        ["--json", "fsck"],
        ["evidence"],
        ["--help"],
        ["verify", str(BUNDLES / "demo-1905.08204.json")],
        ["ids", str(BUNDLES / "demo-1905.08204.json")],
    ],
    ids=" ".join,
)
def test_a_full_stdout_is_a_named_error(demo: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", "--ledger", "L", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=demo,
            env=_env(demo),
            timeout=120,
        )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(
        "error[cannot-write-output]: cannot write the output to stdout: No space left on device\nhint: "
    )
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
@pytest.mark.parametrize(
    "args",
    [
        ["apply", "missing.json"],
        ["state", "2605.99999"],
        ["state", "hello"],
        ["log", "--ledger", "nowhere"],
        ["fsck", "--ledger", "nowhere"],
        ["evidence", "hello"],
        ["export", "hello"],
        ["verify", "--digest", "zz", "--signature", "AA=="],
        ["verify"],
        ["keys", "export", "nobody"],
        ["digest", "--ledger", "nowhere"],
    ],
    ids=" ".join,
)
def test_every_command_with_json_prints_its_error_as_json(demo: Path, args: list[str]) -> None:
    plain = _pithledger("--ledger", "L", *args, cwd=demo)
    r = _pithledger("--ledger", "L", *args, "--json", cwd=demo)
    assert r.returncode == plain.returncode != 0
    assert r.stderr == plain.stderr  # the message a person reads is unchanged
    doc = json.loads(r.stdout.splitlines()[-1])
    code = re.match(r"error\[([a-z-]+)\]: (.*)", r.stderr)
    assert code is not None
    assert doc["error"] == code[1] and doc["message"] in code[2] and doc["hint"] in r.stderr
    assert set(doc) == {"error", "message", "hint"}


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_state_json_errors_are_the_same_on_the_fast_path(demo: Path) -> None:
    full = "import sys; sys.argv[0] = 'pithledger'; from pithledger.cli import full; full()"
    for args in (
        ["--ledger", "L", "--json", "state", "hello"],
        ["--json", "--ledger", "nowhere", "state", "2605.00424"],
    ):
        fast = _pithledger(*args, cwd=demo)
        slow = subprocess.run(
            [sys.executable, "-c", full, *args], capture_output=True, text=True, cwd=demo, env=_env(demo), timeout=60
        )
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
        assert json.loads(fast.stdout)["error"] in ("malformed-id", "no-ledger")
