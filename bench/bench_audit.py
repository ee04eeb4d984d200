"""Audit cost against ledger size (not run in CI): two real LMDB ledgers of N records that differ in
10 records; the digests read must grow with the differences, not with N.

    python bench/bench_audit.py 10000 100000 1000000

For each N: build ledger A (one signed record_created event per synthetic record, applied in batches
of 10,000), copy it to B, add one event to each of 10 records of B, then audit A against B.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pithledger.audit import compare
from pithledger.records.bundle import Bundle
from pithledger.records.canonical import text_sha256
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids
from pithledger.store import Ledger

KEY = LocalKey(name="bench", seed=hashlib.sha256(b"bench audit").digest())


def record(i: int) -> dict:  # type: ignore[type-arg]
    return {
        "metadata": {
            "abstract_canon_sha256": text_sha256(f"abstract {i}"),
            "cross_cats_sorted": [],
            "license": "",
            "primary_cat": "cs.DC",
            "submitted_at": "2025-01-01T00:00:00Z",
            "title_canon_sha256": text_sha256(f"title {i}"),
        },
        "schema_version": "1.0",
        "source": {
            "id": f"25{i // 100000 % 100:02d}.{i % 100000:05d}",
            "kind": "arxiv",
            "version": 1 + i // 10_000_000,
        },
    }


def build(path: Path, n: int) -> list[str]:
    numbers = []
    with Ledger(path, create=True, map_size=8 << 30) as ledger:
        batch = []
        for i in range(n):
            rec = record(i)
            rid = record_ids(rec)
            numbers.append(rid.pith_number)
            event = make_event(
                "record_created",
                rid.pith_number,
                {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256},
                KEY,
                created_at="2026-01-01T00:00:00Z",
            )
            batch.append(Bundle(pith_number=rid.pith_number, events=[event]))
            if len(batch) == 10_000:
                ledger.apply_batch(batch)
                batch = []
        ledger.apply_batch(batch)
    return numbers


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    print(f"{'records':>10} {'build s':>8} {'audit s':>8} {'digests read':>13} {'divergent':>9}")
    for n in sizes:
        with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
            a, b = Path(tmp) / "a", Path(tmp) / "b"
            t = time.perf_counter()
            numbers = build(a, n)
            built = time.perf_counter() - t
            shutil.copytree(a, b)
            chosen = random.Random(n).sample(numbers, 10)
            with Ledger(b) as lb:
                lb.apply_batch(
                    [
                        Bundle(
                            pith_number=p,
                            events=[
                                make_event(
                                    "author_attestation",
                                    p,
                                    {"author_name": "bench"},
                                    KEY,
                                    created_at="2026-02-01T00:00:00Z",
                                )
                            ],
                        )
                        for p in chosen
                    ]
                )
            with Ledger(a) as la, Ledger(b) as lb:
                t = time.perf_counter()
                result = compare(la, lb)
                took = time.perf_counter() - t
            assert sorted(d.pith_number for d in result.divergent) == sorted(chosen)
            print(
                f"{n:>10,} {built:>8.1f} {took:>8.3f} {result.digests_read:>13,} {len(result.divergent):>9}", flush=True
            )


if __name__ == "__main__":
    main()
