"""The fixtures this area's tests share, from the kits that define them (tests/helpers): a fixture
named here reaches every test file of the folder without an import of its own."""

from __future__ import annotations

from helpers.hostile_sources import published
from helpers.pull import truth

__all__ = ["truth", "published"]
