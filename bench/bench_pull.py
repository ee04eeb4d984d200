"""`pithledger pull` from a local Pith-shaped server, through the real CLI (not run in CI).

    .venv/bin/python bench/bench_pull.py [N] [--connections C] [--by arxiv|pith] [--keep]

Default N = 10 000. Builds once, in a temp dir, N synthetic canonical records minted by the real
``mint`` from arXiv-snapshot-like metadata (ids 2601.00000 ...), each with a ``record_created`` and
a ``citation_signature`` citing an earlier record, signed by demo keys whose seeds are public strings
(as bundles/make_examples.py); serves them with tests/helpers/pith_site.py, which answers ONLY Pith's paths
(``/pith-mirrors.json``, ``/pith/<suffix>/bundle.json``, ``/.well-known/...``, the resolver) over
keep-alive HTTP/1.1 with ETags. Then, each a subprocess under /usr/bin/time -v (bench/_measure.py):

1. ``apply`` of the same bundles from one JSON-lines file into ledger A (the reference);
2. ``pull URL --ids IDS --rate 0`` into an empty ledger B (IDs: long Pith Numbers, or with
   ``--by arxiv`` arXiv ids, each resolved through the server's resolver: twice the requests);
3. the same pull again (everything unchanged: conditional GETs answered 304).

Prints records/s, events/s, requests, connections accepted by the server and peak RSS of each, and
checks that B's digest equals A's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import measure  # noqa: E402  (bench/ is on sys.path when run as a script)

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.records.mint import mint
from pithledger.records.model import record_ids

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from helpers.pith_site import PithSite  # noqa: E402

PITHLEDGER = str(Path(sys.executable).parent / "pithledger")


def demo_key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"pithledger demo key: {name}".encode()).digest())


MIRROR, CITER = demo_key("bench-mirror"), demo_key("bench-alice")
SIGNER_IDS = {k.name: f"{k.name} (DEMO KEY, published seed: not evidence of anything)" for k in (MIRROR, CITER)}


def meta(i: int) -> dict[str, Any]:
    return {
        "id": f"2601.{i:05d}",
        "title": f"Synthetic paper {i}",
        "abstract": f"Abstract of synthetic paper {i}.",
        "authors": "Bench Author",
        "categories": "cs.DL cs.CR",
        "license": "http://creativecommons.org/licenses/by/4.0/",
        "versions": [{"version": "v1", "created": f"Mon, {1 + i % 28} Jun 2026 {i % 24:02d}:00:00 GMT"}],
    }


def build(n: int, tmp: Path) -> tuple[dict[str, bytes], list[str], list[str], int]:
    """(bundles by suffix, long Pith Numbers, arXiv ids, events): written to tmp/bundles.jsonl too."""
    bundles: dict[str, bytes] = {}
    numbers: list[str] = []
    arxiv: list[str] = []
    events = 0
    with open(tmp / "bundles.jsonl", "wb") as out:
        for i in range(n):
            rec = mint(meta(i))
            rid = record_ids(rec)
            when = f"2026-06-{1 + i % 28:02d}T00:00:00Z"
            evs = [
                make_event(
                    "record_created",
                    rid.pith_number,
                    {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256},
                    MIRROR,
                    created_at=when,
                    signer_id=SIGNER_IDS[MIRROR.name],
                )
            ]
            if numbers:
                cited = numbers[(i * 7919) % len(numbers)]
                evs.append(
                    make_event(
                        "citation_signature",
                        rid.pith_number,
                        {"cited_pith_number": cited, "relation": "cites"},
                        CITER,
                        created_at=when,
                        signer_id=SIGNER_IDS[CITER.name],
                    )
                )
            data = canonical_bytes(write_bundle(rid.pith_number, evs, canonical_record=rec, aliases_created_at=when))
            out.write(data + b"\n")
            bundles[rid.pith_number.rsplit(":", 1)[-1]] = data
            numbers.append(rid.pith_number)
            arxiv.append(rec["source"]["id"])
            events += len(evs)
    return bundles, numbers, arxiv, events


def run(args: list[str], tmp: Path) -> tuple[Any, dict[str, Any] | None]:
    m = measure([PITHLEDGER, "-q", *args], tmp, 3600)
    if m.rc not in (0,):
        print(f"  !! pithledger {' '.join(args)} exited {m.rc}: {m.err.strip()[-2000:]}", flush=True)
    try:
        doc = json.loads(m.out)
    except ValueError:
        doc = None
    return m, doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=10_000)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--by", choices=("pith", "arxiv"), default="pith")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    try:
        t = time.perf_counter()
        bundles, numbers, arxiv, events = build(a.n, tmp)
        (tmp / "ids.txt").write_text("\n".join(numbers if a.by == "pith" else arxiv) + "\n")
        print(
            f"built {a.n:,} records, {events:,} events, {sum(map(len, bundles.values())) / 1e6:.1f} MB of bundles "
            f"in {time.perf_counter() - t:.1f} s ({tmp})",
            flush=True,
        )
        ref, _ = run(["--ledger", str(tmp / "A"), "apply", str(tmp / "bundles.jsonl")], tmp)
        print(
            f"apply (reference): {ref.wall:.1f} s, {a.n / ref.wall:,.0f} records/s, {events / ref.wall:,.0f} events/s, "
            f"peak RSS {ref.rss_mb or 0:.0f} MiB",
            flush=True,
        )
        with PithSite(bundles) as site:
            rows = []
            for label in ("pull", "pull again (unchanged)"):
                before_conn, before_req = site.connections, sum(site.requests.values())
                m, doc = run(
                    [
                        "--ledger",
                        str(tmp / "B"),
                        "pull",
                        site.base_url,
                        "--ids",
                        str(tmp / "ids.txt"),
                        "--rate",
                        "0",
                        "--connections",
                        str(a.connections),
                        "--json",
                    ],
                    tmp,
                )
                doc = doc or {}
                rows.append(label)
                print(
                    f"{label}: {m.wall:.1f} s, {a.n / m.wall:,.0f} records/s, {doc.get('new', 0) / m.wall:,.0f} new events/s "
                    f"({doc.get('new')} new, {doc.get('records_fetched')} fetched, {doc.get('unchanged')} unchanged, "
                    f"{doc.get('batches')} batches), {sum(site.requests.values()) - before_req:,} requests over "
                    f"{site.connections - before_conn} connections accepted, peak RSS {m.rss_mb or 0:.0f} MiB "
                    f"({m.anon_mb or 0:.0f} anon / {m.file_mb or 0:.0f} file)",
                    flush=True,
                )
        da, _ = run(["--ledger", str(tmp / "A"), "digest", "--json"], tmp)
        db, _ = run(["--ledger", str(tmp / "B"), "digest", "--json"], tmp)
        print("digest of the pulled ledger equals apply's:", da.out == db.out, flush=True)
        if da.out != db.out:
            sys.exit(1)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
