"""Ledgers of a chosen size, made fast, and the peak memory of a command run on them (issue #36: no
whole-ledger command's memory grows with the ledger)."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import nacl.signing

from helpers.consensus import BOB, REC, citation
from helpers.procmem import process_tree, rss_kib
from pithledger.records import keys
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import compute_event_id, signing_message
from pithledger.records.model import record_ids

_SIGNER = nacl.signing.SigningKey(BOB.seed)  # LocalKey.sign derives the key again on every call


def _record(i: int) -> tuple[dict[str, Any], str, str]:
    rec = copy.deepcopy(REC["canonical_record"])
    rec["source"]["id"] = f"27{1 + i // 100_000:02d}.{i % 100_000:05d}"
    rec["metadata"]["title_canon_sha256"] = f"{i:064x}"
    rid = record_ids(rec)
    return rec, rid.pith_number, rid.canonical_sha256


def _when(n: int) -> str:
    return f"2026-{1 + n // 2_592_000 % 12:02d}-{1 + n // 86_400 % 28:02d}T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def papers(path: Path, records: int, per_record: int = 20) -> int:
    """A .jsonl file of ``records`` bundles, one a line: each record's record_created and
    ``per_record - 1`` citation_signature events citing other records of the file (signed by one
    key, each at its own time). Returns the number of events. Costs ~0.1 ms an event."""
    made = [_record(i) for i in range(records)]
    template = {k: v for k, v in citation().items() if k not in ("event_id", "signature_b64", "payload")}
    created = {k: v for k, v in template.items() if k != "event_type"} | {"event_type": "record_created"}
    n = 0
    with path.open("wb") as fh:
        for i, (rec, number, canon) in enumerate(made):
            events = []
            for j in range(per_record):
                if j == 0:
                    event = created | {"payload": {"canonical_record": rec, "canonical_sha256": canon}}
                else:
                    cited = made[(i + j) % records][1]
                    event = template | {"payload": {"cited_pith_number": cited, "relation": "supports"}}
                event |= {"subject_pith_number": number, "created_at": _when(n)}
                event["signature_b64"] = keys.b64encode(_SIGNER.sign(signing_message(event)).signature)
                event["event_id"] = compute_event_id(event)
                events.append(event)
                n += 1
            fh.write(
                canonical_bytes(
                    write_bundle(number, events, canonical_record=rec, aliases_created_at="2026-01-01T00:00:00Z")
                )
                + b"\n"
            )
    return n


def peak_memory(args: list[str], env: dict[str, str], timeout: float = 300) -> dict[str, Any]:
    """Run ``pithledger ARGS`` and sample every 10 ms the RssAnon and RssFile (KiB, from /proc) of it and
    of every process it starts. Returns {"rc", "out", "err", "main": (anon, file) peaks of the command's
    own process, "workers": the largest (anon, file) peaks of any other}."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    peaks: dict[int, list[int]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in process_tree(proc.pid):
                got = rss_kib(pid)
                if got is not None:
                    p = peaks.setdefault(pid, [0, 0])
                    p[0], p[1] = max(p[0], got[0]), max(p[1], got[1])
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        sampler.join()
    others = [v for pid, v in peaks.items() if pid != proc.pid]
    return {
        "rc": proc.returncode,
        "out": out.decode(errors="replace"),
        "err": err.decode(errors="replace"),
        "main": tuple(peaks.get(proc.pid, [0, 0])),
        "workers": (max((v[0] for v in others), default=0), max((v[1] for v in others), default=0)),
    }
