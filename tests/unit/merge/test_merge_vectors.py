"""The conformance vectors in spec/vectors/merge/: events in, verdicts and state bytes out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.eventpool import bundles_of
from helpers.merge_vectors import FILES
from pithledger.merge import MERGE_VERSION, Entry, reduce_all
from pithledger.records import bitcoin, keys
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import verify_event
from pithledger.store import Ledger


def load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text())
    return vector


@pytest.fixture
def registry_of(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def use(vector: dict[str, Any]) -> None:
        if "bitcoin_chain" in vector:  # a test network's rules in place of mainnet's, never mainnet's loosened
            monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", {"regtest": bitcoin.REGTEST}[vector["bitcoin_chain"]])
        if "registry_keys" in vector:
            monkeypatch.setattr(
                keys,
                "PITH_REGISTRY_KEYS",
                {
                    kid: keys.RegistryKey(key_id=kid, public_key=keys.b64decode_strict(b64))
                    for kid, b64 in vector["registry_keys"].items()
                },
            )

    return use


def test_there_are_vectors_for_every_attack_of_the_issue() -> None:
    names = {p.stem for p in FILES}
    for prefix in ("garbled-copy-", "junk-", "odd-spelling-", "fabricated-record-", "pith-record-", "revocation-"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_vector_verdicts_and_state_bytes(path: Path, registry_of) -> None:  # type: ignore[no-untyped-def]
    vector = load(path)
    registry_of(vector)
    assert vector["merge_version"] == MERGE_VERSION
    verdicts = [verify_event(e) for e in vector["events"]]
    got = [
        {"status": v.status, "reason": v.reason, "event_id": v.event_id if v.status == "valid" else None}
        for v in verdicts
    ]
    assert got == vector["expected"]["verdicts"]
    states = reduce_all(Entry(e, v) for e, v in zip(vector["events"], verdicts, strict=True))
    assert {s: canonical_bytes(d).decode() for s, d in states.items()} == vector["expected"]["states"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_vector_through_a_real_ledger_one_event_per_batch(path: Path, registry_of, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    vector = load(path)
    registry_of(vector)
    with Ledger(tmp_path, create=True) as ledger:
        for event in vector["events"]:
            ledger.apply_batch(bundles_of([event]))
        assert {s: ledger.state_bytes(s).decode() for s in ledger.subjects()} == vector["expected"]["states"]
        assert ledger.fsck() == []
