"""Apply throughput against this machine's own limits (not run in CI).

    python bench/bench_apply.py [N_EVENTS]

Prints the raw Ed25519 verify rate, verify_event's rate, apply's rate into a fresh LMDB ledger, the
reducer's time for one record with thousands of events, and the ratios between them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import nacl.signing

from pithledger.merge import Entry, reduce
from pithledger.records.bundle import Bundle
from pithledger.records.events import make_event, verify_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids
from pithledger.store import Ledger

ROOT = Path(__file__).parent.parent


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    records = [
        json.loads(line) for line in (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_text().splitlines()
    ]
    key = LocalKey(name="bench", seed=hashlib.sha256(b"bench").digest())

    vk = nacl.signing.SigningKey(key.seed)
    sig = vk.sign(b"x" * 300).signature
    t = time.perf_counter()
    for _ in range(5000):
        vk.verify_key.verify(b"x" * 300, sig)
    raw = 5000 / (time.perf_counter() - t)
    print(f"ed25519 verify (PyNaCl, 300 B):      {raw:,.0f}/s")

    t = time.perf_counter()
    events = []
    for i in range(n):
        r = records[i % len(records)]
        rid = record_ids(r)
        if i < len(records):
            events.append(
                make_event(
                    "record_created",
                    rid.pith_number,
                    {"canonical_record": r, "canonical_sha256": rid.canonical_sha256},
                    key,
                    created_at="2026-06-01T00:00:00Z",
                )
            )
        else:
            events.append(
                make_event(
                    "author_attestation",
                    rid.pith_number,
                    {"author_name": f"author {i}"},
                    key,
                    created_at=f"2026-06-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                )
            )
    print(f"make_event (sign + self-check):      {rate(n, time.perf_counter() - t)}  ({n:,} events)")

    t = time.perf_counter()
    verdicts = [verify_event(e) for e in events]
    v = n / (time.perf_counter() - t)
    print(f"verify_event:                        {v:,.0f}/s  = {v / raw:.2f} x raw verify")

    by_subject: dict[str, list] = {}
    for e in events:
        by_subject.setdefault(e["subject_pith_number"], []).append(e)
    bundles = [Bundle(pith_number=s, events=es) for s, es in by_subject.items()]
    with tempfile.TemporaryDirectory() as tmp:
        with Ledger(Path(tmp), create=True) as ledger:
            t = time.perf_counter()
            for i in range(0, len(bundles), 5):
                ledger.apply_batch(bundles[i : i + 5])
            a = n / (time.perf_counter() - t)
            print(f"apply into LMDB (batched):           {a:,.0f}/s  = {a / raw:.2f} x raw verify")
            t = time.perf_counter()
            ledger.apply_batch(bundles)
            d = n / (time.perf_counter() - t)
            print(f"re-apply (all duplicates):           {d:,.0f}/s")

    # One record with thousands of events: the reducer must stay in milliseconds.
    subject = events[0]["subject_pith_number"]
    many = [Entry(events[0], verdicts[0])]
    for i in range(5000):
        e = make_event(
            "graph_snapshot" if i % 3 == 0 else "author_attestation",
            subject,
            {"graph_snapshot": {"n": i}} if i % 3 == 0 else {"author_name": f"a{i}"},
            key,
            created_at=f"2026-02-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        )
        many.append(Entry(e, verify_event(e)))
    t = time.perf_counter()
    reduce(subject, many)
    print(f"reduce one record of {len(many):,} events:     {1000 * (time.perf_counter() - t):.1f} ms")


if __name__ == "__main__":
    main()
