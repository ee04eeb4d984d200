"""In this folder the ``cli`` fixture runs the real entry point, ``pithledger.cli.main``, in this process
(click's CliRunner isolation: stdin, stdout, stderr, environment), for the tests of help and usage text,
which need no process of their own. tests/conftest.py's ``cli`` runs it in a subprocess."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.common import Result


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.chdir(tmp_path)
    # What the subprocess fixture gives: its own XDG directories, no ledger or key directory from the
    # caller, and the width of a pipe (help wraps at the terminal's width).
    env: dict[str, str | None] = {
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "PITHLEDGER_LEDGER": None,
        "PITHLEDGER_KEYS": None,
        "COLUMNS": "80",
    }

    def run(*args: str, input: bytes | None = None) -> Result:
        from pithledger.cli import main

        with CliRunner().isolation(input=input, env=env) as (out, err, _):
            monkeypatch.setattr(sys, "argv", ["pithledger", *args])
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            return Result(code, out.getvalue().decode(), err.getvalue().decode())

    return run
