"""Peak memory of reading hostile sources (issue #20 §1; not run in CI). Each case runs in a fresh process.

    python bench/bench_sync_parts.py chunked MIB          # GET of a body of MIB MiB sent as 1-byte chunks (127.0.0.1)
    python bench/bench_sync_parts.py parts DIR N [MIB]    # build DIR: one record, N parts of ~MIB (40) MiB of valid events
    python bench/bench_sync_parts.py sync DIR             # sync a fresh ledger from DIR/pub (peak RSS)
    python bench/bench_sync_parts.py buckets DIR B [R] [E]  # build DIR/a, DIR/b: B buckets of R (700) records of E (1000) ids; a has one id per record
    python bench/bench_sync_parts.py compare DIR          # compare DIR/a with DIR/b as published sources (peak RSS)

Each measuring case prints one line with its peak RSS (getrusage of this process).

Figures (2 cores, before = main at eb27e53, after = branch syncparts):

| case | before | after |
|---|---|---|
| `chunked 1`: 1 MiB body in 1-byte chunks | 173 MiB peak, read | 34 MiB (no growth over the process's 34 MiB), read |
| `chunked 4`: 4 MiB in 1-byte chunks | 617 MiB, read in 17.3 s | 70 MiB (no growth), refused after 2^20 chunks in 5.0 s |
| `sync` of 4 parts of 40 MiB (`parts DIR 4 40`), peak of the fetch/apply loop (before the final finish) | 502 MiB | 245 MiB |
| the same, 8 parts | 972 MiB | 293 MiB |
| `sync` of 4 parts, whole process (finish derives one 160 MiB record: store.py, unchanged) | 658 MiB | 543 MiB |
| `compare` of 4 hostile buckets (700 records x 1000 ids lacking each) | 554 MiB, 2,797,200 ids listed | 311 MiB, 280,000 listed (100 per record, counts whole) |
"""

from __future__ import annotations

import hashlib
import resource
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

from pithledger.records.canonical import canonical_bytes


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def chunked(mib: int) -> None:
    from pithledger.errors import SourceError
    from pithledger.mirror.transport import http_get

    n = mib << 20
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * n + b"0\r\n\r\n"
    sock = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(reply)
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    base = peak_mib()
    t = time.perf_counter()
    try:
        body = http_get(
            f"http://127.0.0.1:{sock.getsockname()[1]}/pithledger/digest.json", timeout=120, max_bytes=64 << 20
        )
        outcome = f"read {len(body):,} bytes"
    except SourceError as exc:
        outcome = f"refused ({exc.message[-60:]})"
    print(
        f"chunked {mib} MiB of 1-byte chunks: {outcome} in {time.perf_counter() - t:.1f} s; "
        f"peak RSS {peak_mib():,.0f} MiB (the reply itself {len(reply) / 2**20:,.0f} MiB, {base:,.0f} MiB before the GET)"
    )


def parts(directory: Path, n_parts: int, mib: int) -> None:
    """A published tree holding one record whose bundle is ``n_parts`` files of ~``mib`` MiB of valid
    self-signed ~1 MiB snapshots (what anyone can write), digests computed by hand (bench_source_memory)."""
    from bench_source_memory import build_tree

    from pithledger.mirror.publish import record_dir
    from pithledger.records.bundle import write_bundle
    from pithledger.records.events import make_event
    from pithledger.records.keys import LocalKey

    key = LocalKey(name="flood", seed=hashlib.sha256(b"flood").digest())
    number = "pith:2026:AAA" + "B" * 23
    pub = directory / "pub"
    shutil.rmtree(pub, ignore_errors=True)
    ids: list[str] = []
    pad = "x" * (1000 * 1024)
    for p in range(n_parts):
        events = [
            make_event(
                "graph_snapshot",
                number,
                {"graph_snapshot": {"part": p, "n": i, "pad": pad}},
                key,
                created_at="2026-07-01T00:00:00Z",
            )
            for i in range(mib)
        ]
        ids += [e["event_id"] for e in events]
        path = pub / record_dir(number) / ("bundle.json" if p == 0 else f"bundle-{p}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(canonical_bytes(write_bundle(number, events)) + b"\n")
    build_tree(pub, {"AAA": {number: ids}})
    print(f"built {pub}: {n_parts} parts, {len(ids)} events")


def sync_case(directory: Path) -> None:
    from pithledger.mirror.publish import sync
    from pithledger.store import Ledger

    target = directory / "ledger"
    shutil.rmtree(target, ignore_errors=True)
    t = time.perf_counter()
    with Ledger(target, create=True) as ledger:
        counts = sync(ledger, str(directory / "pub"))
    print(
        f"sync: {counts['new']:,} new, {counts['batches']} batches, lying {len(counts['lying'])}, skipped {len(counts['skipped'])}; "
        f"{time.perf_counter() - t:.1f} s; peak RSS {peak_mib():,.0f} MiB"
    )


def buckets(directory: Path, n_buckets: int, n_records: int, n_events: int) -> None:
    import base64

    from bench_source_memory import build_tree

    from pithledger.audit import ALPHABET, DEPTH

    b: dict[str, dict[str, list[str]]] = {}
    for k in range(n_buckets):
        prefix = ALPHABET[k] * DEPTH
        b[prefix] = {}
        for r in range(n_records):
            tail = base64.b32encode(hashlib.sha256(f"{k}/{r}".encode()).digest()).decode()[: 26 - DEPTH]
            name = f"pith:2026:{prefix}{tail}"
            b[prefix][name] = ["sha256:" + hashlib.sha256(f"{name}/{e}".encode()).hexdigest() for e in range(n_events)]
    a = {p: {n: ids[:1] for n, ids in recs.items()} for p, recs in b.items()}
    build_tree(directory / "a", a)
    build_tree(directory / "b", b)
    print(
        f"built {directory}/a and /b: {n_buckets} buckets of {n_records} records; b has {n_events} ids per record, a one"
    )


def compare_case(directory: Path) -> None:
    from pithledger.audit import compare
    from pithledger.mirror.publish import Published

    t = time.perf_counter()
    result = compare(Published(str(directory / "a")), Published(str(directory / "b")))
    listed = sum(len(d.a_lacks) for d in result.divergent)
    print(
        f"compare: {len(result.divergent):,} divergent, {listed:,} ids listed; {time.perf_counter() - t:.1f} s; "
        f"peak RSS {peak_mib():,.0f} MiB"
    )


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "chunked":
        chunked(int(args[0]))
    elif cmd == "parts":
        parts(Path(args[0]), int(args[1]), int(args[2]) if len(args) > 2 else 40)
    elif cmd == "sync":
        sync_case(Path(args[0]))
    elif cmd == "buckets":
        nums = [int(x) for x in args[1:]]
        nums += [1, 700, 1000][len(nums) :]
        buckets(Path(args[0]), nums[0], nums[1], nums[2])
    elif cmd == "compare":
        compare_case(Path(args[0]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
