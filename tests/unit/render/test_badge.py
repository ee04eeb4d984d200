"""The record badge (spec/badge-and-latex.md §1): the pure builder against hostile states, the words the
reducer writes, `/pith/<suffix>/badge.svg` from a real server over a ledger of bundles/, the record
page's embed snippets, `publish`, and the badge drawn by headless Chromium (skipped where
/usr/bin/chromium is absent, never under CI=true). ``PITHLEDGER_SCREENSHOT_BADGE=docs/badge.png``
writes the screenshot there (how docs/ got its copy)."""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pithledger.render import badge
from pithledger.errors import MalformedId
from pithledger.merge import _status

from helpers.site import FZ7, Server, example_site, pl

SVG = "{http://www.w3.org/2000/svg}"
NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"
ALLOWED_TAGS = {"svg", "title", "clipPath", "rect", "g", "text"}


def parse_safe(data: bytes) -> ET.Element:
    """Parse as XML after refusing any DTD (no entities can expand), and check everything a safe embed
    needs: SVG elements only from a small drawing set, no event handler, no link, no reference that
    leaves the document."""
    text = data.decode("utf-8")
    assert "<!" not in text and "<?" not in text  # no DOCTYPE, ENTITY, CDATA or processing instruction
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    for el in root.iter():
        assert el.tag.startswith(SVG) and el.tag[len(SVG):] in ALLOWED_TAGS, el.tag
        for name, value in el.attrib.items():
            assert not name.lower().startswith("on"), name
            assert "href" not in name.lower(), name
            assert "javascript" not in value.lower() and "//" not in value.replace("http://www.w3.org/2000/svg", "")
            for ref in re.findall(r"url\(([^)]*)\)", value):
                assert ref.startswith("#"), ref
    return root


def drawn_text(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(SVG + "text")]


def test_every_word_the_reducer_writes_is_in_the_vocabulary() -> None:
    """Each combination of what a record can hold gives badge words the badge knows: none is drawn
    as "unknown", and every word of the vocabulary is reachable (it is not a list of guesses)."""
    seen: dict[str, set[str]] = {k: set() for k in badge.ORDER}
    authors = [[], [{"strength": "weak"}], [{"strength": "strong"}], [{"strength": "weak"}, {"strength": "strong"}]]
    anchors = [[], [{"anchor_state": "pending"}], [{"anchor_state": "bitcoin"}, {"anchor_state": "pending"}]]
    for a, t, s, c in itertools.product(authors, anchors, [[], [{}]], [[], [{}]]):
        current = {"author_attestations": a, "timestamp_anchors": t, "storage_attestations": s, "citations": c,
                   "replication_records": [], "graph_snapshots": [], "record_receipts": []}
        _, words = _status(current)
        for key, word, cls, _ in badge.words(words):
            assert cls != "unknown", (key, words[key])
            seen[key].add(word)
    assert seen == {k: set(v) for k, v in badge.VOCABULARY.items()}


def test_the_badge_is_safe_xml_with_the_states_words() -> None:
    words = {"author": "claimed", "timestamp": "bitcoin anchor claimed", "storage": "not stored", "references": "refs signed"}
    data = badge.badge_svg(NUMBER, words)
    root = parse_safe(data)
    assert drawn_text(root) == ["pith:FZ7AO632", "author claimed", "bitcoin anchor claimed", "not stored", "refs signed"]
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


