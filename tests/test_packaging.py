"""The installed package says the version pyproject.toml declares."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pithledger


def test_version_literal_matches_the_project_and_the_installed_metadata() -> None:
    declared = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["version"]
    assert pithledger.__version__ == declared == version("pithledger")
