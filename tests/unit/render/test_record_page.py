"""The record page and record JSON, rendered pure (pithledger.render.pages): badge wording, display-metadata
checks, receipts, and hostile strings from bundles (spec/serve.md §5, §6)."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from helpers.common import PITH_RECEIPTS, PITH_RECORDS
from helpers.pagekit import RECORD, TITLE, _state, _view
from pithledger.errors import MetadataError
from pithledger.records.canonical import text_sha256
from pithledger.records.display import DisplayMetadata, check, from_arxiv, from_pith_json
from pithledger.render import pages, record_doc


class _Links(HTMLParser):
    """Every href and every script/style element of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name == "href" and value is not None:
                self.hrefs.append(value)
            if name.startswith("on") or name == "style":
                self.handlers.append(f"{tag}.{name}")


def _parse(html: str) -> _Links:
    p = _Links()
    p.feed(html)
    return p


def render(state: dict[str, Any], meta: DisplayMetadata | None = None, facts: pages.RecordFacts | None = None) -> str:
    return pages.record_page(
        state, facts or pages.RecordFacts(receipts=[], signers=[]), meta, pages.Links(), mirror="m"
    )


# --- badges -------------------------------------------------------------------------------------------


def test_badges_use_the_state_wording_and_mark_claims_as_claims() -> None:
    badges = {
        "author": "claimed",
        "references": "refs signed",
        "storage": "capture claimed",
        "timestamp": "bitcoin anchor claimed",
    }
    html = render(_state(badges=badges))
    for key, text in badges.items():
        m = re.search(rf'<span class="badge (\w+)" data-badge="{key}"[^>]*><b>{key}</b> ([^<]*)</span>', html)
        assert m, key
        assert m[2] == text
        assert m[1] == "claim"  # "refs signed" too: a self-signed citation is a claim, like a self-signed author claim
    html = render(_state())
    for key, text in {
        "author": "not attested",
        "timestamp": "not anchored",
        "storage": "not stored",
        "references": "refs pending",
    }.items():
        assert f'<span class="badge absent" data-badge="{key}"><b>{key}</b> {text}</span>' in html


def test_the_page_has_the_numbers_copy_buttons_and_the_verify_snippet() -> None:
    state = _state()
    html = render(state)
    number = state["pith_number"]
    suffix = number.rsplit(":", 1)[1]
    assert f'<span class="value" id="long-number">{number}</span>' in html
    assert f'data-copy="{number}"' in html and f'data-copy="pith:{suffix[:8]}"' in html
    assert state["current"]["canonical_sha256"] in html
    assert f"curl -sH &#x27;Accept: application/ld+json&#x27; http://127.0.0.1:8080/pith/{suffix}" in html
    assert f"# expect: {state['current']['canonical_sha256']}" in html
    for item in ("Bitcoin timestamp", "Internet Archive", "Author claim", "Citations", "Replications"):
        assert f'data-item="{item}"' in html


# --- display metadata ---------------------------------------------------------------------------------


def test_display_metadata_checks_match_mismatch_unchecked() -> None:
    fields = {
        f.name: f
        for f in check(DisplayMetadata(title=TITLE, authors="A. Author", abstract="Another abstract."), RECORD)
    }
    assert (fields["title"].check, fields["authors"].check, fields["abstract"].check) == (
        "match",
        "unchecked",
        "mismatch",
    )
    assert fields["title"].expected_sha256 == RECORD["metadata"]["title_canon_sha256"] == text_sha256(TITLE)
    assert [f.check for f in check(None, RECORD)] == ["unchecked"] * 3
    html = render(_state(), DisplayMetadata(title="A Forged Title", abstract="An abstract."))
    assert '<h1 id="title">arXiv 1709.09021v1</h1>' in html  # a mismatching title never becomes the heading
    assert '<span class="mismatched">A Forged Title</span>' in html
    assert 'data-check="abstract" title="matches the record&#x27;s hash">match</span>' in html
    html = render(_state(), DisplayMetadata(title=TITLE))
    assert '<h1 id="title">Identitas: A Better Way To Be Meaningless</h1>' in html


