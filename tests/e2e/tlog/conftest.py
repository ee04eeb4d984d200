"""The fixtures this area's tests share, from the kits that define them (tests/helpers): a fixture
named here reaches every test file of the folder without an import of its own."""

from __future__ import annotations

from helpers.witness import log_signer, witness

__all__ = ["log_signer", "witness"]
