"""Issue #43 item 1: what a step of new papers costs when their citations name papers the ledger holds,
against the same step citing papers it does not hold, through the CLI.

    .venv/bin/python bench/bench_cited_step.py [--base 1500] [--step 750] [--repeat 2] [--workers N]

A base of ``--base`` papers of the bench_suite workload (20 events each, 8 of them citations among the
base) is applied once into a ledger, which is copied for each measured run. The step is ``--step`` new
papers of the same shape, whose 8 citations name either base papers (``held``: each cited record's state
gains an inbound citation, so finishing has to bring it up to date) or papers of another tag that are
never applied (``absent``: the cited records hold no events, nothing but the `inbound` index changes).
Both steps have the same events, signatures and bytes but for the cited numbers. The figure is the CPU
(user + sys) of `pithledger apply` and every process it starts (resource.getrusage(RUSAGE_CHILDREN)
around the run), the best of ``--repeat`` runs, and the ratio held / absent (issue #43: <= 1.33).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_suite as B  # noqa: E402  (bench/ is on sys.path when run as a script)

PITHLEDGER = str(Path(sys.executable).parent / "pithledger")


def step_lines(base: int, step: int, cited: list[str]) -> bytes:
    """Papers base..base+step-1 of tag "growth", their citations re-made to name records of ``cited``."""
    B.numbers_for("growth", base + step)
    out = []
    for i in range(base, base + step):
        rec, events, kis = B.paper_events("growth", i)
        rng = random.Random(f"cited-step:{i}")
        remade = []
        for e, ki in zip(events, kis, strict=True):
            if e["event_type"] == "citation_signature":
                payload = dict(e["payload"], cited_pith_number=cited[rng.randrange(len(cited))])
                e = B._ev("citation_signature", e["subject_pith_number"], payload, ki, e["created_at"])
            remade.append(e)
        out.append(B.bundle_line(B._NUMBERS["growth"][i], remade, rec))
    return b"".join(out)


def base_lines(base: int) -> bytes:
    B.numbers_for("main", base)
    return b"".join(B.bundle_line(B._NUMBERS["main"][i], *B.paper_events("main", i)[1::-1]) for i in range(base))


def cpu_of(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds of ``cmd`` and its descendants, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def split(papers: int) -> None:
    """Where the inbound update of one record goes (``--split``): its states from a ledger of ``papers``
    papers (in process), each updated with one citation withdrawn; microseconds per record, least of 5."""
    import timeit
    import zlib

    from pithledger.merge import with_inbound
    from pithledger.store import Ledger
    from pithledger.store.views import _derive_part, _entry_decoder

    tmp = Path(tempfile.mkdtemp(prefix="cited-split-"))
    try:
        (tmp / "base.jsonl").write_bytes(base_lines(papers))
        subprocess.run([PITHLEDGER, "--ledger", str(tmp / "L"), "apply", str(tmp / "base.jsonl"), "-q"], check=True)
        with Ledger(tmp / "L", readonly=True) as ledger, ledger._core._begin() as txn:
            inputs = []
            for subject in list(ledger.subjects())[:400]:
                got = ledger._views._gather_inbound(
                    txn, subject, bytes(txn.get(subject.encode(), db=ledger.db[b"state"]))
                )
                if got is not None and len(got.inbound) >= 2:
                    inputs.append(got._replace(inbound=got.inbound[1:], inbound_ids=got.inbound_ids[32:]))
        packed = [i.old_state for i in inputs]
        plain = [zlib.decompress(p) for p in packed]  # type: ignore[arg-type]
        ids = [{"sha256:" + i.inbound_ids[k : k + 32].hex() for k in range(0, len(i.inbound_ids), 32)} for i in inputs]
        raw = [
            {"sha256:" + i.inbound_ids[k * 32 : k * 32 + 32].hex(): e for k, e in enumerate(i.inbound)} for i in inputs
        ]
        made = [
            with_inbound(i.subject, d, s, lambda x, r=r: [_entry_decoder.decode(r[e]).entry() for e in x])[0]
            for i, d, s, r in zip(inputs, plain, ids, raw)
        ]  # type: ignore[index]

        def per(f: object) -> float:
            return min(timeit.repeat(f, number=1, repeat=5)) / len(inputs) * 1e6  # type: ignore[arg-type]

        print(
            f"{len(inputs)} records, state {sum(map(len, plain)) // len(plain)} B (compressed {sum(map(len, packed)) // len(packed)} B)"
        )  # type: ignore[arg-type]
        print(f"  inflate        {per(lambda: [zlib.decompress(p) for p in packed]):7.1f} us")  # type: ignore[arg-type]
        print(
            f"  splice + sha   {per(lambda: [with_inbound(i.subject, d, s, lambda x: []) for i, d, s in zip(inputs, plain, ids)]):7.1f} us (the stored list kept)"
        )
        print(f"  deflate        {per(lambda: [zlib.compress(m, 1) for m in made]):7.1f} us")
        print(f"  update, whole  {per(lambda: _derive_part(inputs)):7.1f} us (views._derive_part: all of the above)")
        with Ledger(tmp / "L", readonly=True) as ledger, ledger._core._begin() as txn:
            full = [ledger._views._gather(txn, i.subject) for i in inputs]
        print(f"  full derivation{per(lambda: _derive_part(full)):7.1f} us (views._derive_part of the whole inputs)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", type=int, default=0, help="only: the update's cost split, on a ledger of N papers")
    ap.add_argument("--base", type=int, default=1500, help="papers (x 20 events) in the ledger before the step")
    ap.add_argument("--step", type=int, default=750, help="papers (x 20 events) in the measured step")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=None, help="apply --workers N (default: apply's own)")
    args = ap.parse_args()
    if args.split:
        split(args.split)
        return
    tmp = Path(tempfile.mkdtemp(prefix="cited-step-"))
    try:
        (tmp / "base.jsonl").write_bytes(base_lines(args.base))
        B.numbers_for("probe", 4 * args.base)
        steps = {
            "held": step_lines(args.base, args.step, B._NUMBERS["main"][: args.base]),
            "absent": step_lines(args.base, args.step, B._NUMBERS["probe"][args.base :]),
        }
        for name, data in steps.items():
            (tmp / f"{name}.jsonl").write_bytes(data)
        workers = ["--workers", str(args.workers)] if args.workers is not None else []
        base = tmp / "L-base"
        subprocess.run(
            [PITHLEDGER, "--ledger", str(base), "apply", str(tmp / "base.jsonl"), "-q", *workers], check=True
        )
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for name in steps:
                led = tmp / f"L-{name}"
                shutil.rmtree(led, ignore_errors=True)
                shutil.copytree(base, led)
                cmd = [PITHLEDGER, "--ledger", str(led), "apply", str(tmp / f"{name}.jsonl"), "-q", *workers]
                got = cpu_of(cmd)
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
        for name, (cpu, wall) in best.items():
            print(f"{name:7s} cpu {cpu:7.2f} s  wall {wall:7.2f} s  ({args.step * 20} events)")
        print(
            f"held/absent CPU: {best['held'][0] / best['absent'][0]:.2f}  (base {args.base} papers, step {args.step})"
        )
    finally:
        if os.environ.get("KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
