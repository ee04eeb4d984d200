"""The lanes' contract (tests/unit/conftest.py): a test of the in-process lane that starts a process or a
server fails, naming the lane it belongs to, even when it catches the error; an in-process test passes."""

from __future__ import annotations

from pathlib import Path

import pytest

GUARD = (Path(__file__).parent / "conftest.py").read_text()


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ("import subprocess, sys\n    subprocess.run([sys.executable, '-c', 'pass'])", "started a process"),
        (
            "import socket\n    with socket.socket() as s:\n        s.bind(('127.0.0.1', 0))\n        s.listen()",
            "started a server",
        ),
        (
            "import subprocess\n    try:\n        subprocess.run(['true'])\n    except BaseException:\n        pass",
            "started a process",
        ),
    ],
    ids=["process", "server", "process-caught"],
)
def test_a_unit_test_starting_a_process_or_a_server_fails(pytester: pytest.Pytester, body: str, what: str) -> None:
    pytester.makeconftest(GUARD)
    pytester.makepyfile(f"def test_it():\n    {body}\n\ndef test_in_process():\n    assert sum([1, 2]) == 3\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    if "except" in body:  # caught: the test passes, its teardown fails
        result.assert_outcomes(passed=2, errors=1)
    else:
        result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines([f"*in-process lane (tests/unit) {what}*move this test to tests/e2e*"])
