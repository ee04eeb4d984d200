"""Regenerate the example bundles in this folder (deterministic: same bytes every run).

    python bundles/make_examples.py

The events are signed by DEMO keys whose seeds are derived from public strings below: anyone can
sign as them, so they prove nothing. Their signer_id says so. The records are real Pith records.
Also written: display/titles.jsonl, the real titles (source-data/pith-titles.jsonl, as Pith shows them)
of the records whose title hash they match, for `pithledger metadata` (display only, outside consensus).
Not written here: pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json is Pith's own record document, verbatim.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from pithledger.records import ots as _ots
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes, text_sha256
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids

HERE = Path(__file__).parent


def demo_key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"pithledger demo key: {name}".encode()).digest())


ALICE, BOB, MIRROR = demo_key("demo-alice"), demo_key("demo-bob"), demo_key("demo-mirror")
SIGNER_IDS = {k.name: f"{k.name} (DEMO KEY, published seed: not evidence of anything)" for k in (ALICE, BOB, MIRROR)}


def ev(kind: str, subject: str, payload: dict[str, Any], key: LocalKey, when: str) -> dict[str, Any]:
    return make_event(kind, subject, payload, key, created_at=when, signer_id=SIGNER_IDS[key.name])


def record_created(record: dict[str, Any], when: str) -> dict[str, Any]:
    rid = record_ids(record)
    payload = {"canonical_record": record, "canonical_sha256": rid.canonical_sha256}
    return ev("record_created", rid.pith_number, payload, MIRROR, when)


def main() -> None:
    records = [json.loads(line) for line in (HERE / "source-data" / "pith-records.jsonl").read_text().splitlines()]
    a, b, c = records[0], records[1], records[8]  # 2605.00424, 1905.08204, 1709.09021
    ida, idb, idc = (record_ids(r) for r in (a, b, c))
    pa = ida.pith_number

    proof = _ots.build(bytes.fromhex(ida.canonical_sha256), ["https://alice.btc.calendar.opentimestamps.org"], [948000])
    wrong_citation = ev(
        "citation_signature",
        pa,
        {"cited_pith_number": idc.pith_number, "relation": "refutes"},
        BOB,
        "2026-06-01T10:00:00Z",
    )
    events_a = [
        record_created(a, "2026-05-20T00:00:40Z"),
        ev(
            "graph_snapshot",
            pa,
            {"graph_snapshot": {"builder_version": "demo-builder-1", "claims": {"count": 0, "items": []}}},
            MIRROR,
            "2026-05-20T00:01:00Z",
        ),
        ev("timestamp_anchor", pa, {"ots_proof_b64": base64.b64encode(proof).decode()}, ALICE, "2026-05-20T01:00:00Z"),
        ev(
            "storage_attestation",
            pa,
            {
                "capture_url": "https://web.archive.org/web/20260520013000/https://arxiv.org/abs/2605.00424",
                "captured_at": "2026-05-20T01:30:00Z",
            },
            ALICE,
            "2026-05-20T01:31:00Z",
        ),
        ev(
            "author_attestation",
            pa,
            {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
            BOB,
            "2026-05-21T09:00:00Z",
        ),
        ev(
            "citation_signature",
            pa,
            {"cited_pith_number": idb.pith_number, "relation": "extends"},
            BOB,
            "2026-05-22T09:00:00Z",
        ),
        wrong_citation,
        ev(
            "revocation",
            pa,
            {"revoked_event_id": wrong_citation["event_id"], "reason": "wrong relation"},
            BOB,
            "2026-06-01T10:05:00Z",
        ),
        ev(
            "replication_record",
            pa,
            {
                "replication_type": "replication",
                "outcome": "succeeded",
                "artifact_url": "https://example.org/replications/2605.00424",
            },
            ALICE,
            "2026-06-10T12:00:00Z",
        ),
        ev(
            "integrity_finding",
            pa,
            {"finding_type": "reference_unresolved", "severity": "info", "description": "reference 12 has no DOI"},
            MIRROR,
            "2026-06-11T12:00:00Z",
        ),
    ]
    events_a.append(
        ev(
            "challenge",
            pa,
            {"challenged_event_id": events_a[-1]["event_id"], "reason": "reference 12 resolves via arXiv"},
            BOB,
            "2026-06-12T12:00:00Z",
        )
    )
    bundles = {
        "demo-2605.00424-every-kind.json": write_bundle(
            pa, events_a, canonical_record=a, aliases_created_at="2026-05-20T00:00:40Z"
        ),
        "demo-1905.08204.json": write_bundle(
            idb.pith_number,
            [
                record_created(b, "2026-05-17T23:45:47Z"),
                ev("author_attestation", idb.pith_number, {"author_name": "A. Author"}, ALICE, "2026-05-18T08:00:00Z"),
            ],
            canonical_record=b,
            aliases_created_at="2026-05-17T23:45:47Z",
        ),
        "demo-1709.09021.json": write_bundle(
            idc.pith_number,
            [record_created(c, "2026-05-18T00:34:09Z")],
            canonical_record=c,
            aliases_created_at="2026-05-18T00:34:09Z",
        ),
    }
    for name, bundle in bundles.items():
        (HERE / name).write_bytes(json.dumps(bundle, indent=1, ensure_ascii=False).encode() + b"\n")
    # Bulk transfer: one bundle per line, every real record with its record_created event.
    lines = [
        canonical_bytes(
            write_bundle(record_ids(r).pith_number, [record_created(r, "2026-05-20T00:00:00Z")], canonical_record=r)
        )
        for r in records
    ]
    (HERE / "demo-50-records.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    # Titles to show: display metadata, kept beside a ledger by `pithledger metadata`, never in a bundle
    # (a record document without a receipt would add an unverified record event instead).
    by_hash = {r["metadata"]["title_canon_sha256"]: r for r in records}
    titles = [json.loads(line) for line in (HERE / "source-data" / "pith-titles.jsonl").read_text().splitlines()]
    shown = []
    for t in titles:
        assert t["canon_sha256"] == text_sha256(t["text"]) and t["canon_sha256"] in by_hash, t
        shown.append(
            canonical_bytes(
                {"canonical_record": by_hash[t["canon_sha256"]], "title": t["text"], "title_seen_at": t["source"]}
            )
        )
    (HERE / "display").mkdir(exist_ok=True)
    (HERE / "display" / "titles.jsonl").write_bytes(b"\n".join(shown) + b"\n")


if __name__ == "__main__":
    main()