HOSTILE: list[Any] = ["<script>alert(1)</script>", "claimed\u202e", "Claimed", " claimed", "x" * 100_000, None, 7, ["claimed"],
                      {"claimed": 1}, "</text><foreignObject><iframe src=javascript:alert(1)>", "refs signed"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_word_outside_the_vocabulary_draws_unknown_and_never_itself(value: Any) -> None:
    words = {"author": value, "timestamp": value, "storage": value, "references": value}  # a word of one badge is unknown on another
    data = badge.badge_svg(NUMBER, words)
    root = parse_safe(data)
    texts = drawn_text(root)
    for key, text in zip(badge.ORDER, texts[1:], strict=True):
        known = isinstance(value, str) and value in badge.VOCABULARY[key]
        assert text == (badge.VOCABULARY[key][value][1] if known else f"{key} unknown")
    if isinstance(value, str) and not any(value in v for v in badge.VOCABULARY.values()):
        assert value.encode() not in data and data == badge.badge_svg(NUMBER, {})
    assert len(data) < 4096


@pytest.mark.parametrize("number", ["pith:2026:FZ7AO632", "pith:2026:fz7ao632hbv3fatauuz6y44y3p", "FZ7AO632HBV3FATAUUZ6Y44Y3P",
                                    'pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3"', ""])
def test_only_a_long_pith_number_is_drawn(number: str) -> None:
    with pytest.raises(MalformedId):
        badge.badge_svg(number, {})


# --- served, on the page, published ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    yield from example_site(tmp_path_factory.mktemp("badge"))


def test_served_badge(served: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = served
    state = json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)
    status, headers, body = server.request(f"/pith/{FZ7}/badge.svg")
    assert status == 200 and headers["content-type"] == "image/svg+xml"
    assert body == badge.badge_svg(state["pith_number"], state["current"]["badges"])
    parse_safe(body)
    assert headers["etag"] == '"' + hashlib.sha256(body).hexdigest() + '"'
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "sandbox" in csp and "script-src" not in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["cross-origin-resource-policy"] == "cross-origin"
    assert headers["access-control-allow-origin"] == "*"
    assert server.request(f"/pith/{FZ7}/badge.svg", headers={"If-None-Match": headers["etag"]})[0] == 304
    head = server.request(f"/pith/{FZ7}/badge.svg", method="HEAD")
    assert head[0] == 200 and head[2] == b"" and head[1]["etag"] == headers["etag"]
    for path in (f"/pith/{FZ7[:8]}/badge.svg", "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/badge.svg", f"/pith/{FZ7.lower()}/badge.svg"):
        status, headers, body = server.request(path)
        assert status == 404 and headers["content-type"] == "application/json", path


def test_record_page_embed_snippets(served: tuple[Server, Path, Path]) -> None:
    server, _, _ = served
    status, _, body = server.request(f"/pith/{FZ7}")
    page = body.decode()
    assert status == 200 and "Embed verified badge" in page
    snippets = {m[1]: html.unescape(m[2]) for m in re.finditer(r'<pre class="snippet" data-embed="(\w+)">([^<]*)</pre>', page)}
    image, record = f"{server.base}/pith/{FZ7}/badge.svg", f"{server.base}/pith/{FZ7}"
    assert snippets == {"html": f'<a href="{record}"><img src="{image}" alt="pith:FZ7AO632: Pith record" height="20"></a>',
                        "markdown": f"[![pith:FZ7AO632: Pith record]({image})]({record})"}
    for code in snippets.values():  # each has a copy button with exactly its text
        assert f'data-copy="{html.escape(code, quote=True)}"' in page
    m = re.search(r'<p id="badge-preview">(<svg .*?</svg>)</p>', page)
    assert m and m[1].encode() + b"\n" == server.request(f"/pith/{FZ7}/badge.svg")[2]  # the served badge, inline
    # both URLs answer: the snippet links work as pasted
    assert server.request(f"/pith/{FZ7}")[0] == 200 and server.request(f"/pith/{FZ7}/badge.svg")[0] == 200


def test_publish_writes_the_badge(served: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = served
    out = tmp / "published"
    pl(tmp, "--ledger", str(ledger), "publish", str(out), "--base-url", "https://mirror.example")
    assert (out / f"pith/{FZ7}/badge.svg").read_bytes() == server.request(f"/pith/{FZ7}/badge.svg")[2]
    badges = list(out.glob("pith/*/badge.svg"))
    pages = list(out.glob("pith/*/index.html"))
    assert len(badges) == len(pages) > 10
    for path in badges:
        parse_safe(path.read_bytes())
    page = (out / f"pith/{FZ7}/index.html").read_text()
    assert html.escape(f"[![pith:FZ7AO632: Pith record](https://mirror.example/pith/{FZ7}/badge.svg)](https://mirror.example/pith/{FZ7}/index.html)") in page


# --- in a browser ---------------------------------------------------------------------------------------------

CHROMIUM = os.environ.get("PITHLEDGER_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.skipif(os.environ.get("PITHLEDGER_NO_BROWSER") == "1", reason="PITHLEDGER_NO_BROWSER=1")
@pytest.mark.skipif(not Path(CHROMIUM).exists() and os.environ.get("CI") != "true",
                    reason=f"no {CHROMIUM} (apt-get install -y chromium); CI installs it and never skips")
def test_badge_in_chromium_embedded_from_another_origin(served: tuple[Server, Path, Path], tmp_path: Path) -> None:
    from helpers.browser import ARGS

    from playwright.sync_api import sync_playwright

    server, _, _ = served
    url = f"{server.base}/pith/{FZ7}/badge.svg"
    width = float(ET.fromstring(server.request(f"/pith/{FZ7}/badge.svg")[2]).get("width", "0"))
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 700, "height": 120}, device_scale_factor=2)
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # a page of another origin (file://) embeds it as README renderers do: <a><img></a>
            host = tmp_path / "embed.html"
            host.write_text(f'<!doctype html><body style="margin:16px;background:#fff"><a href="{server.base}/pith/{FZ7}">'
                            f'<img id="b" src="{url}" alt="pith:FZ7AO632"></a></body>')
            page.goto(host.as_uri())
            page.wait_for_function("document.getElementById('b').complete")
            natural = page.evaluate("[document.getElementById('b').naturalWidth, document.getElementById('b').naturalHeight]")
            assert natural == [round(width), 20] or natural[1] == 20 and abs(natural[0] - width) < 1
            shot = page.locator("#b").screenshot()
            assert len(shot) > 1000
            target = os.environ.get("PITHLEDGER_SCREENSHOT_BADGE")
            if target:
                Path(target).write_bytes(shot)
            # opened as a document, it draws and runs nothing
            page.goto(url)
            assert page.evaluate("document.documentElement.tagName") == "svg"
            assert page.evaluate("document.scripts.length") == 0
            context.close()
        finally:
            browser.close()
    assert errors == []


def test_a_record_revoked_away_loses_its_published_badge(tmp_path: Path) -> None:
    from pithledger.records.events import make_event
    from pithledger.mirror.publish import publish
    from pithledger.records.model import record_ids
    from pithledger.store import Ledger

    from helpers.eventpool import MALLORY, RECS, bundles_of

    rec = {**RECS[1], "source": {**RECS[1]["source"], "version": 778}}
    ids = record_ids(rec)
    created = make_event("record_created", ids.pith_number, {"canonical_record": rec, "canonical_sha256": ids.canonical_sha256},
                         MALLORY, created_at="2026-07-01T00:00:00Z")
    with Ledger(tmp_path / "a", create=True) as ledger:
        ledger.apply_batch(bundles_of([created]))
        publish(ledger, tmp_path / "pub")
        path = tmp_path / "pub" / "pith" / ids.pith_number.rsplit(":", 1)[1] / "badge.svg"
        words = json.loads(ledger.state_bytes(ids.pith_number))["current"]["badges"]
        assert path.read_bytes() == badge.badge_svg(ids.pith_number, words)
        ledger.apply_batch(bundles_of([make_event("revocation", ids.pith_number, {"revoked_event_id": created["event_id"]}, MALLORY,
                                                  created_at="2026-07-02T00:00:00Z")]))
        publish(ledger, tmp_path / "pub")
        assert not path.exists() and not path.with_name("index.html").exists()


def test_a_self_signed_citation_is_the_colour_of_a_self_signed_author_claim(served: tuple[Server, Path, Path]) -> None:
    """Issue #31 item 7: one citation signed by a throwaway key (bundles/' demo-bob) drew "refs signed" green
    (checked) beside the amber of an equally self-signed author claim. The same trust, the same colour, in
    the served badge and on the page."""
    server, ledger, tmp = served
    current = json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)["current"]
    assert current["badges"]["references"] == "refs signed" and current["badges"]["author"] == "claimed"
    assert {c["trust"] for c in current["citations"]} == {"self_signed"}
    assert {a["trust"] for a in current["author_attestations"]} == {"self_signed"}
    _, _, body = server.request(f"/pith/{FZ7}/badge.svg")
    fills = [r.get("fill") for r in parse_safe(body).iter(SVG + "rect") if r.get("fill") and r.get("fill") != "#fff"]
    author, references = fills[1], fills[4]
    assert author == references == badge.COLORS["claim"], fills
    _, _, page = server.request(f"/pith/{FZ7}", headers={"Accept": "text/html"})
    classes = {key: cls for cls, key in re.findall(rb'<span class="badge (\w+)" data-badge="(\w+)"', page)}
    assert classes[b"author"] == classes[b"references"] == b"claim", classes