def test_display_metadata_from_the_arxiv_snapshot_and_pith_json() -> None:
    key, meta = from_arxiv(
        {
            "id": "1709.09021",
            "title": TITLE,
            "abstract": "An abstract.",
            "categories": "cs.DL",
            "authors": "Nizal Alshammry, Phillip Lord",
            "license": None,
            "versions": [{"version": "v1", "created": "Tue, 26 Sep 2017 13:56:47 GMT"}],
        }
    )
    assert key == "1709.09021v1" and meta.source == "arxiv-snapshot" and meta.authors == "Nizal Alshammry, Phillip Lord"
    key, meta = from_pith_json(
        {"canonical_record": PITH_RECORDS[0]["canonical_record"], "title": "T", "authors": [{"name": "A"}, "B"]}
    )
    assert key == "2605.00424v2" and meta.authors == "A, B" and meta.source == "pith-record-json"
    for bad in (
        {"canonical_record": {"x": 1}, "title": "T"},
        {"canonical_record": PITH_RECORDS[0]["canonical_record"]},
        {"canonical_record": PITH_RECORDS[0]["canonical_record"], "title": 5},
        {"canonical_record": PITH_RECORDS[0]["canonical_record"], "title": "x" * 5000},
        [1],
    ):
        with pytest.raises(MetadataError):
            from_pith_json(bad)


# --- receipts ----------------------------------------------------------------------------------------


def test_receipt_panel_reports_this_mirrors_own_check() -> None:
    v = PITH_RECEIPTS[0]
    good = pages.receipt_view(
        v["canonical_sha256"],
        {
            "kind": "pith_receipt",
            "key_id": v["key_id"],
            "algorithm": "ed25519",
            "signed_at": "2026-05-18T00:34:09.384803Z",
            "signature_b64": v["signature_b64"],
            "builder": "pith-number-builder-2026-05-17-v1",
        },
    )
    assert good.result == "verified" and good.fingerprint == "8d4b5ee74e4693bcd1df2446408b0d54"
    flipped = base64.b64encode(
        bytes([base64.b64decode(v["signature_b64"])[0] ^ 1]) + base64.b64decode(v["signature_b64"])[1:]
    ).decode()
    bad = pages.receipt_view(v["canonical_sha256"], {"key_id": v["key_id"], "signature_b64": flipped})
    assert bad.result == "fails"
    assert (
        pages.receipt_view(v["canonical_sha256"], {"key_id": "nobody", "signature_b64": flipped}).result
        == "unknown-key"
    )
    html = render(_state(), facts=pages.RecordFacts(receipts=[good, bad], signers=[]))
    assert 'data-receipt="verified"' in html and 'data-receipt="fails"' in html
    assert "pith-number-builder-2026-05-17-v1" in html and v["signature_b64"] in html
    assert 'data-receipt="none"' in render(_state())


# --- hostile strings ----------------------------------------------------------------------------------

EVIL = "\"><script>alert(1)</script><img src=x onerror=alert(2)>'&"
BAD_URLS = [
    "javascript:alert(1)",
    "JAVASCRIPT:alert(1)",
    " javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:x",
    "//evil.example/x",
    "/relative",
    "http://exa mple.org",
    "https://ok.example/\n<script>",
    "http://é.example",
]


