"""bench/growth.png from a bench_suite.py result: apply throughput and peak RSS against ledger size.

/tmp/benchv/bin/python bench/plot_growth.py bench/results-full.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _axes(ax: Any, ylabel: str, title: str) -> None:
    ax.set_xscale("log")
    ax.set_xlabel("ledger size (events)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(fontsize=8)


def plot(results: Path, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    R = json.loads(results.read_text())
    g = R["growth"]
    x = [p["ledger_events"] for p in g]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    a1.plot(x, [p["rate"] for p in g], "o-", label="apply (papers shape, increment into this ledger)")
    a1.axhline(
        0.75 * R["raw_verify"]["rate_2t"], color="tab:red", ls="--", label="target: 0.75 x raw verify, 2 threads"
    )
    a1.axhline(R["raw_verify"]["rate_1t"], color="tab:gray", ls=":", label="raw verify, 1 thread")
    _axes(a1, "events / s", "apply throughput")
    a2.plot(x, [p["rss_mb"] for p in g], "o-", label="peak RSS (/usr/bin/time -v)")
    if all("anon_mb" in p for p in g):
        a2.plot(x, [p["anon_mb"] for p in g], "s--", label="peak anonymous (sampled)")
        a2.plot(x, [p["file_mb"] for p in g], "^--", label="peak file-backed, LMDB map (sampled)")
    a2.axhline(300, color="tab:red", ls="--", label="target: 300 MB")
    _axes(a2, "MiB", "memory of that apply")
    for p, xx in zip(g, x):
        a2.annotate(
            f"+{p['increment_events']:,}", (xx, p["rss_mb"]), fontsize=7, textcoords="offset points", xytext=(4, 4)
        )
    m = R["machine"]
    fig.suptitle(
        f"pithledger apply vs ledger size ({R['scale']} scale, {m['date']}, nproc {m['nproc']}, {m['python']})",
        fontsize=10,
    )
    fig.tight_layout()
    out = out or results.parent / "growth.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(plot(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None))
