"""Issue #12 benchmark suite: apply throughput, memory, latency and growth, measured through the CLI.

    /tmp/benchv/bin/python bench/bench_suite.py [--scale small|full] [--no-profile] [--keep]

(``/tmp/benchv``: a venv with ``pip install -e . -r bench/requirements.txt``; see bench/README.md.)

Workload (issue #12): P papers x 20 events (1 record_created, 3 storage_attestation, 4 author_attestation,
8 citation_signature to other papers of the workload, 2 replication_record, 2 integrity_finding), signed
by 64 demo keys whose seeds are public strings. Canonical records are real Pith records from
bundles/source-data/pith-records.jsonl with source.id and title digest varied (each checked by
``record_ids``). Events are made with ``pithledger.records.events.make_event`` (in 2 worker processes).

Every timed apply is a subprocess ``pithledger --ledger DIR apply FILE.jsonl --batch-size 10000 -q --json``
of the project's venv (``/work/main/.venv/bin/pithledger``), timed by wall clock, peak RSS from
``/usr/bin/time -v``. Arrival shapes: ``papers`` (one bundle of 20 events per paper per line), ``events``
(one event per line, lines shuffled), ``bootstrap`` (as many records as events, one record_created each).

The raw verify bound is PyNaCl ``VerifyKey.verify`` over the SAME messages and signatures as the papers
workload (64 VerifyKey objects built beforehand), on 1 thread and on 2 threads (ThreadPoolExecutor, chunks
of 256), measured in the same run. The eventsourcing/SQLite peer runs as a subprocess of this script
(``_peer`` mode) on the same papers file. Results: a table on stdout and bench/results-<scale>.json.
All data lives in one tempfile.mkdtemp() directory, removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _measure import GNU_TIME, measure  # noqa: E402  (bench/ is on sys.path when run as a script)

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import OUTCOMES, RELATIONS, REPLICATION_TYPES, SEVERITIES, make_event, signing_message
from pithledger.records.keys import LocalKey
from pithledger.records.model import record_ids

ROOT = Path(__file__).resolve().parent.parent
RECORDS_FILE = ROOT / "bundles" / "source-data" / "pith-records.jsonl"
CMD_TIMEOUT = 3600


def _project_bin(name: str) -> str:
    for cand in (ROOT / ".venv" / "bin" / name, Path(sys.executable).parent / name):
        if cand.is_file():
            return str(cand)
    found = shutil.which(name)
    if not found:
        sys.exit(f"no {name} found (create the project venv: python3 -m venv .venv && .venv/bin/pip install -e .)")
    return found


PITHLEDGER = _project_bin("pithledger")
PROJECT_PY = _project_bin("python")  # the interpreter the CLI runs on (for the bare-import baseline)

SCALES: dict[str, dict[str, Any]] = {
    "tiny": {"papers": 100, "peer_papers": 20, "growth": [2_000, 6_000], "reps": 1, "state_runs": 3},  # smoke test only
    # papers: the workload; peer_papers: papers fed to the eventsourcing peer (each variant);
    # growth: ledger sizes (events) measured on one growing ledger; reps: applies per arrival shape
    "small": {"papers": 2000, "peer_papers": 500, "growth": [10_000, 30_000, 100_000], "reps": 1, "state_runs": 9},
    "full": {
        "papers": 2000,
        "peer_papers": 2000,
        "growth": [10_000, 100_000, 300_000, 1_000_000],
        "reps": 3,
        "state_runs": 15,
    },
}

# --- workload generation ------------------------------------------------------------------------------


def _key(i: int) -> LocalKey:
    return LocalKey(
        name=f"bench-signer-{i:02d}", seed=hashlib.sha256(f"pithledger bench suite signer {i}".encode()).digest()
    )


KEYS = [_key(i) for i in range(64)]
SIGNER_IDS = [f"did:web:lab{i:02d}.bench.example.org (bench key)" for i in range(64)]
TAG_YEAR = {"main": 21, "boot": 22, "growth": 23, "citer": 24, "probe": 25, "hot": 20}
FIRST = (
    "Ada",
    "Alan",
    "Barbara",
    "Claude",
    "Donald",
    "Edsger",
    "Frances",
    "Grace",
    "Hedy",
    "John",
    "Katherine",
    "Leslie",
    "Margaret",
    "Niklaus",
    "Radia",
    "Shafi",
    "Tim",
    "Whitfield",
    "Yoshua",
    "Zhang",
)
LAST = (
    "Lovelace",
    "Turing",
    "Liskov",
    "Shannon",
    "Knuth",
    "Dijkstra",
    "Allen",
    "Hopper",
    "Lamarr",
    "McCarthy",
    "Johnson",
    "Lamport",
    "Hamilton",
    "Wirth",
    "Perlman",
    "Goldwasser",
    "Berners-Lee",
    "Diffie",
    "Bengio",
    "Wei",
)
FINDINGS = ("figure_reuse", "statistics_check", "reference_check", "data_availability", "code_availability")
SENTENCES = (
    "The reported confidence intervals in the main results table could not be reproduced from the released data.",
    "Two figures in the appendix appear to reuse panels from an earlier preprint by overlapping authors.",
    "Several references point to withdrawn or superseded versions; the claims they support should be rechecked.",
    "The evaluation script referenced in the paper is missing from the artifact; results were recomputed by hand.",
    "Sample sizes in the ablation differ between the text and the supplementary material by a small margin.",
)

_RECS: list[dict[str, Any]] = []
_NUMBERS: dict[str, list[str]] = {}  # tag -> pith numbers (set in the parent before the pool forks)
_CANON: dict[str, list[str]] = {}


def base_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RECORDS_FILE.read_text().splitlines() if line.strip()]


def mint(tag: str, i: int) -> dict[str, Any]:
    """A distinct canonical record: a real record with its own arXiv id (year by tag) and title digest."""
    global _RECS
    if not _RECS:
        _RECS = base_records()
    rec = json.loads(json.dumps(_RECS[i % len(_RECS)]))
    rec["source"]["id"] = f"{TAG_YEAR[tag]}{1 + (i // 100000) % 12:02d}.{i % 100000:05d}"
    rec["metadata"]["title_canon_sha256"] = hashlib.sha256(f"pithledger bench suite {tag} {i}".encode()).hexdigest()
    return rec


def numbers_for(tag: str, n: int) -> None:
    """Pith numbers of records 0..n-1 of ``tag`` (record_ids raises on an invalid record)."""
    have = _NUMBERS.setdefault(tag, [])
    canon = _CANON.setdefault(tag, [])
    for i in range(len(have), n):
        rid = record_ids(mint(tag, i))
        have.append(rid.pith_number)
        canon.append(rid.canonical_sha256)


def _when(i: int, j: int = 0) -> str:
    t = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=37 * i + j)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _orcid(rng: random.Random) -> str:
    digits = [rng.randrange(10) for _ in range(15)]
    total = 0
    for d in digits:
        total = (total + d) * 2
    check = (12 - total % 11) % 11
    s = "".join(map(str, digits)) + ("X" if check == 10 else str(check))
    return "-".join(s[k : k + 4] for k in range(0, 16, 4))


def _ev(kind: str, subject: str, payload: dict[str, Any], ki: int, when: str) -> dict[str, Any]:
    return make_event(kind, subject, payload, KEYS[ki], created_at=when, signer_id=SIGNER_IDS[ki])


def paper_events(tag: str, i: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[int]]:
    """The 20 events of paper i of ``tag``, and the signer index of each."""
    rng = random.Random(f"{tag}:{i}")
    pool = _NUMBERS[tag]
    rec = mint(tag, i)
    number, canon = pool[i], _CANON[tag][i]
    arxiv = f"{rec['source']['id']}v{rec['source']['version']}"
    out: list[tuple[str, dict[str, Any]]] = [("record_created", {"canonical_record": rec, "canonical_sha256": canon})]
    for j, kind in enumerate(("abs", "pdf", "html")):
        t = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=rng.randrange(30 * 86400))
        out.append(
            (
                "storage_attestation",
                {
                    "capture_url": f"https://web.archive.org/web/{t:%Y%m%d%H%M%S}/https://arxiv.org/{kind}/{arxiv}",
                    "captured_at": f"{t:%Y-%m-%dT%H:%M:%SZ}",
                    "content_sha256": hashlib.sha256(f"{number} {kind}".encode()).hexdigest(),
                },
            )
        )
    for j in range(4):
        out.append(
            (
                "author_attestation",
                {
                    "author_name": f"{rng.choice(FIRST)} {rng.choice('ABCDEFGHJKLMNPRSTW')}. {rng.choice(LAST)}",
                    "orcid": _orcid(rng),
                },
            )
        )
    for j in range(8):
        k = rng.randrange(len(pool) - 1)
        out.append(
            (
                "citation_signature",
                {"cited_pith_number": pool[k if k < i else k + 1], "relation": rng.choice(RELATIONS)},
            )
        )
    for j in range(2):
        out.append(
            (
                "replication_record",
                {
                    "replication_type": rng.choice(REPLICATION_TYPES),
                    "outcome": rng.choice(OUTCOMES),
                    "artifact_url": f"https://zenodo.org/records/{rng.randrange(10**7, 10**8)}/files/replication-{arxiv}.tar.gz",
                },
            )
        )
    for j in range(2):
        out.append(
            (
                "integrity_finding",
                {
                    "finding_type": rng.choice(FINDINGS),
                    "severity": rng.choice(SEVERITIES),
                    "description": " ".join(rng.sample(SENTENCES, 2)),
                },
            )
        )
    kis = [rng.randrange(64) for _ in out]
    return rec, [_ev(kind, number, p, ki, _when(i, j)) for j, ((kind, p), ki) in enumerate(zip(out, kis))], kis


def bundle_line(number: str, events: list[dict[str, Any]], rec: dict[str, Any] | None) -> bytes:
    return (
        canonical_bytes(
            write_bundle(
                number, events, canonical_record=rec, aliases_created_at="2026-05-31T00:00:00Z" if rec else None
            )
        )
        + b"\n"
    )


def _task(args: tuple[Any, ...]) -> dict[str, Any]:
    """Worker: one chunk of a workload. Returns lines (and, for the main workload, what raw verify needs)."""
    what = args[0]
    out: dict[str, Any] = {"papers": [], "events": [], "verify": [], "sizes": []}
    if what == "papers":
        _, tag, a, b, detail = args
        for i in range(a, b):
            rec, evs, kis = paper_events(tag, i)
            number = _NUMBERS[tag][i]
            out["papers"].append(bundle_line(number, evs, rec))
            if detail:
                out["events"] += [
                    bundle_line(number, [e], rec if e["event_type"] == "record_created" else None) for e in evs
                ]
                out["verify"] += [
                    (ki, signing_message(e), base64.b64decode(e["signature_b64"])) for e, ki in zip(evs, kis)
                ]
                out["sizes"] += [len(canonical_bytes(e)) for e in evs]
    elif what == "boot":  # one record_created per record
        _, a, b = args
        for i in range(a, b):
            rec = mint("boot", i)
            number, canon = _NUMBERS["boot"][i], _CANON["boot"][i]
            e = _ev("record_created", number, {"canonical_record": rec, "canonical_sha256": canon}, i % 64, _when(i))
            out["papers"].append(bundle_line(number, [e], rec))
    elif what == "citers":  # citer records: record_created + one citation of ``cited``
        _, tag, a, b, cited = args
        for i in range(a, b):
            rec = mint(tag, i)
            number, canon = _NUMBERS[tag][i], _CANON[tag][i]
            evs = [
                _ev("record_created", number, {"canonical_record": rec, "canonical_sha256": canon}, i % 64, _when(i)),
                _ev(
                    "citation_signature",
                    number,
                    {"cited_pith_number": cited, "relation": RELATIONS[i % len(RELATIONS)]},
                    (i * 7) % 64,
                    _when(i, 1),
                ),
            ]
            out["papers"].append(bundle_line(number, evs, rec))
    elif what == "hot":  # events about one record, in bundles of 1 000
        _, subject, a, b = args
        rng = random.Random(f"hot:{a}")
        evs = []
        for i in range(a, b):
            if i % 2:
                evs.append(
                    _ev(
                        "author_attestation",
                        subject,
                        {"author_name": f"{rng.choice(FIRST)} {rng.choice(LAST)} {i}", "orcid": _orcid(rng)},
                        i % 64,
                        _when(i),
                    )
                )
            else:
                evs.append(
                    _ev(
                        "integrity_finding",
                        subject,
                        {
                            "finding_type": rng.choice(FINDINGS),
                            "severity": rng.choice(SEVERITIES),
                            "description": f"hot-record note {i}: " + " ".join(rng.sample(SENTENCES, 3)),
                        },
                        i % 64,
                        _when(i),
                    )
                )
        out["papers"].append(bundle_line(subject, evs, None))
    return out


class Gen:
    """Generation on all cores (fork: the workers inherit the pith numbers computed here)."""

    def __init__(self) -> None:
        self.pool: Any = None

    def run(self, tasks: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        import multiprocessing as mp

        if self.pool is not None:  # the pith numbers may have grown: fork again
            self.pool.close()
            self.pool.join()
        self.pool = mp.get_context("fork").Pool(os.cpu_count() or 1)
        return list(self.pool.imap(_task, tasks))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()


def chunks(a: int, b: int, size: int) -> list[tuple[int, int]]:
    return [(x, min(b, x + size)) for x in range(a, b, size)]


def papers_workload(papers: int) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
    """The papers workload (``papers`` x 20 events, one bundle per paper per line) as JSON lines, and
    (signer index, signing message, signature) of each event, for raw_verify: what bench_scaling.py and
    bench_pure.py measure."""
    numbers_for("main", papers)
    gen = Gen()
    try:
        parts = gen.run([("papers", "main", a, b, True) for a, b in chunks(0, papers, 50)])
    finally:
        gen.close()
    return b"".join(x for p in parts for x in p["papers"]), [x for p in parts for x in p["verify"]]


# --- running the CLI ------------------------------------------------------------------------------------

FAILURES: list[str] = []


def run(cmd: list[str], tmp: Path, *, expect: tuple[int, ...] = (0,)) -> dict[str, Any]:
    r = measure(cmd, tmp, CMD_TIMEOUT)
    if r.rc not in expect:
        msg = f"`{' '.join(cmd)[:200]}` exited {r.rc}: {r.err.strip()[-2000:]}"
        FAILURES.append(msg)
        print("  !! " + msg, flush=True)
    try:
        doc = json.loads(r.out)
    except ValueError:
        doc = None
    return {
        "wall": r.wall,
        "rss_mb": r.rss_mb,
        "rc": r.rc,
        "doc": doc,
        "anon_mb": r.anon_mb or 0,
        "file_mb": r.file_mb or 0,
    }


def apply(ledger: Path, f: Path, tmp: Path, expect_new: int | None = None) -> dict[str, Any]:
    r = run([PITHLEDGER, "--ledger", str(ledger), "apply", str(f), "--batch-size", "10000", "-q", "--json"], tmp)
    doc = r["doc"] or {}
    r["events"] = doc.get("events")
    r["new"] = doc.get("new")
    r["batches"] = doc.get("batches")
    if expect_new is not None and doc.get("new") != expect_new:
        FAILURES.append(
            f"apply {f.name}: new={doc.get('new')} invalid={doc.get('invalid')} unverified={doc.get('unverified')}, "
            f"expected new={expect_new}"
        )
        print("  !! " + FAILURES[-1], flush=True)
    return r


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if p.returncode != 0:
        FAILURES.append(f"`{' '.join(cmd)}` exited {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}")
    return took


def state_latency(ledger: Path, number: str, runs: int) -> dict[str, float]:
    """Median wall time of `pithledger state` and of the bare import, interleaved."""
    st, bare = [], []
    timed([PITHLEDGER, "--ledger", str(ledger), "state", number])  # warm the page cache
    for _ in range(runs):
        st.append(timed([PITHLEDGER, "--ledger", str(ledger), "state", number]))
        bare.append(timed([PROJECT_PY, "-c", "import lmdb, msgspec, nacl.signing"]))
    s, b = statistics.median(st), statistics.median(bare)
    return {"state_s": s, "bare_import_s": b, "ratio": s / b}


def data_mdb(ledger: Path) -> dict[str, int]:
    st = (ledger / "data.mdb").stat()
    return {"size": st.st_size, "allocated": st.st_blocks * 512}


# --- raw verify bound -------------------------------------------------------------------------------------


def raw_verify(items: list[tuple[int, bytes, bytes]]) -> dict[str, float]:
    import nacl.signing

    vks = [nacl.signing.VerifyKey(k.public_key) for k in KEYS]

    def chunk(part: list[tuple[int, bytes, bytes]]) -> int:
        for ki, msg, sig in part:
            vks[ki].verify(msg, sig)
        return len(part)

    best1 = best2 = 0.0
    parts = [items[i : i + 256] for i in range(0, len(items), 256)]
    for _ in range(2):  # best of two of each
        t = time.perf_counter()
        chunk(items)
        best1 = max(best1, len(items) / (time.perf_counter() - t))
        with ThreadPoolExecutor(max_workers=2) as pool:
            t = time.perf_counter()
            n = sum(pool.map(chunk, parts))
            best2 = max(best2, n / (time.perf_counter() - t))
    return {"events": len(items), "rate_1t": best1, "rate_2t": best2, "speedup_2t": best2 / best1}


# --- eventsourcing / SQLite peer ---------------------------------------------------------------------------


def peer_main(mode: str, src: str, db: str, max_events: int) -> None:
    """Subprocess: verify each event's Ed25519 signature, save it to an eventsourcing Application backed by
    SQLite (one aggregate per record, one domain event per Pith event), and keep a projection (per-record
    event count and inbound citations, with its tracking position) in SQLite.

    idiomatic: per event: verify, repository.get (or create), trigger, app.save (one transaction), then the
               projection pulls the new notification and commits it with its tracking position.
    batched:   per 1 000 events: verify all, get each touched aggregate once, one app.save(*aggregates),
               then the projection processes those notifications in one transaction.
    """
    import sqlite3
    import uuid

    import nacl.signing

    os.environ.update({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": db})
    from eventsourcing.application import AggregateNotFoundError, Application
    from eventsourcing.domain import Aggregate, event

    class Paper(Aggregate):
        @staticmethod
        def create_id(pith_number: str) -> uuid.UUID:
            return uuid.uuid5(uuid.NAMESPACE_URL, pith_number)

        @event("Opened")
        def __init__(self, pith_number: str) -> None:
            self.pith_number = pith_number
            self.events: list[str] = []

        @event("Recorded")
        def record(self, pith_event: dict[str, Any]) -> None:
            self.events.append(pith_event["event_id"])

    class Papers(Application[uuid.UUID]):
        pass

    app = Papers()
    view = sqlite3.connect(db + ".view")
    view.executescript(
        "CREATE TABLE IF NOT EXISTS paper (pith TEXT PRIMARY KEY, events INT, cited_by INT);"
        "CREATE TABLE IF NOT EXISTS tracking (id INT PRIMARY KEY, position INT);"
        "INSERT OR IGNORE INTO tracking VALUES (0, 0);"
    )
    vks: dict[str, Any] = {}
    position = 0

    def project() -> int:
        nonlocal position
        n = 0
        while True:
            notes = app.recorder.select_notifications(start=position + 1, limit=1000)
            if not notes:
                return n
            with view:  # one transaction, tracking position included
                for note in notes:
                    de = app.mapper.to_domain_event(note)
                    if isinstance(de, Paper.Recorded):
                        pe = de.pith_event
                        view.execute(
                            "INSERT INTO paper VALUES (?, 1, 0) ON CONFLICT(pith) DO UPDATE SET events = events + 1",
                            (pe["subject_pith_number"],),
                        )
                        if pe["event_type"] == "citation_signature":
                            view.execute(
                                "INSERT INTO paper VALUES (?, 0, 1) ON CONFLICT(pith) DO UPDATE SET cited_by = cited_by + 1",
                                (pe["payload"]["cited_pith_number"],),
                            )
                    position = note.id
                    n += 1
                view.execute("UPDATE tracking SET position = ? WHERE id = 0", (position,))

    def verify(e: dict[str, Any]) -> None:
        pk = e["signer"]["public_key_b64"]
        vk = vks.get(pk) or vks.setdefault(pk, nacl.signing.VerifyKey(base64.b64decode(pk)))
        vk.verify(signing_message(e), base64.b64decode(e["signature_b64"]))

    def get(number: str) -> Paper:
        try:
            return app.repository.get(uuid.uuid5(uuid.NAMESPACE_URL, number))
        except AggregateNotFoundError:
            return Paper(number)

    done = 0
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        for e in pending:
            verify(e)
        aggs: dict[str, Paper] = {}
        for e in pending:
            s = e["subject_pith_number"]
            (aggs.get(s) or aggs.setdefault(s, get(s))).record(e)
        app.save(*aggs.values())
        project()
        pending.clear()

    with open(src, "rb") as f:
        for line in f:
            for e in json.loads(line)["events"]:
                if done >= max_events:
                    break
                done += 1
                if mode == "idiomatic":
                    verify(e)
                    p = get(e["subject_pith_number"])
                    p.record(e)
                    app.save(p)
                    project()
                else:
                    pending.append(e)
                    if len(pending) == 1000:
                        flush()
    if pending:
        flush()
    n_view = view.execute("SELECT SUM(events) FROM paper").fetchone()[0]
    print(json.dumps({"events": done, "projected": n_view}))


# --- the suite --------------------------------------------------------------------------------------------


def code_state() -> str:
    h = hashlib.sha256()
    for f in sorted([*(ROOT / "ledger").rglob("*.py"), *(ROOT / "cli").rglob("*.py")]):
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--short", "--", "ledger", "cli"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"HEAD {head}"
        + (" + uncommitted ledger/cli changes" if dirty else " (clean ledger/ cli/)")
        + f", sources {h.hexdigest()[:12]}"
    )


def rate(events: int | None, wall: float) -> float:
    return (events or 0) / wall if wall else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile / py-spy run of one papers apply")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    # The commands are timed as a user runs them: with their bytecode cached. A shell that sets
    # PYTHONDONTWRITEBYTECODE would make every run compile every module (+40 ms on `state`).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([PROJECT_PY, "-m", "compileall", "-q", str(ROOT / "ledger"), str(ROOT / "cli")], check=False)
    sc = SCALES[args.scale]
    tmp = Path(tempfile.mkdtemp(prefix="bench_suite."))
    t_start = time.perf_counter()
    machine = {
        "nproc": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "system": f"{platform.system()} {platform.release()}",
        "cpu": _cpu_name(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code": code_state(),
        "cli": PITHLEDGER,
        "rss": "/usr/bin/time -v" if GNU_TIME else "getrusage",
    }
    print(f"scale {args.scale}; {machine}\ntmp {tmp} ({shutil.disk_usage(tmp).free / 1e9:,.0f} GB free)", flush=True)
    R: dict[str, Any] = {"scale": args.scale, "machine": machine, "config": sc}
    gen = Gen()
    try:
        suite(tmp, sc, R, gen, profile=not args.no_profile)
    finally:
        gen.close()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    R["total_s"] = time.perf_counter() - t_start
    R["failures"] = FAILURES
    now = code_state()
    if now != machine["code"]:
        R["note_code_changed"] = f"the code changed during the run: {machine['code']} -> {now}"
    print_table(R)
    out = ROOT / "bench" / f"results-{args.scale}.json"
    out.write_text(json.dumps(R, indent=1, default=str) + "\n")
    try:  # bench/growth.png (matplotlib): apply throughput and peak RSS against ledger size
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from plot_growth import plot

        print(f"wrote {plot(out).relative_to(ROOT)}")
    except ImportError as exc:
        print(f"no plot ({exc})")
    print(f"\nwrote {out.relative_to(ROOT)} ({R['total_s']:,.0f} s total)")


def _cpu_name() -> str:
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        return m[1].strip() if m else "?"
    except OSError:
        return "?"


def suite(tmp: Path, sc: dict[str, Any], R: dict[str, Any], gen: Gen, *, profile: bool) -> None:
    P = sc["papers"]
    # 1. the workload --------------------------------------------------------------------------
    t = time.perf_counter()
    numbers_for("main", P)
    numbers_for("boot", 20 * P)
    parts = gen.run([("papers", "main", a, b, True) for a, b in chunks(0, P, 50)])
    papers = [x for p in parts for x in p["papers"]]
    ev_lines = [x for p in parts for x in p["events"]]
    items = [x for p in parts for x in p["verify"]]
    sizes = [x for p in parts for x in p["sizes"]]
    random.Random(12).shuffle(ev_lines)
    boot = [x for p in gen.run([("boot", a, b) for a, b in chunks(0, 20 * P, 1000)]) for x in p["papers"]]
    N = len(items)
    f_papers, f_events, f_boot = tmp / "papers.jsonl", tmp / "events.jsonl", tmp / "bootstrap.jsonl"
    f_papers.write_bytes(b"".join(papers))
    f_events.write_bytes(b"".join(ev_lines))
    f_boot.write_bytes(b"".join(boot))
    W = {
        "papers": P,
        "events": N,
        "signers": 64,
        "gen_s": time.perf_counter() - t,
        "canonical_event_bytes_mean": statistics.mean(sizes),
        "event_line_bytes_mean": f_events.stat().st_size / N,
        "papers_line_bytes_per_event": f_papers.stat().st_size / N,
        "bootstrap_records": len(boot),
        "bootstrap_line_bytes_mean": f_boot.stat().st_size / len(boot),
    }
    R["workload"] = W
    print(
        f"workload: {P:,} papers x 20 = {N:,} events, canonical event {W['canonical_event_bytes_mean']:.0f} B, "
        f"event line {W['event_line_bytes_mean']:.0f} B, generated in {W['gen_s']:.0f} s",
        flush=True,
    )
    del papers, ev_lines, boot

    R["raw_verify"] = raw_verify(items)
    rv = R["raw_verify"]
    print(f"raw verify: {rv['rate_1t']:,.0f}/s 1 thread, {rv['rate_2t']:,.0f}/s 2 threads", flush=True)
    del items

    # 2. apply through the CLI, three arrival shapes ----------------------------------------------------------
    R["apply"] = {}
    keep_ledger = tmp / "L-papers"
    for shape, f, expect in (("papers", f_papers, N), ("events", f_events, N), ("bootstrap", f_boot, 20 * P)):
        runs = []
        for rep in range(sc["reps"]):
            led = tmp / f"L-{shape}-{rep}"
            r = apply(led, f, tmp, expect)
            r.update(data_mdb(led))
            runs.append(r)
            if shape == "papers" and rep == 0:
                led.rename(keep_ledger)
            else:
                shutil.rmtree(led)
        walls = sorted(r["wall"] for r in runs)
        med = statistics.median(walls)
        A = {
            "events": expect,
            "walls": walls,
            "wall": med,
            "rate": expect / med,
            "rss_mb": max(r["rss_mb"] or 0 for r in runs),
            "anon_mb": max(r["anon_mb"] for r in runs),
            "file_mb": max(r["file_mb"] for r in runs),
            "batches": runs[0]["batches"],
            "data_mdb_bytes": runs[0]["size"],
            "data_mdb_allocated": runs[0]["allocated"],
            "bytes_per_event": runs[0]["size"] / expect,
        }
        A["x_raw_1t"], A["x_raw_2t"] = A["rate"] / rv["rate_1t"], A["rate"] / rv["rate_2t"]
        R["apply"][shape] = A
        print(
            f"apply {shape}: {A['rate']:,.0f} ev/s ({A['x_raw_2t']:.2f} x raw 2T), {A['wall']:.1f} s, RSS {A['rss_mb']:.0f} MiB, "
            f"data.mdb {A['bytes_per_event']:.0f} B/event",
            flush=True,
        )
    f_events.unlink()
    f_boot.unlink()

    # 3. state latency ----------------------------------------------------------------------------------------
    R["state"] = state_latency(keep_ledger, _NUMBERS["main"][P // 2], sc["state_runs"])
    print(
        f"state {R['state']['state_s'] * 1000:.0f} ms vs bare import {R['state']['bare_import_s'] * 1000:.0f} ms",
        flush=True,
    )

    # 3b. from the log: fsck and rebuild (signature checks reused / all again), sync of the same data ----------
    R["from_log"] = {}
    for name, cmd in (
        ("fsck", ["fsck"]),
        ("fsck --reverify", ["fsck", "--reverify"]),
        ("rebuild", ["rebuild", "--json"]),
        ("rebuild --reverify", ["rebuild", "--json", "--reverify"]),
    ):
        r = run([PITHLEDGER, "--ledger", str(keep_ledger), *cmd], tmp)
        R["from_log"][name] = {
            "wall": r["wall"],
            "rate": N / r["wall"],
            "x_raw_1t": N / r["wall"] / rv["rate_1t"],
            "rss_mb": r["rss_mb"],
        }
        print(f"{name}: {N / r['wall']:,.0f} ev/s = {N / r['wall'] / rv['rate_1t']:.2f} x raw 1T", flush=True)
    for backup in tmp.glob("L-papers.v*-backup*"):
        shutil.rmtree(backup)
    pub = tmp / "pub-papers"
    run([PITHLEDGER, "--ledger", str(keep_ledger), "publish", str(pub)], tmp)
    r = run([PITHLEDGER, "--ledger", str(tmp / "L-synced"), "sync", str(pub), "--json"], tmp)
    R["sync"] = {
        "wall": r["wall"],
        "rate": N / r["wall"],
        "x_apply_papers_wall": r["wall"] / R["apply"]["papers"]["wall"],
        "rss_mb": r["rss_mb"],
    }
    print(
        f"sync of the papers ledger: {r['wall']:.1f} s = {R['sync']['x_apply_papers_wall']:.2f} x its apply", flush=True
    )
    shutil.rmtree(pub)
    shutil.rmtree(tmp / "L-synced")
    shutil.rmtree(keep_ledger)

    # 4. eventsourcing peer -----------------------------------------------------------------------------------
    n_peer = 20 * sc["peer_papers"]
    R["peer"] = {}
    for mode in ("idiomatic", "batched"):
        db = tmp / f"es-{mode}.sqlite"
        r = run(
            [sys.executable, str(Path(__file__).resolve()), "_peer", mode, str(f_papers), str(db), str(n_peer)], tmp
        )
        doc = r["doc"] or {}
        if doc.get("events") != n_peer or doc.get("projected") != n_peer:
            FAILURES.append(f"peer {mode}: {doc}")
        R["peer"][mode] = {
            "events": n_peer,
            "wall": r["wall"],
            "rate": n_peer / r["wall"],
            "rss_mb": r["rss_mb"],
            "sqlite_bytes_per_event": (db.stat().st_size if db.exists() else 0) / n_peer,
        }
        for p in tmp.glob(f"es-{mode}.sqlite*"):
            p.unlink()
        print(
            f"peer {mode}: {R['peer'][mode]['rate']:,.0f} ev/s ({n_peer:,} events, {r['wall']:.1f} s, RSS {r['rss_mb']:.0f} MiB)",
            flush=True,
        )
    for mode in ("idiomatic", "batched"):
        R["peer"][mode]["pithledger_papers_x"] = R["apply"]["papers"]["rate"] / R["peer"][mode]["rate"]

    # 5. profile of one papers apply -------------------------------------------------------------------------
    if profile:
        R["profile"] = profile_apply(tmp, f_papers)

    f_papers.unlink()

    # 6. hot record: 20 applies of 1 000 events to one record ---------------------------------------------------
    numbers_for("hot", 1)
    hot_rec = mint("hot", 0)
    hot = _NUMBERS["hot"][0]
    led = tmp / "L-hot"
    first = tmp / "hot-0.jsonl"
    first.write_bytes(
        bundle_line(
            hot,
            [
                _ev(
                    "record_created",
                    hot,
                    {"canonical_record": hot_rec, "canonical_sha256": _CANON["hot"][0]},
                    0,
                    _when(0),
                )
            ],
            hot_rec,
        )
    )
    apply(led, first, tmp, 1)
    hot_parts = gen.run([("hot", hot, 1 + 1000 * k, 1 + 1000 * (k + 1)) for k in range(20)])
    walls, rss = [], []
    for k, part in enumerate(hot_parts):
        f = tmp / f"hot-{k + 1}.jsonl"
        f.write_bytes(part["papers"][0])
        r = apply(led, f, tmp, 1000)
        walls.append(r["wall"])
        rss.append(r["rss_mb"] or 0)
        f.unlink()
    hs = state_latency(led, hot, 5)
    R["hot"] = {
        "walls": walls,
        "first": walls[0],
        "last": walls[-1],
        "ratio": walls[-1] / walls[0],
        "rss_mb": max(rss),
        "ratio_mean_last3_first3": sum(walls[-3:]) / sum(walls[:3]),
        "state_s_20001_events": hs["state_s"],
    }
    print(f"hot record: first {walls[0]:.2f} s, last {walls[-1]:.2f} s, ratio {walls[-1] / walls[0]:.2f}", flush=True)
    shutil.rmtree(led)

    # 7. heavily cited record: 4 000 citers -------------------------------------------------------------------
    numbers_for("citer", 4000)
    cited = _NUMBERS["main"][0]  # a real-looking record of the main workload, created first
    cited_rec = mint("main", 0)
    head = bundle_line(
        cited,
        [
            _ev(
                "record_created",
                cited,
                {"canonical_record": cited_rec, "canonical_sha256": _CANON["main"][0]},
                0,
                _when(0),
            )
        ],
        cited_rec,
    )
    citer_lines = [
        x for p in gen.run([("citers", "citer", a, b, cited) for a, b in chunks(0, 4000, 250)]) for x in p["papers"]
    ]
    inc_walls = []
    led = tmp / "L-cited"
    (tmp / "cited-head.jsonl").write_bytes(head)
    apply(led, tmp / "cited-head.jsonl", tmp, 1)
    for k in range(4):  # incremental: 4 applies of 1 000 citers into one ledger
        f = tmp / f"citers-{k}.jsonl"
        f.write_bytes(b"".join(citer_lines[1000 * k : 1000 * (k + 1)]))
        r = apply(led, f, tmp, 2000)
        inc_walls.append(r["wall"])
    cs = state_latency(led, cited, 5)
    shutil.rmtree(led)
    single = {}
    for n in (1000, 2000, 4000):  # single shot: n citers in one apply into a fresh ledger
        f = tmp / f"citers-single-{n}.jsonl"
        f.write_bytes(head + b"".join(citer_lines[:n]))
        led = tmp / f"L-cited-{n}"
        r = apply(led, f, tmp, 2 * n + 1)
        single[n] = {
            "wall": r["wall"],
            "rss_mb": r["rss_mb"],
            "anon_mb": r["anon_mb"],
            "file_mb": r["file_mb"],
            "per_citer_ms": 1000 * r["wall"] / n,
        }
        shutil.rmtree(led)
        f.unlink()
    cum = [sum(inc_walls[:k]) for k in (1, 2, 4)]
    R["cited"] = {
        "incremental_walls": inc_walls,
        "cumulative_1000_2000_4000": cum,
        "increment_ratio_last_first": inc_walls[-1] / inc_walls[0],
        "single_shot": single,
        "single_ratio_4000_1000": single[4000]["wall"] / single[1000]["wall"],
        "state_s_4000_citers": cs["state_s"],
    }
    print(
        f"cited: increments {', '.join('%.2f' % w for w in inc_walls)} s; single shot "
        + ", ".join("%d: %.2f" % (n, v["wall"]) for n, v in single.items())
        + " s",
        flush=True,
    )

    # 8. growth ------------------------------------------------------------------------------------------------
    R["growth"] = growth(tmp, sc, gen)
    R["peak_rss_mb_all_applies"] = max(
        [R["apply"][s]["rss_mb"] for s in R["apply"]]
        + [R["hot"]["rss_mb"]]
        + [v["rss_mb"] or 0 for v in single.values()]
        + [g["rss_mb"] for g in R["growth"]]
        + [g["hot_rss_mb"] for g in R["growth"]]
    )


def growth(tmp: Path, sc: dict[str, Any], gen: Gen) -> list[dict[str, Any]]:
    points = sc["growth"]
    papers_total = points[-1] // 20
    numbers_for("growth", papers_total)
    led = tmp / "L-growth"
    hot, cited = _NUMBERS["growth"][0], _NUMBERS["growth"][1]
    numbers_for("probe", 500 * len(points))
    out = []
    prev = 0
    held = 0
    for k, size in enumerate(points):
        t = time.perf_counter()
        a, b = prev // 20, size // 20
        f = tmp / f"growth-{k}.jsonl"
        with f.open("wb") as fh:
            for part in gen.run([("papers", "growth", x, y, False) for x, y in chunks(a, b, 100)]):
                fh.writelines(part["papers"])
        gen_s = time.perf_counter() - t
        n_inc = 20 * (b - a)
        r = apply(led, f, tmp, n_inc)
        f.unlink()
        held += n_inc
        size_bytes = data_mdb(led)["size"]
        sl = state_latency(led, _NUMBERS["growth"][7], sc["state_runs"] // 2 + 1)
        # probes: 1 000 events to the hot record (growth paper 0), 500 new records citing growth paper 1
        hp = gen.run([("hot", hot, 10**6 + 1000 * k, 10**6 + 1000 * (k + 1))])[0]["papers"][0]
        fh_ = tmp / "probe-hot.jsonl"
        fh_.write_bytes(hp)
        rh = apply(led, fh_, tmp, 1000)
        cl = [x for p in gen.run([("citers", "probe", 500 * k, 500 * (k + 1), cited)]) for x in p["papers"]]
        fc = tmp / "probe-cited.jsonl"
        fc.write_bytes(b"".join(cl))
        rc = apply(led, fc, tmp, 1000)
        fh_.unlink()
        fc.unlink()
        g = {
            "ledger_events": held,
            "increment_events": n_inc,
            "gen_s": gen_s,
            "wall": r["wall"],
            "rate": n_inc / r["wall"],
            "rss_mb": r["rss_mb"],
            "anon_mb": r["anon_mb"],
            "file_mb": r["file_mb"],
            "batches": r["batches"],
            "data_mdb_bytes": size_bytes,
            "bytes_per_event": size_bytes / held,
            "state_s": sl["state_s"],
            "bare_import_s": sl["bare_import_s"],
            "hot_batch_s": rh["wall"],
            "hot_rss_mb": rh["rss_mb"],
            "hot_record_events_before": 20 + 1000 * k,
            "cited_batch_s": rc["wall"],
            "cited_citers_before": 500 * k + (8 if k else 0),
        }
        held += 2000
        out.append(g)
        print(
            f"growth {held - 2000:>9,} events: +{n_inc:,} at {g['rate']:,.0f} ev/s, RSS {g['rss_mb']:.0f} MiB, "
            f"state {1000 * g['state_s']:.0f} ms, hot batch {g['hot_batch_s']:.2f} s, cited batch {g['cited_batch_s']:.2f} s, "
            f"{g['bytes_per_event']:.0f} B/event (gen {gen_s:.0f} s)",
            flush=True,
        )
        prev = size
    shutil.rmtree(led)
    return out


#: frames above the work (interpreter, runpy, typer/click dispatch, the CLI entry, thread bootstrap)
WRAPPER = re.compile(
    r"(runpy|<string>|built-in method builtins\.exec|typer/|click/|cli/__init__\.py|cli/__main__\.py|cli/_base\.py|"
    r"threading\.py|concurrent/futures/thread\.py|<module>)"
)


def profile_apply(tmp: Path, f_papers: Path) -> dict[str, Any]:
    """cProfile of one papers apply (main thread only: verification runs on pithledger's verify threads),
    and py-spy (all threads) when available; top 15 functions by cumulative time / inclusive samples."""
    import pstats

    prof = tmp / "apply.prof"
    led = tmp / "L-prof"
    cmd = [
        PROJECT_PY,
        "-m",
        "cProfile",
        "-o",
        str(prof),
        "-m",
        "pithledger.cli",
        "--ledger",
        str(led),
        "apply",
        str(f_papers),
        "--batch-size",
        "10000",
        "-q",
    ]
    t = time.perf_counter()
    subprocess.run(cmd, check=False, capture_output=True)
    wall = time.perf_counter() - t
    shutil.rmtree(led, ignore_errors=True)
    st = pstats.Stats(str(prof))
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # type: ignore[attr-defined]
    rows = [r for r in rows if not WRAPPER.search(f"{r[0][0]}:{r[0][2]}")]  # the call chain down to `apply`
    top = []
    for (file, line, fn), (cc, nc, tt, ct, _) in rows[:15]:
        where = re.sub(r".*/(site-packages|work/main)/", "", file)
        top.append({"function": f"{where}:{line}({fn})", "ncalls": nc, "tottime": tt, "cumtime": ct})
    res: dict[str, Any] = {"cprofile_wall_s": wall, "cprofile_top15": top}
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if Path(pyspy).is_file():
        raw = tmp / "pyspy.txt"
        led = tmp / "L-spy"
        p = subprocess.run(
            [
                pyspy,
                "record",
                "-r",
                "250",
                "-f",
                "raw",
                "-o",
                str(raw),
                "--",
                PITHLEDGER,
                "--ledger",
                str(led),
                "apply",
                str(f_papers),
                "--batch-size",
                "10000",
                "-q",
            ],
            capture_output=True,
        )
        shutil.rmtree(led, ignore_errors=True)
        if p.returncode == 0 and raw.exists():
            incl: dict[str, int] = {}
            total = 0
            for line in raw.read_text().splitlines():
                stack, _, n = line.rpartition(" ")
                total += int(n)
                names = {
                    re.sub(r":\d+\)$", ")", re.sub(r"\s*\(.*?/(site-packages|work/main)/", " (", fr))
                    for fr in stack.split(";")[1:]
                }  # first item is the thread; one count per function per sample
                for name in names:
                    if not WRAPPER.search(name.replace(" (", ":")):
                        incl[name] = incl.get(name, 0) + int(n)
            res["pyspy_total_samples"] = total
            res["pyspy_top15"] = [
                {"function": k, "share": v / total} for k, v in sorted(incl.items(), key=lambda kv: -kv[1])[:15]
            ]
    return res


# --- the table --------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def targets(R: dict[str, Any]) -> list[tuple[str, str, str]]:
    A, rv = R["apply"], R["raw_verify"]
    out = []
    for shape in ("papers", "events"):
        x = A[shape]["x_raw_2t"]
        out.append((f"apply ({shape}) >= 0.75 x raw verify 2T", f"{x:.2f} x", verdict(x >= 0.75)))
    out.append(
        (
            "apply >= 10 x idiomatic peer",
            f"{R['peer']['idiomatic']['pithledger_papers_x']:.1f} x",
            verdict(R["peer"]["idiomatic"]["pithledger_papers_x"] >= 10),
        )
    )
    out.append(
        (
            "apply >= 5 x batched peer",
            f"{R['peer']['batched']['pithledger_papers_x']:.1f} x",
            verdict(R["peer"]["batched"]["pithledger_papers_x"] >= 5),
        )
    )
    out.append(
        (
            "peak RSS <= 300 MB (every apply)",
            f"{R['peak_rss_mb_all_applies']:.0f} MiB",
            verdict(R["peak_rss_mb_all_applies"] <= 300),
        )
    )
    out.append(("hot record: apply 20 <= 2 x apply 1", f"{R['hot']['ratio']:.2f} x", verdict(R["hot"]["ratio"] <= 2)))
    c = R["cited"]
    out.append(
        (
            "4 000 citers linear (last 1k increment <= 1.5 x first)",
            f"{c['increment_ratio_last_first']:.2f} x (single shot 4k/1k {c['single_ratio_4000_1000']:.2f})",
            verdict(c["increment_ratio_last_first"] <= 1.5 and c["single_ratio_4000_1000"] <= 4 * 1.25),
        )
    )
    out.append(("state <= 2 x bare import", f"{R['state']['ratio']:.2f} x", verdict(R["state"]["ratio"] <= 2)))
    out.append(
        (
            "sync <= 3 x apply of the same data",
            f"{R['sync']['x_apply_papers_wall']:.2f} x",
            verdict(R["sync"]["x_apply_papers_wall"] <= 3),
        )
    )
    for name in ("fsck", "rebuild"):
        x = R["from_log"][name]["x_raw_1t"]
        out.append((f"{name} (signatures reused) >= 5 x raw verify 1T", f"{x:.2f} x", verdict(x >= 5)))
    _ = rv
    return out


def print_table(R: dict[str, Any]) -> None:
    W, rv, A, m = R["workload"], R["raw_verify"], R["apply"], R["machine"]
    L: list[str] = []
    L.append(
        f"pithledger bench suite, scale {R['scale']}, {m['date']}, nproc {m['nproc']}, {m['python']}, {m['cpu']}, {m['code']}"
    )
    L.append(
        f"workload: {W['papers']:,} papers x 20 events = {W['events']:,} events, 64 signers; canonical event "
        f"{W['canonical_event_bytes_mean']:.0f} B, event line {W['event_line_bytes_mean']:.0f} B; bootstrap {W['bootstrap_records']:,} records"
    )
    L.append("")
    L.append(f"| {'measure':<52} | {'value':>44} |")
    L.append(f"|{'-' * 54}|{'-' * 46}|")

    def row(k: str, v: str) -> None:
        L.append(f"| {k:<52} | {v:>44} |")

    row("raw Ed25519 verify, 1 thread (PyNaCl)", f"{rv['rate_1t']:,.0f} ev/s")
    row("raw Ed25519 verify, 2 threads", f"{rv['rate_2t']:,.0f} ev/s ({rv['speedup_2t']:.2f} x)")
    for shape, label in (
        ("papers", "apply, one bundle per paper"),
        ("events", "apply, one event per line, shuffled"),
        ("bootstrap", "apply, bulk bootstrap (1 record_created/record)"),
    ):
        a = A[shape]
        row(label, f"{a['rate']:,.0f} ev/s = {a['x_raw_1t']:.2f} x 1T, {a['x_raw_2t']:.2f} x 2T")
        row(
            "  wall / peak RSS (anon a/file f) / data.mdb per ev",
            f"{a['wall']:.1f} s / {a['rss_mb']:.0f} ({a['anon_mb']:.0f}a/{a['file_mb']:.0f}f) MiB / {a['bytes_per_event']:,.0f} B",
        )
    row("canonical event size (mean)", f"{W['canonical_event_bytes_mean']:.0f} B")
    s = R["state"]
    row(
        "state latency / bare import (median)",
        f"{1000 * s['state_s']:.0f} ms / {1000 * s['bare_import_s']:.0f} ms = {s['ratio']:.2f} x",
    )
    for mode in ("idiomatic", "batched"):
        p = R["peer"][mode]
        row(
            f"eventsourcing+SQLite peer, {mode}",
            f"{p['rate']:,.0f} ev/s ({p['events']:,} ev, {p['rss_mb']:.0f} MiB); ours {p['pithledger_papers_x']:.1f} x",
        )
    h = R["hot"]
    row(
        "hot record: 20 applies x 1 000 events, first / last",
        f"{h['first']:.2f} s / {h['last']:.2f} s = {h['ratio']:.2f} x",
    )
    row("  mean of last 3 / mean of first 3", f"{h['ratio_mean_last3_first3']:.2f} x")
    c = R["cited"]
    row("cited record: 1 000-citer applies (cumulative)", " / ".join(f"{w:.2f}" for w in c["incremental_walls"]) + " s")
    row(
        "  cumulative at 1 000 / 2 000 / 4 000 citers",
        " / ".join(f"{w:.2f}" for w in c["cumulative_1000_2000_4000"]) + " s",
    )
    row(
        "  single shot 1 000 / 2 000 / 4 000 citers",
        " / ".join(f"{v['wall']:.2f}" for v in c["single_shot"].values()) + " s",
    )
    for name, v in R["from_log"].items():
        row(name, f"{v['rate']:,.0f} ev/s = {v['x_raw_1t']:.2f} x 1T ({v['wall']:.1f} s)")
    row(
        "sync of the papers ledger (published tree)",
        f"{R['sync']['wall']:.1f} s = {R['sync']['x_apply_papers_wall']:.2f} x its apply",
    )
    row("peak RSS over every apply of the run", f"{R['peak_rss_mb_all_applies']:.0f} MiB")
    L.append("")
    L.append(
        f"| {'ledger events':>13} | {'apply ev/s':>10} | {'peak RSS MiB':>12} | {'anon/file MiB':>13} | {'state ms':>8} | {'hot batch s':>11} | {'cited batch s':>13} | {'B/event':>7} |"
    )
    L.append(f"|{'-' * 15}|{'-' * 12}|{'-' * 14}|{'-' * 15}|{'-' * 10}|{'-' * 13}|{'-' * 15}|{'-' * 9}|")
    for g in R["growth"]:
        L.append(
            f"| {g['ledger_events']:>13,} | {g['rate']:>10,.0f} | {g['rss_mb']:>12.0f} | {g['anon_mb']:>6.0f}/{g['file_mb']:<6.0f} | {1000 * g['state_s']:>8.0f} | "
            f"{g['hot_batch_s']:>11.2f} | {g['cited_batch_s']:>13.2f} | {g['bytes_per_event']:>7,.0f} |"
        )
    L.append("")
    L.append(f"| {'target':<56} | {'measured':>44} | {'':<6} |")
    L.append(f"|{'-' * 58}|{'-' * 46}|{'-' * 8}|")
    for name, val, ok in targets(R):
        L.append(f"| {name:<56} | {val:>44} | {ok:<6} |")
    R["targets"] = [{"target": n, "measured": v, "verdict": o} for n, v, o in targets(R)]
    for f in R["failures"]:
        L.append("FAILURE: " + f)
    print("\n" + "\n".join(L))
    R["table"] = "\n".join(L)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_peer":
        peer_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
