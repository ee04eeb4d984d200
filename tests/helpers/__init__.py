"""Kits the tests share: the real Pith vectors, event pools, servers on loopback, transparency-log
builders. Imported as ``helpers.<kit>`` (pyproject's pytest options put tests/ on sys.path); the
fixtures and hooks stay in the conftest.py files."""
