"""The inbound update (spec/storage.md §3.5) through the command line: the citation pool of
tests/helpers/citepool.py applied in several `pithledger apply` runs of small batches, in place and on two
worker processes that read finishing's inputs from the snapshot, gives the ledger one run gives, database
for database, and `fsck` finds nothing; the update is the path taken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import lmdb

from helpers.citepool import A, B, cite_pool
from helpers.eventpool import ORPHAN, bundles_of

RUN = """
import atexit, json, sys
from pithledger.ingest import bundles as _bundles
from pithledger.store import StoreTuning, pending, tuned
_bundles.REGION_BYTES = 4000  # input read in small regions: the workers start before the ledger opens
atexit.register(lambda: print("inbound-stats " + json.dumps(pending._inbound_stats), file=sys.stderr))
atexit.register(lambda: print("snapshot-stats " + json.dumps(pending._snapshot_stats), file=sys.stderr))
sys.argv = ["pithledger"] + sys.argv[1:]
from pithledger.cli import main
# every finishing step on the workers, which read its parts (two records each) from the snapshot
tuning = dict(verify_chunk=8, process_after_chunks=2, parallel_states=1, derive_part_records=2, snapshot_part=2)
with tuned(StoreTuning(**tuning, start_workers_from=0)):
    main()
"""


def _lines(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        json.dumps(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": b.pith_number,
                "events": b.events,
            }
        ).encode()
        + b"\n"
        for b in bundles_of(events)
    )


def _apply(ledger: Path, files: list[Path], *args: str, small: bool = False) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = {}
    for f in files:
        head = [sys.executable, "-c", RUN] if small else [sys.executable, "-m", "pithledger.cli"]
        done = subprocess.run(
            [*head, "--ledger", str(ledger), "apply", str(f), "--json", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-2000:]  # 1: junk held
        for line in done.stderr.splitlines():
            name, _, doc = line.partition(" ")
            if name in ("inbound-stats", "snapshot-stats"):
                got = json.loads(doc)
                stats[name] = {k: stats.get(name, {}).get(k, 0) + v for k, v in got.items()}
    return stats


PAD = "pith:2026:BBBBBBBBBBBBBBBBBBBBBBBBBB"


def _cite(citer: str, cited: str) -> dict[str, Any]:
    from helpers.eventpool import BOB, t
    from pithledger.records.events import make_event

    return make_event(
        "citation_signature", citer, {"cited_pith_number": cited, "relation": "cites"}, BOB, created_at=t(21)
    )


def _padding(n: int) -> list[dict[str, Any]]:
    """40 events of a record nobody cites and that never arrives (pending): input, not citations."""
    from helpers.eventpool import EVE, t
    from pithledger.records.events import make_event

    return [
        make_event("author_attestation", PAD, {"author_name": f"Pad {n} {i}"}, EVE, created_at=t(20)) for i in range(40)
    ]


def _dump(ledger: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    env = lmdb.open(str(ledger), readonly=True, lock=False, max_dbs=64, subdir=True)
    try:
        with env.begin() as txn:
            names = [bytes(k) for k, _ in txn.cursor()]
            out = {}
            for name in names:
                db = env.open_db(name, txn=txn, create=False)
                out[name] = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)]
    finally:
        env.close()
    # of ``fold`` only which records keep an entry: its bytes may follow the history (spec/storage.md §3.3)
    out[b"fold"] = [(k, b"") for k, _ in out.get(b"fold", [])]
    return out


def _fsck(ledger: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "fsck", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_apply_in_runs_and_batches_in_place_and_on_workers_gives_the_ledger_of_one_run(tmp_path: Path) -> None:
    big, rest, junk = cite_pool()
    # the records; the citations of A by B and C (A is updated), by ORPHAN and FAKE (A crosses the fold
    # threshold: in full), the rest (C cites ORPHAN, pending: unchanged) and revocations (A under it again)
    revocations = [e for e in rest if e["event_type"] == "revocation"]
    others = [e for e in rest if e["event_type"] != "revocation"]
    assert others[-1]["subject_pith_number"] == ORPHAN and others[11]["subject_pith_number"] == ORPHAN
    parts = [
        big + others[:3],
        others[3:11] + junk[:1],
        others[11:19] + others[-1:],
        others[19:-1] + revocations[:3],
        revocations[3:] + junk[1:],
        # last, citations whose cited records (A, B) are updated and stay so
        [_cite(ORPHAN, B), _cite(PAD, A)],
    ]
    files = []
    for i, part in enumerate(parts):
        part = part + _padding(i)  # enough input that the run starts its workers before it opens the ledger
        files.append(tmp_path / f"part{i}.jsonl")
        files[-1].write_bytes(_lines(part))
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join(f.read_bytes() for f in files))
    _apply(tmp_path / "once", [whole], "--workers", "0")
    want = _dump(tmp_path / "once")
    _apply(tmp_path / "runs", files, "--workers", "0", "--batch-size", "7")
    assert _dump(tmp_path / "runs") == want
    stats = _apply(tmp_path / "workers", files, "--workers", "2", "--batch-size", "5", small=True)
    assert stats["inbound-stats"]["updated"] > 0 and stats["inbound-stats"]["unchanged"] > 0, stats
    assert stats["inbound-stats"]["fell_back"] == 0, stats
    assert stats["snapshot-stats"]["read"] > 0 and stats["snapshot-stats"]["fallback"] == 0, stats
    assert _dump(tmp_path / "workers") == want
    for name in ("once", "runs", "workers"):
        _fsck(tmp_path / name)
