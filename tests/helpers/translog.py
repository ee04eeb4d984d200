"""What tests/unit/store/test_translog.py and tests/e2e/store/test_translog.py share: Real records and attestations,
raw writes into a ledger's tables, and `assert_tlog_is_the_log`: the transparency log holds the log's entries in
order."""

from __future__ import annotations

import hashlib
import json  # noqa: E402
from pathlib import Path
from typing import Any  # noqa: E402

import lmdb

from helpers.common import PITH_RECORDS  # noqa: E402
from helpers.eventpool import ALICE, bundles_of, pool  # noqa: E402
from pithledger.records.bundle import Bundle  # noqa: E402
from pithledger.records.canonical import canonical_bytes  # noqa: E402
from pithledger.records.events import make_event  # noqa: E402
from pithledger.store import Ledger  # noqa: E402
from pithledger.tlog import merkle

REMEDY = "; the transparency log is derived from the log: `pithledger rebuild --force` rebuilds it"


RECORD = PITH_RECORDS[0]


NUMBER = RECORD["pith_number"]


def served(data: bytes) -> bytes:
    """The canonical bytes of a logged event as the mirror serves it (spec/bundle.md §6): ours as held, a
    Pith-envelope record_created in its served form, which is what its entry hashes (spec/transparency.md §1)."""
    from pithledger.records.bundle import served_pith_record_event

    event = json.loads(data)
    pith = "signature_b64" not in event and "event_version" not in event
    return canonical_bytes(served_pith_record_event(event)) if pith else data


def contract_entries(ledger: Ledger) -> list[bytes]:
    """The entry bytes the contract says each log entry has (spec/storage.md §2.2), computed here from
    the log, independently of ledger/store/tlog_tables.py."""
    out = []
    for e in ledger.log():
        v = e.verdict
        assert v.event_id.startswith("sha256:")
        out.append(
            canonical_bytes(
                {
                    "event_id": v.event_id[len("sha256:") :],
                    "record": v.subject,
                    "sha256": hashlib.sha256(served(e.event)).hexdigest(),
                }
            )
        )
    return out


def assert_tlog_is_the_log(ledger: Ledger) -> list[bytes]:
    entries = contract_entries(ledger)
    assert ledger.tlog_size() == len(entries) == ledger.counts()["events"]
    assert ledger.tlog_entries(0, len(entries)) == entries
    assert ledger.tlog_root() == merkle.root([merkle.leaf_hash(e) for e in entries])
    for n, e in enumerate(ledger.log()):
        assert ledger.tlog_index(e.verdict.event_id) == n == e.seq
    return entries


def attestations(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        make_event(
            "author_attestation",
            NUMBER,
            {"author_name": f"author {i}"},
            ALICE,
            created_at=f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        )
        for i in range(start, start + n)
    ]


def record_created() -> dict[str, Any]:
    return make_event(
        "record_created",
        NUMBER,
        {"canonical_record": RECORD["canonical_record"], "canonical_sha256": RECORD["canonical_sha256"]},
        ALICE,
        created_at="2026-01-01T00:00:00Z",
    )


def raw_put(path: Path, db: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=env.open_db(db, txn=txn, create=False))
    env.close()


def small_ledger(path: Path) -> None:
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        ledger.apply_batch([Bundle(pith_number=NUMBER, events=[record_created()] + attestations(40))])
