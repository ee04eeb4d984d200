"""The e2e lane: every test here starts real processes or servers; it carries the ``e2e`` marker
(declared in pyproject.toml), so ``pytest -m 'not e2e'`` runs the in-process lane alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.fanout import local  # the fanout tests' fixture (test_fanout.py of this folder)

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Called with the whole session's items, whichever conftest holds it: mark only this folder's.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


__all__ = ["local"]
