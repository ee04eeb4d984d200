"""apply reads its inputs twice: a strict checking pass that records a digest per region, then a
guarded pass that decodes checked bytes with msgspec's plain decoder (ledger/ingest/bundles.py, spec/storage.md §3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_apply_reading import FIFTY
from helpers.common import ROOT

# --- the plain decoder reads what the strict one accepts as the strict one does ---------------------


# --- regions ---------------------------------------------------------------------------------------


# --- through the command line, with small regions -------------------------------------------------

RUN = """
import os, sys
from pithledger.ingest import bundles as _bundles
_bundles.REGION_BYTES = int(sys.argv[1])
if os.environ.get("MAXDOC"):
    _bundles.MAX_DOCUMENT_BYTES = int(os.environ["MAXDOC"])
if os.environ.get("SPY"):  # which route the writer took: workers reading the file (spans) or not
    for name in ("_spans", "_reread_spans"):
        def spying(*a, _f=getattr(_bundles, name), _n=name):
            open(os.environ["SPY"], "a").write(_n + "\\n")
            return _f(*a)
        setattr(_bundles, name, spying)
change = sys.argv[2]
if change:
    reread = _bundles.reread_bundles
    def changing(files, plan, *rest):  # the input is changed between the two readings
        kind, path, *args = change.split("|")
        if kind == "sub":
            data = open(path, "rb").read()
            open(path, "wb").write(data.replace(args[0].encode(), args[1].encode()))
        elif kind == "truncate":
            os.truncate(path, int(args[0]))
        elif kind == "append":
            open(path, "ab").write(args[0].encode())
        elif kind == "replace":
            os.replace(args[0], path)
        return reread(files, plan, *rest)
    _bundles.reread_bundles = changing
