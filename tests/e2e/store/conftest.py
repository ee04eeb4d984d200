"""The fixtures this area's tests share, from the kits that define them (tests/helpers): a fixture
named here reaches every test file of the folder without an import of its own."""

from __future__ import annotations

from helpers.fsck_fold import full_after_later, sound

__all__ = ["full_after_later", "sound"]
