"""What a mirror serves about valid events is a function of those events (issue #20 §3): two ledgers
holding the same valid events, reached by different copies of Pith's record_created (copies differ in
fields Pith's receipt does not sign), serve and export the same bytes, and nothing unauthenticated is
shown as Pith's. Every check runs the real command line and real `serve` processes on 127.0.0.1."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pithledger.bundle import pith_record_event, served_pith_record_event, write_bundle
from pithledger.events import make_event, verify_event

from conftest import VECTORS
from eventpool import ALICE
from test_serve_http import Server, pl

DOC = json.loads((VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json").read_text())
NUMBER = DOC["pith_number"]
SUFFIX = NUMBER.rsplit(":", 1)[-1]
FORGED = "RECORD WITHDRAWN"


def _relayed(event: dict[str, Any]) -> dict[str, Any]:
    """The real record_created as a hostile relay delivers it: every field Pith's receipt leaves unsigned rewritten."""
    out = copy.deepcopy(event)
    out["created_at"] = "2031-01-01T00:00:00Z"
    out["signer"]["signer_id"] = FORGED
    out["payload"]["receipt"]["signed_at"] = FORGED
    out["payload"]["receipt"]["notice"] = FORGED
    out["payload"]["receipt"]["signature_status"] = FORGED
    return out


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
    assert served["created_at"] == DOC["canonical_record"]["metadata"]["submitted_at"]  # authenticated by the record's hash
    assert served["signer"]["signer_id"] == "pith.science"


def _ledger(tmp: Path, name: str, first: dict[str, Any], also: list[dict[str, Any]]) -> Path:
    """A ledger that received ``first`` (a bundle) first, then the record document, then ``also``."""
    ledger = tmp / name
    (tmp / f"{name}-first.json").write_text(json.dumps(first))
    (tmp / f"{name}-doc.json").write_text(json.dumps(DOC))
    (tmp / f"{name}-also.json").write_text(json.dumps(write_bundle(NUMBER, also)))
    for part in ("first", "doc", "also"):
        pl(tmp, "--ledger", str(ledger), "apply", str(tmp / f"{name}-{part}.json"))
    return ledger


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_mirrors_with_the_same_valid_events_serve_the_same_bytes(tmp_path: Path) -> None:
    real = pith_record_event(DOC)
    author = make_event("author_attestation", NUMBER, {"author_name": "A. Author"}, ALICE, created_at="2026-07-06T00:00:00Z")
    a = _ledger(tmp_path, "a", write_bundle(NUMBER, [real]), [author])
    b = _ledger(tmp_path, "b", write_bundle(NUMBER, [_relayed(real)]), [author])
    # the log keeps each first copy as received: the ledgers differ in what they hold, not in what is valid
    assert pl(tmp_path, "--ledger", str(a), "digest").stdout == pl(tmp_path, "--ledger", str(b), "digest").stdout

    exports = [pl(tmp_path, "--ledger", str(x), "export", SUFFIX).stdout for x in (a, b)]
    assert exports[0] == exports[1]
    assert FORGED not in exports[0]
    assert "signed_at" in exports[0]  # the receipt is exported, in its served form

    trees = []
    for x in (a, b):
        out = tmp_path / f"{x.name}-tree"
        pl(tmp_path, "--ledger", str(x), "publish", str(out), "--base-url", "https://mirror.example")
        trees.append(_tree(out))
    assert trees[0].keys() == trees[1].keys()
    differ = [rel for rel in trees[0] if trees[0][rel] != trees[1][rel]]
    assert differ == []
    assert not any(FORGED.encode() in data for data in trees[0].values())

    servers = [Server(x, tmp_path, "--base-url", "https://mirror.example") for x in (a, b)]
    try:
        for path, headers in [(f"/pith/{SUFFIX}", {}), (f"/pith/{SUFFIX}", {"Accept": "application/ld+json"}),
                              (f"/pith/{SUFFIX}/bundle.json", {}), (f"/pith/{SUFFIX}/events.json", {}),
                              (f"/.well-known/pith/{SUFFIX}/bundle.json", {}),
                              (f"/api/pith-number/{SUFFIX}/events.json", {}), (f"/pith/{SUFFIX}/state.json", {})]:
            got = [s.request(path, headers=headers) for s in servers]
            assert got[0][0] == got[1][0] == 200, (path, got[0][0], got[1][0])
            assert got[0][2] == got[1][2], path
            assert FORGED.encode() not in got[0][2], path
        # the page shows Pith's receipt as verified, and the unsigned time as what it is
        page = servers[1].request(f"/pith/{SUFFIX}")[2].decode()
        assert 'data-receipt="verified"' in page
        assert "not covered by Pith's signature" in page
    finally:
        for s in servers:
            s.stop()
