"""The per-module floors of branch coverage of the consensus modules (tests/README.md), checked against the data a
``pytest --cov=pithledger.records --cov=pithledger.merge --cov=pithledger.audit --cov-branch`` run left in
``.coverage``. Files are matched by the end of their path, so the package may be imported from the repository (an
editable install) or from site-packages (CI). Exit 1, naming each module under its floor."""

from __future__ import annotations

import io
import sys

import coverage

#: module (end of its path) -> the least branch coverage it may have, in percent: a little under what the in-process
#: consensus tests reach (tests/README.md has the figures)
FLOORS = {
    "records/events.py": 98.0,
    "records/bitcoin.py": 96.0,
    "records/ots.py": 92.0,
    "records/canonical.py": 98.0,
    "records/bundle.py": 96.0,
    "records/ids.py": 98.0,
    "records/fast.py": 94.0,  # the fast path decides validity too (spec/adr/0020): tests/unit/store/test_fast_path.py
    "/merge.py": 98.0,
    "/audit.py": 97.0,
}


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    measured = cov.get_data().measured_files()
    failed = []
    for end, floor in FLOORS.items():
        files = [f for f in measured if f.replace("\\", "/").endswith(end)]
        if len(files) != 1:
            print(f"coverage floor: {end}: {len(files)} measured files end so (expected 1)")
            failed.append(end)
            continue
        percent = cov.report(include=files, file=io.StringIO())
        print(f"coverage floor: {end}: {percent:.1f}% (floor {floor}%)")
        if percent < floor:
            failed.append(end)
    if failed:
        print(f"coverage floor: under the floor: {', '.join(failed)} (tests/README.md)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
