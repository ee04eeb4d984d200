"""Apply bundles/ and a few hundred generated events into a fresh ledger and dump everything it holds.

The dump is every LMDB database's (key, value) pairs sorted, `pithledger digest`, every record's
`state` bytes, fsck's findings, and the same again after `pithledger rebuild`. Run it before and after
a change that must not alter the ledger (a refactoring, a move of code) and compare the SHA-256s:

    python bench/dump_ledger.py OUT.txt      # prints the dump's SHA-256
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import lmdb

from pithledger.bundle import Bundle
from pithledger.events import make_event
from pithledger.keys import LocalKey
from pithledger.model import record_ids
from pithledger.store import Ledger

ROOT = Path(__file__).resolve().parent.parent


def _cli(ledger: Path, *args: str) -> bytes:
    env = dict(os.environ, PITHLEDGER_LEDGER=str(ledger))
    done = subprocess.run([sys.executable, "-m", "pithledger.cli", *args], env=env, capture_output=True, check=False)
    return b"$ pithledger %s -> %d\n" % (" ".join(args).encode(), done.returncode) + done.stdout


def _generated(n: int) -> list[Bundle]:
    """Records from the source data, then attestations on them, and a few copies with a broken signature
    (so the evidence area is exercised too)."""
    records = [json.loads(line) for line in (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_text().splitlines()]
    key = LocalKey(name="dump", seed=hashlib.sha256(b"dump").digest())
    events = []
    for i in range(n):
        r = records[i % len(records)]
        rid = record_ids(r)
        if i < len(records):
            events.append(make_event("record_created", rid.pith_number, {"canonical_record": r, "canonical_sha256": rid.canonical_sha256},
                                     key, created_at="2026-06-01T00:00:00Z"))
        else:
            events.append(make_event("author_attestation", rid.pith_number, {"author_name": f"author {i}"}, key,
                                     created_at=f"2026-06-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"))
    for e in events[-5:]:
        bad = json.loads(json.dumps(e))
        bad["payload"]["author_name"] = "tampered"
        events.append(bad)
    by_subject: dict[str, list[dict[str, object]]] = {}
    for e in events:
        by_subject.setdefault(str(e["subject_pith_number"]), []).append(e)
    return [Bundle(pith_number=s, events=es) for s, es in by_subject.items()]


def _dump_dbs(path: Path) -> bytes:
    out = []
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64, subdir=True)
    with env.begin() as txn:
        names = sorted(bytes(k) for k, _ in txn.cursor())
    for name in names:
        try:
            db = env.open_db(name, create=False)
        except lmdb.Error:  # a plain key of the main database, not a table
            continue
        with env.begin(db=db) as txn:
            pairs = sorted((bytes(k), bytes(v)) for k, v in txn.cursor())
        out.append(b"== %s %d\n" % (name, len(pairs)))
        out.extend(b"%s %s\n" % (k.hex().encode(), v.hex().encode()) for k, v in pairs)
    env.close()
    return b"".join(out)


def _dump(path: Path) -> bytes:
    parts = [_dump_dbs(path), _cli(path, "digest"), _cli(path, "fsck")]
    with Ledger(path, readonly=True) as ledger:
        for s in sorted(ledger.subjects()):
            parts.append(b"-- state %s\n" % s.encode() + ledger.state_bytes(s) + b"\n")
    return b"".join(parts)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger"
        files = sorted(str(p) for p in (ROOT / "bundles").iterdir() if p.suffix in (".json", ".jsonl"))
        parts = [_cli(path, "init"), _cli(path, "apply", "--keep-going", *files)]
        with Ledger(path) as ledger:
            ledger.apply_batch(_generated(400))
        parts.append(_dump(path))
        parts.append(_cli(path, "rebuild"))
        parts.append(_dump(path))
    data = b"".join(parts).replace(tmp.encode(), b"TMP").replace(str(ROOT).encode(), b"ROOT")
    Path(sys.argv[1]).write_bytes(data)
    print(hashlib.sha256(data).hexdigest(), len(data))


if __name__ == "__main__":
    main()
