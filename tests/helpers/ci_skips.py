"""Under CI=true a skipped test fails the run unless tests/ci_allowed_skips.txt lists it (issue #42).

A test that skips because its tool is missing proves nothing, and a green run hides it: CI installs what
every test needs (.ci/run), so a skip there is either written down with its reason or a failure. The guard
runs on the controller only (pytest-xdist replays its workers' reports there) and names each unlisted skip
with its reason in the summary.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

ALLOWED = Path(__file__).resolve().parent.parent / "ci_allowed_skips.txt"


def allowed_patterns(text: str) -> list[str]:
    """The node-id patterns of an allow-list: one a line, the reason after ``  #``; blank lines and comment
    lines skipped. A pattern without a reason is refused, so every allowed skip says why."""
    patterns = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = line.partition("  #")
        if not sep or not reason.strip():
            raise ValueError(f"ci_allowed_skips.txt line {number}: no reason given ('PATTERN  # why CI may skip it')")
        patterns.append(pattern.strip())
    return patterns


def unlisted(skips: list[tuple[str, str]], patterns: list[str]) -> list[tuple[str, str]]:
    return [(node, why) for node, why in skips if not any(fnmatch.fnmatchcase(node, p) for p in patterns)]


class CISkipGuard:
    def __init__(self, allowed: Path = ALLOWED) -> None:
        self.patterns = allowed_patterns(allowed.read_text()) if allowed.exists() else []
        self.skips: list[tuple[str, str]] = []
        self.refused: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            longrepr = report.longrepr
            why = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
            self.skips.append((report.nodeid, why))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.refused = unlisted(self.skips, self.patterns)
        if self.refused and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.refused:
            return
        terminalreporter.section("skipped under CI=true, not on tests/ci_allowed_skips.txt", red=True)
        for node, why in self.refused:
            terminalreporter.line(f"{node}: {why}")
        terminalreporter.line("install what the test needs in .ci/run, or list it with its reason")
