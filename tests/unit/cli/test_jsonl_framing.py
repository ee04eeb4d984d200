"""The JSON-lines framing as spec/bundle.md §2 writes it, statement by statement: what `apply`, `verify` and `sync`
read of a file (ledger/ingest/bundles.py). Each case is a file's bytes and what checking them yields: the place
(`in` for the whole file, `in:N` for line N) and `ok` or the error code."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli_apply_reading import FIFTY
from pithledger.errors import PithledgerError
from pithledger.ingest import bundles as _bundles
from pithledger.ingest.inputs import Input

A, B, C = FIFTY.read_bytes().splitlines()[:3]
BOM = b"\xef\xbb\xbf"
FLOAT = b'{"bundle_type": 1.5}'  # a fault that is not trailing data


def read(tmp_path: Path, data: bytes) -> list[tuple[str, str]]:
    f = tmp_path / "in.jsonl"
    f.write_bytes(data)
    found = _bundles.check_bundles([Input(str(f), "in")], _bundles.Plan())
    return [(where, r.code if isinstance(r, PithledgerError) else "ok") for where, r in found]


CASES = {
    "line-ends-mixed-lf-crlf-lone-cr": (
        A + b"\n" + B + b"\r\n" + C + b"\r",
        [("in:1", "ok"), ("in:2", "ok"), ("in:3", "ok")],
    ),
    "last-line-without-a-line-end": (A + b"\n" + B, [("in:1", "ok"), ("in:2", "ok")]),
    "blank-lines-of-space-tab-vt-ff-are-skipped-and-counted": (
        A + b"\n \t\x0b\x0c\n\n" + B + b"\n\n",
        [("in:1", "ok"), ("in:4", "ok")],
    ),
    "json-white-space-around-a-document": (b" \t" + A + b"\t \n" + B + b"\n", [("in:1", "ok"), ("in:2", "ok")]),
    "u2028-is-no-line-end": (
        A + "\u2028".encode() + B + b"\n" + C + b"\n",
        [("in:1", "trailing-data"), ("in:2", "ok")],
    ),
    "nel-is-no-line-end": (A + "\u0085".encode() + B + b"\n" + C + b"\n", [("in:1", "trailing-data"), ("in:2", "ok")]),
    "form-feed-is-no-line-end": (A + b"\x0c" + B + b"\n" + C + b"\n", [("in:1", "trailing-data"), ("in:2", "ok")]),
    "bom-at-the-start-refuses-the-whole-file": (BOM + A + b"\n" + B + b"\n", [("in", "invalid-utf8")]),
    "bom-on-a-later-line-is-that-lines-fault": (
        A + b"\n" + BOM + B + b"\n" + C + b"\n",
        [("in:1", "ok"), ("in:2", "invalid-utf8"), ("in:3", "ok")],
    ),
    "empty-file": (b"", [("in", "malformed-json")]),
    "white-space-only-file": (b" \n\n", [("in", "malformed-json")]),
    "faulty-first-line-is-that-lines-fault": (
        FLOAT + b"\n" + B + b"\n",
        [("in:1", "float-not-allowed"), ("in:2", "ok")],
    ),
    "blank-first-line-then-a-faulty-document-refuses-the-whole-file": (
        b"\n" + FLOAT + b"\n" + B + b"\n",
        [("in", "float-not-allowed")],
    ),
    "blank-first-line-then-sound-documents": (b"\n" + A + b"\n" + B + b"\n", [("in:2", "ok"), ("in:3", "ok")]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_json_lines_framing_reads_as_spec_bundle_2_writes(name: str, tmp_path: Path) -> None:
    data, expected = CASES[name]
    assert read(tmp_path, data) == expected
