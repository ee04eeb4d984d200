"""Size of a published static tree per record, by file kind, through the real CLI (issue #33 item 6; not run in CI).

    .venv/bin/python bench/bench_tree_size.py [N] [--tree DIR] [--keep]

Default N = 2 000. Builds bench/bench_suite.py's papers workload (N papers x 20 events: a record_created,
storage, author, 8 citations of other papers, replications, findings), ``apply``s it into an empty ledger
and ``publish --key`` s it into a new directory (the transparency log too), then measures the tree:
names (paths), inodes (files and directories, a hard-linked file once: ``find -xdev | wc -l`` less the
extra links), apparent bytes and bytes on disk (``du -sk --apparent-size`` / ``du -sk``, which count a
linked file once), each per record and broken down by kind (the path with its suffix, year, short form
and node tag replaced by placeholders). ``--tree DIR``: measure an existing tree instead, N its records.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PITHLEDGER = str(Path(sys.executable).parent / "pithledger")

_KIND = [
    (re.compile(r"[A-Z2-7]{26}"), "<suffix>"),
    (re.compile(r"^paper/[A-Z2-7]{8}"), "paper/<short8>"),
    (re.compile(r"/records/\d{4}/"), "/records/<year>/"),
    (re.compile(r"^pithledger/nodes/.*"), "pithledger/nodes/<node>"),
    (re.compile(r"^tile/.*"), "tile/<tile>"),
    (re.compile(r"bundle-\d+\.json$"), "bundle-<n>.json"),
]


def kind(rel: str) -> str:
    for rx, sub in _KIND:
        rel = rx.sub(sub, rel)
    return rel


def measure(tree: Path) -> dict[str, dict[str, int]]:
    """Per kind: names, inodes, apparent bytes, disk bytes (a linked inode counted at its first path, sorted)."""
    seen: set[int] = set()
    out: dict[str, dict[str, int]] = {}
    paths: list[tuple[str, bool]] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        rel_dir = os.path.relpath(dirpath, tree)
        for d in dirnames:
            paths.append((os.path.normpath(os.path.join(rel_dir, d)), True))
        for f in filenames:
            paths.append((os.path.normpath(os.path.join(rel_dir, f)), False))
    for rel, is_dir in sorted(paths):
        st = os.lstat(tree / rel)
        row = out.setdefault(kind(rel) + ("/" if is_dir else ""), {"names": 0, "inodes": 0, "bytes": 0, "disk": 0})
        row["names"] += 1
        if st.st_ino in seen:
            continue
        seen.add(st.st_ino)
        row["inodes"] += 1
        row["bytes"] += st.st_size
        row["disk"] += st.st_blocks * 512
    return out


def du(tree: Path, *extra: str) -> int:
    return int(
        subprocess.run(["du", "-sk", *extra, str(tree)], capture_output=True, text=True, check=True).stdout.split()[0]
    )


def report(tree: Path, n: int) -> None:
    rows = measure(tree)
    find = len(
        subprocess.run(["find", str(tree), "-xdev"], capture_output=True, text=True, check=True).stdout.splitlines()
    )
    total = {k: sum(r[k] for r in rows.values()) for k in ("names", "inodes", "bytes", "disk")}
    print(
        f"tree {tree}: {n:,} records; find -xdev {find:,} paths, {total['inodes'] + 1:,} inodes (hard links once, root incl.); "
        f"du -sk {du(tree):,} KiB, du -sk --apparent-size {du(tree, '--apparent-size'):,} KiB"
    )
    print(
        f"per record: {total['names'] / n:.2f} names, {total['inodes'] / n:.2f} inodes, "
        f"{total['bytes'] / n / 1024:.1f} KiB apparent, {total['disk'] / n / 1024:.1f} KiB on disk\n"
    )
    print("| kind | names/rec | inodes/rec | apparent B/rec | disk B/rec |\n|---|---:|---:|---:|---:|")
    for k, r in sorted(rows.items(), key=lambda kv: -kv[1]["disk"]):
        print(
            f"| `{k}` | {r['names'] / n:.2f} | {r['inodes'] / n:.2f} | {r['bytes'] / n:,.0f} | {r['disk'] / n:,.0f} |"
        )
    print(
        f"| **total** | {total['names'] / n:.2f} | {total['inodes'] / n:.2f} | {total['bytes'] / n:,.0f} | {total['disk'] / n:,.0f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2000)
    ap.add_argument("--tree", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.tree is not None:
        report(args.tree, args.n)
        return
    from bench_suite import papers_workload

    tmp = Path(tempfile.mkdtemp(prefix="bench-tree-"))
    try:
        t = time.monotonic()
        lines, _ = papers_workload(args.n)
        (tmp / "papers.jsonl").write_bytes(lines)
        print(f"workload: {args.n:,} papers, {len(lines) / 1e6:.1f} MB ({time.monotonic() - t:.1f} s)", flush=True)
        env = dict(os.environ, PITHLEDGER_KEYS=str(tmp / "keys"))
        ledger, tree = str(tmp / "ledger"), tmp / "tree"

        def cli(*a: str) -> None:
            t = time.monotonic()
            subprocess.run([PITHLEDGER, "--ledger", ledger, *a], env=env, check=True, stdout=subprocess.DEVNULL)
            print(f"{a[0]}: {time.monotonic() - t:.1f} s", flush=True)

        cli("keys", "new", "bench")
        cli("apply", str(tmp / "papers.jsonl"), "-q")
        cli("publish", str(tree), "--key", "bench", "-q")
        report(tree, args.n)
        cli(
            "publish", str(tree), "--key", "bench", "-q"
        )  # an unchanged re-publish: what it costs to find nothing to do
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
