"""Size of a published tree's static resolve index (spec/serve.md §7.1; issue #41 item 7; not run in CI).

    .venv/bin/python bench/bench_resolve_index.py [N] [--spread dense|sparse]

Builds N records (one self-signed ``record_created`` each, bench_suite.py's canonical records) into an
empty ledger, then writes the whole resolve index into an empty directory (``resolveindex.update``, what
``publish`` runs on a tree without one) and counts its files and bytes. ``dense``: consecutive arXiv ids,
as a mirror of everything has them (1 000 papers per ``arxiv/`` shard); ``sparse``: ids drawn at random
over 2007-2026, as a mirror of a few papers has them (about one paper per ``arxiv/`` shard).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_suite  # noqa: E402

from pithledger.mirror import resolveindex  # noqa: E402
from pithledger.records.bundle import read_bundle, write_bundle  # noqa: E402
from pithledger.records.model import record_ids  # noqa: E402
from pithledger.store import Ledger  # noqa: E402


def records(n: int, spread: str) -> list[dict[str, object]]:
    rng = random.Random(41)
    seen: set[str] = set()
    out = []
    for i in range(n):
        rec = bench_suite.mint("main", i)
        if spread == "sparse":
            while True:
                yymm = f"{rng.randrange(7, 27):02d}{rng.randrange(1, 13):02d}"
                arxiv = f"{yymm}.{rng.randrange(25000):05d}" if yymm >= "1501" else f"{yymm}.{rng.randrange(10000):04d}"
                if arxiv not in seen:
                    seen.add(arxiv)
                    break
            rec["source"]["id"] = arxiv  # type: ignore[index]
        out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=10_000)
    ap.add_argument("--spread", choices=("dense", "sparse"), default="dense")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ledger_path, tree = Path(tmp) / "ledger", Path(tmp) / "tree"
        with Ledger(ledger_path, create=True) as ledger:
            batch = []
            for rec in records(args.n, args.spread):
                rid = record_ids(rec)
                event = bench_suite._ev(
                    "record_created",
                    rid.pith_number,
                    {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256},
                    0,
                    bench_suite._when(0),
                )
                batch.append(read_bundle(write_bundle(rid.pith_number, [event])))
                if len(batch) == 5000:
                    ledger.apply_batch(batch)
                    batch = []
            if batch:
                ledger.apply_batch(batch)
            t0 = time.perf_counter()
            written, _ = resolveindex.update(ledger, tree, [], [], full=True)
            seconds = time.perf_counter() - t0
        files = {"pith": [0, 0], "arxiv": [0, 0]}
        for kind in files:
            for entry in os.scandir(tree / resolveindex.INDEX_DIR / kind):
                files[kind][0] += 1
                files[kind][1] += entry.stat().st_size
        print(f"{args.n:,} records, {args.spread} arXiv ids: {written:,} shards written in {seconds:.1f} s")
        for kind, (count, size) in files.items():
            print(
                f"  {kind}/: {count:,} files, {size / 1024:,.0f} KiB "
                f"(mean {size / max(count, 1) / 1024:,.1f} KiB, {size / args.n:,.0f} B per record)"
            )


if __name__ == "__main__":
    main()
