"""What tests/unit/merge/test_consensus.py and tests/e2e/merge/test_consensus.py share: Real Pith records and events
signed over them: record_created, citations, a mirror's bundle, a fake record, odd spellings of one value."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from helpers.common import PITH_RECORDS
from helpers.eventpool import ALICE, BOB, bundles_of
from pithledger.records import keys
from pithledger.records import ots as _ots
from pithledger.records.events import compute_event_id, make_event, signing_message
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids
from pithledger.store import Ledger

REC = PITH_RECORDS[0]  # arXiv 2605.00424v2


NUMBER = REC["pith_number"]


OTHER = PITH_RECORDS[1]["pith_number"]


def created(
    key: LocalKey, record: dict[str, Any] = REC["canonical_record"], when: str = "2026-06-01T00:00:00Z"
) -> dict[str, Any]:
    rid = record_ids(record)
    return make_event(
        "record_created",
        rid.pith_number,
        {"canonical_record": record, "canonical_sha256": rid.canonical_sha256},
        key,
        created_at=when,
    )


def citation(when: str = "2026-06-02T00:00:00Z") -> dict[str, Any]:
    return make_event(
        "citation_signature", NUMBER, {"cited_pith_number": OTHER, "relation": "supports"}, BOB, created_at=when
    )


def mirror(path: Path, *batches: list[dict[str, Any]]) -> Ledger:
    ledger = Ledger(path, create=True)
    for batch in batches:
        ledger.apply_batch(bundles_of(batch))
    return ledger


FAKE_RECORD = {**REC["canonical_record"], "source": {**REC["canonical_record"]["source"], "version": 9999}}


FAKE = record_ids(FAKE_RECORD).pith_number


def signed(fields: dict[str, Any], key: LocalKey = ALICE) -> dict[str, Any]:
    """Sign whatever we are given (make_event refuses invalid results; an adversary does not)."""
    template = citation()
    event = {k: v for k, v in template.items() if k not in ("event_id", "signature_b64")}
    event["signer"] = {
        **event["signer"],
        "key_id": key.name,
        "public_key_b64": keys.b64encode(key.public_key),
        "public_key_fingerprint": keys.fingerprint_hex(key.public_key),
    }
    event.update(fields)
    event["signature_b64"] = keys.b64encode(key.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


ODD_SPELLINGS = {
    "created-at-in-arabic-indic-digits": ({"created_at": "٢٠٢٦-06-01T00:00:00Z"}, "bad-time"),
    "created-at-in-fullwidth-digits": ({"created_at": "２０２６-０６-０１T００:００:００Z"}, "bad-time"),
    "created-at-with-trailing-newline": ({"created_at": "2026-06-01T00:00:00Z\n"}, "bad-time"),
    "cited-number-with-trailing-newline": (
        {"payload": {"cited_pith_number": OTHER + "\n", "relation": "cites"}},
        "bad-payload",
    ),
    "cited-number-in-arabic-indic-digits": (
        {"payload": {"cited_pith_number": OTHER.replace("2019", "٢٠١٩"), "relation": "cites"}},
        "bad-payload",
    ),
    "orcid-in-arabic-indic-digits": (
        {"event_type": "author_attestation", "payload": {"author_name": "J", "orcid": "٠٠٠٠-0002-1825-0097"}},
        "bad-orcid",
    ),
    "orcid-with-trailing-newline": (
        {"event_type": "author_attestation", "payload": {"author_name": "J", "orcid": "0000-0002-1825-0097\n"}},
        "bad-orcid",
    ),
    "author-name-of-ascii-blanks": (
        {"event_type": "author_attestation", "payload": {"author_name": " \t\r\n"}},
        "bad-payload",
    ),
    "record-arxiv-id-with-trailing-newline": (
        {
            "event_type": "record_created",
            "payload": {
                "canonical_record": {
                    **REC["canonical_record"],
                    "source": {**REC["canonical_record"]["source"], "id": "2605.00424\n"},
                },
                "canonical_sha256": REC["canonical_sha256"],
            },
        },
        "bad-record",
    ),
    "record-submitted-at-in-fullwidth-digits": (
        {
            "event_type": "record_created",
            "payload": {
                "canonical_record": {
                    **REC["canonical_record"],
                    "metadata": {**REC["canonical_record"]["metadata"], "submitted_at": "２０２６-05-01T05:53:05Z"},
                },
                "canonical_sha256": REC["canonical_sha256"],
            },
        },
        "bad-record",
    ),
    "anchor-height-of-2-to-the-64": (
        {
            "event_type": "timestamp_anchor",
            "payload": {
                "ots_proof_b64": base64.b64encode(
                    _ots.build(bytes.fromhex(REC["canonical_sha256"]), [], [2**64])
                ).decode()
            },
        },
        "bad-proof",
    ),
    "anchor-height-beyond-2-to-the-32": (
        {
            "event_type": "timestamp_anchor",
            "payload": {
                "ots_proof_b64": base64.b64encode(
                    _ots.build(bytes.fromhex(REC["canonical_sha256"]), [], [2**53 + 1])
                ).decode()
            },
        },
        "bad-proof",
    ),
}