def _hostile_state() -> dict[str, Any]:
    views = {
        "author_attestations": [_view("author_attestation", {"author_name": EVIL, "orcid": EVIL}, strength=EVIL)],
        "storage_attestations": [
            _view("storage_attestation", {"capture_url": u, "captured_at": EVIL}) for u in BAD_URLS
        ],
        "replication_records": [
            _view("replication_record", {"replication_type": EVIL, "outcome": EVIL, "artifact_url": u})
            for u in BAD_URLS
        ],
        "integrity_findings": [
            _view("integrity_finding", {"finding_type": EVIL, "severity": EVIL, "description": EVIL})
        ],
        "challenges": [_view("challenge", {"challenged_event_id": EVIL, "reason": EVIL})],
        "citations": [_view("citation_signature", {"cited_pith_number": EVIL, "relation": EVIL})],
        "inbound_citations": [
            _view("citation_signature", {"cited_pith_number": "x", "relation": EVIL}, citing_pith_number=EVIL)
        ],
        "timestamp_anchors": [_view("timestamp_anchor", {}, bitcoin_heights=[], pending_calendars=BAD_URLS)],
        "badges": {"author": EVIL, "references": EVIL, "storage": EVIL, "timestamp": EVIL},
    }
    state = _state(**views)
    for v in views["author_attestations"] + views["citations"]:
        v["signer"] = {"signer_id": EVIL, "key_id": EVIL, "public_key_fingerprint": EVIL}
        v["trust"] = EVIL
    return state


