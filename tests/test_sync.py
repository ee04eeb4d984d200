"""sync against sources that are merely different or lying: every record either arrives or is named."""

from __future__ import annotations

import json
from pathlib import Path

from pithledger.audit import compare
from pithledger.canonical import canonical_bytes
from pithledger.events import make_event
from pithledger.mirror import Published, publish, sync
from pithledger.store import Ledger

from adversary import garble
from eventpool import ALICE, BOB, P, bundles_of, pool


def ledger_with(path: Path, events: list) -> Ledger:  # type: ignore[type-arg]
    ledger = Ledger(path, create=True)
    ledger.apply_batch(bundles_of(events))
    return ledger


def bundle_path(pub: Path, number: str) -> Path:
    return pub / "pith" / number.rsplit(":", 1)[-1] / "bundle.json"


def test_a_source_serving_garbled_copies_is_named_lying_on_every_run_and_audit_sees_it(tmp_path: Path) -> None:
    citation = next(e for e in pool() if e["event_type"] == "citation_signature" and e["subject_pith_number"] == P[2])
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
    path = bundle_path(tmp_path / "pub", P[2])
    bundle = json.loads(path.read_text())
    bundle["events"] = [garble(e, "wrong-event-id") if e == citation else e for e in bundle["events"]]
    path.write_bytes(canonical_bytes(bundle) + b"\n")
    with Ledger(tmp_path / "c", create=True) as c:
        runs = [sync(c, str(tmp_path / "pub")) for _ in range(2)]
        for counts in runs:  # the same input gets the same answer, every time
            assert counts["lying"] == [{"pith_number": P[2], "missing_event_ids": [citation["event_id"]]}]
            assert sorted(r.reason for r in counts["rejected"]) == ["id-mismatch", "unverifiable-signature"]
        result = compare(c, Published(str(tmp_path / "pub")))
    assert not result.consistent
    assert [(d.pith_number, d.a_lacks) for d in result.divergent if d.a_lacks] == [(P[2], [citation["event_id"]])]


def test_one_unusable_record_does_not_stop_the_others(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        want = set(a.subjects())
    bundle_path(tmp_path / "pub", P[0]).write_bytes(b"{ not json")
    with Ledger(tmp_path / "c", create=True) as c:
        counts = sync(c, str(tmp_path / "pub"))
        assert [(s["pith_number"], s["reason"]) for s in counts["skipped"]] == [(P[0], "malformed-json")]
        assert set(c.subjects()) == want - {P[0]}


def test_sync_applies_in_batches_and_equals_applying_the_same_data(tmp_path: Path) -> None:
    cited = P[0]
    citers = [make_event("citation_signature", P[1 + i % 2], {"cited_pith_number": cited, "relation": "cites"},
                         ALICE if i % 3 else BOB, created_at=f"2026-07-{1 + i % 28:02d}T{i % 24:02d}:00:00Z") for i in range(40)]
    with ledger_with(tmp_path / "a", pool() + citers) as a:
        publish(a, tmp_path / "pub")
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"), batch_events=8)
            assert counts["batches"] > 1 and counts["skipped"] == [] and counts["lying"] == []
            assert {s: c.state_bytes(s) for s in c.subjects()} == {s: a.state_bytes(s) for s in a.subjects()}
            assert compare(a, c).consistent and c.fsck() == []


def test_bundles_without_events_still_close_batches(tmp_path: Path) -> None:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
    with Ledger(tmp_path / "c", create=True) as c:
        counts = sync(c, str(tmp_path / "pub"), batch_events=1)
        assert counts["batches"] == counts["records_fetched"]
