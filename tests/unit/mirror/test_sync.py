"""sync against sources that are merely different or lying: every record either arrives or is named."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.eventpool import ALICE, BOB, P, bundles_of, pool
from helpers.ledgers import ledger_with
from helpers.sync import bundle_path, publish_with_a_garbled_citation
from pithledger.audit import compare
from pithledger.mirror.publish import Published, publish, record_dir, sync
from pithledger.records.events import make_event
from pithledger.store import Ledger


def test_a_source_serving_garbled_copies_is_named_lying_on_every_run_and_audit_sees_it(tmp_path: Path) -> None:
    citation = publish_with_a_garbled_citation(tmp_path)
    with Ledger(tmp_path / "c", create=True) as c:
        runs = [sync(c, str(tmp_path / "pub")) for _ in range(2)]
        for counts in runs:  # the same input gets the same answer, every time
            assert counts["lying"] == [
                {"pith_number": P[2], "missing_event_ids": [citation["event_id"]], "missing_count": 1}
            ]
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
    citers = [
        make_event(
            "citation_signature",
            P[1 + i % 2],
            {"cited_pith_number": cited, "relation": "cites"},
            ALICE if i % 3 else BOB,
            created_at=f"2026-07-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
        )
        for i in range(40)
    ]
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


def test_a_forged_year_subject_cannot_overwrite_the_real_records_published_files(tmp_path: Path) -> None:
    real = P[0]
    forged = "pith:1999:" + real.rsplit(":", 1)[1]
    squat = make_event(
        "author_attestation", forged, {"author_name": "squatter"}, BOB, created_at="2026-07-01T00:00:00Z"
    )
    with ledger_with(tmp_path / "a", pool() + [squat]) as a:
        publish(a, tmp_path / "pub")
        pith_bundle = json.loads((tmp_path / "pub" / "pith" / real.rsplit(":", 1)[1] / "bundle.json").read_text())
        assert pith_bundle["pith_number"] == real  # Pith's path belongs to the present record
        assert json.loads((tmp_path / "pub" / record_dir(forged) / "bundle.json").read_text())["pith_number"] == forged
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"))
            assert counts["skipped"] == [] and counts["lying"] == []
            assert {s: c.state_bytes(s) for s in c.subjects()} == {s: a.state_bytes(s) for s in a.subjects()}


def test_a_record_revoked_away_gives_up_pith_paths_on_republish(tmp_path: Path) -> None:
    from helpers.eventpool import MALLORY, RECS
    from pithledger.records.model import record_ids

    fake_rec = {**RECS[1], "source": {**RECS[1]["source"], "version": 777}}
    fake = record_ids(fake_rec).pith_number
    created = make_event(
        "record_created",
        fake,
        {"canonical_record": fake_rec, "canonical_sha256": record_ids(fake_rec).canonical_sha256},
        MALLORY,
        created_at="2026-07-01T00:00:00Z",
    )
    with ledger_with(tmp_path / "a", [created]) as a:
        publish(a, tmp_path / "pub")
        pith_path = tmp_path / "pub" / "pith" / fake.rsplit(":", 1)[1] / "bundle.json"
        assert pith_path.is_file()
        a.apply_batch(
            bundles_of(
                [
                    make_event(
                        "revocation",
                        fake,
                        {"revoked_event_id": created["event_id"]},
                        MALLORY,
                        created_at="2026-07-02T00:00:00Z",
                    )
                ]
            )
        )
        publish(a, tmp_path / "pub")
        assert not pith_path.exists() and (tmp_path / "pub" / record_dir(fake) / "bundle.json").is_file()


def test_a_record_flooded_with_events_still_travels_in_parts(tmp_path: Path) -> None:
    from pithledger.store import StoreTuning, tuned

    flood = [
        make_event(
            "graph_snapshot",
            P[0],
            {"graph_snapshot": {"n": i, "pad": "x" * 1500}},
            BOB,
            created_at=f"2026-07-{1 + i % 28:02d}T00:00:{i % 60:02d}Z",
        )
        for i in range(12)
    ]
    # a flood of ~1 MiB events, scaled down
    with tuned(StoreTuning(part_bytes=4000)), ledger_with(tmp_path / "a", pool() + flood) as a:
        parts = a.export_parts(P[0])
        assert len(parts) > 3 and "canonical_record" in parts[0] and all("canonical_record" not in p for p in parts[1:])
        assert sorted(e["event_id"] for p in parts for e in p["events"] if "event_id" in e) == sorted(
            e["event_id"] for e in a.export(P[0])["events"] if "event_id" in e
        )
        publish(a, tmp_path / "pub")
        assert (tmp_path / "pub" / record_dir(P[0]) / f"bundle-{len(parts) - 1}.json").is_file()
        with Ledger(tmp_path / "c", create=True) as c:
            counts = sync(c, str(tmp_path / "pub"))
            assert counts["skipped"] == [] and counts["lying"] == []
            assert compare(a, c).consistent
