"""The conformance vectors in spec/vectors/merge/: events in, verdicts and state bytes out.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/merge/test_merge_vectors.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.common import ROOT
from helpers.merge_vectors import FILES, VECTORS


def test_vectors_regenerate_byte_for_byte(tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in FILES}
    script = VECTORS / "make_vectors.py"
    copy = tmp_path / "merge"
    copy.mkdir()
    (copy / "make_vectors.py").write_bytes(script.read_bytes())
    # run the generator against a copy, so the repository's files are never touched by a test
    src = script.read_text().replace('HERE.parent.parent.parent / "tests"', f'Path({str(ROOT)!r}) / "tests"')
    (copy / "make_vectors.py").write_text(src)
    subprocess.run([sys.executable, str(copy / "make_vectors.py")], check=True, capture_output=True, timeout=120)
    assert {p.name: p.read_bytes() for p in copy.glob("*.json")} == before
