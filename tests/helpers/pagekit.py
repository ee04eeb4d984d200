"""A record and hand-made state documents for the pure page builders (cut from tests/unit/render/test_record_page.py,
which tests/e2e/web/test_agent_api.py shares)."""

from __future__ import annotations

from typing import Any

from pithledger.merge import reduce
from pithledger.records.mint import mint

TITLE = "Identitas: A Better Way To Be\n  Meaningless"
RECORD = mint(
    {
        "id": "1709.09021",
        "title": TITLE,
        "abstract": "An abstract.",
        "categories": "cs.DL",
        "license": "http://creativecommons.org/licenses/by/4.0/",
        "versions": [{"version": "v1", "created": "Tue, 26 Sep 2017 13:56:47 GMT"}],
    }
)


def _state(**slots: list[dict[str, Any]]) -> dict[str, Any]:
    """A state document of the shape the reducer writes, with hand-made slot views."""
    from pithledger.records.model import record_ids

    rid = record_ids(RECORD)
    state = reduce(rid.pith_number, [])
    cur: dict[str, Any] = {
        "canonical_record": RECORD,
        "canonical_sha256": rid.canonical_sha256,
        "source_aliases": [
            {"alias_kind": k, "alias_value": v, "created_at": "2017-09-26T13:56:47Z"} for k, v in rid.aliases.items()
        ],
        "record_receipts": [],
        "record_signers": ["ed25519:00"],
        "graph_snapshots": [],
        "timestamp_anchors": [],
        "storage_attestations": [],
        "author_attestations": [],
        "replication_records": [],
        "integrity_findings": [],
        "challenges": [],
        "citations": [],
        "inbound_citations": [],
        "revocations": [],
        "badges": {
            "author": "not attested",
            "references": "refs pending",
            "storage": "not stored",
            "timestamp": "not anchored",
        },
        "verification_status": {"pith_receipt": False},
    }
    cur.update(slots)
    state.update(record_status="present", current=cur, state_sha256="0" * 64)
    return state


def _view(kind: str, payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "created_at": "2026-05-20T00:00:00Z",
        "event_id": "sha256:" + "ab" * 32,
        "event_type": kind,
        "payload": payload,
        "signer": {
            "key_id": "k",
            "public_key_fingerprint": "f" * 32,
            "signer_id": "someone",
            "signer_type": "self_signed",
        },
        "target": "record",
        "trust": "self_signed",
    } | extra
