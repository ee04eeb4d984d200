"""What an action body may cost (issue #31 item 2, spec/serve.md §8): a body's values are bounded before it is
decoded, so one client cannot hold the event loop (and every reader) for a third of a second per request
with a megabyte of empty arrays. A real server on 127.0.0.1, real signed events.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/web/test_action_cost.py."""

from __future__ import annotations

import pytest

from pithledger.web.actions import too_structured


@pytest.mark.parametrize(
    ("body", "limit", "over"),
    [
        (b"[1,2,3]", 2, True),
        (b'["1,2,3"]', 2, False),
        (b'["\\",1,2"]', 1, False),  # an escaped quote does not end the string
        (b'["\\\\",1,2]', 1, True),  # an escaped backslash does not escape the quote after it
        (b'"' + b'\\",' * 1000, 1, False),  # unterminated: one string to the end, not a comma in sight
        (b'{"a,":"b,","c":[],"d":{}}', 5, False),
        (b'{"a,":"b,","c":[],"d":{}}', 4, True),
    ],
)
def test_structure_is_counted_outside_strings(body: bytes, limit: int, over: bool) -> None:
    assert too_structured(body, limit) is over
