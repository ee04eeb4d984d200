"""The attacks of issue #10, each as a test: nothing but a valid event can move the consensus.

Consensus = the state bytes, the digest roots and identifier resolution (spec/merge.md §0,
spec/identifiers.md §7). Junk goes to evidence (spec/storage.md §2.1) and is reported every time.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/merge/test_consensus.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.consensus import FAKE, FAKE_RECORD, NUMBER, ODD_SPELLINGS, created, mirror, signed
from helpers.eventpool import ALICE, MALLORY, bundles_of
from pithledger.errors import AmbiguousId


def test_self_signed_records_that_disagree_are_listed_not_picked(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    real, fake = created(ALICE), created(MALLORY, FAKE_RECORD)
    with mirror(tmp_path / "m", [real, fake]) as m:
        with pytest.raises(AmbiguousId) as info:
            m.resolve("2605.00424")
        assert NUMBER in info.value.message and FAKE in info.value.message and "self-signed" in info.value.message
    path = tmp_path / "b.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "bundle_type": "pith_open_graph_bundle",
                    "bundle_version": "1.0",
                    "pith_number": b.pith_number,
                    "events": b.events,
                }
            )
            for b in bundles_of([real, fake])
        )
    )
    assert cli("--ledger", "L", "apply", str(path)).code == 0
    r = cli("--ledger", "L", "state", "2605.00424")
    assert r.code == 1 and "error[ambiguous-id]" in r.err and "v9999" in r.err and "Traceback" not in r.err


def test_an_overflowing_anchor_through_the_cli_is_named_not_a_traceback(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    fields, _ = ODD_SPELLINGS["anchor-height-of-2-to-the-64"]
    path = tmp_path / "anchor.json"
    path.write_text(
        json.dumps(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": NUMBER,
                "events": [created(ALICE), signed(fields)],
            }
        )
    )
    r = cli("--ledger", "L", "apply", str(path))
    assert r.code == 1 and "[bad-proof]" in r.out and "Traceback" not in r.err
    assert json.loads(cli("--ledger", "L", "state", NUMBER).out)["current"]["timestamp_anchors"] == []


def test_a_bundle_subject_in_other_digits_is_refused_whole(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "b.json"
    path.write_text(
        json.dumps(
            {
                "bundle_type": "pith_open_graph_bundle",
                "bundle_version": "1.0",
                "pith_number": NUMBER.replace("2026", "２０２６"),
                "events": [],
            }
        )
    )
    r = cli("--ledger", "L", "apply", str(path))
    assert r.code == 1 and "error[bad-bundle]" in r.err
