"""Filled-in example payloads for `pithledger event KIND --example`: the demo events of
bundles/demo-2605.00424-every-kind.json, all about the record of arXiv 2605.00424."""

from __future__ import annotations

from typing import Any

#: The record every example is about (a timestamp_anchor proof commits to this record's digest).
SUBJECT = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"

EXAMPLES: dict[str, dict[str, Any]] = {
    "author_attestation": {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
    "challenge": {
        "challenged_event_id": "sha256:4f869469a5c820fdfe32acda981c11b43ad6649a4306398d6462c86660bd0325",
        "reason": "reference 12 resolves via arXiv",
    },
    "citation_signature": {"cited_pith_number": "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY", "relation": "extends"},
    "graph_snapshot": {"graph_snapshot": {"builder_version": "demo-builder-1", "claims": {"count": 0, "items": []}}},
    "integrity_finding": {
        "description": "reference 12 has no DOI",
        "finding_type": "reference_unresolved",
        "severity": "info",
    },
    "record_created": {
        "canonical_record": {
            "metadata": {
                "abstract_canon_sha256": "d2f972b2c94b933c62e4053c2b0259c857f7eb4f853dfcdb7e80ba1d1249f83f",
                "cross_cats_sorted": ["cs.AI", "cs.MA", "cs.SE"],
                "license": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
                "primary_cat": "cs.CR",
                "submitted_at": "2026-05-01T05:53:05Z",
                "title_canon_sha256": "596942a82eb1cbce8a681c3fb2b5e080134da0f45bfb7ea8c1707cba543e0e00",
            },
            "schema_version": "1.0",
            "source": {"id": "2605.00424", "kind": "arxiv", "version": 2},
        }
    },
    "replication_record": {
        "artifact_url": "https://example.org/replications/2605.00424",
        "outcome": "succeeded",
        "replication_type": "replication",
    },
    "revocation": {
        "reason": "wrong relation",
        "revoked_event_id": "sha256:b85c5761174ab826c31b0f943d1117e741db671796afaba9b9e829564342a80e",
    },
    "storage_attestation": {
        "capture_url": "https://web.archive.org/web/20260520013000/https://arxiv.org/abs/2605.00424",
        "captured_at": "2026-05-20T01:30:00Z",
    },
    "timestamp_anchor": {
        "ots_proof_b64": "AE9wZW5UaW1lc3RhbXBzAABQcm9vZgC/ieLohOiSlAEILn4He3o4a7KCYKUz7HOY285ItajnwHRsFf7VfyrPFIn/8AQAAAAACACD3+MNLvkMji4taHR0cHM6Ly9hbGljZS5idGMuY2FsZW5kYXIub3BlbnRpbWVzdGFtcHMub3Jn8AQAAAABCAAFiJYNc9cZAQOg7jk="
    },
}
