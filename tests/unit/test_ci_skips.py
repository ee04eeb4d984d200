"""The CI skip guard (tests/helpers/ci_skips.py): under CI=true a skip fails the run unless the allow-list
names it with a reason; a listed skip and a run without skips pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.ci_skips import ALLOWED, allowed_patterns, unlisted

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is not installed")

@pytest.mark.skipif(True, reason="marked away")
def test_marked():
    pass

def test_runs():
    assert 1 + 1 == 2
"""


def _run(pytester: pytest.Pytester, allowed: str) -> pytest.RunResult:
    (pytester.path / "allowed.txt").write_text(allowed)
    pytester.makeconftest(
        "from pathlib import Path\nfrom helpers.ci_skips import CISkipGuard\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(CISkipGuard(Path(__file__).with_name('allowed.txt')), 'guard')\n"
    )
    pytester.makepyfile(test_tools=SKIPPING)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider")


def test_an_unlisted_skip_fails_the_run_and_is_named(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "test_tools.py::test_marked  # a listed one\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*not on tests/ci_allowed_skips.txt*", "*test_needs_a_tool: *the tool is not installed"]
    )
    assert "test_marked:" not in result.stdout.str()


def test_listed_skips_pass(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "test_tools.py::test_needs_*  # the tool is optional\ntest_tools.py::test_marked  # too\n")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=2)


def test_an_allowed_skip_must_say_why() -> None:
    with pytest.raises(ValueError, match="line 2: no reason"):
        allowed_patterns("# comment\ntests/e2e/test_x.py::test_y\n")
    assert unlisted([("a::b", "why"), ("c::d", "why")], ["a::*"]) == [("c::d", "why")]


def test_the_projects_allow_list_reads() -> None:
    # Every line of the real list has a reason (the guard would refuse to start otherwise).
    assert isinstance(allowed_patterns(Path(ALLOWED).read_text()), list)
