"""The LMDB ledger as other processes meet it (the in-process store tests are in tests/unit/store/test_store.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.adversary import unsigned_pith_event
from helpers.clikit import _env, _junk, _pith, _pithledger
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes

_OPENED_EARLY = textwrap.dedent("""
    import json, sys
    from pithledger.records.bundle import read_bundle
    from pithledger.errors import PithledgerError
    from pithledger.store import Ledger
    mode, path, bundle = sys.argv[1], sys.argv[2], sys.argv[3]
    ledger = Ledger(path, readonly=mode == "read", map_size=1 << 16)  # this process's map: no larger than the file
    print("open", ledger.env.info()["map_size"], flush=True)
    sys.stdin.readline()  # meanwhile another process grows the ledger
    try:
        if mode == "read":
            print(json.dumps({"pending": ledger.pending(), "events": ledger.counts()["events"]}))
        else:
            r = ledger.apply_batch([read_bundle(json.loads(open(bundle).read()))])
            print(json.dumps({"unverified": r.unverified, "map_size": ledger.env.info()["map_size"]}))
    except PithledgerError as exc:
        print(json.dumps({"error": exc.code, "message": exc.message, "hint": exc.hint}))
""")


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
@pytest.mark.parametrize("mode", ["write", "read"])
def test_a_handle_opened_before_another_process_grew_the_map_adopts_it(tmp_path: Path, mode: str) -> None:
    """MDB_MAP_RESIZED (a ledger grown past this handle's map since it opened) is adopted and the
    transaction begun again, not reported as a full disk."""
    _junk(tmp_path / "small.jsonl", 1, 1)
    _pithledger("--ledger", "L", "apply", "small.jsonl", cwd=tmp_path)
    (tmp_path / "one.json").write_bytes(canonical_bytes(write_bundle(_pith(99), [unsigned_pith_event(_pith(99), n=1)])))
    early = subprocess.Popen(
        [sys.executable, "-c", _OPENED_EARLY, mode, str(tmp_path / "L"), str(tmp_path / "one.json")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    assert early.stdout is not None and early.stdin is not None
    opened = early.stdout.readline().split()
    assert opened[0] == "open"
    _junk(tmp_path / "grow.jsonl", 200, 20, first=1000)  # 4,000 copies as evidence: several MiB more file
    grown = _pithledger("--ledger", "L", "apply", "grow.jsonl", cwd=tmp_path)
    assert "unverified" in grown.stdout
    assert (tmp_path / "L" / "data.mdb").stat().st_size > int(opened[1])  # past the early handle's map
    out, _ = early.communicate("go\n", timeout=120)
    result = json.loads(out.splitlines()[-1])
    assert "error" not in result, result
    if mode == "read":
        assert result["events"] == 0 and result["pending"] == 0
    else:
        assert result["unverified"] == 1 and result["map_size"] > int(opened[1])
