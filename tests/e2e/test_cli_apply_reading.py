"""apply reads its inputs twice: a strict checking pass that records a digest per region, then a
guarded pass that decodes checked bytes with msgspec's plain decoder (cli/_bundles.py, spec/storage.md §3)."""

from __future__ import annotations

import io
import json
import os
import tempfile
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pithledger.records.canonical import MAX_SAFE_INTEGER, strict_decode
from pithledger.cli import _bundles
from pithledger.cli._output import Input
from helpers.common import ROOT

BUNDLES = ROOT / "bundles"
FIFTY = BUNDLES / "demo-50-records.jsonl"

# --- the plain decoder reads what the strict one accepts as the strict one does ---------------------

text = st.text(st.characters(exclude_categories=("Cs",)))  # no lone surrogates: the strict decoder refuses them
values = st.recursive(
    st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=30,
)


def typed(value: Any) -> Any:
    """The value with every scalar's type made explicit (True == 1 in Python, not in JSON)."""
    if isinstance(value, dict):
        return ("object", [(k, typed(v)) for k, v in value.items()])  # key order kept
    if isinstance(value, list):
        return ("array", [typed(v) for v in value])
    return (type(value).__name__, value)


@given(values, st.booleans(), st.sampled_from([None, 0, 2]), st.booleans(), st.booleans())
def test_the_plain_decoder_reads_every_strictly_accepted_document_as_the_strict_one_does(
        value: Any, ascii_only: bool, indent: int | None, spaced: bool, escaped_slashes: bool) -> None:
    doc = json.dumps(value, ensure_ascii=ascii_only, indent=indent, separators=(", ", ": ") if spaced else (",", ":"))
    if escaped_slashes:
        doc = doc.replace("/", "\\/")  # "/" occurs only inside strings, where "\/" means the same
    data = doc.encode()
    assert typed(msgspec.json.decode(data)) == typed(strict_decode(data)) == typed(value)


# --- regions ---------------------------------------------------------------------------------------

lines = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")) | st.just(b"") | st.just(b"\r"), max_size=30)


@given(lines, st.booleans(), st.integers(8, 64))
def test_regions_are_whole_lines_that_cover_the_bytes_and_depend_on_them_alone(parts: list[bytes], final_newline: bool,
                                                                                region: int) -> None:
    data = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    saved = _bundles.REGION_BYTES
    _bundles.REGION_BYTES = region
    try:
        got = list(_bundles._regions(io.BytesIO(data), "x"))
        again = list(_bundles._regions(_Trickle(data), "x"))  # reads of any size: the same cut
    finally:
        _bundles.REGION_BYTES = saved
    assert got == again
    assert b"".join(r for _, r in got) == data
    seen = 0
    for lineno, r in got:
        assert lineno == len(data[:seen].splitlines()) + 1  # lines end at \n, \r\n or a lone \r
        assert r.endswith(b"\n") or seen + len(r) == len(data)
        assert len(r) <= region or r.count(b"\n") <= 1  # longer only to hold one long line
        seen += len(r)


class _Trickle(io.BytesIO):
    """A stream that returns at most 7 bytes a read (before its end)."""

    def read(self, size: int | None = -1) -> bytes:
        return super().read(7 if size is None or size < 0 else min(size, 7))


# --- through the command line, with small regions -------------------------------------------------

