"""A ledger written under merge v1 is refused with a pointer to `rebuild`, which loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

import lmdb
import msgspec
import pytest

from typing import Any

from pithledger.records.canonical import canonical_bytes
from pithledger.errors import LayoutMismatch
from pithledger.records.events import verify_event
from pithledger.store import Ledger, rebuild

from pithledger.records.events import compute_event_id, make_event

from helpers.eventpool import ALICE, P, bundles_of, pool
from helpers.common import TESTS


def forged() -> dict[str, Any]:
    """A valid event with the signature of another: bad-signature, and nothing else wrong with it."""
    event = make_event("author_attestation", P[0], {"author_name": "Forged Author"}, ALICE, created_at="2026-02-01T00:00:00Z")
    other = next(e for e in pool() if e.get("signature_b64"))
    event = {**event, "signature_b64": other["signature_b64"]}
    return {**event, "event_id": compute_event_id(event)}  # the id covers the signature: recomputed, it matches


def write_v1_ledger(path: Path, extra_events: tuple[tuple[dict[str, Any], str], ...] = ()) -> None:
    """What pithledger 0.1 (layout 1, merge v1) left on disk: every received event in its log, with
    the status its verdict had (``extra_events``: more (event, status) pairs)."""
    env = lmdb.open(str(path), max_dbs=16, subdir=True)
    meta, log, extra = (env.open_db(n) for n in (b"meta", b"log", b"extra"))
    enc = msgspec.msgpack.Encoder()
    with env.begin(write=True) as txn:
        txn.put(b"layout_version", b"1", db=meta)
        txn.put(b"merge_version", b"pithledger-merge-v1", db=meta)
        held = [(e, verify_event(e).status) for e in pool()] + list(extra_events)
        for seq, (event, status) in enumerate(held):
            entry = {"seq": seq, "event": canonical_bytes(event), "verdict": {"event_id": "v1", "status": status}}
            txn.put(seq.to_bytes(8, "big"), enc.encode(entry), db=log)
        txn.put(pool()[0]["subject_pith_number"].encode() + b"\0" + b"ab" * 32, b'{"note":"kept"}', db=extra)
    env.close()


def test_a_v1_ledger_is_refused_naming_the_rebuild(tmp_path: Path) -> None:
    write_v1_ledger(tmp_path / "old")
    for readonly in (True, False):
        with pytest.raises(LayoutMismatch) as info:
            Ledger(tmp_path / "old", readonly=readonly)
        assert "pithledger-merge-v1" in info.value.message and "rebuild" in info.value.hint


def test_rebuild_gives_what_applying_everything_to_a_new_ledger_gives(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    old = tmp_path / "L"
    write_v1_ledger(old)
    r = cli("--ledger", str(old), "state", pool()[0]["subject_pith_number"])
    assert r.code == 1 and "error[layout-mismatch]" in r.err and "rebuild" in r.err
    r = cli("--ledger", str(old), "rebuild", "--json")
    assert r.code == 0, r.err
    counts = r.json()
    assert counts["events_read"] == len(pool()) and counts["invalid"] == 2 and counts["unverified"] == 1
    assert Path(counts["backup"]).name == "L.v1-backup" and (Path(counts["backup"]) / "data.mdb").exists()
    with Ledger(tmp_path / "fresh", create=True) as fresh:
        fresh.apply_batch(bundles_of(pool()))
        want = ({s: fresh.state_bytes(s) for s in fresh.subjects()}, fresh.root(), fresh.evidence_usage())
    with Ledger(old, readonly=True) as rebuilt:
        assert ({s: rebuilt.state_bytes(s) for s in rebuilt.subjects()}, rebuilt.root(), rebuilt.evidence_usage()) == want
        assert rebuilt.fsck() == []
        assert rebuilt.export(pool()[0]["subject_pith_number"])["note"] == "kept"  # unknown bundle fields survive
    again = cli("--ledger", str(old), "rebuild", "--force")  # a v2 ledger rebuilt from its log and evidence: same again
    assert again.code == 0 and "-> pithledger-merge-v2" in again.out
    assert json.loads(cli("--ledger", str(old), "digest", "--json").out)["events_root"] == want[1].events.hex()


def test_rebuild_reuses_the_signature_checks_of_events_held_as_valid_only(tmp_path: Path) -> None:
    write_v1_ledger(tmp_path / "L", ((forged(), "invalid"),))
    counts = rebuild(tmp_path / "L")
    assert counts["signatures_reused"] == sum(verify_event(e).status == "valid" for e in pool())
    assert counts["invalid"] == 3  # the forged copy was checked again, and refused
    with Ledger(tmp_path / "L", readonly=True) as rebuilt:
        assert [h.verdict.reason for _, h in rebuilt.evidence(forged()["subject_pith_number"])
                if h.verdict.reason == "bad-signature"] == ["bad-signature"]


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


def test_rebuild_keeps_the_display_metadata_beside_the_ledger(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The sidecars (display metadata; outside consensus) travel with the rebuilt ledger: a title kept
    from Pith's record document is still shown after `rebuild --force` (found by the adversarial review)."""
    from pithledger.records.display import MetadataStore

    doc = TESTS / "vectors" / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
    ledger = tmp_path / "L"
    assert cli("--ledger", str(ledger), "apply", str(doc)).code == 0
    record = json.loads(doc.read_text())["canonical_record"]

    def title() -> str | None:
        store = MetadataStore(ledger, readonly=True)
        try:
            meta = store.get(record)
            return meta.title if meta is not None else None
        finally:
            store.close()

    before = title()
    assert before is not None and before.startswith("ByteScale")
    r = cli("--ledger", str(ledger), "rebuild", "--force", "--json")
    assert r.code == 0, r.err
    assert title() == before
    assert (Path(r.json()["backup"]) / "display-metadata" / "data.mdb").exists()  # the backup keeps its own
