"""apply reads its inputs twice: a strict checking pass that records a digest per region, then a
guarded pass that decodes checked bytes with msgspec's plain decoder (ledger/ingest/bundles.py, spec/storage.md §3).

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/cli/test_cli_apply_reading.py."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.cli_apply_reading import FIFTY, lines
from helpers.clikit import _lines
from pithledger.ingest import bundles as _bundles
from pithledger.ingest.inputs import Input
from pithledger.records.canonical import MAX_SAFE_INTEGER, strict_decode

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
    value: Any, ascii_only: bool, indent: int | None, spaced: bool, escaped_slashes: bool
) -> None:
    doc = json.dumps(value, ensure_ascii=ascii_only, indent=indent, separators=(", ", ": ") if spaced else (",", ":"))
    if escaped_slashes:
        doc = doc.replace("/", "\\/")  # "/" occurs only inside strings, where "\/" means the same
    data = doc.encode()
    assert typed(msgspec.json.decode(data)) == typed(strict_decode(data)) == typed(value)


@given(lines, st.booleans(), st.integers(8, 64))
def test_regions_are_whole_lines_that_cover_the_bytes_and_depend_on_them_alone(
    parts: list[bytes], final_newline: bool, region: int
) -> None:
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
    assert [(b.pith_number, len(b.events), b.size) for _, b in second if b] == [
        (json.loads(line)["pith_number"], c.events, c.size) for line, (_, c) in zip(lines, first)
    ]


@given(
    st.lists(
        st.binary(max_size=30).map(lambda b: b.replace(b"\n", b""))
        | st.just(b"")
        | st.just(b"\r")
        | st.integers(20, 120).map(lambda n: b"x" * n),
        max_size=25,
    ),
    st.booleans(),
    st.integers(8, 48),
    st.integers(10, 90),
    st.integers(1, 9),
)
def test_the_writer_finds_the_cuts_the_reading_of_every_byte_makes(
    parts: list[bytes], final_newline: bool, region: int, limit: int, step: int
) -> None:
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

FIRSTS = [
    DOC,
    b'{"a":1,"a":2}',
    b"",
    b"  ",
    PRETTY,
    b"1",
    b'"x"',
    b"{}\x0c",
    b"\xff",
    b"\xef\xbb\xbf{}",
    b"[1.5]",
    b"{",
]

RESTS = [
    b"",
    b"\n",
    b"\r\n",
    b"\n\x0c\x0b \n",
    b"\n{}\n",
    b"\nzz",
    b"\n\xff\n",
    b"\r" + DOC,
    b"\n" + PRETTY,
    b"\n\n\n" + DOC,
]


@given(st.sampled_from(FIRSTS), st.lists(st.sampled_from(RESTS), max_size=3))
def test_a_file_is_found_to_be_json_lines_or_one_document_as_when_it_was_read_whole(
    first: bytes, rest: list[bytes]
) -> None:
    """_open finds JSON lines from the first line when it can: the same outcome as reading the file whole
    and decoding it as one document first (what it did before)."""
    from pithledger.errors import PithledgerError, TrailingData
    from pithledger.ingest.inputs import lines_framed, located

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


# Issue #20 §4/§6 (hardening), as a user meets it.
def test_checking_a_single_big_file_moves_by_bytes(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from pithledger.cli._progress import ApplyProgress
    from pithledger.ingest.inputs import Input

    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * 30_000_000)
    out = io.StringIO()
    with ApplyProgress(True, console=Console(file=out, width=80, force_terminal=True, color_system=None)) as progress:
        progress.checking([Input(str(big), "big.jsonl")])
        progress.checked(12_000_000)  # what check_bundles yields as a region's documents are checked
    lines = _lines(out.getvalue())
    assert any("12.0 MB/30.0 MB" in x for x in lines), lines
    assert all(len(x) < 80 for x in lines)
