"""What a mirror serves about valid events is a function of those events (issue #20 §3): two ledgers
holding the same valid events, reached by different copies of Pith's record_created (copies differ in
fields Pith's receipt does not sign), serve and export the same bytes, and nothing unauthenticated is
shown as Pith's. Every check runs the real command line and real `serve` processes on 127.0.0.1.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/web/test_served_bytes.py."""

from __future__ import annotations

import json

from helpers.served_bytes import DOC, FORGED, _relayed
from pithledger.records.bundle import pith_record_event, served_pith_record_event
from pithledger.records.events import verify_event


def test_the_served_form_has_the_copys_identity_and_verifies() -> None:
    real = pith_record_event(DOC)
    relayed = _relayed(real)
    served = served_pith_record_event(relayed)
    assert served == served_pith_record_event(real)
    for event in (real, relayed, served):
        verdict = verify_event(event)
        assert verdict.status == "valid", verdict
        assert verdict.event_id == verify_event(real).event_id
    assert FORGED not in json.dumps(served)
    assert (
        served["created_at"] == DOC["canonical_record"]["metadata"]["submitted_at"]
    )  # authenticated by the record's hash
    assert served["signer"]["signer_id"] == "pith.science"
