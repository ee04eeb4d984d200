"""The installed package says the version pyproject.toml declares."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import pithledger
from helpers.common import ROOT


def test_version_literal_matches_the_project_and_the_installed_metadata() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert pithledger.__version__ == declared == version("pithledger")
