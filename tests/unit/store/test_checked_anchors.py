"""Checked and claimed anchors in a real ledger (issue #34 item 4): the state's views, verification_status and
badge, the record document's ``externally_anchored`` and its claim, fsck and a rebuild, on regtest's rules put in
place of mainnet's for the test (spec/events.md §3.1.3); the same events under mainnet's rules are refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from helpers import bitcoinkit as bk
from helpers.eventpool import ALICE, BOB, IDS, RECS, P, bundles_of
from pithledger.records import bitcoin, ots
from pithledger.records.events import make_event
from pithledger.render import record_doc
from pithledger.store import Ledger

DIGEST = bytes.fromhex(IDS[0].canonical_sha256)
PROOF = ots.build(DIGEST, ["https://a.example"], [900_000])


def events(headers: int, bits: int = bk.CHECKED_BITS) -> list[dict[str, object]]:
    created = make_event(
        "record_created",
        P[0],
        {"canonical_record": RECS[0], "canonical_sha256": IDS[0].canonical_sha256},
        ALICE,
        created_at="2026-06-01T00:00:00Z",
    )
    b64 = base64.b64encode(PROOF).decode()
    payload = {
        "ots_proof_b64": b64,
        "bitcoin_headers_b64": base64.b64encode(bk.run(bk.message_of(DIGEST, 1), headers, bits=bits)).decode(),
    }
    checked = make_event("timestamp_anchor", P[0], payload, ALICE, created_at="2026-06-02T00:00:00Z")
    claimed = make_event("timestamp_anchor", P[0], {"ots_proof_b64": b64}, BOB, created_at="2026-06-03T00:00:00Z")
    return [created, checked, claimed]


def doc(ledger: Ledger) -> dict[str, object]:
    state = json.loads(ledger.state_bytes(P[0]))
    return record_doc.record_document(state, [], [], None, [], record_doc.Urls(base="https://m.example"))


def test_a_checked_anchor_makes_the_record_externally_anchored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
    with Ledger(tmp_path / "l", create=True) as ledger:
        for event in events(8):  # one batch each: the fold path
            ledger.apply_batch(bundles_of([event]))
        state = json.loads(ledger.state_bytes(P[0]))
        cur = state["current"]
        assert [a["anchor_state"] for a in cur["timestamp_anchors"]] == ["bitcoin", "claimed"]
        block = cur["timestamp_anchors"][0]["bitcoin_block"]
        assert block["height"] == 900_000 and block["headers"] == 8 and block["work"] == "256"
        assert block["run_work"] == str(8 * 256)
        assert cur["verification_status"]["externally_anchored"] is True
        assert cur["badges"]["timestamp"] == "anchored in bitcoin"
        d = doc(ledger)
        assert d["verification_status"]["externally_anchored"] is True
        assert d["pithledger_claims"]["externally_anchored"] == "checked"
        assert ledger.fsck() == []
        folded = ledger.state_bytes(P[0])
    with Ledger(tmp_path / "m", create=True) as other:  # all at once: the full derivation, the same bytes
        other.apply_batch(bundles_of(events(8)))
        assert other.state_bytes(P[0]) == folded


def test_without_enough_work_the_anchor_stays_claimed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(bundles_of(events(8, bk.REGTEST_BITS)))  # 2 work in the attested block: under 128
        cur = json.loads(ledger.state_bytes(P[0]))["current"]
        assert [a["anchor_state"] for a in cur["timestamp_anchors"]] == ["claimed", "claimed"]
        assert cur["verification_status"]["externally_anchored"] is False
        assert cur["badges"]["timestamp"] == "bitcoin anchor claimed"
        d = doc(ledger)
        assert d["verification_status"]["externally_anchored"] is False
        assert d["pithledger_claims"]["externally_anchored"] == "claimed"


def test_on_mainnet_the_regtest_headers_are_refused_and_nothing_is_anchored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # signed where they are valid (make_event signs only valid events)
        m.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
        signed = events(8)
    assert bitcoin.CONSENSUS_CHAIN is bitcoin.MAINNET
    with Ledger(tmp_path, create=True) as ledger:
        report = ledger.apply_batch(bundles_of(signed))
        cur = json.loads(ledger.state_bytes(P[0]))["current"]
        assert [a["anchor_state"] for a in cur["timestamp_anchors"]] == ["claimed"]  # the checked one is refused
        assert cur["verification_status"]["externally_anchored"] is False
        assert "bad-headers" in repr(report)
        assert ledger.fsck() == []
