"""The record page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by Playwright, against
the real server on 127.0.0.1 and against a published static tree under file://.

It must run in CI (.ci/run installs chromium, and under CI=true a missing browser fails the test); elsewhere
it is skipped when /usr/bin/chromium is absent (`apt-get install -y chromium`), or when PITHLEDGER_NO_BROWSER=1 (ignored under CI=true).
``PITHLEDGER_SCREENSHOT=docs/record-page.png`` also writes the screenshot there (how docs/ got its copy).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.browser import ARGS, CHROMIUM
from helpers.site import FZ7, Y7E, Server, example_site, pl
from pithledger.render.badge import VOCABULARY

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("PITHLEDGER_NO_BROWSER") == "1" and os.environ.get("CI") != "true",
        reason="PITHLEDGER_NO_BROWSER=1 (ignored under CI=true)",
    ),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and os.environ.get("CI") != "true",
        reason=f"no {CHROMIUM} (apt-get install -y chromium); CI installs it and never skips",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    yield from example_site(tmp_path_factory.mktemp("browser"))


def _page(browser: Any, errors: list[str]) -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return context, page


def test_record_page_in_chromium(browser: Any, served: tuple[Server, Path, Path], tmp_path: Path) -> None:
    server, ledger, tmp = served
    state = json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)
    errors: list[str] = []
    context, page = _page(browser, errors)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    resp = page.goto(f"{server.base}/pith/{FZ7}")
    assert resp is not None and resp.status == 200

    # numbers
    assert page.inner_text("#long-number") == state["pith_number"] == f"pith:2026:{FZ7}"
    assert page.inner_text("#short-number") == f"pith:{FZ7[:8]}"
    assert page.inner_text("#canonical-hash") == state["current"]["canonical_sha256"]
    # badges: the state's wording, claims marked as claims: the badge vocabulary's colour (ledger/render/badge.py),
    # in which "refs signed" is a claim too, though its words do not say "claimed" (spec/badge-and-latex.md §1)
    for key, text in state["current"]["badges"].items():
        badge = page.locator(f'[data-badge="{key}"]')
        assert badge.inner_text() == f"{key} {text}"
        drawn = badge.get_attribute("class") or ""
        assert ("claim" in drawn) == (VOCABULARY[key][text][0] == "claim"), (key, text, drawn)
    # the style applied (CSP allowed the hashed inline style): badges are pills, not plain text
    radius = page.eval_on_selector('[data-badge="author"]', "el => getComputedStyle(el).borderTopLeftRadius")
    assert radius not in ("0px", "")

    # copy buttons: a click puts the text on the clipboard
    for text in (state["pith_number"], f"pith:{FZ7[:8]}", state["current"]["canonical_sha256"]):
        button = page.locator(f'button[data-copy="{text}"]').first
        button.click()
        page.wait_for_function("b => b.hasAttribute('data-copied')", arg=button.element_handle(), timeout=5000)
        assert button.inner_text() == "copied"
        assert page.evaluate("navigator.clipboard.readText()") == text

    # links: every same-site link answers 200; bundle and state are the ledger's documents
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)")
    local = sorted({h for h in hrefs if h.startswith(server.base)})
    assert f"{server.base}/pith/{FZ7}/bundle.json" in local and f"{server.base}/pith/{FZ7}/state.json" in local
    for href in local:
        got = page.request.get(href)
        assert got.status == 200, href
    cited = page.locator("text=pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY").first
    assert cited.get_attribute("href") == "../pith/GHGOR674YFXPXVI65Z7PPAT6KY"
    page.click("#state-link")
    page.wait_for_url(f"**/pith/{FZ7}/state.json")
    assert json.loads(page.inner_text("body"))["state_sha256"] == state["state_sha256"]
    page.go_back()

    shot = tmp_path / "record-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("PITHLEDGER_SCREENSHOT"):
        shutil.copy(shot, os.environ["PITHLEDGER_SCREENSHOT"])
    assert not [e for e in errors if "Content Security Policy" in e or "Refused" in e], errors
    context.close()


def test_display_metadata_and_search_in_chromium(browser: Any, served: tuple[Server, Path, Path]) -> None:
    server = served[0]
    errors: list[str] = []
    context, page = _page(browser, errors)
    page.goto(f"{server.base}/")
    page.fill("#q", "10.48550/arxiv.1709.09021")
    page.press("#q", "Enter")
    page.wait_for_url(f"**/pith/{Y7E}")
    assert page.inner_text("#title") == "Identitas: A Better Way To Be Meaningless"
    assert page.inner_text('[data-check="title"]') == "match"
    assert page.inner_text('[data-check="authors"]') == "unchecked"
    assert page.inner_text('[data-check="abstract"]') == "mismatch"
    assert not [e for e in errors if "Content Security Policy" in e], errors
    context.close()


def test_published_static_page_in_chromium(browser: Any, served: tuple[Server, Path, Path]) -> None:
    _, ledger, tmp = served
    out = tmp / "published"
    pl(tmp, "--ledger", str(ledger), "publish", str(out))
    errors: list[str] = []
    context, page = _page(browser, errors)
    page.goto((out / "index.html").as_uri())
    # the index lists the 50 most recently appended records (bundles/ holds 51): follow the newest one's link
    newest = page.get_attribute('a[href^="pith/"][href$="/index.html"]', "href")
    assert newest is not None
    page.click(f'a[href="{newest}"]')
    page.wait_for_url(f"**/{newest}")
    assert page.inner_text("#long-number").endswith(newest.split("/")[1])
    page.goto((out / "pith" / FZ7 / "index.html").as_uri())
    assert page.inner_text("#long-number") == f"pith:2026:{FZ7}"
    page.click("#bundle-link")
    page.wait_for_url(f"**/pith/{FZ7}/bundle.json")
    assert json.loads(page.inner_text("body"))["pith_number"] == f"pith:2026:{FZ7}"
    assert not [e for e in errors if "Content Security Policy" in e], errors
    context.close()


def test_record_page_fits_a_phone_in_chromium(browser: Any, served: tuple[Server, Path, Path], tmp_path: Path) -> None:
    """At a 390 px viewport nothing overflows sideways: long numbers and hashes wrap, tables scroll in their box."""
    server = served[0]
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for suffix in (FZ7, Y7E):
        resp = page.goto(f"{server.base}/pith/{suffix}")
        assert resp is not None and resp.status == 200
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = page.eval_on_selector(
            "#long-number",
            "el => { const r = el.getBoundingClientRect(); return [r.left, r.right, el.scrollWidth, el.clientWidth]; }",
        )
        left, right, scroll_w, client_w = box
        assert left >= 0 and right <= 390 and scroll_w <= client_w, box  # the whole long number is on screen
        assert page.inner_text("#long-number").endswith(suffix)
        for sel in ("#short-number", "#canonical-hash"):
            r = page.eval_on_selector(sel, "el => el.getBoundingClientRect().right")
            assert r <= 390, sel
    # the example record's evidence is all self-signed: every completeness row is a claim, none is green
    page.goto(f"{server.base}/pith/{FZ7}")
    rows = page.eval_on_selector_all(
        "ol.complete li",
        "els => els.map(li => [li.className, "
        "getComputedStyle(li, '::before').backgroundColor, li.querySelector('.level').innerText])",
    )
    done = page.eval_on_selector(
        "ol.complete",
        "ol => { const li = document.createElement('li'); li.className = 'done'; ol.appendChild(li); "
        "const c = getComputedStyle(li, '::before').backgroundColor; li.remove(); return c; }",
    )
    assert [r[0] for r in rows] == ["claimed"] * 5, rows
    assert all(r[1] != done and r[2] == "claimed" for r in rows), (rows, done)
    shot = tmp_path / "record-page-390.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("PITHLEDGER_SCREENSHOT_390"):
        shutil.copy(shot, os.environ["PITHLEDGER_SCREENSHOT_390"])
    assert not errors, errors
    context.close()
