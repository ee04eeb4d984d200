"""`pithledger apply` with its fast path (spec/adr/0020) and with it forced off (PITHLEDGER_SLOW_PATH=1, a
switch only tests use) gives the same ledger, report and exit code for a mixed hostile input: valid events
of every kind, garbled ones, lines written non-canonically (reordered keys, escapes, white space), lines the
strict reading refuses (float, lone surrogate, duplicate key: skipped with --keep-going), Pith's envelope,
an unknown kind; big enough (over two regions) that the reading workers verify, and in place."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.adversary import GARBLINGS, garble, unsigned_pith_event
from helpers.common import ROOT
from helpers.eventpool import RECS, P, pool
from pithledger.ingest.bundles import REGION_BYTES
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes

_spec = importlib.util.spec_from_file_location("dump_ledger", ROOT / "bench" / "dump_ledger.py")
assert _spec is not None and _spec.loader is not None
dump_ledger = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dump_ledger)


def _lines() -> list[bytes]:
    events = pool()
    ours = [e for e in events if "event_version" in e]
    out = []
    for subject in [*P, *{e["subject_pith_number"] for e in events} - set(P)]:
        mine = [e for e in events if e["subject_pith_number"] == subject]
        record = RECS[P.index(subject)] if subject in P else None
        value = write_bundle(subject, mine, canonical_record=record)
        out.append(canonical_bytes(value))
        out.append(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())  # ASCII escapes
        out.append(json.dumps(value).encode())  # white space, keys in another order
    for how in GARBLINGS:
        e = garble(ours[len(out) % len(ours)], how)
        out.append(canonical_bytes(write_bundle(str(e.get("subject_pith_number", P[0])), [e])))
    out.append(canonical_bytes(write_bundle(P[2], [unsigned_pith_event(P[2])])))
    good = canonical_bytes(write_bundle(P[0], [ours[0]]))
    out.append(good.replace(b'"target":"record"', b'"target":"record","x":1.5'))  # refused: a float
    out.append(good.replace(b'"target":"record"', b'"target":"\\udc00record"'))  # refused: a lone surrogate
    out.append(good.replace(b'"target":"record"', b'"target":"record","target":"record"'))  # refused: duplicate
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = _lines()
    block = b"\n".join(lines) + b"\n"
    path = tmp_path_factory.mktemp("in") / "hostile.jsonl"
    path.write_bytes(block * (2 * REGION_BYTES // len(block) + 2))  # over two regions: read on the workers
    return path


def _apply(tmp: Path, name: str, hostile: Path, workers: list[str], slow: bool) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PITHLEDGER_LEDGER", "PITHLEDGER_SLOW_PATH")}
    env["XDG_DATA_HOME"] = str(tmp / "xdg")
    if slow:
        env["PITHLEDGER_SLOW_PATH"] = "1"
    ledger = tmp / name / "ledger"
    cmd = [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", "--keep-going", "--json"]
    done = subprocess.run(
        [*cmd, *workers, str(ROOT / "bundles"), str(hostile)], capture_output=True, env=env, timeout=600
    )
    dump = dump_ledger._dump(ledger).replace(str(tmp / name).encode(), b"TMP")  # as bench/dump_ledger.py
    return done.returncode, done.stdout.decode(), hashlib.sha256(dump).hexdigest()


@pytest.mark.parametrize("workers", [["--workers", "0"], []], ids=["in-place", "workers"])
def test_apply_gives_the_same_ledger_and_report_with_the_fast_path_forced_off(
    tmp_path: Path, hostile: Path, workers: list[str]
) -> None:
    fast = _apply(tmp_path, "fast", hostile, workers, slow=False)
    slow = _apply(tmp_path, "slow", hostile, workers, slow=True)
    assert fast == slow
    report = json.loads(fast[1])
    assert fast[0] == 1 and report["new"] > 10 and report["invalid"] > 10 and report["unverified"] >= 1
    assert report["duplicate"] > report["new"]  # the block repeated: duplicates and evidence offered again