def test_hostile_strings_are_escaped_and_bad_urls_never_linked() -> None:
    meta = DisplayMetadata(title=EVIL, authors=EVIL, abstract=EVIL)
    facts = pages.RecordFacts(
        receipts=[
            pages.receipt_view("00" * 32, {"key_id": EVIL, "signature_b64": EVIL, "signed_at": EVIL, EVIL: EVIL})
        ],
        signers=[
            pages.RecordSigner(
                event_id=EVIL, created_at=EVIL, signer_id=EVIL, key_id=EVIL, fingerprint=EVIL, trust=EVIL
            )
        ],
    )
    html = pages.record_page(_hostile_state(), facts, meta, pages.Links(base_url="http://x.example"), mirror=EVIL)
    assert (
        "<script>alert" not in html
        and "<img" not in html
        and "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    )
    parsed = _parse(html)
    assert parsed.tags.count("script") == 1 and "img" not in parsed.tags
    assert parsed.handlers == []  # no event handler or style attribute anywhere
    for href in parsed.hrefs:
        assert href.startswith(("http://", "https://", "../")), href
        assert not re.match(r"\s*(javascript|data|vbscript):", href, re.I)
        assert href.isascii() and " " not in href and "\n" not in href
    # the escaped text is still there, readable
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_only_the_hashed_inline_blocks_run() -> None:
    html = render(_state())
    style = re.search(r"<style>(.*?)</style>", html, re.S)
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    assert style and script
    for block in (style[1], script[1]):
        digest = "'sha256-" + base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() + "'"
        assert digest in pages.CSP
    assert pages.CSP.startswith("default-src 'none';") and "frame-ancestors 'none'" in pages.CSP_HEADER
    assert "http" not in pages.STYLE + pages.SCRIPT  # no external assets: fonts, scripts, CDNs


def test_record_document_carries_the_canonical_record_verbatim() -> None:
    state = _state()
    doc = record_doc.record_document(state, [], [], None, [], record_doc.Urls(base="https://m.example/"))
    assert doc["canonical_record"] == RECORD and doc["canonical_sha256"] == state["current"]["canonical_sha256"]
    assert doc["links"]["state"].startswith("https://m.example/pith/") and "//pith" not in doc["links"]["state"]


def test_static_links_are_relative_to_the_page() -> None:
    state = _state(
        citations=[
            _view(
                "citation_signature",
                {"cited_pith_number": "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY", "relation": "extends"},
            )
        ]
    )
    html = pages.record_page(
        state,
        pages.RecordFacts(receipts=[], signers=[]),
        None,
        pages.Links(root="../../", page="/index.html", base_url="$MIRROR", server=False),
    )
    hrefs = _parse(html).hrefs
    suffix = state["pith_number"].rsplit(":", 1)[1]
    assert f"../../pith/{suffix}/bundle.json" in hrefs and f"../../pith/{suffix}/state.json" in hrefs
    assert "../../pith/GHGOR674YFXPXVI65Z7PPAT6KY/index.html" in hrefs
    assert "../../index.html" in hrefs
    assert 'action="' not in html  # no search form on a static host
    assert f"curl -s $MIRROR/pith/{suffix}/bundle.json" in html


# --- completeness -------------------------------------------------------------------------------------

ITEMS = ("Bitcoin timestamp", "Internet Archive", "Author claim", "Citations", "Replications")


def _rows(html: str) -> dict[str, tuple[str, str]]:
    """Each completeness row: its level (the li's class) and its inner HTML."""
    section = html.split("<h2>Record completeness</h2>", 1)[1].split("</ol>", 1)[0]
    rows = {m[2]: (m[1], m[3]) for m in re.finditer(r'<li class="(\w+)" data-item="([^"]+)">(.*?)</li>', section, re.S)}
    assert sorted(rows) == sorted(ITEMS)
    return rows


def _evidence(trust: str) -> dict[str, Any]:
    """Every completeness slot filled with one view of the given trust, and the badges the reducer would write."""
    registry = trust == "registry"
    return {
        "timestamp_anchors": [
            _view(
                "timestamp_anchor",
                {},
                anchor_state="claimed",
                bitcoin_block=None,
                bitcoin_heights=[840000],
                pending_calendars=[],
                trust=trust,
            )
        ],
        "storage_attestations": [
            _view(
                "storage_attestation",
                {"capture_url": "https://web.archive.org/web/2026/x", "captured_at": "2026-05-20T00:00:00Z"},
                trust=trust,
            )
        ],
        "author_attestations": [
            _view(
                "author_attestation",
                {"author_name": "A. Author", "orcid": "0000-0002-1825-0097"},
                strength="strong" if registry else "weak",
                trust=trust,
            )
        ],
        "citations": [
            _view(
                "citation_signature",
                {"cited_pith_number": "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY", "relation": "extends"},
                trust=trust,
            )
        ],
        "replication_records": [
            _view(
                "replication_record",
                {"replication_type": "reproduction", "outcome": "succeeded", "artifact_url": "https://example.org/a"},
                trust=trust,
            )
        ],
        "badges": {
            "author": "attested (strong)" if registry else "claimed",
            "references": "refs signed",
            "storage": "capture claimed",
            "timestamp": "bitcoin anchor claimed",
        },
    }


def test_completeness_shows_self_signed_evidence_as_claimed_not_done() -> None:
    rows = _rows(render(_state(**_evidence("self_signed"))))
    assert {item: level for item, (level, _) in rows.items()} == dict.fromkeys(ITEMS, "claimed")
    for _, text in rows.values():
        assert ">claimed<" in text  # the level is said in words, not only in colour
    # registry-signed: Pith's own word, done; but a Bitcoin height without headers and a capture stay claims on
    # any signer: this mirror checked neither (the record JSON's pithledger_claims agree)
    rows = _rows(render(_state(**_evidence("registry"))))
    assert {item: level for item, (level, _) in rows.items()} == {
        "Bitcoin timestamp": "claimed",
        "Internet Archive": "claimed",
        "Author claim": "done",
        "Citations": "done",
        "Replications": "done",
    }
    # one registry-signed author attestation among self-signed ones makes the row done; inbound citations count
    mixed = _evidence("self_signed")
    mixed["author_attestations"].append(
        _view("author_attestation", {"author_name": "B"}, strength="weak", trust="registry")
    )
    rows = _rows(
        render(
            _state(
                **mixed,
                inbound_citations=[
                    _view("citation_signature", {"relation": "uses"}, citing_pith_number="x", trust="registry")
                ],
            )
        )
    )
    assert rows["Author claim"][0] == "done" and rows["Citations"][0] == "done" and rows["Replications"][0] == "claimed"
    pending = _view(
        "timestamp_anchor",
        {},
        anchor_state="pending",
        bitcoin_heights=[],
        pending_calendars=["https://a.pool.opentimestamps.org"],
    )
    assert (
        _rows(
            render(
                _state(
                    timestamp_anchors=[pending], badges={**_state()["current"]["badges"], "timestamp": "anchor pending"}
                )
            )
        )["Bitcoin timestamp"][0]
        == "pending"
    )
    # an anchor whose carried headers checked (merge v3) is done, whoever signed it, and says what was checked
    checked = _view(
        "timestamp_anchor",
        {},
        anchor_state="bitcoin",
        bitcoin_block={
            "block_hash": "00" * 32,
            "headers": 3,
            "height": 940000,
            "time": "2026-03-01T00:00:00Z",
            "work": str(2**79),
            "run_work": str(3 * 2**79),
        },
        bitcoin_heights=[940000],
        pending_calendars=[],
    )
    html = render(
        _state(
            timestamp_anchors=[checked], badges={**_state()["current"]["badges"], "timestamp": "anchored in bitcoin"}
        )
    )
    level, text = _rows(html)["Bitcoin timestamp"]
    assert level == "done" and "checked against the Bitcoin headers its event carries" in text
    assert "Bitcoin attestation checked against block " + "00" * 32 in html and "2^79.0 hashes of work" in html
    assert "height 940000 and time 2026-03-01T00:00:00Z as the attestation and the header say" in html
    # styled apart: only done rows are green
    assert re.search(r"ol\.complete li\.done::before\{[^}]*var\(--ok\)", pages.STYLE)
    claimed = re.search(r"ol\.complete li\.claimed::before\{([^}]*)\}", pages.STYLE)
    assert claimed and "--ok" not in claimed[1] and "var(--warn)" in claimed[1]


def test_open_items_say_how_to_complete_them() -> None:
    state = _state()
    number = state["pith_number"]
    rows = _rows(render(state))
    assert {item: level for item, (level, _) in rows.items()} == dict.fromkeys(ITEMS, "open")
    howto = {item: text.split('class="howto"', 1)[1] for item, (_, text) in rows.items()}
    assert "pithledger ids --canonical bundle.json &gt; record.canon" in howto["Bitcoin timestamp"]
    assert "ots stamp record.canon" in howto["Bitcoin timestamp"]
    assert (
        f"pithledger event timestamp_anchor --subject {number} --key NAME --ots record.canon.ots"
        in howto["Bitcoin timestamp"]
    )
    for item, kind, file in (
        ("Internet Archive", "storage_attestation", "capture.json"),
        ("Author claim", "author_attestation", "author.json"),
        ("Citations", "citation_signature", "citation.json"),
        ("Replications", "replication_record", "replication.json"),
    ):
        assert f"pithledger event {kind} --subject {number} --key NAME --payload @{file}" in howto[item], item
        assert f"pithledger event {kind} --example" in howto[item], item
    for text in howto.values():
        assert "<a " not in text and "href" not in text  # text only: no link leaves the mirror
    # a pending anchor says how to finish it, a claimed one how to carry its headers; other done and claimed rows
    # carry no instructions
    pending = _view(
        "timestamp_anchor",
        {},
        anchor_state="pending",
        bitcoin_heights=[],
        pending_calendars=["https://a.pool.opentimestamps.org"],
    )
    row = _rows(render(_state(timestamp_anchors=[pending])))["Bitcoin timestamp"][1]
    assert "ots upgrade record.canon.ots" in row and f"--subject {number} --key NAME --ots record.canon.ots" in row
    for item, (level, text) in _rows(render(_state(**_evidence("registry")))).items():
        if item == "Bitcoin timestamp":
            assert level == "claimed" and "--headers headers.txt" in text
        else:
            assert 'class="howto"' not in text, item
