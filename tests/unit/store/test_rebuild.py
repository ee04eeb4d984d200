"""A ledger written under merge v1 is refused with a pointer to `rebuild`, which loses nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers.eventpool import ALICE, P, pool
from helpers.rebuild import write_v1_ledger
from pithledger.errors import LayoutMismatch
from pithledger.records.events import compute_event_id, make_event, verify_event
from pithledger.store import Ledger
from pithledger.store.rebuild import rebuild


def forged() -> dict[str, Any]:
    """A valid event with the signature of another: bad-signature, and nothing else wrong with it."""
    event = make_event(
        "author_attestation", P[0], {"author_name": "Forged Author"}, ALICE, created_at="2026-02-01T00:00:00Z"
    )
    other = next(e for e in pool() if e.get("signature_b64"))
    event = {**event, "signature_b64": other["signature_b64"]}
    return {**event, "event_id": compute_event_id(event)}  # the id covers the signature: recomputed, it matches


def test_a_v1_ledger_is_refused_naming_the_rebuild(tmp_path: Path) -> None:
    write_v1_ledger(tmp_path / "old")
    for readonly in (True, False):
        with pytest.raises(LayoutMismatch) as info:
            Ledger(tmp_path / "old", readonly=readonly)
        assert "pithledger-merge-v1" in info.value.message and "rebuild" in info.value.hint


def test_rebuild_reuses_the_signature_checks_of_events_held_as_valid_only(tmp_path: Path) -> None:
    write_v1_ledger(tmp_path / "L", ((forged(), "invalid"),))
    counts = rebuild(tmp_path / "L")
    assert counts["signatures_reused"] == sum(verify_event(e).status == "valid" for e in pool())
    assert counts["invalid"] == 3  # the forged copy was checked again, and refused
    with Ledger(tmp_path / "L", readonly=True) as rebuilt:
        assert [
            h.verdict.reason
            for _, h in rebuilt.evidence(forged()["subject_pith_number"])
            if h.verdict.reason == "bad-signature"
        ] == ["bad-signature"]


def test_reused_signature_checks_trust_the_old_log_and_reverify_does_not(tmp_path: Path) -> None:
    """The trust boundary, stated: a log tampered to call a forged signature valid passes a reusing
    rebuild; `rebuild --reverify` (and `fsck --reverify` beforehand) checks every signature again."""
    write_v1_ledger(tmp_path / "reuse", ((forged(), "valid"),))
    write_v1_ledger(tmp_path / "full", ((forged(), "valid"),))
    assert rebuild(tmp_path / "reuse")["invalid"] == 2
    full = rebuild(tmp_path / "full", reverify=True)
    assert full["invalid"] == 3 and full["signatures_reused"] == 0
    with Ledger(tmp_path / "reuse", readonly=True) as tampered:
        assert any("does not verify" in p or "verifies as invalid" in p for p in tampered.fsck(reverify=True))
    with Ledger(tmp_path / "full", readonly=True) as clean:
        assert clean.fsck(reverify=True) == []
