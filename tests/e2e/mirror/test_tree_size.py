"""Smaller static trees (issue #33 item 6; spec/audit.md §4, spec/serve.md §7): a one-part record has no
part index, no record has a ``paper/<short8>/`` redirect; sync and audit read such a tree, and still read a
tree an earlier version published (with those files), which a re-publish brings to the new layout record by
record as records change. The real command line over a real ledger of bundles/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from helpers.site import BUNDLES, FZ7, _env
from pithledger.mirror.publish import part_index_doc
from pithledger.records.canonical import canonical_bytes
from pithledger.store import Ledger

FZ7_NUMBER = f"pith:2026:{FZ7}"


def run(tmp: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, env=_env(tmp), timeout=300
    )
    assert not ok or proc.returncode == 0, proc.stderr
    return proc


def digest(tmp: Path, ledger: Path) -> object:
    return json.loads(run(tmp, "--ledger", str(ledger), "digest", "--json").stdout)


def old_files(ledger: Path, tree: Path) -> list[Path]:
    """Write what the previous version also published: a part index for every record, a paper/<short8>/ redirect
    for every present one (the bytes it wrote)."""
    added = []
    with Ledger(ledger, readonly=True) as held:
        for number in held.subjects():
            suffix = number.rsplit(":", 1)[-1]
            year = number.split(":")[1]
            index = tree / "pithledger" / "records" / year / suffix / "parts.json"
            index.write_bytes(
                canonical_bytes(part_index_doc(number, held.export_parts(number), held.record_events(number))) + b"\n"
            )
            added.append(index)
            if (tree / "pith" / suffix / "index.html").exists():
                page = tree / "paper" / suffix[:8] / "index.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                target = f"../../pith/{suffix}/index.html"
                page.write_text(
                    f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={target}">'
                    f'<title>{number}</title></head><body><p><a href="{target}">{number}</a></p></body></html>\n'
                )
                added.append(page)
    return added


def test_a_tree_this_version_publishes_is_smaller_and_read_by_sync_and_audit(tmp_path: Path) -> None:
    a, tree, b = tmp_path / "a", tmp_path / "tree", tmp_path / "b"
    run(tmp_path, "--ledger", str(a), "apply", str(BUNDLES))
    run(tmp_path, "keys", "new", "tree-log")
    run(tmp_path, "--ledger", str(a), "publish", str(tree), "--key", "tree-log")
    assert not (tree / "paper").exists()
    assert list((tree / "pithledger" / "records").rglob("parts.json")) == []  # bundles/ has no multi-part record
    doc = json.loads((tree / "pith" / f"{FZ7}.json").read_text())
    assert doc["agent_actions"]["view_paper"] == doc["links"]["paper"] == f"../pith/{FZ7}/index.html"
    assert (tree / "pith" / FZ7 / "index.html").is_file()  # what view_paper names exists
    run(tmp_path, "--ledger", str(b), "sync", str(tree))
    assert digest(tmp_path, b) == digest(tmp_path, a)
    run(tmp_path, "audit", str(a), str(tree))
    run(tmp_path, "audit", str(tree), "--bundles")
    log = json.loads(
        run(tmp_path, "verify-log", str(tree), "--json").stdout
    )  # every logged event found in its record's bundle
    assert log["faults"] == [] and log["events_matched"] == log["size"] > 0, log


def test_a_tree_the_previous_version_published_is_read_and_a_republish_converges(tmp_path: Path) -> None:
    a, tree = tmp_path / "a", tmp_path / "tree"
    run(tmp_path, "--ledger", str(a), "apply", str(BUNDLES))
    run(tmp_path, "--ledger", str(a), "publish", str(tree))
    added = old_files(a, tree)
    assert len(added) > 20
    # read as it is, part indexes and all
    run(tmp_path, "--ledger", str(tmp_path / "b"), "sync", str(tree))
    assert digest(tmp_path, tmp_path / "b") == digest(tmp_path, a)
    run(tmp_path, "audit", str(a), str(tree))
    run(tmp_path, "audit", str(tree), "--bundles")
    # a hostile disk: a paper/<short8> that is a symlink out of the tree is never followed
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "index.html").write_text("not publish's")
    victim = tree / "paper" / FZ7[:8]
    for path in victim.iterdir():
        path.unlink()
    victim.rmdir()
    victim.symlink_to(outside, target_is_directory=True)
    # one record changes: a re-publish rewrites it, and its files of the old layout go
    run(tmp_path, "keys", "new", "tree-test")
    payload = tmp_path / "payload.json"
    payload.write_text(
        json.dumps({"description": "a new finding", "finding_type": "reference_unresolved", "severity": "info"})
    )
    run(
        tmp_path,
        "event",
        "integrity_finding",
        "--subject",
        FZ7_NUMBER,
        "--key",
        "tree-test",
        "--payload",
        f"@{payload}",
        "-o",
        str(tmp_path / "finding.json"),
    )
    run(tmp_path, "--ledger", str(a), "apply", str(tmp_path / "finding.json"))
    run(tmp_path, "--ledger", str(a), "publish", str(tree))
    fz7_index = tree / "pithledger" / "records" / "2026" / FZ7 / "parts.json"
    assert not fz7_index.exists()
    assert (outside / "index.html").read_text() == "not publish's" and victim.is_symlink()
    # the unchanged records keep theirs, still true of what they describe (same event root), so still read
    kept = [p for p in added if p.exists()]
    assert kept and all(p != fz7_index for p in kept)
    c = tmp_path / "c"
    run(tmp_path, "--ledger", str(c), "sync", str(tree))
    assert digest(tmp_path, c) == digest(tmp_path, a)
    # a ledger that had synced the old tree takes the change from the re-published one (no part index: part 0)
    again = json.loads(run(tmp_path, "--ledger", str(tmp_path / "b"), "sync", str(tree), "--json").stdout)
    assert again["new"] == 1 and again["lying"] == [] and again["skipped"] == []
    assert digest(tmp_path, tmp_path / "b") == digest(tmp_path, a)
    run(tmp_path, "audit", str(a), str(tree))
    run(tmp_path, "audit", str(tree), "--bundles")
    # and a tree published fresh holds none of the old files: re-publishing over the old one converges on the
    # files a Pith client reads (same bytes), and the extra files left are the previous version's, still true
    fresh = tmp_path / "fresh"
    run(tmp_path, "--ledger", str(a), "publish", str(fresh))
    for rel in (
        f"pith/{FZ7}/bundle.json",
        f"pith/{FZ7}.json",
        f".well-known/pith/{FZ7}/bundle.json",
        f"pith/{FZ7}/state.json",
    ):
        assert (tree / rel).read_bytes() == (fresh / rel).read_bytes(), rel


def test_sync_and_audit_read_the_smaller_tree_over_http(tmp_path: Path) -> None:
    """Served by Python's http.server (a 404 for every one-part record's absent parts.json, then its bundle)."""
    a, tree = tmp_path / "a", tmp_path / "tree"
    run(tmp_path, "--ledger", str(a), "apply", str(BUNDLES))
    run(tmp_path, "--ledger", str(a), "publish", str(tree))
    static = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(tree)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    try:
        assert static.stdout is not None
        m = re.search(r"port (\d+)", static.stdout.readline())
        assert m
        url = f"http://127.0.0.1:{m[1]}"
        counts = json.loads(run(tmp_path, "--ledger", str(tmp_path / "b"), "sync", url, "--json").stdout)
        assert counts["skipped"] == [] and counts["lying"] == [] and counts["new"] > 0
        assert digest(tmp_path, tmp_path / "b") == digest(tmp_path, a)
        run(tmp_path, "audit", url, "--bundles")
    finally:
        static.terminate()
        assert static.stderr is not None
        log = static.communicate(timeout=10)[1]
    assert re.search(
        r'"GET /pithledger/records/\d{4}/[A-Z2-7]{26}/parts\.json HTTP/1\.[01]" 404', log
    )  # the reader asked, found none
