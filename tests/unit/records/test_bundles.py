"""Bundles: Pith's published shape read without loss; our own written in the same shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common import PITH_RECORDS, ROOT, TESTS
from pithledger.records.bundle import read_bundle, write_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import verify_event

REFERENCE = TESTS / "vectors" / "pith-bundle-FZ7AO632-head.json"
EXAMPLES = ROOT / "bundles"


def pith_bundle() -> dict:
    """The top level of a real Pith bundle, verbatim from pith.science (events trimmed by the source)."""
    return json.loads(REFERENCE.read_text())


def test_real_pith_bundle_top_level_is_consistent_and_read() -> None:
    bundle = read_bundle(pith_bundle())
    assert bundle.pith_number == "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"
    assert bundle.canonical_record == PITH_RECORDS[0]["canonical_record"]


def test_unknown_top_level_fields_survive_a_round_trip() -> None:
    value = pith_bundle()
    value["mirror_hints"] = {"preferred": ["https://mirror.example"], "since": 3}
    value["zz_future"] = [1, "two", None]
    bundle = read_bundle(value)
    assert bundle.extra == {"mirror_hints": value["mirror_hints"], "zz_future": value["zz_future"]}
    again = write_bundle(
        bundle.pith_number, bundle.events, canonical_record=bundle.canonical_record, extra=bundle.extra
    )
    again["source_aliases"] = value["source_aliases"]  # alias times are Pith's, not derived
    assert canonical_bytes(again) == canonical_bytes(value)


def test_unknown_fields_inside_events_are_kept_byte_for_byte() -> None:
    data = (EXAMPLES / "demo-1905.08204.json").read_bytes()
    value = strict_decode(data)
    value["events"][1]["payload"]["future_field"] = {"kept": True}
    bundle = read_bundle(value)
    assert bundle.events[1]["payload"]["future_field"] == {"kept": True}
    assert verify_event(bundle.events[1]).reason == "id-mismatch"  # and it is signed: adding it is tampering


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("demo-*.json*")), ids=lambda p: p.name)
def test_example_bundles_verify(path: Path) -> None:
    lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
    for line in lines:
        bundle = read_bundle(strict_decode(line))
        assert [verify_event(e).status for e in bundle.events] == ["valid"] * len(bundle.events)


def test_example_bundles_hold_every_kind() -> None:
    from pithledger.records.events import KNOWN_KINDS

    bundle = read_bundle(strict_decode((EXAMPLES / "demo-2605.00424-every-kind.json").read_bytes()))
    assert {e["event_type"] for e in bundle.events} == KNOWN_KINDS


def test_example_bundles_are_reproducible(tmp_path: Path) -> None:
    import importlib.util
    import shutil

    shutil.copytree(EXAMPLES, tmp_path / "bundles")
    spec = importlib.util.spec_from_file_location("make_examples", tmp_path / "bundles" / "make_examples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    for path in EXAMPLES.glob("demo-*"):
        assert (tmp_path / "bundles" / path.name).read_bytes() == path.read_bytes(), (
            f"run: python bundles/make_examples.py ({path.name})"
        )


def test_a_bundle_without_a_record_carries_only_events() -> None:
    events = read_bundle(strict_decode((EXAMPLES / "demo-2605.00424-every-kind.json").read_bytes())).events
    bare = write_bundle("pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P", events[1:3])
    assert set(bare) == {"bundle_type", "bundle_version", "pith_number", "events"}
    assert read_bundle(bare).canonical_record is None
