"""What the benchmarks share: running a command under /usr/bin/time and sampling its memory."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

GNU_TIME = "/usr/bin/time" if Path("/usr/bin/time").is_file() else None

# the /proc readers the scale tests use too (tests/helpers/procmem.py): one way to read a tree's memory
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.procmem import process_tree, rss_kib  # noqa: E402

__all__ = ["GNU_TIME", "Measured", "measure", "process_tree", "rss_kib"]


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
            got = rss_kib(int(target)) if target is not None else None
            if got is not None:
                peaks["RssAnon"], peaks["RssFile"] = (
                    max(peaks.get("RssAnon", 0), got[0]),
                    max(peaks.get("RssFile", 0), got[1]),
                )
        except (OSError, IndexError):
            pass
        done.wait(0.02)


class Measured(NamedTuple):
    rc: int  # -9 when it ran past the timeout and was killed
    wall: float  # seconds, interpreter start-up included
    out: str
    err: str
    rss_mb: float | None  # peak RSS from /usr/bin/time -v (else a running max over all children)
    anon_mb: float | None  # peak RssAnon, sampled
    file_mb: float | None  # peak RssFile (pages of the LMDB map), sampled


def measure(cmd: list[str], tmp: Path, timeout: float) -> Measured:
    """Run ``cmd``, timing it and measuring its peak memory (``tmp`` holds /usr/bin/time's report)."""
    stats = tmp / ".time-v"
    full = [GNU_TIME, "-v", "-o", str(stats), *cmd] if GNU_TIME else cmd
    peaks: dict[str, int] = {}
    done = threading.Event()
    t = time.perf_counter()
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = threading.Thread(target=_sample, args=(p.pid, peaks, done), daemon=True)
    sampler.start()
    try:
        bout, berr = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        bout, berr = p.communicate()
        rc, berr = -9, f"TIMEOUT after {timeout} s\n".encode() + berr
    wall = time.perf_counter() - t
    done.set()
    sampler.join()
    rss = None
    if GNU_TIME and stats.exists():
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stats.read_text())
        rss = int(m[1]) / 1024 if m else None
        stats.unlink()
    elif not GNU_TIME:
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return Measured(
        rc,
        wall,
        bout.decode(errors="replace"),
        berr.decode(errors="replace"),
        rss,
        peaks["RssAnon"] / 1024 if "RssAnon" in peaks else None,
        peaks["RssFile"] / 1024 if "RssFile" in peaks else None,
    )
