"""apply / state / export / log / fsck as a user runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lmdb

from helpers.clikit import _junk, _pith, _pithledger
from helpers.common import FIXTURES, ROOT
from pithledger.store import Ledger

BUNDLES = ROOT / "bundles"
NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


def test_apply_examples_then_state_for_every_id_form(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("--ledger", "L", "apply", str(BUNDLES))
    assert r.code == 0, r.err
    # 64 demo events (bundles/demo-*) and the record event of Pith's record document (bundles/pith-record-*.json)
    assert "65 new, 0 duplicate, 0 invalid" in r.out and "51 records touched" in r.out
    receipted = json.loads(cli("--ledger", "L", "state", "FHIBFT2F").out)
    assert receipted["pith_number"] == "pith:2025:FHIBFT2FCAH6TNYKWKJEBOYM4L"
    assert receipted["current"]["verification_status"]["pith_receipt"] is True
    states = set()
    for form in [
        NUMBER,
        "pith:FZ7AO632",
        "FZ7AO632HBV3",
        "FZ7AO632HBV3FATA",
        "2605.00424",
        "2605.00424v2",
        "10.48550/arxiv.2605.00424",
    ]:
        s = cli("--ledger", "L", "state", form)
        assert s.code == 0, (form, s.err)
        states.add(s.out)
    assert len(states) == 1
    doc = json.loads(states.pop())
    assert doc["pith_number"] == NUMBER and doc["merge_version"] == "pithledger-merge-v3"
    assert doc["current"]["badges"] == {
        "author": "claimed",
        "references": "refs signed",
        "storage": "capture claimed",
        "timestamp": "bitcoin anchor claimed",
    }


def test_apply_is_idempotent_in_any_grouping(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = sorted(str(p) for p in BUNDLES.glob("demo-*"))
    cli("--ledger", "A", "apply", *files)
    for f in reversed(files):
        cli("--ledger", "B", "apply", f, "--batch-size", "3")
    again = cli("--ledger", "B", "apply", "--json", *files)
    assert again.json()["new"] == 0 and again.json()["duplicate"] == 64
    for number in [NUMBER, "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"]:
        assert cli("--ledger", "A", "state", number).out == cli("--ledger", "B", "state", number).out


def test_export_then_apply_into_an_empty_ledger_gives_identical_state(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "A", "apply", str(BUNDLES))
    assert cli("--ledger", "A", "export", "2605.00424", "-o", "x.json").code == 0
    assert cli("--ledger", "C", "apply", "x.json").code == 0
    assert cli("--ledger", "C", "state", NUMBER).out == cli("--ledger", "A", "state", NUMBER).out


def test_export_of_a_cited_record_carries_its_standing_citations(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cited = "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"  # 1905.08204, cited by 2605.00424 in the examples
    cli("--ledger", "A", "apply", str(BUNDLES))
    assert json.loads(cli("--ledger", "A", "state", cited).out)["current"]["inbound_citations"]
    assert cli("--ledger", "A", "export", cited, "-o", "x.jsonl").code == 0
    lines = (tmp_path / "x.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["pith_number"] == cited
    assert {e["event_type"] for e in json.loads(lines[1])["events"]} == {"citation_signature"}
    assert cli("--ledger", "C", "apply", "x.jsonl").code == 0
    assert cli("--ledger", "C", "state", cited).out == cli("--ledger", "A", "state", cited).out


def test_stdin_and_env_ledger(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = (BUNDLES / "demo-1905.08204.json").read_bytes()
    r = cli("--ledger", "S", "apply", "-", input=data)
    assert r.code == 0 and "2 new" in r.out


def test_bad_input_is_named_exits_1_and_changes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"))
    before = cli("--ledger", "L", "log").out
    for name in [
        "truncated-json",
        "duplicate-keys",
        "event-for-another-subject",
        "top-level-hash-wrong",
        "float-in-payload",
    ]:
        # a good bundle first, the bad one second: the good one must not be written either
        r = cli(
            "--ledger", "L", "apply", str(BUNDLES / "demo-1709.09021.json"), str(FIXTURES / "bundles" / f"{name}.json")
        )
        assert r.code == 1, name
        assert r.err.startswith("error[") and f"{name}.json" in r.err and "Traceback" not in r.err
        assert cli("--ledger", "L", "log").out == before, name
    assert cli("--ledger", "L", "fsck").code == 0


def test_invalid_events_are_recorded_and_reported_with_exit_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = str(FIXTURES / "bundles" / "malleated-signature-s-plus-l.json")
    r = cli("--ledger", "L", "apply", bundle)
    assert r.code == 1 and "[bad-signature]" in r.out and "1 invalid" in r.out
    again = cli("--ledger", "L", "apply", bundle)  # offered again: reported again, the same way
    assert again.code == 1 and again.out.splitlines()[0] == r.out.splitlines()[0]
    assert cli("--ledger", "L", "log", "--json").out == ""  # the log holds valid events only
    held = [json.loads(line) for line in cli("--ledger", "L", "evidence", NUMBER, "--json").out.splitlines()]
    assert [(h["status"], h["reason"]) for h in held] == [("invalid", "bad-signature")]
    state = cli("--ledger", "L", "state", NUMBER)
    assert state.code == 1 and "error[not-found]" in state.err and "held as evidence" in state.err


def test_state_errors(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("--ledger", "nowhere", "state", "2605.00424")
    assert r.code == 1 and "error[no-ledger]" in r.err
    assert not (tmp_path / "nowhere").exists()
    cli("--ledger", "L", "apply", str(BUNDLES))
    r = cli("--ledger", "L", "state", "2605.00424v1")
    assert r.code == 1 and "error[not-found]" in r.err and "v2" in r.err
    r = cli("--ledger", "L", "state", "hello")
    assert r.code == 1 and "error[malformed-id]" in r.err


def test_fsck_detects_a_tampered_state_naming_the_record(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import zlib

    import lmdb

    cli("--ledger", "L", "apply", str(BUNDLES))
    assert cli("--ledger", "L", "fsck").code == 0
    env = lmdb.open(str(tmp_path / "L"), max_dbs=16)
    with env.begin(write=True, db=env.open_db(b"state", dupsort=False)) as txn:
        raw = zlib.decompress(txn.get(NUMBER.encode()))  # states are stored compressed
        txn.put(NUMBER.encode(), zlib.compress(raw.replace(b'"storage":"capture claimed"', b'"storage":"not stored"')))
    env.close()
    r = cli("--ledger", "L", "fsck")
    assert r.code == 1 and NUMBER in r.out


def test_log_since(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES))
    lines = cli("--ledger", "L", "log", "--since", "60").out.splitlines()
    assert [int(line.split()[0]) for line in lines] == [60, 61, 62, 63, 64]


def test_readme_first_command_works(tmp_path: Path) -> None:
    """The README's first command, minus the venv creation (the suite already runs installed)."""
    import re
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(.*?)\n", readme, re.S).group(1)  # type: ignore[union-attr]
    steps = first.split(" && ")
    assert steps[0].startswith("python3 -m venv") and "pip install" in steps[1]
    work = tmp_path / "clone"
    shutil.copytree(BUNDLES, work / "bundles")
    for step in steps[2:]:
        cmd = step.replace(".venv/bin/pithledger", f"{sys.executable} -m pithledger.cli")
        out = subprocess.run(cmd, shell=True, cwd=work, capture_output=True, text=True)
        assert out.returncode == 0, (step, out.stderr)
    assert json.loads(out.stdout)["state_type"] == "pith_open_graph_state"


