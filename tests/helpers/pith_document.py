"""What tests/unit/records/test_pith_document.py and tests/e2e/records/test_pith_document.py share: Pith's record
document for FHIBFT2F… (tests/vectors), its record, event id and the bundle built from it, and its named mutations."""

from __future__ import annotations

import json
from typing import Any

from helpers.common import FIXTURES, ROOT, VECTORS
from pithledger.records import keys
from pithledger.records.bundle import write_bundle
from pithledger.records.events import pith_record_event_id

DOC_PATH = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"


DOC = json.loads(DOC_PATH.read_bytes())


NUMBER = "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L"


RECORD = DOC["canonical_record"]


EVENT_ID = pith_record_event_id(DOC["canonical_sha256"], DOC["receipt"]["key_id"], DOC["receipt"]["signature_b64"])


BUNDLES = ROOT / "bundles"


def pith_bundle_event(created_at: str = "2026-07-05T12:01:21Z", signer_id: str = "pith.science") -> dict[str, Any]:
    """The same record as Pith's bundle carries it (PITH-FORMAT §4), written out by hand from the spec."""
    reg = keys.PITH_REGISTRY_KEYS["pith-v1-2026-05"]
    return {
        "event_type": "record_created",
        "subject_pith_number": NUMBER,
        "target": "record",
        "created_at": created_at,
        "signer": {
            "key_id": reg.key_id,
            "public_key_fingerprint": reg.fingerprint,
            "signer_id": signer_id,
            "signer_type": "pith_registry",
        },
        "payload": {"canonical_record": RECORD, "canonical_sha256": DOC["canonical_sha256"], "receipt": DOC["receipt"]},
    }


def pith_bundle(*events: dict[str, Any]) -> dict[str, Any]:
    return write_bundle(
        NUMBER,
        list(events) or [pith_bundle_event()],
        canonical_record=RECORD,
        aliases_created_at="2026-07-05T12:01:21Z",
    )


EXPECTED = json.loads((FIXTURES / "bundles" / "expected.json").read_text())


MUTATIONS = {  # fixture -> (exit code, what stderr or stdout says)
    "record-document-wrong-canonical-sha256": (1, "error[bundle-inconsistent]: "),
    "record-document-record-of-another-paper": (1, "error[bundle-inconsistent]: "),
    "record-document-aliases-mismatch": (1, "error[bundle-inconsistent]: "),
    "record-document-short-number-wrong": (1, "error[bundle-inconsistent]: "),
    "record-document-unknown-schema-version": (1, "error[bad-bundle]: "),
    "record-document-unknown-record-type": (1, "error[bad-bundle]: "),
    "record-document-title-not-a-string": (1, "error[bad-bundle]: "),
    "record-document-event-for-another-subject": (1, "error[subject-mismatch]: "),
    "record-document-tampered-receipt": (1, "invalid    " + NUMBER + " record_created [bad-receipt] "),
    "record-document-receipt-by-unknown-key": (1, "invalid    " + NUMBER + " record_created [unknown-registry-key] "),
    "record-document-no-receipt": (0, "unverified " + NUMBER + " record_created [no-receipt] "),
}