sys.argv = ["pithledger"] + sys.argv[3:]
from pithledger.cli import main
main()
"""


def run(
    *args: str, region: int = 4096, change: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN, str(region), change, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def digest(ledger: Path) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "digest"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_many_small_regions_apply_what_one_reading_applies(tmp_path: Path) -> None:
    small, whole = tmp_path / "small", tmp_path / "whole"
    r = run("--ledger", str(small), "apply", str(FIFTY), region=3000)
    assert r.returncode == 0, r.stderr
    r = run("--ledger", str(whole), "apply", str(FIFTY), region=1 << 30)
    assert r.returncode == 0, r.stderr
    assert digest(small) == digest(whole)


def test_a_duplicate_key_line_is_never_applied_by_the_fast_reading(tmp_path: Path) -> None:
    lines = FIFTY.read_bytes().splitlines(keepends=True)
    victim = json.loads(lines[3])
    # msgspec's plain decoder keeps the last of two equal keys: read plainly, this line is a sound bundle
    lines[3] = b'{"pith_number":"pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA",' + lines[3][1:]
    f = tmp_path / "in.jsonl"
    f.write_bytes(b"".join(lines))
    r = run("--ledger", str(tmp_path / "L"), "apply", "--keep-going", "--json", str(f), region=3000)
    assert r.returncode == 1
    assert f"error[duplicate-key]: {f}:4:" in r.stderr
    assert json.loads(r.stdout)["bundles"] == 49
    r = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp_path / "L"), "state", victim["pith_number"]],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "error[not-found]" in r.stderr


def test_an_input_changed_between_the_readings_is_refused_where_it_changed(tmp_path: Path) -> None:
    lines = FIFTY.read_bytes().splitlines(keepends=True)
    f = tmp_path / "in.jsonl"
    f.write_bytes(b"".join(lines))
    late = json.loads(lines[40])["pith_number"]
    ledger = tmp_path / "L"
    # line 41 becomes another sound bundle (one character of a signature changes, so it no longer
    # verifies): applying it would be applying bytes nobody checked
    old = json.loads(lines[40])["events"][0]["signature_b64"]
    new = old[:10] + ("A" if old[10] != "A" else "B") + old[11:]
    r = run("--ledger", str(ledger), "apply", "--batch-size", "20", str(f), region=3000, change=f"sub|{f}|{old}|{new}")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"error[input-changed]: {f} changed while it was being applied")
    assert "committed" in r.stderr and "hint: " in r.stderr and "Traceback" not in r.stderr
    check = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "fsck"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr  # what was committed is whole and derived
    r = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "state", late], capture_output=True, text=True
    )
    assert r.returncode == 1 and "error[not-found]" in r.stderr  # nothing of the changed region
    f.write_bytes(b"".join(lines))  # the input as it was: the same command finishes the job
    assert run("--ledger", str(ledger), "apply", str(f)).returncode == 0
    assert digest(ledger) == digest_of_fifty(tmp_path)


def digest_of_fifty(tmp_path: Path) -> str:
    ref = tmp_path / "ref"
    assert run("--ledger", str(ref), "apply", str(FIFTY)).returncode == 0
    return digest(ref)


@pytest.mark.parametrize("fault", [b'{"bundle_type":"pith_open_graph_bundle","x":1.5}', b'{"a":1,"a":2}'])
def test_a_fault_in_the_first_line_of_json_lines_is_that_line_s_own(tmp_path: Path, fault: bytes) -> None:
    """The first line of JSON lines, if it holds a fault, is skipped like any other line by --keep-going,
    and named by its line; verify reads the later lines too (spec/bundle.md §2)."""
    lines = FIFTY.read_bytes().splitlines()
    f = tmp_path / "in.jsonl"
    f.write_bytes(fault + b"\n" + b"\n".join(lines) + b"\n")
    r = run("--ledger", str(tmp_path / "L"), "apply", "--keep-going", str(f))
    assert r.returncode == 1 and f"{f}:1:" in r.stderr, r.stderr
    assert digest(tmp_path / "L") == digest_of_fifty(tmp_path)  # every later line applied
    r = run("--ledger", str(tmp_path / "strict"), "apply", str(f))  # without --keep-going: refused, nothing written
    assert r.returncode == 1 and f"{f}:1:" in r.stderr and not (tmp_path / "strict").exists()
    v = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "verify", str(f)], capture_output=True, text=True, timeout=120
    )
    assert v.stdout.count(": valid ") == 50, v.stdout[-500:]


def test_a_pretty_printed_document_with_a_fault_is_still_refused_whole(tmp_path: Path) -> None:
    doc = json.loads(FIFTY.read_bytes().splitlines()[0])
    doc["x"] = 0
    f = tmp_path / "pretty.json"
    f.write_text(json.dumps(doc, indent=2).replace('"x": 0', '"x": 1.5'))
    r = run("--ledger", str(tmp_path / "L"), "apply", "--keep-going", str(f))
    assert r.returncode == 1 and "float-not-allowed" in r.stderr and f"{f}:" in r.stderr
    assert f"{f}:2:" not in r.stderr  # the whole file, not a line of it


# --- the workers read the regions from the file: the same cuts, lines, messages and refusals ------------


NASTY = (
    b"\n\n"
    + b"\r\n".join(FIFTY.read_bytes().splitlines()[:6])
    + b'\r\n  \n{"a":1,"a":2}\n[1.5]\r'
    + b"\n".join(FIFTY.read_bytes().splitlines()[6:30])
    + b"\nnot json\n"
    + b"\n".join(FIFTY.read_bytes().splitlines()[30:])
)


def both_routes(
    tmp_path: Path, data: bytes, *args: str, change: str = "", before: Any = None, env: dict[str, str] | None = None
) -> list[tuple[int, str, str, str]]:
    """(exit code, stdout, stderr, ledger digest or "") of `apply ARGS in.jsonl` with workers that read the file
    (--workers 2) and with the writer reading it (--workers 0), the same file at the same path each time."""
    out = []
    for workers in ("2", "0"):
        f, ledger, spy = tmp_path / "in.jsonl", tmp_path / f"L{workers}", tmp_path / f"spy{workers}"
        f.write_bytes(data)
        if before is not None:
            before()
        r = run(
            "--ledger",
            str(ledger),
            "apply",
            "--workers",
            workers,
            *args,
            str(f),
            region=3000,
            change=change,
            env={"SPY": str(spy), **(env or {})},
        )
        routes = set(spy.read_text().split()) if spy.exists() else set()
        assert routes == ({"_spans", "_reread_spans"} if workers == "2" else set()) or (
            workers == "2" and routes == {"_spans"} and r.returncode
        ), (workers, routes, r.stderr)
        held = digest(ledger) if ledger.exists() else ""
        out.append((r.returncode, r.stdout.replace(str(ledger), "LEDGER"), r.stderr, held))
    assert out[0] == out[1]
    return out


def test_workers_that_read_the_file_give_what_the_writer_s_reading_gives(tmp_path: Path) -> None:
    """Blank lines, CRLF, a lone \\r, faulty lines, a last line without newline, in regions of ~3000 bytes:
    the same messages (file:LINE), summary and ledger whichever process reads the regions."""
    (code, stdout, stderr, held), _ = both_routes(tmp_path, NASTY, "--keep-going", "--json")
    assert code == 1 and json.loads(stdout)["bundles"] == 50 and held
    assert (
        f"{tmp_path / 'in.jsonl'}:10:" in stderr and ":11:" in stderr and ":36:" in stderr and "Traceback" not in stderr
    )


def test_a_line_over_the_size_limit_stops_the_file_where_it_stops_the_writer_s_reading(tmp_path: Path) -> None:
    lines = FIFTY.read_bytes().splitlines()
    data = b"\n".join(lines[:10]) + b"\n" + b"x" * 20000 + b"\n" + b"\n".join(lines[10:]) + b"\n"
    (code, stdout, stderr, _), _ = both_routes(tmp_path, data, "--keep-going", "--json", env={"MAXDOC": "9000"})
    assert code == 1 and "a line is larger than 9,000 bytes" in stderr and f"{tmp_path / 'in.jsonl'}:11:" in stderr
    assert json.loads(stdout)["bundles"] == 10


@pytest.mark.parametrize(
    "kind", ["sub", "truncate-mid", "truncate-cut", "append-newline", "append-line", "replace-other", "replace-same"]
)
def test_an_input_changed_between_the_readings_is_refused_alike_on_both_routes(tmp_path: Path, kind: str) -> None:
    """Changed in place, truncated (within a region, or at a cut), grown, replaced by another file: refused
    with input-changed, the same message, nothing written; replaced by the same bytes: applied."""
    data = FIFTY.read_bytes()
    f, other = tmp_path / "in.jsonl", tmp_path / "other.jsonl"
    first = data.splitlines()[0]
    old = json.loads(first)["events"][0]["signature_b64"]
    new = old[:10] + ("A" if old[10] != "A" else "B") + old[11:]
    change = {
        "sub": f"sub|{f}|{old}|{new}",
        "truncate-mid": f"truncate|{f}|100",
        "truncate-cut": f"truncate|{f}|{len(first) + 1}",
        "append-newline": f"append|{f}|\n",
        "append-line": f"append|{f}|{first.decode()}\n",
        "replace-other": f"replace|{f}|{other}",
        "replace-same": f"replace|{f}|{other}",
    }[kind]
    body = data if kind == "replace-same" else data.replace(old.encode(), new.encode())
    (code, _, stderr, held), _ = both_routes(tmp_path, data, change=change, before=lambda: other.write_bytes(body))
    if kind == "replace-same":
        assert code == 0 and held == digest_of_fifty(tmp_path)
        return
    assert code == 1 and stderr.startswith(f"error[input-changed]: {f} ") and "; 0 of 1 batch committed" in stderr, (
        stderr
    )
    number = json.loads(first)["pith_number"]
    r = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp_path / "L2"), "state", number],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "error[not-found]" in r.stderr  # nothing written


FIFTY = ROOT / "bundles" / "demo-50-records.jsonl"

KILL_A_CHECKING_WORKER = """
import os, signal, sys
from pithledger.ingest import bundles as _bundles
_bundles.REGION_BYTES = 3000  # demo-50-records.jsonl is ~32 regions: checked on worker processes
flag = sys.argv[1]
checked = _bundles._check_span  # the workers read their regions from the file (path, offset, length)
def dying(part):  # the OOM killer, or a user's kill -9, takes one worker mid-region
    if part[1] > 40000 and not os.path.exists(flag):
        open(flag, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return checked(part)
_bundles._check_span = dying
sys.argv = ["pithledger"] + sys.argv[2:]
from pithledger.cli import main
main()
"""


# A finding of the adversarial review of session 4 (apply's two readings, finishing/fsck/verification
# on worker processes); failed at 6581123, before the fix it guards.
def test_a_checking_worker_killed_mid_region_is_no_traceback(tmp_path: Path) -> None:
    """ledger/ingest/bundles.py _take: future.result() of a region whose worker died raises BrokenProcessPool,
    which nothing catches: apply dies with a Python traceback (errors.py: 'nothing a user types or
    feeds in should ever surface as a traceback'), where finishing and verification fall back to
    working in place (store._on_workers, _outcome). Expected: the region is checked in place, the run
    goes on and applies all 50 bundles."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_A_CHECKING_WORKER,
            str(tmp_path / "killed"),
            "--ledger",
            str(tmp_path / "l"),
            "apply",
            str(FIFTY),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (tmp_path / "killed").exists()
    assert "Traceback" not in r.stderr, r.stderr[-600:]
    assert r.returncode == 0 and "50 new" in r.stderr + r.stdout


# A finding of the adversarial review of session 4 (apply's two readings, finishing/fsck/verification
# on worker processes); failed at 6581123, before the fix it guards.
def test_apply_reads_a_bare_cr_jsonl_file_as_verify_and_the_previous_apply_did(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ledger/ingest/bundles.py _lines splits regions on b"\\n" only; _output.iter_documents (verify, and apply
    before b713297) splits a small file with bytes.splitlines(), which also breaks on a bare "\\r".
    A classic-Mac/CR-terminated .jsonl file now fails apply with trailing-data on line 1 while
    `pithledger verify` of the same file finds every event valid (a regression, fail-closed)."""
    lines = FIFTY.read_bytes().split(b"\n")[:3]
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b"\r".join(lines) + b"\r")
    assert cli("--ledger", str(tmp_path / "l"), "verify", str(path)).code == 0
    r = cli("--ledger", str(tmp_path / "l"), "apply", str(path))
    assert r.code == 0, r.err
