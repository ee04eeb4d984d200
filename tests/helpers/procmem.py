"""A process tree's memory, from /proc (Linux): shared by the scale tests (helpers/scale.py) and the
benchmarks that sample memory (bench/_measure.py), so both read the same figures the same way."""

from __future__ import annotations

import os
import re


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process it started, by /proc's children lists, ``pid`` first."""
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return seen


def rss_kib(pid: int) -> tuple[int, int] | None:
    """(RssAnon, RssFile) of ``pid`` in KiB; None once it is gone (or has no such lines)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            status = fh.read()
    except OSError:
        return None
    got = [re.search(k + r":\s+(\d+)", status) for k in ("RssAnon", "RssFile")]
    return (int(got[0][1]), int(got[1][1])) if got[0] and got[1] else None
