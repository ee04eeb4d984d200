"""Peak memory of auditing two published mirrors with a few very large buckets (not run in CI).

    python bench/bench_source_memory.py build DIR [BUCKETS] [RECORDS] [EVENTS]
    python bench/bench_source_memory.py audit DIR [CACHE_BYTES]

``build`` writes two published trees, DIR/a and DIR/b, by hand (digests computed, no ledger): BUCKETS
buckets (default 4) of RECORDS records (700) with EVENTS synthetic event ids each (1000), about 52 MB
per bucket file; in b one record per bucket has one event more. ``audit`` compares them as published
sources in this process and prints the divergences and the peak RSS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from pithledger.audit import ALPHABET, DEPTH, Pair, bucket_pair, compare, inner_pair, record_event_root
from pithledger.merge import MERGE_VERSION
from pithledger.mirror.publish import DIGEST_FILE, Published, _node_file


def _hex(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


def _write(root: Path, prefix: str, node: dict[str, Any], pair: Pair) -> None:
    path = root / _node_file(prefix, pair)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"prefix": prefix, "digest": _hex(pair), **node}, sort_keys=True, separators=(",", ":")))


def build_tree(root: Path, buckets: dict[str, dict[str, list[str]]]) -> None:
    pairs: dict[str, Pair] = {}
    for prefix, records in buckets.items():
        recs = {n: Pair(record_event_root(ids), hashlib.sha256(n.encode()).digest()) for n, ids in records.items()}
        pairs[prefix] = bucket_pair(recs)
        _write(
            root,
            prefix,
            {
                "records": {
                    n: {
                        "event_ids": sorted(ids),
                        "event_root": recs[n].events.hex(),
                        "state_sha256": recs[n].states.hex(),
                    }
                    for n, ids in records.items()
                }
            },
            pairs[prefix],
        )
    for depth in range(DEPTH - 1, -1, -1):
        level: dict[str, dict[str, Pair]] = {}
        for prefix, pair in pairs.items():
            level.setdefault(prefix[:depth], {})[prefix[depth]] = pair
        pairs = {}
        for prefix, kids in level.items():
            pairs[prefix] = inner_pair(prefix, kids)
            _write(root, prefix, {"children": {c: _hex(p) for c, p in sorted(kids.items())}}, pairs[prefix])
    (root / DIGEST_FILE).write_text(
        json.dumps(
            {
                "digest_version": "pithledger-digest-v1",
                "merge_version": MERGE_VERSION,
                "depth": DEPTH,
                "root": _hex(pairs[""]),
            }
        )
    )


def build(directory: Path, n_buckets: int, n_records: int, n_events: int) -> None:
    a: dict[str, dict[str, list[str]]] = {}
    for b in range(n_buckets):
        prefix = ALPHABET[b] * DEPTH
        a[prefix] = {}
        for r in range(n_records):
            tail = base64.b32encode(hashlib.sha256(f"{b}/{r}".encode()).digest()).decode()[: 26 - DEPTH]
            name = f"pith:2026:{prefix}{tail}"
            a[prefix][name] = ["sha256:" + hashlib.sha256(f"{name}/{e}".encode()).hexdigest() for e in range(n_events)]
    bb = {p: {n: list(ids) for n, ids in recs.items()} for p, recs in a.items()}
    for prefix, recs in bb.items():
        first = sorted(recs)[0]
        recs[first].append("sha256:" + hashlib.sha256(f"extra {first}".encode()).hexdigest())
    build_tree(directory / "a", a)
    build_tree(directory / "b", bb)


def audit(directory: Path, cache_bytes: int | None) -> None:
    t = time.perf_counter()
    kw: dict[str, Any] = {} if cache_bytes is None else {"cache_bytes": cache_bytes}
    result = compare(Published(str(directory / "a"), **kw), Published(str(directory / "b"), **kw))
    took = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
    print(
        f"divergent {len(result.divergent)}  b_lacks {sum(len(d.b_lacks) for d in result.divergent)}  "
        f"a_lacks {sum(len(d.a_lacks) for d in result.divergent)}  {took:.1f} s wall, {cpu:.1f} s CPU  peak RSS {peak:,.0f} MiB",
        flush=True,
    )


def main() -> None:
    cmd, directory = sys.argv[1], Path(sys.argv[2])
    if cmd == "build":
        nums = [int(a) for a in sys.argv[3:]] + [4, 700, 1000][len(sys.argv[3:]) :]
        build(directory, *nums)
    else:
        audit(directory, int(sys.argv[3]) if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    main()
