"""The record badge (spec/badge-and-latex.md §1): the pure builder against hostile states, the words the
reducer writes, `/pith/<suffix>/badge.svg` from a real server over a ledger of bundles/, the record
page's embed snippets, `publish`, and the badge drawn by headless Chromium (skipped where
/usr/bin/chromium is absent, never under CI=true). ``PITHLEDGER_SCREENSHOT_BADGE=docs/badge.png``
writes the screenshot there (how docs/ got its copy)."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from helpers.badge import SVG, parse_safe
from pithledger.errors import MalformedId
from pithledger.merge import _status
from pithledger.render import badge

NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


def drawn_text(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(SVG + "text")]


def test_every_word_the_reducer_writes_is_in_the_vocabulary() -> None:
    """Each combination of what a record can hold gives badge words the badge knows: none is drawn
    as "unknown", and every word of the vocabulary is reachable (it is not a list of guesses)."""
    seen: dict[str, set[str]] = {k: set() for k in badge.ORDER}
    authors = [[], [{"strength": "weak"}], [{"strength": "strong"}], [{"strength": "weak"}, {"strength": "strong"}]]
    anchors = [
        [],
        [{"anchor_state": "pending"}],
        [{"anchor_state": "claimed"}, {"anchor_state": "pending"}],
        [{"anchor_state": "bitcoin"}, {"anchor_state": "claimed"}],
    ]
    for a, t, s, c in itertools.product(authors, anchors, [[], [{}]], [[], [{}]]):
        current = {
            "author_attestations": a,
            "timestamp_anchors": t,
            "storage_attestations": s,
            "citations": c,
            "replication_records": [],
            "graph_snapshots": [],
            "record_receipts": [],
        }
        _, words = _status(current)
        for key, word, cls, _ in badge.words(words):
            assert cls != "unknown", (key, words[key])
            seen[key].add(word)
    assert seen == {k: set(v) for k, v in badge.VOCABULARY.items()}


def test_the_badge_is_safe_xml_with_the_states_words() -> None:
    words = {
        "author": "claimed",
        "timestamp": "bitcoin anchor claimed",
        "storage": "not stored",
        "references": "refs signed",
    }
    data = badge.badge_svg(NUMBER, words)
    root = parse_safe(data)
    assert drawn_text(root) == [
        "pith:FZ7AO632",
        "author claimed",
        "bitcoin anchor claimed",
        "not stored",
        "refs signed",
    ]
    title = root.find(SVG + "title")
    assert title is not None and title.text == root.get("aria-label")
    assert "author: claimed" in (title.text or "") and "timestamp: bitcoin anchor claimed" in (title.text or "")
    fills = [r.get("fill") for r in root.iter(SVG + "rect") if r.get("fill") and r.get("fill") != "#fff"]
    assert fills == [badge.COLORS[c] for c in ("number", "claim", "claim", "absent", "claim")]
    # each text sits in its own segment (textLength holds it there whatever font draws it)
    rects = [r for r in root.iter(SVG + "rect") if r.get("fill") and r.get("fill") != "#fff"]
    for rect, text in zip(rects, root.iter(SVG + "text"), strict=True):
        x, w = float(rect.get("x", "0")), float(rect.get("width", "0"))
        tx, tw = float(text.get("x", "0")), float(text.get("textLength", "0"))
        assert x < tx and tx + tw < x + w
    assert float(root.get("width", "0")) == pytest.approx(sum(float(r.get("width", "0")) for r in rects))
    assert data == badge.badge_svg(NUMBER, dict(words))  # a function of its inputs


HOSTILE: list[Any] = [
    "<script>alert(1)</script>",
    "claimed\u202e",
    "Claimed",
    " claimed",
    "x" * 100_000,
    None,
    7,
    ["claimed"],
    {"claimed": 1},
    "</text><foreignObject><iframe src=javascript:alert(1)>",
    "refs signed",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_word_outside_the_vocabulary_draws_unknown_and_never_itself(value: Any) -> None:
    words = {
        "author": value,
        "timestamp": value,
        "storage": value,
        "references": value,
    }  # a word of one badge is unknown on another
    data = badge.badge_svg(NUMBER, words)
    root = parse_safe(data)
    texts = drawn_text(root)
    for key, text in zip(badge.ORDER, texts[1:], strict=True):
        known = isinstance(value, str) and value in badge.VOCABULARY[key]
        assert text == (badge.VOCABULARY[key][value][1] if known else f"{key} unknown")
    if isinstance(value, str) and not any(value in v for v in badge.VOCABULARY.values()):
        assert value.encode() not in data and data == badge.badge_svg(NUMBER, {})
    assert len(data) < 4096


@pytest.mark.parametrize(
    "number",
    [
        "pith:2026:FZ7AO632",
        "pith:2026:fz7ao632hbv3fatauuz6y44y3p",
        "FZ7AO632HBV3FATAUUZ6Y44Y3P",
        'pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3"',
        "",
    ],
)
def test_only_a_long_pith_number_is_drawn(number: str) -> None:
    with pytest.raises(MalformedId):
        badge.badge_svg(number, {})


# --- served, on the page, published ------------------------------------------------------------------------


# --- in a browser ---------------------------------------------------------------------------------------------


def test_a_record_revoked_away_loses_its_published_badge(tmp_path: Path) -> None:
    from helpers.eventpool import MALLORY, RECS, bundles_of
    from pithledger.mirror.publish import publish
    from pithledger.records.events import make_event
    from pithledger.records.model import record_ids
    from pithledger.store import Ledger

    rec = {**RECS[1], "source": {**RECS[1]["source"], "version": 778}}
    ids = record_ids(rec)
    created = make_event(
        "record_created",
        ids.pith_number,
        {"canonical_record": rec, "canonical_sha256": ids.canonical_sha256},
        MALLORY,
        created_at="2026-07-01T00:00:00Z",
    )
    with Ledger(tmp_path / "a", create=True) as ledger:
        ledger.apply_batch(bundles_of([created]))
        publish(ledger, tmp_path / "pub")
        path = tmp_path / "pub" / "pith" / ids.pith_number.rsplit(":", 1)[1] / "badge.svg"
        words = json.loads(ledger.state_bytes(ids.pith_number))["current"]["badges"]
        assert path.read_bytes() == badge.badge_svg(ids.pith_number, words)
        ledger.apply_batch(
            bundles_of(
                [
                    make_event(
                        "revocation",
                        ids.pith_number,
                        {"revoked_event_id": created["event_id"]},
                        MALLORY,
                        created_at="2026-07-02T00:00:00Z",
                    )
                ]
            )
        )
        publish(ledger, tmp_path / "pub")
        assert not path.exists() and not path.with_name("index.html").exists()
