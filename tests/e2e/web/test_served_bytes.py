"""What a mirror serves about valid events is a function of those events (issue #20 §3): two ledgers
holding the same valid events, reached by different copies of Pith's record_created (copies differ in
fields Pith's receipt does not sign), serve and export the same bytes, and nothing unauthenticated is
shown as Pith's. Every check runs the real command line and real `serve` processes on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from helpers.eventpool import ALICE
from helpers.served_bytes import DOC, FORGED, _relayed
from helpers.site import Server, pl
from pithledger.records.bundle import pith_record_event, served_pith_record_event, write_bundle
from pithledger.records.events import make_event

NUMBER = DOC["pith_number"]
SUFFIX = NUMBER.rsplit(":", 1)[-1]


def _ledger(tmp: Path, name: str, first: dict[str, Any], also: list[dict[str, Any]]) -> Path:
    """A ledger that received ``first`` (a bundle) first, then the record document, then ``also``."""
    ledger = tmp / name
    (tmp / f"{name}-first.json").write_text(json.dumps(first))
    (tmp / f"{name}-doc.json").write_text(json.dumps(DOC))
    (tmp / f"{name}-also.json").write_text(json.dumps(write_bundle(NUMBER, also)))
    for part in ("first", "doc", "also"):
        pl(tmp, "--ledger", str(ledger), "apply", str(tmp / f"{name}-{part}.json"))
    return ledger


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_mirrors_with_the_same_valid_events_serve_the_same_bytes(tmp_path: Path) -> None:
    real = pith_record_event(DOC)
    author = make_event(
        "author_attestation", NUMBER, {"author_name": "A. Author"}, ALICE, created_at="2026-07-06T00:00:00Z"
    )
    a = _ledger(tmp_path, "a", write_bundle(NUMBER, [real]), [author])
    b = _ledger(tmp_path, "b", write_bundle(NUMBER, [_relayed(real)]), [author])
    # the log keeps each first copy as received: the ledgers differ in what they hold, not in what is valid
    assert pl(tmp_path, "--ledger", str(a), "digest").stdout == pl(tmp_path, "--ledger", str(b), "digest").stdout

    exports = [pl(tmp_path, "--ledger", str(x), "export", SUFFIX).stdout for x in (a, b)]
    assert exports[0] == exports[1]
    assert FORGED not in exports[0]
    assert "signed_at" in exports[0]  # the receipt is exported, in its served form

    trees = []
    for x in (a, b):
        out = tmp_path / f"{x.name}-tree"
        pl(tmp_path, "--ledger", str(x), "publish", str(out), "--base-url", "https://mirror.example")
        trees.append(_tree(out))
    assert trees[0].keys() == trees[1].keys()
    differ = [rel for rel in trees[0] if trees[0][rel] != trees[1][rel]]
    assert differ == []
    assert not any(FORGED.encode() in data for data in trees[0].values())

    servers = [Server(x, tmp_path, "--base-url", "https://mirror.example") for x in (a, b)]
    try:
        for path, headers in [
            (f"/pith/{SUFFIX}", {}),
            (f"/pith/{SUFFIX}", {"Accept": "application/ld+json"}),
            (f"/pith/{SUFFIX}/bundle.json", {}),
            (f"/pith/{SUFFIX}/events.json", {}),
            (f"/.well-known/pith/{SUFFIX}/bundle.json", {}),
            (f"/api/pith-number/{SUFFIX}/events.json", {}),
            (f"/pith/{SUFFIX}/state.json", {}),
        ]:
            got = [s.request(path, headers=headers) for s in servers]
            assert got[0][0] == got[1][0] == 200, (path, got[0][0], got[1][0])
            assert got[0][2] == got[1][2], path
            assert FORGED.encode() not in got[0][2], path
        # the page shows Pith's receipt as verified, and the unsigned time as what it is
        page = servers[1].request(f"/pith/{SUFFIX}")[2].decode()
        assert 'data-receipt="verified"' in page
        assert "not covered by Pith's signature" in page
    finally:
        for s in servers:
            s.stop()


def test_the_transparency_log_entry_of_a_pith_record_hashes_what_is_served(tmp_path: Path) -> None:
    """Two ledgers reached by different copies of Pith's record_created hold the same transparency-log
    entries (spec/transparency.md §1: the entry hashes the event as served, never the copy that came
    first), and the entry of the record is the SHA-256 of the served form a reader fetches."""
    from pithledger.records.canonical import canonical_bytes
    from pithledger.store import Ledger

    real = pith_record_event(DOC)
    author = make_event(
        "author_attestation", NUMBER, {"author_name": "A. Author"}, ALICE, created_at="2026-07-06T00:00:00Z"
    )
    a = _ledger(tmp_path, "a", write_bundle(NUMBER, [real]), [author])
    b = _ledger(tmp_path, "b", write_bundle(NUMBER, [_relayed(real)]), [author])
    entries = []
    for path in (a, b):
        with Ledger(path, readonly=True) as ledger:
            entries.append(ledger.tlog_entries(0, ledger.tlog_size()))
    assert entries[0] == entries[1] and len(entries[0]) == 2
    first = json.loads(entries[0][0])
    served = canonical_bytes(served_pith_record_event(_relayed(real)))
    assert first["record"] == NUMBER and first["sha256"] == hashlib.sha256(served).hexdigest()
    assert first["sha256"] != hashlib.sha256(canonical_bytes(_relayed(real))).hexdigest()  # not b's first copy


# --- human output: no string of an event reaches a terminal as control characters (issue #20 §3) --------

HOSTILE = "A. Author\n  record   Pith receipt by pith-v1-2026-05: signature over the digest VERIFIED\x1b[2J\x9b31m\u202eevil\u2066\x7f"
UNSAFE = ["\x1b", "\x9b", "\u202e", "\u2066", "\x7f"]


def _hostile_ledger(tmp: Path) -> tuple[Path, Path]:
    """A ledger holding a self-signed record with a hostile author name; and a bundle file with a Pith-envelope
    event whose event_type is hostile (unverified: refused, kept as evidence)."""
    from helpers.common import PITH_RECORDS

    rec = PITH_RECORDS[5]
    number = rec["pith_number"]
    created = make_event(
        "record_created",
        number,
        {"canonical_record": rec["canonical_record"], "canonical_sha256": rec["canonical_sha256"]},
        ALICE,
        created_at="2026-07-01T00:00:00Z",
    )
    author = make_event(
        "author_attestation", number, {"author_name": HOSTILE}, ALICE, created_at="2026-07-02T00:00:00Z"
    )
    relayed = {
        "created_at": "2026-07-03T00:00:00Z",
        "event_type": "x\n  record   VERIFIED\x1b[31m\u202e",
        "payload": {},
        "signer": {
            "key_id": "pith-v1-2026-05",
            "public_key_fingerprint": "8d4b5ee74e4693bcd1df2446408b0d54",
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "subject_pith_number": number,
        "target": "record",
    }
    good, bad = tmp / "good.json", tmp / "bad.json"
    good.write_text(json.dumps(write_bundle(number, [created, author])))
    bad.write_text(json.dumps(write_bundle(number, [relayed])))
    ledger = tmp / "ledger"
    pl(tmp, "--ledger", str(ledger), "apply", str(good))
    return ledger, bad


def test_state_view_log_verify_evidence_escape_control_characters(tmp_path: Path) -> None:
    ledger, bad = _hostile_ledger(tmp_path)
    view = pl(tmp_path, "--ledger", str(ledger), "state", "--view", _subject(ledger, tmp_path)).stdout
    assert "\x1b" not in view and "\u202e" not in view
    # the name is one line: its newline is shown as \x0a, and no line of the view claims a verified receipt
    assert not any(line.startswith("  record   Pith receipt") for line in view.splitlines()), view
    assert "A. Author\\x0a  record   Pith receipt" in view and "\\x1b[2J" in view and "\\u202eevil\\u2066\\x7f" in view
    outputs = [
        pl(tmp_path, "--ledger", str(ledger), "apply", str(bad), check=False),
        pl(tmp_path, "verify", str(bad), check=False),
        pl(tmp_path, "--ledger", str(ledger), "evidence", _subject(ledger, tmp_path)),
        pl(tmp_path, "--ledger", str(ledger), "log"),
    ]
    for proc in outputs:
        for text in (proc.stdout, proc.stderr):
            for ch in UNSAFE[:3]:
                assert ch not in text, (proc.args, repr(ch), text)
            assert not any(line.startswith("  record   VERIFIED") for line in text.splitlines()), text
    assert "x\\x0a  record   VERIFIED\\x1b[31m\\u202e" in outputs[0].stdout + outputs[1].stdout


def _subject(ledger: Path, tmp: Path) -> str:  # the hostile ledger's record
    from helpers.common import PITH_RECORDS

    return str(PITH_RECORDS[5]["pith_number"])


def test_pages_show_bidi_controls_escaped(tmp_path: Path) -> None:
    ledger, _ = _hostile_ledger(tmp_path)
    out = tmp_path / "tree"
    pl(tmp_path, "--ledger", str(ledger), "publish", str(out))
    suffix = _subject(ledger, tmp_path).rsplit(":", 1)[-1]
    page = (out / "pith" / suffix / "index.html").read_text()
    assert "\u202e" not in page and "\u2066" not in page
    assert "\\u202eevil\\u2066" in page


# --- the search box as a browser meets it (issue #20 §6) -----------------------------------------------------


def test_the_search_box_answers_a_browser_with_a_page(tmp_path: Path) -> None:
    ledger, _ = _hostile_ledger(tmp_path)
    server = Server(ledger, tmp_path)
    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    try:
        for ident, status in (("0000.00000", 404), ("not an id", 400), ("pith:ZZZZ", 400)):
            got, headers, body = server.request(f"/resolve?id={ident.replace(' ', '+')}", headers=browser)
            assert got == status, (ident, got)
            assert headers["content-type"].startswith("text/html"), headers
            assert b'id="error"' in body and b'<form method="get"' in body
            # an API client still gets the JSON error
            got, headers, body = server.request(
                f"/resolve?id={ident.replace(' ', '+')}", headers={"Accept": "application/json"}
            )
            assert got == status and json.loads(body)["error"] in ("not-found", "malformed-id")
        got, headers, _ = server.request(
            f"/resolve?id={_subject(ledger, tmp_path).rsplit(':', 1)[-1][:8]}", headers=browser
        )
        assert got == 302 and headers["location"].startswith("/pith/")
    finally:
        server.stop()