def _miscount(path: Path) -> None:
    """What the old code left after a race: counters above what is held (no entry changed)."""
    from pithledger.store import Usage
    from pithledger.store.entries import _entry_encoder

    env = lmdb.open(str(path), max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:
        evsize, meta = env.open_db(b"evsize", txn=txn), env.open_db(b"meta", txn=txn)
        txn.put(_pith(2).encode(), _entry_encoder.encode(Usage(9, 9999)), db=evsize)
        txn.put(b"evidence_usage", _entry_encoder.encode(Usage(8256, 10**6)), db=meta)
    env.close()


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_fsck_names_each_evidence_miscount_and_repair_recounts(tmp_path: Path) -> None:
    _junk(tmp_path / "junk.jsonl", 3, 5)
    assert _pithledger("--ledger", "L", "apply", "junk.jsonl", cwd=tmp_path).returncode == 0
    _miscount(tmp_path / "L")
    r = _pithledger("--ledger", "L", "fsck", cwd=tmp_path)
    assert r.returncode == 1
    assert f"MISMATCH evidence usage of {_pith(2)} counts 9 copies (9,999 bytes) but 5 copies (" in r.stdout
    assert "MISMATCH the total evidence usage counts 8,256 copies (1,000,000 bytes) but 15 copies (" in r.stdout
    assert "fsck --repair" in r.stderr
    fixed = _pithledger("--ledger", "L", "fsck", "--repair", "--json", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    doc = json.loads(fixed.stdout)
    assert doc["ok"] is True and len(doc["repaired"]) == 2 and doc["problems"] == []
    assert _pithledger("--ledger", "L", "fsck", cwd=tmp_path).returncode == 0
    with Ledger(tmp_path / "L", readonly=True) as ledger:
        assert ledger.evidence_usage().entries == 15


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_apply_refuses_a_non_empty_directory_that_is_not_a_ledger(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "bundles").mkdir(parents=True)
    (site / "index.html").write_text("<h1>a published tree</h1>")
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    for target in (site, site / "index.html"):
        r = _pithledger("--ledger", str(target), "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path)
        assert r.returncode == 1 and r.stderr.startswith("error[not-a-ledger]: "), r.stderr
        assert "hint: " in r.stderr and "data.mdb" in r.stderr
    assert r.stderr.startswith(f"error[not-a-ledger]: {site / 'index.html'} is a file")
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before  # nothing written
    (tmp_path / "empty").mkdir()
    for fresh in ("empty", "new/deeper"):  # an empty or new directory becomes a ledger, and stays one
        for _ in range(2):
            r = _pithledger("--ledger", fresh, "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path)
            assert r.returncode == 0, r.stderr
    sidecar = _pithledger(
        "--ledger", "empty", "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"), cwd=tmp_path
    )
    assert sidecar.returncode == 0, sidecar.stderr
    assert (
        _pithledger("--ledger", "empty", "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode == 0
    )
