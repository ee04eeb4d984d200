"""The declared Python API (ledger/__init__.py, issue #32 item 3): README's example runs, each entry point
gives what the command it names gives for the same inputs (state bytes, exports, counts, verdicts), the
import stays cheap, and the reference built from the docstrings documents every declared name."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pithledger
from pithledger.errors import PithledgerError

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "bundles"
IDS = ["2502.21231", "2605.00424", "FZ7AO632", "1709.09021"]


def readme_example() -> str:
    """README's first ```python block (the "Python" section's complete example)."""
    found = re.search(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert found, "README.md has no ```python block"
    return found.group(1)


def test_readme_example_runs_from_the_repo_root() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", readme_example()], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "records touched" in proc.stdout and "'pith_receipt': True" in proc.stdout and "['valid']" in proc.stdout


def test_a_broken_readme_example_is_seen() -> None:
    """The check above fails when the example does (a check that cannot fail proves nothing)."""
    broken = readme_example().replace("state_document", "no_such_entry_point")
    proc = subprocess.run([sys.executable, "-c", broken], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "no_such_entry_point" in proc.stderr


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]:
    """The example bundles applied by the command line (``cli``) and by the API (``api``)."""
    root = tmp_path_factory.mktemp("api")
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(root / "cli"), "apply", str(BUNDLES), "--json"],
        capture_output=True,
        check=True,
        timeout=300,
    )
    report = pithledger.apply(root / "api", BUNDLES)
    return root / "cli", root / "api", json.loads(proc.stdout), report


def _cli(ledger: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), *args], capture_output=True, timeout=120
    )


def test_apply_counts_equal_the_cli(ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]) -> None:
    _, _, doc, report = ledgers
    assert report.summary() == {k: doc[k] for k in report.summary()}
    assert report.records_touched == doc["records_touched"] and report.ok
    assert [r.copy_sha256 for r in report.rejected] == [r["copy_sha256"] for r in doc["rejected"]]


def test_state_and_export_equal_the_cli(ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]) -> None:
    cli_ledger, api_ledger, _, _ = ledgers
    for ident in IDS:
        assert pithledger.state(api_ledger, ident) + b"\n" == _cli(cli_ledger, "state", ident).stdout
        assert pithledger.export(api_ledger, ident) == _cli(cli_ledger, "export", ident).stdout
        number = pithledger.resolve(api_ledger, ident)
        assert pithledger.state_document(api_ledger, ident)["pith_number"] == number
    expected = pithledger.state(api_ledger, IDS[0])
    with pithledger.open_ledger(api_ledger, readonly=True) as ledger:  # an open handle is used, and left open
        assert pithledger.state(ledger, IDS[0]) == expected
        assert ledger.counts()["events"] > 0


def test_digest_equals_the_cli(ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]) -> None:
    path = ledgers[0]
    got = pithledger.digest(path)
    assert json.loads(_cli(path, "digest", "--json").stdout) == {
        "events_root": got.events_root,
        "states_root": got.states_root,
        "records": got.records,
        "events": got.events,
        "digest_version": "pithledger-digest-v1",
    }
    assert got.records > 0 and got.events > 0 and len(got.events_root) == 64
    with pithledger.open_ledger(path, readonly=True) as ledger:
        assert pithledger.digest(ledger) == got  # an open ledger, read as it is


def test_errors_are_the_named_ones(
    ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport], tmp_path: Path
) -> None:
    _, api_ledger, _, _ = ledgers
    with pytest.raises(pithledger.errors.MalformedId):
        pithledger.state(api_ledger, "hello")
    with pytest.raises(pithledger.errors.NoLedger):
        pithledger.state(tmp_path / "nowhere", IDS[0])
    assert issubclass(pithledger.errors.MalformedId, pithledger.PithledgerError)


def test_verify_bundle_equals_the_cli(ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]) -> None:
    cli_ledger, _, _, _ = ledgers
    for path in sorted(BUNDLES.glob("*.json")):
        lines = [json.loads(line) for line in _cli(cli_ledger, "verify", str(path), "--json").stdout.splitlines()]
        verdicts = pithledger.verify_bundle(path.read_bytes())
        assert [(v.status, v.event_id, v.reason) for v in verdicts] == [
            (r["status"], r["event_id"], r["reason"]) for r in lines
        ]
        assert [v.status for v in pithledger.verify_bundle(json.loads(path.read_bytes()))] == [
            v.status for v in verdicts
        ]
    with pytest.raises(PithledgerError):
        pithledger.verify_bundle(b'{"a": 1, "a": 2}')  # strict decoding: a duplicate key is refused


def test_audit_mirrors_of_equal_ledgers(ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport]) -> None:
    cli_ledger, api_ledger, _, _ = ledgers
    assert pithledger.audit_mirrors(cli_ledger, api_ledger).consistent
    importlib.import_module("pithledger.audit")  # the internal module of that name replaces no entry point
    assert callable(pithledger.audit_mirrors)


def test_apply_again_and_apply_bytes_count_duplicates(
    ledgers: tuple[Path, Path, dict[str, Any], pithledger.ApplyReport],
) -> None:
    _, api_ledger, _, first = ledgers
    again = pithledger.apply(api_ledger, BUNDLES, workers=0)
    assert (again.new, again.duplicate) == (0, first.new)
    data = (BUNDLES / "demo-1709.09021.json").read_bytes()
    once = pithledger.apply_bytes(api_ledger, data)
    assert once.new == 0 and once.duplicate == len(pithledger.verify_bundle(data))


def test_apply_refuses_before_writing_or_skips_with_keep_going(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"bundle_type": ')
    with pytest.raises(PithledgerError):
        pithledger.apply(tmp_path / "L", BUNDLES / "demo-1709.09021.json", bad)
    assert not (tmp_path / "L").exists()  # nothing written: the fault was found in pass 1
    seen: list[str] = []
    report = pithledger.apply(
        tmp_path / "L",
        BUNDLES / "demo-1709.09021.json",
        bad,
        keep_going=True,
        on_skip=lambda exc, where: seen.append(exc.code),
    )
    assert report.new > 0 and not report.ok and [w for w, _ in report.skipped] == [str(bad)] and len(seen) == 1


def test_every_declared_name_is_documented_and_loaded_lazily() -> None:
    for name in pithledger.__all__:
        value = getattr(pithledger, name)
        assert name == "__version__" or (value.__doc__ or "").strip(), f"{name} has no docstring"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pithledger; print(sorted(m for m in sys.modules if m.startswith('pithledger')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "['pithledger']"  # `pithledger state` imports the package: it must stay cheap


@pytest.mark.skipif(importlib.util.find_spec("pdoc") is None, reason="pdoc is in the test extra")
def test_the_api_reference_documents_every_declared_name(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pdoc", "-o", str(tmp_path), "pithledger"], check=True, capture_output=True, timeout=300
    )
    page = (tmp_path / "pithledger.html").read_text()
    missing = [
        name
        for name in pithledger.__all__  # a name is an anchor of the package's page, a module its own page
        if f'id="{name}"' not in page and not (tmp_path / "pithledger" / f"{name}.html").is_file()
    ]
    assert not missing, f"no anchor in the API reference for {missing}"
