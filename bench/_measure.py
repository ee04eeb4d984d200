"""What the benchmarks share: sampling a measured process's memory from /proc."""

from __future__ import annotations

import re
import threading
from pathlib import Path

GNU_TIME = "/usr/bin/time" if Path("/usr/bin/time").is_file() else None


def _sample(pid: int, peaks: dict[str, int], done: threading.Event) -> None:
    """Peak RssAnon / RssFile (kB) of the measured process (the child of /usr/bin/time), from /proc every
    20 ms: anonymous memory (Python heap, LMDB dirty pages) against pages of the LMDB map, which also count
    in the peak RSS /usr/bin/time reports."""
    target = None
    while not done.is_set():
        try:
            if target is None:
                kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split() if GNU_TIME else [str(pid)]
                target = kids[0] if kids else None
            if target is not None:
                status = Path(f"/proc/{target}/status").read_text()
                for k in ("RssAnon", "RssFile"):
                    m = re.search(k + r":\s+(\d+)", status)
                    if m:
                        peaks[k] = max(peaks.get(k, 0), int(m[1]))
        except (OSError, IndexError):
            pass
        done.wait(0.02)