RUN = """
import os, sys
from pithledger.cli import _bundles
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


def run(*args: str, region: int = 4096, change: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN, str(region), change, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def digest(ledger: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "digest"], capture_output=True, text=True)
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
    r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp_path / "L"), "state", victim["pith_number"]],
                       capture_output=True, text=True)
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
    check = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "fsck"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # what was committed is whole and derived
    r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "state", late], capture_output=True, text=True)
    assert r.returncode == 1 and "error[not-found]" in r.stderr  # nothing of the changed region
    f.write_bytes(b"".join(lines))  # the input as it was: the same command finishes the job
    assert run("--ledger", str(ledger), "apply", str(f)).returncode == 0
    assert digest(ledger) == digest_of_fifty(tmp_path)


def digest_of_fifty(tmp_path: Path) -> str:
    ref = tmp_path / "ref"
    assert run("--ledger", str(ref), "apply", str(FIFTY)).returncode == 0
    return digest(ref)


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b""])
def test_blank_lines_crlf_and_a_last_line_without_newline_read_as_before(tmp_path: Path, ending: bytes) -> None:
    lines = FIFTY.read_bytes().splitlines()
    f = tmp_path / "in.jsonl"
    f.write_bytes(b"\n\n" + b"\r\n".join(lines[:5]) + b"\r\n  \n" + b"\n".join(lines[5:]) + ending)
    plan = _bundles.Plan()
    first = list(_bundles.check_bundles([Input(str(f), "in")], plan))
    assert [w for w, _ in first][:2] == ["in:3", "in:4"] and len(first) == 50
    second = [(w, b) for w, b in _bundles.reread_bundles([Input(str(f), "in")], plan)]
    assert [w for w, _ in second] == [w for w, _ in first]
    assert [(b.pith_number, len(b.events), b.size) for _, b in second if b] == [(json.loads(line)["pith_number"], c.events, c.size)
                                                                             for line, (_, c) in zip(lines, first)]


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
    v = subprocess.run([sys.executable, "-m", "pithledger.cli", "verify", str(f)], capture_output=True, text=True, timeout=120)
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

@given(st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")) | st.just(b"") | st.just(b"\r")
                | st.integers(20, 120).map(lambda n: b"x" * n), max_size=25),
       st.booleans(), st.integers(8, 48), st.integers(10, 90), st.integers(1, 9))
def test_the_writer_finds_the_cuts_the_reading_of_every_byte_makes(parts: list[bytes], final_newline: bool, region: int,
                                                                   limit: int, step: int) -> None:
    """_spans (reading near each cut) cuts as _regions (reading every byte) does, long lines and the size limit included."""
    data = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    saved = _bundles.REGION_BYTES, _bundles.MAX_DOCUMENT_BYTES, _bundles._STEP
    _bundles.REGION_BYTES, _bundles.MAX_DOCUMENT_BYTES, _bundles._STEP = region, limit, step
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        try:
            read: list[tuple[Any, int]] = []
            try:
                for _, r in _bundles._regions(io.BytesIO(data), "x"):
                    read.append((sum(n for _, n in read), len(r)))
            except _bundles.DocumentTooLarge:
                read.append(("long", sum(n for _, n in read)))
            cut: list[tuple[Any, int]] = []
            try:
                cut.extend(_bundles._spans(fh.name))
            except _bundles._TooLong as exc:
                cut.append(("long", exc.offset))
        finally:
            _bundles.REGION_BYTES, _bundles.MAX_DOCUMENT_BYTES, _bundles._STEP = saved
    assert cut == read


DOC = FIFTY.read_bytes().splitlines()[0]
PRETTY = json.dumps(json.loads(DOC), indent=2).encode()
FIRSTS = [DOC, b'{"a":1,"a":2}', b"", b"  ", PRETTY, b"1", b'"x"', b"{}\x0c", b"\xff", b"\xef\xbb\xbf{}", b"[1.5]", b"{"]
RESTS = [b"", b"\n", b"\r\n", b"\n\x0c\x0b \n", b"\n{}\n", b"\nzz", b"\n\xff\n", b"\r" + DOC, b"\n" + PRETTY, b"\n\n\n" + DOC]


@given(st.sampled_from(FIRSTS), st.lists(st.sampled_from(RESTS), max_size=3))
def test_a_file_is_found_to_be_json_lines_or_one_document_as_when_it_was_read_whole(first: bytes, rest: list[bytes]) -> None:
    """_open finds JSON lines from the first line when it can: the same outcome as reading the file whole
    and decoding it as one document first (what it did before)."""
    from pithledger.cli._output import lines_framed, located
    from pithledger.errors import PithledgerError, TrailingData

    data = first + b"".join(rest)
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        try:
            expected: tuple[str, Any] = ("one", typed(strict_decode(data, what="in")))
        except TrailingData:
            expected = ("lines", None)
        except PithledgerError as exc:
            expected = ("lines", None) if lines_framed(data) else ("error", located(exc, "in").message)
        try:
            opened = _bundles._open(Input(fh.name, "in"))
            got: tuple[str, Any] = ("one", typed(opened[1])) if isinstance(opened, tuple) else ("lines", None)
            if isinstance(opened, bytes):
                assert opened == data
        except PithledgerError as exc:
            got = ("error", exc.message)
    assert got == expected


NASTY = (b"\n\n" + b"\r\n".join(FIFTY.read_bytes().splitlines()[:6]) + b"\r\n  \n{\"a\":1,\"a\":2}\n[1.5]\r"
         + b"\n".join(FIFTY.read_bytes().splitlines()[6:30]) + b"\nnot json\n" + b"\n".join(FIFTY.read_bytes().splitlines()[30:]))


def both_routes(tmp_path: Path, data: bytes, *args: str, change: str = "", before: Any = None, env: dict[str, str] | None = None
                ) -> list[tuple[int, str, str, str]]:
    """(exit code, stdout, stderr, ledger digest or "") of `apply ARGS in.jsonl` with workers that read the file
    (--workers 2) and with the writer reading it (--workers 0), the same file at the same path each time."""
    out = []
    for workers in ("2", "0"):
        f, ledger, spy = tmp_path / "in.jsonl", tmp_path / f"L{workers}", tmp_path / f"spy{workers}"
        f.write_bytes(data)
        if before is not None:
            before()
        r = run("--ledger", str(ledger), "apply", "--workers", workers, *args, str(f), region=3000, change=change,
                env={"SPY": str(spy), **(env or {})})
        routes = set(spy.read_text().split()) if spy.exists() else set()
        assert routes == ({"_spans", "_reread_spans"} if workers == "2" else set()) or (workers == "2" and routes == {"_spans"}
                                                                                      and r.returncode), (workers, routes, r.stderr)
        held = digest(ledger) if ledger.exists() else ""
        out.append((r.returncode, r.stdout.replace(str(ledger), "LEDGER"), r.stderr, held))
    assert out[0] == out[1]
    return out


def test_workers_that_read_the_file_give_what_the_writer_s_reading_gives(tmp_path: Path) -> None:
    """Blank lines, CRLF, a lone \\r, faulty lines, a last line without newline, in regions of ~3000 bytes:
    the same messages (file:LINE), summary and ledger whichever process reads the regions."""
    (code, stdout, stderr, held), _ = both_routes(tmp_path, NASTY, "--keep-going", "--json")
    assert code == 1 and json.loads(stdout)["bundles"] == 50 and held
    assert f"{tmp_path / 'in.jsonl'}:10:" in stderr and ":11:" in stderr and ":36:" in stderr and "Traceback" not in stderr


def test_a_line_over_the_size_limit_stops_the_file_where_it_stops_the_writer_s_reading(tmp_path: Path) -> None:
    lines = FIFTY.read_bytes().splitlines()
    data = b"\n".join(lines[:10]) + b"\n" + b"x" * 20000 + b"\n" + b"\n".join(lines[10:]) + b"\n"
    (code, stdout, stderr, _), _ = both_routes(tmp_path, data, "--keep-going", "--json", env={"MAXDOC": "9000"})
    assert code == 1 and "a line is larger than 9,000 bytes" in stderr and f"{tmp_path / 'in.jsonl'}:11:" in stderr
    assert json.loads(stdout)["bundles"] == 10


@pytest.mark.parametrize("kind", ["sub", "truncate-mid", "truncate-cut", "append-newline", "append-line", "replace-other", "replace-same"])
def test_an_input_changed_between_the_readings_is_refused_alike_on_both_routes(tmp_path: Path, kind: str) -> None:
    """Changed in place, truncated (within a region, or at a cut), grown, replaced by another file: refused
    with input-changed, the same message, nothing written; replaced by the same bytes: applied."""
    data = FIFTY.read_bytes()
    f, other = tmp_path / "in.jsonl", tmp_path / "other.jsonl"
    first = data.splitlines()[0]
    old = json.loads(first)["events"][0]["signature_b64"]
    new = old[:10] + ("A" if old[10] != "A" else "B") + old[11:]
    change = {"sub": f"sub|{f}|{old}|{new}", "truncate-mid": f"truncate|{f}|100", "truncate-cut": f"truncate|{f}|{len(first) + 1}",
              "append-newline": f"append|{f}|\n", "append-line": f"append|{f}|{first.decode()}\n",
              "replace-other": f"replace|{f}|{other}", "replace-same": f"replace|{f}|{other}"}[kind]
    body = data if kind == "replace-same" else data.replace(old.encode(), new.encode())
    (code, _, stderr, held), _ = both_routes(tmp_path, data, change=change, before=lambda: other.write_bytes(body))
    if kind == "replace-same":
        assert code == 0 and held == digest_of_fifty(tmp_path)
        return
    assert code == 1 and stderr.startswith(f"error[input-changed]: {f} ") and "; 0 of 1 batch committed" in stderr, stderr
    number = json.loads(first)["pith_number"]
    r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp_path / "L2"), "state", number],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "error[not-found]" in r.stderr  # nothing written
