"""pithledger: a mirror-side ledger for Pith records.

The library is pure where it can be: ``canonical``, ``ids``, ``model``, ``mint`` and the
verification in ``keys`` take values or bytes and do no IO.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pithledger")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
