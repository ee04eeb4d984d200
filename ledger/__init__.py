"""pithledger: a mirror-side ledger for Pith records.

The library is pure where it can be: ``canonical``, ``ids``, ``model``, ``mint`` and the
verification in ``keys`` take values or bytes and do no IO.
"""

#: Kept equal to pyproject.toml's version by tests/test_packaging.py; a literal, because asking
#: importlib.metadata costs ~40 ms on every command's start.
__version__ = "0.2.0"
