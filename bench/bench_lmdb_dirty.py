"""Why apply's anonymous memory grows with the ledger until it reaches a ceiling (issue #36): LMDB alone.

    .venv/bin/python bench/bench_lmdb_dirty.py 400000 3000000

For each size S, a fresh LMDB environment gets S random 32-byte keys (as the event_id index `ids` does),
in write transactions of 10 000 puts (apply's default --batch-size), then three more such transactions;
prints the table's leaf pages and depth and the process's RssAnon. A write transaction holds every page it
modifies as a private copy (malloc'd: anonymous memory) until it commits, and LMDB keeps those buffers for
the next transaction (`me_dpages`) instead of freeing them. A random key lands on a random leaf, so a
transaction of n puts into a table of L leaves dirties about L * (1 - exp(-n / L)) of them: more as the
table grows, up to n pages (40 MiB for n = 10 000 puts of 4 KiB pages) once L >> n. That is inherent to a
B-tree with random keys updated in group-commit batches (spec/storage.md §10), bounded by the batch, not by
the ledger; a smaller --batch-size lowers the ceiling. Measured on the bench box (bench/README.md, Scale):
RssAnon 27 MiB at 0.4 M keys, 46 MiB at 3 M (python + lmdb alone: ~10 MiB).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

import lmdb


def anon_mib() -> int:
    with open("/proc/self/status") as fh:
        return int(re.search(r"RssAnon:\s+(\d+)", fh.read())[1]) // 1024  # type: ignore[index]


def main() -> None:
    for size in [int(a) for a in sys.argv[1:]] or [400_000, 3_000_000]:
        d = tempfile.mkdtemp()
        env = lmdb.open(d, map_size=1 << 36, sync=False, metasync=False, max_dbs=2)
        db = env.open_db(b"ids")
        for start in range(0, size, 10_000):
            with env.begin(write=True, db=db) as txn:
                for i in range(start, min(size, start + 10_000)):
                    txn.put(os.urandom(32), i.to_bytes(8, "big"))
        during = []
        for _ in range(3):
            with env.begin(write=True, db=db) as txn:
                for i in range(10_000):
                    txn.put(os.urandom(32), i.to_bytes(8, "big"))
                during.append(anon_mib())
        with env.begin() as txn:
            st = txn.stat(db)
        print(f"{size:>10,} keys: {st['leaf_pages']:,} leaf pages, depth {st['depth']}: RssAnon {max(during)} MiB")
        env.close()
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
