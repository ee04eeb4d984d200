"""A ledger written under merge v1 is refused with a pointer to `rebuild`, which loses nothing.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/store/test_rebuild.py."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.clikit import _pithledger
from helpers.common import TESTS
from helpers.eventpool import bundles_of, pool
from helpers.rebuild import write_v1_ledger
from helpers.site import BUNDLES
from pithledger.store import Ledger


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
        assert (
            {s: rebuilt.state_bytes(s) for s in rebuilt.subjects()},
            rebuilt.root(),
            rebuilt.evidence_usage(),
        ) == want
        assert rebuilt.fsck() == []
        assert rebuilt.export(pool()[0]["subject_pith_number"])["note"] == "kept"  # unknown bundle fields survive
    again = cli("--ledger", str(old), "rebuild", "--force")  # a v2 ledger rebuilt from its log and evidence: same again
    assert again.code == 0 and "-> pithledger-merge-v3" in again.out
    assert json.loads(cli("--ledger", str(old), "digest", "--json").out)["events_root"] == want[1].events.hex()


def test_rebuild_keeps_the_display_metadata_beside_the_ledger(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The sidecars (display metadata; outside consensus) travel with the rebuilt ledger: a title kept
    from Pith's record document is still shown after `rebuild --force` (found by the adversarial review)."""
    from pithledger.store.sidecars import MetadataStore

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


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_rebuild_of_a_current_ledger_does_nothing_unless_forced(tmp_path: Path) -> None:
    assert _pithledger("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode == 0
    for _ in range(2):
        r = _pithledger("--ledger", "L", "rebuild", cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith("nothing to rebuild: L is already at pithledger-merge-v"), (
            r.stdout
        )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("L")) == ["L"]
    assert json.loads(_pithledger("--ledger", "L", "rebuild", "--json", cwd=tmp_path).stdout)["already_current"] is True
    forced = _pithledger("--ledger", "L", "rebuild", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "the old ledger is at" in forced.stdout
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("L.")]) == 1


def test_a_merge_v2_ledger_is_refused_and_rebuilt_under_v3(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Merge v3 changed what an anchor proves (spec/merge.md §9): a ledger whose states were derived under v2 is
    refused until `rebuild` re-checks every event it holds under v3's rules; nothing is lost."""
    import lmdb

    ledger = tmp_path / "L"
    with Ledger(ledger, create=True) as fresh:
        fresh.apply_batch(bundles_of(pool()))
        want = ({s: fresh.state_bytes(s) for s in fresh.subjects()}, fresh.root())
    env = lmdb.open(str(ledger), max_dbs=32, subdir=True)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"merge_version", b"pithledger-merge-v2")
    env.close()
    r = cli("--ledger", str(ledger), "state", pool()[0]["subject_pith_number"])
    assert r.code == 1 and "error[layout-mismatch]" in r.err and "pithledger-merge-v2" in r.err and "rebuild" in r.err
    r = cli("--ledger", str(ledger), "rebuild", "--json")
    assert r.code == 0, r.err
    assert r.json()["old_merge_version"] == "pithledger-merge-v2" and Path(r.json()["backup"]).name == "L.v2-backup"
    with Ledger(ledger, readonly=True) as rebuilt:
        assert ({s: rebuilt.state_bytes(s) for s in rebuilt.subjects()}, rebuilt.root()) == want
        assert rebuilt.fsck() == []
