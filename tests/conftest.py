"""Fixtures and hypothesis profiles for every test; the shared kits are in tests/helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from helpers.common import Result

# pytester: tests/unit/test_lanes.py runs the lane contract on a throwaway test file.
pytest_plugins = ("pytester",)


# Property depth: "ci" keeps the suite quick; "deep" is for a long run by hand:
#   HYPOTHESIS_PROFILE=deep pytest tests
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    # Under CI=true a skip not on tests/ci_allowed_skips.txt fails the run (the controller judges: xdist
    # workers send it their reports).
    if os.environ.get("CI") == "true" and not hasattr(config, "workerinput"):
        from helpers.ci_skips import CISkipGuard

        config.pluginmanager.register(CISkipGuard(), "pithledger-ci-skip-guard")


@pytest.fixture(autouse=True)
def _verifier_caches_do_not_outlive_a_test() -> Iterator[None]:
    """The verifier remembers signer checks (records/events.py's lru_caches), which read the registry keys: a test
    that puts a stand-in in place of Pith's key (the vectors, the oracle's streams) left results that made a later
    test in the same process judge a stand-in-signed event valid (the oracle's whole-pool test, after
    test_merge_vectors.py on one xdist worker). Production never changes the registry; tests start clean."""
    from pithledger.records import events

    events._signer_key_of.cache_clear()
    events._self_signed_key.cache_clear()
    yield
    events._signer_key_of.cache_clear()
    events._self_signed_key.cache_clear()


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the real ``pithledger`` entry point in a subprocess, isolated from the user's files."""
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    env.pop("PITHLEDGER_KEYS", None)

    def run(*args: str, input: bytes | None = None, cwd: Path | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", *args],
            input=input,
            capture_output=True,
            env=env,
            cwd=cwd or tmp_path,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run
