"""sync against apply, and peak memory of sync / audit / apply on large inputs, through the real CLI
(not run in CI).

    .venv/bin/python bench/bench_sync.py [N] [--records R] [--events E] [--eventless-mb M] [--parts 1,2,3]

Defaults: N=4000, R=2000, E=60, M=400, all three parts. Every timed or measured step is a subprocess
of the installed ``pithledger`` entry point on files (``/usr/bin/time -v`` gives peak RSS; without
it, ``getrusage(RUSAGE_CHILDREN)``, which is only a running maximum over all children). The library
is used in-process only to *generate* inputs: canonical records minted from the real records of
tests/vectors/pith-records.jsonl (source.id and metadata.title_canon_sha256 varied, each accepted by
``record_ids``), events signed by demo keys whose seeds are public strings (as bundles/make_examples.py).

1. Citers of one record: N/8, N/4, N/2 and N citing records (record_created + one citation_signature
   each, all citing ONE real record, which has its own record_created), one bundle per JSON line.
   Times ``apply FILE`` into ledger A, ``publish PUB`` of A, ``sync PUB`` into an empty ledger C;
   prints sync/apply (target <= 3) and checks ``audit A C`` exits 0.
2. Peak RSS against a published tree of >= 200 MB (R records x E events of ~1 KB): ``sync PUB`` into
   an empty ledger, ``audit C PUB``, and ``audit PUB PUB2`` where PUB2 has 3 events more.
3. A JSON-lines file of >= M MB of bundles with ``"events": []`` and a 4 KB unknown top-level field:
   peak RSS of ``apply FILE`` and its batch count (``--json``).

Memory is shown as "peak RSS (peak anonymous a / peak file-backed f)" in MiB: the first from
/usr/bin/time, the split sampled from /proc every 20 ms (LMDB maps its file, so pages of the ledger
that a process touches count in its RSS although the kernel can drop them).

All data lives under one tempfile.mkdtemp() directory, removed at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import GNU_TIME, measure  # noqa: E402  (bench/ is on sys.path when run as a script)

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors" / "pith-records.jsonl"
CMD_TIMEOUT = 1800  # seconds; a step that takes longer is reported as hung


def _cli() -> str:
    for cand in (Path(sys.executable).parent / "pithledger", ROOT / ".venv" / "bin" / "pithledger"):
        if cand.is_file():
            return str(cand)
    found = shutil.which("pithledger")
    if not found:
        sys.exit("no pithledger entry point found (run with the project's venv python)")
    return found


PITHLEDGER = _cli()


def demo_key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"pithledger demo key: {name}".encode()).digest())


MIRROR = demo_key("bench-mirror")
SIGNERS = [demo_key(n) for n in ("bench-alice", "bench-bob", "bench-carol")]
SIGNER_IDS = {k.name: f"{k.name} (DEMO KEY, published seed: not evidence of anything)" for k in [MIRROR, *SIGNERS]}
RELATIONS = ("cites", "extends", "supports", "uses_method")


def ev(kind: str, subject: str, payload: dict[str, Any], key: LocalKey, when: str) -> dict[str, Any]:
    return make_event(kind, subject, payload, key, created_at=when, signer_id=SIGNER_IDS[key.name])


def when(i: int, day: int = 1) -> str:
    return f"2026-06-{day + (i // 86400) % 27:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"


def real_records() -> list[dict[str, Any]]:
    return [json.loads(line)["canonical_record"] for line in VECTORS.read_text().splitlines() if line.strip()]


def mint(base: dict[str, Any], tag: str, i: int) -> dict[str, Any]:
    """A distinct canonical record: a real record with another arXiv number and title digest."""
    rec = json.loads(json.dumps(base))
    yymm = rec["source"]["id"][:4] if re.match(r"[0-9]{4}\.", rec["source"]["id"]) else "2601"
    rec["source"]["id"] = f"{yymm}.{i % 100000:05d}"
    rec["metadata"]["title_canon_sha256"] = hashlib.sha256(f"pithledger bench {tag} {i}".encode()).hexdigest()
    return rec


def record_created(rec: dict[str, Any], i: int) -> tuple[str, dict[str, Any]]:
    rid = record_ids(rec)  # raises if the minted record is not a valid canonical record
    return rid.pith_number, ev(
        "record_created",
        rid.pith_number,
        {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256},
        MIRROR,
        when(i),
    )


def bundle_line(number: str, events: list[dict[str, Any]], rec: dict[str, Any] | None) -> bytes:
    return (
        canonical_bytes(
            write_bundle(
                number, events, canonical_record=rec, aliases_created_at="2026-05-31T00:00:00Z" if rec else None
            )
        )
        + b"\n"
    )


# --- running the CLI ---------------------------------------------------------------------------


class Run(dict):  # rc, wall, rss_mb, anon_mb, file_mb, out, err, cmd
    @property
    def doc(self) -> dict[str, Any] | None:
        try:
            return json.loads(self["out"])
        except (ValueError, TypeError):
            return None


FAILURES: list[str] = []


def run(args: list[str], tmp: Path, *, expect: tuple[int, ...] = (0,)) -> Run:
    cmd = [PITHLEDGER, "-q", *args]
    m = measure(cmd, tmp, CMD_TIMEOUT)
    rc, out, err = m.rc, m.out, m.err
    r = Run(
        rc=rc,
        wall=m.wall,
        rss_mb=m.rss_mb,
        anon_mb=m.anon_mb,
        file_mb=m.file_mb,
        out=out,
        err=err,
        cmd="pithledger " + " ".join(_short(a, tmp) for a in cmd[1:]),
    )
    if rc not in expect:
        msg = f"`{r['cmd']}` exited {rc} (expected {'/'.join(map(str, expect))})\n  stderr: {err.strip()[-3000:] or '(empty)'}"
        if out.strip():
            msg += f"\n  stdout (tail): {out.strip()[-1500:]}"
        FAILURES.append(msg)
        print("  !! " + msg, flush=True)
    return r


def mem(r: Run | None) -> str:
    """peak RSS (peak anonymous / peak file-backed, sampled) in MiB"""
    if r is None:
        return "n/a"
    return f"{fmt(r['rss_mb'], '.0f')} ({fmt(r['anon_mb'], '.0f')}a/{fmt(r['file_mb'], '.0f')}f)"


def _short(arg: str, tmp: Path) -> str:
    return arg.replace(str(tmp) + "/", "")


def code_state() -> str:
    """HEAD, and a digest of the library and CLI sources as they are on disk (other people edit this
    tree: the numbers belong to the code that was there while they were taken)."""
    h = hashlib.sha256()
    for f in sorted([*(ROOT / "ledger").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--short", "--", "ledger", "cli"], capture_output=True, text=True
        ).stdout.split()[1::2]
    except OSError:
        head, dirty = "?", []
    return (
        f"HEAD {head or '?'}"
        + (f" + uncommitted {','.join(dirty)}" if dirty else " (clean ledger/ cli/)")
        + f", sources {h.hexdigest()[:12]}"
    )


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1e6


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "n/a" if x is None else format(x, spec)


# --- part 1: citers of one record ----------------------------------------------------------------


def part1(tmp: Path, n_max: int, rows: list[list[str]], notes: list[str]) -> None:
    sizes = sorted({max(1, n_max // 8), max(1, n_max // 4), max(1, n_max // 2), n_max})
    records = real_records()
    cited_rec = records[0]  # arXiv 2605.00424, real
    t = time.perf_counter()
    cited, cited_ev = record_created(cited_rec, 0)
    head = bundle_line(cited, [cited_ev], cited_rec)
    lines = []
    for i in range(n_max):
        rec = mint(records[1 + i % (len(records) - 1)], "citer", i)
        number, rc_ev = record_created(rec, i)
        cite = ev(
            "citation_signature",
            number,
            {"cited_pith_number": cited, "relation": RELATIONS[i % len(RELATIONS)]},
            SIGNERS[i % len(SIGNERS)],
            when(i, 2),
        )
        lines.append(bundle_line(number, [rc_ev, cite], rec))
    print(f"part 1: generated {n_max:,} citing bundles of {cited} in {time.perf_counter() - t:.1f} s", flush=True)
    print(
        f"{'N':>6} {'events':>7} {'apply s':>8} {'publish s':>9} {'sync s':>8} {'sync/apply':>10} "
        f"{'apply RSS MiB':>16} {'sync RSS MiB':>16} {'batches a/s':>11} {'audit A C':>9}",
        flush=True,
    )
    prev: tuple[int, float, float] | None = None
    for n in sizes:
        d = tmp / f"p1-{n}"
        d.mkdir()
        f = d / "citers.jsonl"
        f.write_bytes(head + b"".join(lines[:n]))
        a = run(["--ledger", str(d / "A"), "apply", str(f), "--json"], tmp)
        p = run(["--ledger", str(d / "A"), "publish", str(d / "PUB"), "--json"], tmp)
        s = run(["--ledger", str(d / "C"), "sync", str(d / "PUB"), "--json"], tmp) if p["rc"] == 0 else None
        au = run(["audit", str(d / "A"), str(d / "C"), "--json"], tmp) if s is not None else None
        ad, sd = a.doc or {}, (s.doc if s else None) or {}
        want = 2 * n + 1
        if ad.get("new") != want:
            notes.append(f"part 1 N={n}: apply reported new={ad.get('new')}, expected {want}")
        if s is not None and sd.get("new") != want:
            notes.append(
                f"part 1 N={n}: sync reported new={sd.get('new')}, expected {want}; "
                f"skipped={len(sd.get('skipped', []))} lying={len(sd.get('lying', []))} invalid={sd.get('invalid')}"
            )
        ratio = s["wall"] / a["wall"] if s else None
        audit_ok = "n/a" if au is None else ("exit 0" if au["rc"] == 0 else f"EXIT {au['rc']}")
        print(
            f"{n:>6} {want:>7} {a['wall']:>8.2f} {p['wall']:>9.2f} {fmt(s and s['wall'], '.2f'):>8} {fmt(ratio, '.2f'):>10} "
            f"{mem(a):>16} {mem(s):>16} "
            f"{str(ad.get('batches')) + '/' + str(sd.get('batches')):>11} {audit_ok:>9}",
            flush=True,
        )
        rows.append(
            [
                f"1 citers N={n}",
                f"apply {a['wall']:.2f} s",
                f"publish {p['wall']:.2f} s",
                f"sync {fmt(s and s['wall'], '.2f')} s",
                f"sync/apply {fmt(ratio, '.2f')}" + ("" if ratio is None else (" ok" if ratio <= 3 else " OVER 3x")),
                f"RSS MiB apply {mem(a)} / sync {mem(s)}",
                f"audit A C {audit_ok}",
            ]
        )
        if prev and s:
            pn, pa, ps = prev
            notes.append(
                f"part 1 growth {pn}->{n} (x{n / pn:.1f}): apply x{a['wall'] / pa:.2f}, sync x{s['wall'] / ps:.2f}"
            )
        if s:
            prev = (n, a["wall"], s["wall"])
        shutil.rmtree(d)


# --- part 2: peak RSS against a >= 200 MB published tree -----------------------------------------


def _pad(i: int, n: int) -> str:
    seed = hashlib.sha256(str(i).encode()).hexdigest()
    return (seed * (n // 64 + 1))[:n]


def part2(tmp: Path, n_records: int, n_events: int, min_mb: float, rows: list[list[str]], notes: list[str]) -> None:
    records = real_records()
    d = tmp / "p2"
    d.mkdir()
    f = d / "big.jsonl"
    t = time.perf_counter()
    sizes = []
    subjects = []
    with f.open("wb") as out:
        for r in range(n_records):
            rec = mint(records[r % len(records)], "big", r)
            number, first = record_created(rec, r)
            subjects.append(number)
            events = [first]
            for e in range(1, n_events):
                k = r * n_events + e
                key = SIGNERS[k % len(SIGNERS)]
                if e % 2:
                    events.append(
                        ev(
                            "integrity_finding",
                            number,
                            {"finding_type": "bench_note", "severity": "info", "description": _pad(k, 480)},
                            key,
                            when(k, 2),
                        )
                    )
                else:
                    events.append(
                        ev(
                            "author_attestation",
                            number,
                            {"author_name": "Bench Author " + _pad(k, 470)},
                            key,
                            when(k, 2),
                        )
                    )
            sizes += [len(canonical_bytes(x)) for x in events[1:3]]
            out.write(bundle_line(number, events, rec))
    print(
        f"part 2: generated {n_records:,} records x {n_events} events (~{sum(sizes) / len(sizes):,.0f} B/event), "
        f"{f.stat().st_size / 1e6:,.0f} MB of bundles, in {time.perf_counter() - t:.1f} s",
        flush=True,
    )
    a = run(["--ledger", str(d / "L"), "apply", str(f), "--json"], tmp)
    print(f"  apply {a['wall']:.1f} s, peak RSS {mem(a)} MiB, {(a.doc or {}).get('batches')} batches", flush=True)
    p = run(["--ledger", str(d / "L"), "publish", str(d / "PUB"), "--json"], tmp)
    pub_mb = du_mb(d / "PUB") if (d / "PUB").exists() else 0.0
    print(f"  publish {p['wall']:.1f} s, PUB = {pub_mb:,.0f} MB (du -sb)", flush=True)
    if pub_mb < min_mb:
        notes.append(f"part 2: PUB is only {pub_mb:,.0f} MB (< {min_mb:.0f} MB): raise --records/--events")
    f.unlink()
    # PUB2: a copy of the ledger with 3 more events, published over a copy of PUB (incremental)
    shutil.copytree(d / "L", d / "L2")
    extra = d / "extra.jsonl"
    with extra.open("wb") as out:
        for j, number in enumerate(subjects[:: max(1, len(subjects) // 3)][:3]):
            out.write(
                bundle_line(
                    number,
                    [
                        ev(
                            "author_attestation",
                            number,
                            {"author_name": f"Late Author {j}"},
                            SIGNERS[0],
                            "2026-07-01T00:00:00Z",
                        )
                    ],
                    None,
                )
            )
    run(["--ledger", str(d / "L2"), "apply", str(extra)], tmp)
    shutil.copytree(d / "PUB", d / "PUB2")
    run(["--ledger", str(d / "L2"), "publish", str(d / "PUB2")], tmp)
    shutil.rmtree(d / "L2")
    shutil.rmtree(d / "L")
    s = run(["--ledger", str(d / "C"), "sync", str(d / "PUB"), "--json"], tmp)
    sd = s.doc or {}
    print(
        f"  sync PUB -> empty C: {s['wall']:.1f} s, peak RSS {mem(s)} MiB, exit {s['rc']}, "
        f"{sd.get('records_fetched')} records, {sd.get('new')} new, {sd.get('batches')} batches",
        flush=True,
    )
    if sd.get("new") != n_records * n_events:
        notes.append(f"part 2: sync reported new={sd.get('new')}, expected {n_records * n_events}")
    ac = run(["audit", str(d / "C"), str(d / "PUB"), "--json"], tmp)
    print(f"  audit C PUB: {ac['wall']:.1f} s, peak RSS {mem(ac)} MiB, exit {ac['rc']}", flush=True)
    ap = run(["audit", str(d / "PUB"), str(d / "PUB2"), "--json"], tmp, expect=(1,))
    apd = ap.doc or {}
    ndiv = len(apd.get("divergent", []))
    print(
        f"  audit PUB PUB2: {ap['wall']:.1f} s, peak RSS {mem(ap)} MiB, exit {ap['rc']}, "
        f"{ndiv} divergent, {apd.get('digests_read')} digests read",
        flush=True,
    )
    if ndiv != 3:
        notes.append(f"part 2: audit PUB PUB2 named {ndiv} divergent records, expected 3")
    label = f"2 PUB {pub_mb:,.0f} MB ({n_records}x{n_events})"
    rows.append(
        [
            label,
            f"apply {a['wall']:.1f} s / {mem(a)} MiB",
            f"publish {p['wall']:.1f} s",
            f"sync->empty {s['wall']:.1f} s / {mem(s)} MiB (exit {s['rc']})",
            f"audit C PUB {ac['wall']:.1f} s / {mem(ac)} MiB (exit {ac['rc']})",
            f"audit PUB PUB2 {ap['wall']:.1f} s / {mem(ap)} MiB (exit {ap['rc']}, {ndiv} divergent)",
        ]
    )
    shutil.rmtree(d)


# --- part 3: bundles without events --------------------------------------------------------------


def part3(tmp: Path, target_mb: float, rows: list[list[str]], notes: list[str]) -> None:
    d = tmp / "p3"
    d.mkdir()
    f = d / "eventless.jsonl"
    t = time.perf_counter()
    n = 0
    with f.open("wb") as out:
        while out.tell() < target_mb * 1e6:
            suffix = base64.b32encode(hashlib.sha256(f"eventless {n}".encode()).digest()).decode()[:26]
            out.write(
                json.dumps(
                    {
                        "bundle_type": "pith_open_graph_bundle",
                        "bundle_version": "1.0",
                        "pith_number": f"pith:2026:{suffix}",
                        "events": [],
                        "x_bench_unknown_field": _pad(n, 4096),
                    },
                    separators=(",", ":"),
                ).encode()
                + b"\n"
            )
            n += 1
    size_mb = f.stat().st_size / 1e6
    print(f"part 3: wrote {n:,} event-less bundles, {size_mb:,.0f} MB, in {time.perf_counter() - t:.1f} s", flush=True)
    a = run(["--ledger", str(d / "E"), "apply", str(f), "--json"], tmp)
    ad = a.doc or {}
    ledger_mb = du_mb(d / "E") if (d / "E").exists() else 0.0
    print(
        f"  apply: {a['wall']:.1f} s, peak RSS {mem(a)} MiB, exit {a['rc']}, bundles {ad.get('bundles')}, "
        f"events {ad.get('events')}, batches {ad.get('batches')}, ledger {ledger_mb:,.0f} MB on disk",
        flush=True,
    )
    rows.append(
        [
            f"3 event-less {size_mb:,.0f} MB ({n:,} bundles)",
            f"apply {a['wall']:.1f} s",
            f"peak RSS {mem(a)} MiB",
            f"batches {ad.get('batches')}",
            f"exit {a['rc']}",
            f"ledger E {ledger_mb:,.0f} MB",
        ]
    )
    shutil.rmtree(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "n", nargs="?", type=int, default=4000, help="largest number of citers (part 1 runs N/8, N/4, N/2, N)"
    )
    ap.add_argument("--records", type=int, default=2000, help="part 2: records in the published tree")
    ap.add_argument("--events", type=int, default=60, help="part 2: events per record (~1 KB each)")
    ap.add_argument("--min-pub-mb", type=float, default=200, help="part 2: the published tree must reach this (du -sb)")
    ap.add_argument("--eventless-mb", type=float, default=400, help="part 3: size of the event-less JSON-lines file")
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    parts = {int(p) for p in args.parts.split(",")}

    tmp = Path(tempfile.mkdtemp(prefix="bench_sync."))
    free_gb = shutil.disk_usage(tmp).free / 1e9
    need_gb = (args.records * args.events * 1.1e3 * 7 + args.eventless_mb * 1e6 * 2.3) / 1e9
    machine = (
        f"nproc {os.cpu_count()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, RSS via {'/usr/bin/time -v' if GNU_TIME else 'getrusage(RUSAGE_CHILDREN)'}"
    )
    code = code_state()
    print(
        f"machine: {machine}\ncode: {code}\ncli: {PITHLEDGER}\ntmp: {tmp} ({free_gb:,.0f} GB free, ~{need_gb:.1f} GB needed)",
        flush=True,
    )
    notes: list[str] = []
    if free_gb < need_gb * 1.5:
        scale = free_gb / (need_gb * 1.5)
        args.records = max(100, int(args.records * scale))
        args.eventless_mb = max(50, args.eventless_mb * scale)
        notes.append(f"scaled down for disk: --records {args.records}, --eventless-mb {args.eventless_mb:.0f}")
        print("  " + notes[-1], flush=True)
    rows: list[list[str]] = []
    t0 = time.perf_counter()
    steps = {
        1: lambda: part1(tmp, args.n, rows, notes),
        2: lambda: part2(tmp, args.records, args.events, args.min_pub_mb, rows, notes),
        3: lambda: part3(tmp, args.eventless_mb, rows, notes),
    }
    try:
        for part in sorted(parts):
            steps[part]()
            now = code_state()
            if now != code:
                notes.append(
                    f"the code changed under the benchmark during part {part}: {code} -> {now}; "
                    "numbers of that part may mix versions"
                )
                print("  !! " + notes[-1], flush=True)
                code = now
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n== summary ({time.perf_counter() - t0:,.0f} s total; {machine}; {code}) ==")
    for row in rows:
        print(" | ".join(row))
    for note in notes:
        print("note: " + note)
    for fail in FAILURES:
        print("FAILURE: " + fail)


if __name__ == "__main__":
    main()
