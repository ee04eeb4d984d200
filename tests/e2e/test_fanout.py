"""ledger/fanout.py alone: order kept under random delays, the look-ahead bound, a lost worker's part
redone, the function's own exception raised again; on every executor kind (spec/storage.md §7)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from helpers.common import ROOT
from helpers.fanout import _fails_on_seven, _parts, _slow_square
from helpers.site import BUNDLES
from pithledger.fanout import Fanout


def _kills_its_worker_once(part: tuple[int, str]) -> int:
    """Kills the process running it the first time it runs part 5 (a marker file says it ran)."""
    n, marker = part
    if n == 5 and not os.path.exists(marker):
        with open(marker, "w"):
            pass
        os.kill(os.getpid(), signal.SIGKILL)
    return n * 10


def test_a_worker_killed_mid_part_is_redone_in_place(tmp_path: os.PathLike[str]) -> None:
    marker = os.path.join(tmp_path, "killed")
    with Fanout.processes(2) as fan:
        got = list(fan.map(_kills_its_worker_once, iter([(n, marker) for n in range(20)])))
        assert os.path.exists(marker)  # part 5 did kill its worker
        assert fan.lost
    assert got == [n * 10 for n in range(20)]


def test_a_worker_killed_from_outside_changes_nothing() -> None:
    parts = _parts(60, seed=8)
    with Fanout.processes(2) as fan:
        out: list[int] = []
        for r in fan.map(_slow_square, iter(parts)):
            out.append(r)
            if len(out) == 5:
                pids = fan.worker_pids()
                assert pids
                os.kill(pids[0], signal.SIGKILL)
    assert out == [n * n for n, _ in parts]


# --- Dask --------------------------------------------------------------------------------------------

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A LocalCluster of 2 worker processes for this module's tests, closed after them."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", worker_dashboard_address=":0"
    ) as local:
        yield str(local.scheduler_address)


def test_dask_keeps_order_and_bound(cluster: str) -> None:
    parts = _parts(30, seed=11)
    with Fanout.dask(cluster) as fan:
        assert fan.kind == "dask" and fan.workers == 2
        assert list(fan.map(_slow_square, iter(parts), ahead=3)) == [n * n for n, _ in parts]


def test_dask_raises_the_functions_own_exception(cluster: str) -> None:
    with Fanout.dask(cluster) as fan, pytest.raises(ValueError, match="a bug at 7"):
        list(fan.map(_fails_on_seven, iter(range(10))))


def test_dask_a_killed_worker_changes_nothing(cluster: str, tmp_path: os.PathLike[str]) -> None:
    """The worker running part 5 kills itself: Dask reruns the part elsewhere, or it is redone here."""
    marker = os.path.join(tmp_path, "killed")
    with Fanout.dask(cluster) as fan:
        got = list(fan.map(_kills_its_worker_once, iter([(n, marker) for n in range(12)])))
    assert os.path.exists(marker)
    assert got == [n * 10 for n in range(12)]


def test_dask_a_scheduler_gone_mid_run_changes_nothing() -> None:
    """The whole cluster closes after 10 results: the rest is computed here, in order, in bounded time."""
    from distributed import LocalCluster

    parts = [(i, 0.05) for i in range(60)]
    out: list[int] = []
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with Fanout.dask(str(cluster.scheduler_address)) as fan:
        started = time.monotonic()
        for r in fan.map(_slow_square, iter(parts)):
            out.append(r)
            if len(out) == 10:
                cluster.close()
        assert fan.lost
        assert time.monotonic() - started < 120
    assert out == [n * n for n, _ in parts]


def test_a_scheduler_without_workers_is_a_named_error_not_a_five_minute_stall() -> None:
    from distributed import LocalCluster

    from pithledger.errors import SchedulerUnreachable

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty:
        started = time.monotonic()
        with pytest.raises(SchedulerUnreachable, match="no workers"):
            Fanout.dask(empty.scheduler_address, connect_timeout=5)
        assert time.monotonic() - started < 30


# --- through the CLI: the same inputs on every executor give the same ledger byte for byte -----------

import hashlib  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import lmdb

from helpers.clikit import _junk, _pithledger
from pithledger.records.bundle import write_bundle  # noqa: E402
from pithledger.records.canonical import canonical_bytes  # noqa: E402
from pithledger.records.events import make_event  # noqa: E402
from pithledger.records.keys import LocalKey  # noqa: E402
from pithledger.records.model import record_ids  # noqa: E402

#: The CLI with every threshold lowered, so that these small inputs take the parallel path of every
#: pass (regions checked, chunks verified, states derived, fsck's parts): the path big runs take.
SMALL_PARTS = """
import atexit, json, os, sys
from pithledger.ingest import bundles as _bundles
from pithledger.store import StoreTuning, log, pending, snapshot, tuned
_bundles.REGION_BYTES = 4000
{patch}
atexit.register(lambda: print("snapshot-parts " + json.dumps(pending._snapshot_stats), file=sys.stderr))
atexit.register(lambda: print("precheck " + json.dumps(log._precheck_stats), file=sys.stderr))
sys.argv = ["pithledger"] + sys.argv[1:]
from pithledger.cli import main
with tuned(StoreTuning(**{settings})):  # every ledger handle the command opens
    main()
"""
SMALL = {
    "verify_chunk": 8,
    "process_after_chunks": 2,
    "parallel_states": 1,
    "derive_part_records": 3,
    "fsck_part": 4,
    "snapshot_part": 2,
    "start_workers_from": 0,
}


def _key(i: int) -> LocalKey:
    return LocalKey(name=f"fanout-{i}", seed=hashlib.sha256(f"pithledger fanout test key {i}".encode()).digest())


def _workload(directory: Path) -> list[Path]:
    """60 minted records with attestations, citations among them and a revoked citation, their events
    spread over two files and several lines per record; and junk: an event whose signature was
    altered (invalid), one line that is not JSON (--keep-going skips it), a repeated line."""
    base = [
        json.loads(line) for line in (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_text().splitlines()
    ]
    recs = []
    for i in range(60):
        rec = json.loads(json.dumps(base[i % len(base)]))
        rec["source"]["id"] = f"2611.{i:05d}"
        rec["metadata"]["title_canon_sha256"] = hashlib.sha256(f"fanout {i}".encode()).hexdigest()
        recs.append(rec)
    ids = [record_ids(r) for r in recs]
    keys = [_key(i) for i in range(5)]
    first: list[bytes] = []
    second: list[bytes] = []
    for i, (rec, rid) in enumerate(zip(recs, ids)):
        when = f"2026-06-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
        created = make_event(
            "record_created",
            rid.pith_number,
            {"canonical_record": rec, "canonical_sha256": rid.canonical_sha256},
            keys[i % 5],
            created_at=when,
        )
        events = [
            make_event(
                "author_attestation",
                rid.pith_number,
                {"author_name": f"Author {i}.{j}"},
                keys[(i + j) % 5],
                created_at=when,
            )
            for j in range(2)
        ]
        cites = [
            make_event(
                "citation_signature",
                rid.pith_number,
                {"cited_pith_number": ids[(i + d) % 60].pith_number, "relation": "cites"},
                keys[(i + d) % 5],
                created_at=when,
            )
            for d in (1, 7, 13)
        ]
        later = []
        if i % 4 == 0:  # the signer of a citation revokes it: the citation stops standing
            later.append(
                make_event(
                    "revocation",
                    rid.pith_number,
                    {"revoked_event_id": cites[0]["event_id"]},
                    keys[(i + 1) % 5],
                    created_at=f"2026-07-{1 + i % 28:02d}T00:00:00Z",
                )
            )
        if i % 10 == 3:  # an altered signature: invalid, kept as evidence
            bad = dict(events[0], payload={"author_name": f"Forged {i}"})
            later.append(bad)
        first.append(
            canonical_bytes(
                write_bundle(
                    rid.pith_number, [created, *events], canonical_record=rec, aliases_created_at="2026-05-31T00:00:00Z"
                )
            )
            + b"\n"
        )
        second.append(canonical_bytes(write_bundle(rid.pith_number, cites)) + b"\n")
        if later:
            second.append(canonical_bytes(write_bundle(rid.pith_number, later)) + b"\n")
    second.insert(17, b"{not json\n")
    second.append(second[3])  # offered again: duplicates
    a, b = directory / "generated-a.jsonl", directory / "generated-b.jsonl"
    a.write_bytes(b"".join(first))
    b.write_bytes(b"".join(second))
    return [ROOT / "bundles", a, b]


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _workload(tmp_path_factory.mktemp("workload"))


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


def _start(tmp: Path, ledger: Path, *args: str, patch: str = "") -> subprocess.Popen[str]:
    code = SMALL_PARTS.replace("{settings}", repr(SMALL)).replace("{patch}", patch)
    return subprocess.Popen(
        [sys.executable, "-c", code, "--ledger", str(ledger), *args],
        env=_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(tmp: Path, ledger: Path, *args: str, expect: tuple[int, ...] = (0,)) -> str:
    proc = _start(tmp, ledger, *args)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode in expect, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    return out


def _dump(ledger: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every LMDB database of the ledger, every key and value (dupsort values included)."""
    import lmdb

    env = lmdb.open(str(ledger), readonly=True, lock=False, max_dbs=64, subdir=True)
    try:
        with env.begin() as txn:
            names = [bytes(k) for k, _ in txn.cursor()]
            out = {"": [(bytes(k), bytes(v)) for k, v in txn.cursor()]}
            for name in names:
                db = env.open_db(name, txn=txn, create=False)
                out[name.decode()] = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)]
    finally:
        env.close()
    return out


def _everything(tmp: Path, ledger: Path, extra: tuple[str, ...], during: Any = None) -> dict[str, Any]:
    """apply the workload (batches of 40 events, junk skipped), fsck --reverify, rebuild --force; the
    ledger's every database and what the queries print, after each step."""
    args = ("apply", "--keep-going", "--batch-size", "40", "--json", *extra, *map(str, workload_paths))
    proc = _start(tmp, ledger, *args)
    if during is not None:
        during(proc)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-2000:]  # invalid events and a skipped line
    assert "Traceback" not in err, err[-2000:]
    applied = json.loads(out.splitlines()[-1]) if out.strip() else {}
    got: dict[str, Any] = {"apply": applied, "dump": _dump(ledger)}
    got["digest"] = _run(tmp, ledger, "digest", "--json")
    fsck = json.loads(_run(tmp, ledger, "fsck", "--reverify", "--json", *extra))
    assert fsck.pop("ledger") == str(ledger) and fsck["ok"], fsck
    got["fsck"] = fsck
    got["evidence"] = _run(tmp, ledger, "evidence", "--json")
    _run(tmp, ledger, "rebuild", "--force", "--json", *extra)
    got["rebuilt"] = _dump(ledger)
    got["rebuilt-digest"] = _run(tmp, ledger, "digest", "--json")
    return got


workload_paths: list[Path] = []


@pytest.fixture(scope="module")
def reference(workload: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ledger built in place (--workers 0): what every other executor must give byte for byte."""
    workload_paths[:] = workload
    tmp = tmp_path_factory.mktemp("reference")
    got = _everything(tmp, tmp / "ledger", ("--workers", "0"))
    assert (
        got["apply"]["invalid"] > 0 and got["dump"]["log"] and got["dump"]["inbound"]
    )  # the workload does what it says
    return got


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    for part in want:
        if isinstance(want[part], dict) and part in ("dump", "rebuilt"):
            assert set(got[part]) == set(want[part])
            for name in want[part]:
                assert got[part][name] == want[part][name], f"{part}: database {name!r} differs"
        else:
            assert got[part] == want[part], part


@pytest.mark.parametrize("workers", ["1", "2"])
def test_local_workers_give_the_same_ledger_byte_for_byte(
    reference: dict[str, Any], tmp_path: Path, workers: str
) -> None:
    _same(_everything(tmp_path, tmp_path / "ledger", ("--workers", workers)), reference)


def _children(pid: int) -> list[int]:
    """The worker processes forked by ``pid`` (same command line as their parent)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        mine = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [int(k) for k in kids if Path(f"/proc/{k}/cmdline").read_bytes() == mine]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_a_worker_process_killed_mid_run_changes_nothing(reference: dict[str, Any], tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_one(proc: subprocess.Popen[str]) -> None:
        while proc.poll() is None and not killed:
            for child in _children(proc.pid):
                os.kill(child, signal.SIGKILL)
                killed.append(child)
                break
            time.sleep(0.005)

    got = _everything(tmp_path, tmp_path / "ledger", ("--workers", "2"), during=kill_one)
    assert killed  # a worker was killed while apply ran
    _same(got, reference)


def test_a_dask_cluster_gives_the_same_ledger_byte_for_byte(
    reference: dict[str, Any], cluster: str, tmp_path: Path
) -> None:
    _same(_everything(tmp_path, tmp_path / "ledger", ("--scheduler", cluster)), reference)


def test_a_dask_worker_killed_mid_run_changes_nothing(reference: dict[str, Any], cluster: str, tmp_path: Path) -> None:
    from distributed import Client

    killed: list[str] = []

    def kill_one(proc: subprocess.Popen[str]) -> None:
        def kill() -> None:
            with Client(cluster, timeout=10, set_as_default=False) as client:
                time.sleep(0.3)
                victim = sorted(client.scheduler_info()["workers"])[0]
                try:
                    client.run(os._exit, 1, workers=[victim], wait=False)
                except Exception:  # noqa: BLE001 - the worker went before it answered
                    pass
                killed.append(victim)

        thread = threading.Thread(target=kill)
        thread.start()
        thread.join(30)

    got = _everything(tmp_path, tmp_path / "ledger", ("--scheduler", cluster), during=kill_one)
    assert killed
    _same(got, reference)


def test_scheduler_errors_are_named_not_tracebacks(tmp_path: Path, workload: list[Path]) -> None:
    env = _env(tmp_path)
    started = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pithledger.cli",
            "--ledger",
            str(tmp_path / "l"),
            "apply",
            str(workload[1]),
            "--scheduler",
            "tcp://127.0.0.1:9",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "error[scheduler-unreachable]" in r.stderr and "tcp://127.0.0.1:9" in r.stderr, (
        r.stderr
    )
    assert time.monotonic() - started < 60
    assert not (tmp_path / "l").exists()  # nothing written
    no_dask = "import sys; sys.modules['distributed'] = None; sys.argv = ['pithledger'] + sys.argv[1:]; from pithledger.cli import main; main()"
    r = subprocess.run(
        [sys.executable, "-c", no_dask, "--ledger", str(tmp_path / "l"), "fsck", "--scheduler", "tcp://127.0.0.1:9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "error[dask-not-installed]" in r.stderr and "pithledger[dask]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# --- finishing's inputs read on the workers (ledger/store/snapshot.py, spec/storage.md §3.4) ------------


def _apply_with(
    tmp: Path, ledger: Path, patch: str = "", *, rebuild: bool = False
) -> tuple[dict[str, list[tuple[bytes, bytes]]], dict[str, int]]:
    """apply the workload on 2 local workers (or ``rebuild`` the ledger) with ``patch`` run first in the
    CLI's process (its workers are forked from it); the ledger's databases, and how many finishing
    parts the workers read."""
    args = (
        ("rebuild", "--force", "--json")
        if rebuild
        else ("apply", "--keep-going", "--batch-size", "40", "--json", *map(str, workload_paths))
    ) + ("--workers", "2")
    proc = _start(tmp, ledger, *args, patch=patch)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == (0 if rebuild else 1), err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    stats = json.loads(err.rsplit("snapshot-parts ", 1)[1].splitlines()[0])
    stats["precheck"] = json.loads(err.rsplit("precheck ", 1)[1].splitlines()[0])
    return _dump(ledger), stats


def test_workers_read_finishings_inputs_from_the_snapshot(reference: dict[str, Any], tmp_path: Path) -> None:
    """apply forks its workers while it checks its input, before it opens the ledger: they read every
    part of every finishing step themselves, and the ledger is the in-place one, byte for byte."""
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger")
    assert stats["read"] > 0 and stats["fallback"] == 0, stats
    assert dump == reference["dump"]
    # rebuild starts its workers before it opens a ledger (Fanout.start): they read the new one's snapshots
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger", rebuild=True)
    assert stats["read"] > 0 and stats["fallback"] == 0, stats
    assert dump == reference["rebuilt"]


def test_the_reading_workers_verify_what_they_prepare_where_it_is_new(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    """Into an empty ledger, apply's reading workers verify each copy they prepare (spec/storage.md
    §3.2): the batches hand none over again, and the ledger is the in-place one, byte for byte; the
    same input applied again (all of it held) is not verified there at all. rebuild's workers verify
    what they prepare too."""
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger")
    assert stats["precheck"]["came_verified"] > 0 and stats["precheck"]["handed_over"] == 0, stats
    assert dump == reference["dump"]
    again, stats = _apply_with(tmp_path, tmp_path / "ledger")
    assert stats["precheck"]["came_verified"] == 0, stats
    # only duplicates: every database holds what it held (their pages may have moved: the root's records)
    assert {k: v for k, v in again.items() if k} == {k: v for k, v in dump.items() if k}
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger", rebuild=True)
    assert stats["precheck"]["came_verified"] > 0 and stats["precheck"]["handed_over"] == 0, stats
    assert dump == reference["rebuilt"]


@pytest.mark.parametrize(
    "mutation",
    [
        # the snapshot another transaction began from: every worker refuses it, the writer reads every part
        "snapshot-of-another-transaction:pending.snapshot_of = (lambda f: lambda l, t: (lambda s: s and s._replace(txn_id=s.txn_id + 1))(f(l, t)))(snapshot.snapshot_of)",
        # other files at the same path (rebuild swapped the ledger in): refused the same way
        "snapshot-of-other-files:pending.snapshot_of = (lambda f: lambda l, t: (lambda s: s and s._replace(files=(0, 0)))(f(l, t)))(snapshot.snapshot_of)",
        # a worker that cannot open the ledger (forked after the writer opened it: py-lmdb refuses a second open)
        "ledger-already-open:snapshot._reader = lambda snap: None",
    ],
)
def test_a_snapshot_the_workers_cannot_read_is_read_by_the_writer(
    reference: dict[str, Any], tmp_path: Path, mutation: str
) -> None:
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger", patch=mutation.split(":", 1)[1])
    assert stats["read"] == 0 and stats["fallback"] > 0, stats
    assert dump == reference["dump"]


def test_a_worker_killed_while_it_reads_the_snapshot_changes_nothing(reference: dict[str, Any], tmp_path: Path) -> None:
    """The first worker to read a states step's part dies there (as if killed): its part, and every
    later one, is read and derived by the writer; the ledger is the in-place one."""
    marker = tmp_path / "killed"
    patch = f"""
_derive_states = snapshot.derive_states
def _dies_once(task, **kw):
    try:
        fd = os.open({str(marker)!r}, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return _derive_states(task, **kw)
    os.close(fd)
    os._exit(1)
pending.derive_states = _dies_once
"""
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger", patch=patch)
    assert marker.exists() and stats["fallback"] > 0, stats
    assert dump == reference["dump"]


def test_a_worker_killed_inside_its_read_transaction_leaves_no_reader_slot(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    """The first worker to read its part's inputs dies inside its read transaction (its LMDB reader slot
    taken): the writer does the rest, and its dead reader's slot, which would keep LMDB from reusing
    the pages of that snapshot, is cleared (by the writer when it is refused, and by any writer that
    opens the ledger: workers the pool terminates after a loss can die later still)."""
    import lmdb

    from pithledger.store import Ledger

    marker, ledger = tmp_path / "killed", tmp_path / "ledger"
    Ledger(ledger, create=True).close()
    held = lmdb.open(str(ledger), readonly=True, max_dbs=64)  # held open: the reader table outlives the run
    try:
        patch = f"""
from pithledger.store import views
_gather = views._Views._gather
def _dies_once(self, txn, subject, **kw):
    if self._core.env.flags()["readonly"]:  # a worker's own handle, inside its read transaction
        try:
            os.close(os.open({str(marker)!r}, os.O_CREAT | os.O_EXCL))
            os._exit(1)
        except FileExistsError:
            pass
    return _gather(self, txn, subject, **kw)
views._Views._gather = _dies_once
"""
        args = ("apply", "--keep-going", "--batch-size", "40", "--json", *map(str, workload_paths), "--workers", "2")
        proc = _start(tmp_path, ledger, *args, patch=patch)
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 1 and "Traceback" not in err, err[-2000:]
        assert marker.exists() and '"fallback": 1' in err, err[-500:]
        code = f"from pithledger.store import Ledger; Ledger(__import__('pathlib').Path({str(ledger)!r})).close()"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)  # a writer opens the ledger
        assert held.reader_check() == 0  # no dead reader's slot is left
    finally:
        held.close()
    assert _dump(ledger) == reference["dump"]


def test_a_part_refused_in_the_middle_of_a_states_step_changes_nothing(
    reference: dict[str, Any], tmp_path: Path
) -> None:
    """The workers read a states step's first part, then refuse the second: the writer derives that
    part and the rest of the step itself, after the prefix the workers derived."""
    patch = """
_derive_states = pending.derive_states
_calls = [0]
def _refuses_the_second(task, **kw):
    _calls[0] += 1
    return None if _calls[0] == 2 else _derive_states(task, **kw)
pending.derive_states = _refuses_the_second
"""
    dump, stats = _apply_with(tmp_path, tmp_path / "ledger", patch=patch)
    assert stats["read"] > 1 and stats["fallback"] == 1, (
        stats
    )  # the citations steps and the first states part were read
    assert dump == reference["dump"]


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie is dead; only its parent's parent has not reaped it


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
@pytest.mark.skipif(not Path("/proc/self/task").exists() or (os.cpu_count() or 1) < 2, reason="needs /proc and 2 cores")
def test_workers_exit_when_apply_is_killed(tmp_path: Path) -> None:
    """kill -9 of an apply whose worker processes run: they end too, instead of waiting on their task
    queue forever (each ~45 MiB, holding the ledger's files open)."""
    ledger = tmp_path / "L"
    assert (
        _pithledger("--ledger", str(ledger), "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode
        == 0
    )
    data = tmp_path / "junk.jsonl"
    _junk(data, 3000, 10)  # 30,000 copies to verify in 3 batches: the 4th chunk of 512 starts the worker processes
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    env = lmdb.open(str(ledger), max_dbs=32, subdir=True)
    txn = None
    try:
        workers: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            workers = {c for c in _children(proc.pid) if _alive(c)}
            time.sleep(0.02)
        assert len(workers) >= 2, "the apply never started its worker processes"
        # Take the ledger's writer lock: the apply, still verifying on its workers, then waits to write.
        txn = env.begin(write=True)
        assert proc.poll() is None and all(_alive(w) for w in workers)
        proc.kill()  # SIGKILL: nothing in the parent runs
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
    finally:
        if txn is not None:
            txn.abort()
        env.close()
        if proc.poll() is None:
            proc.kill()
    for w in left:  # do not leave them behind for the next tests
        os.kill(w, signal.SIGKILL)
    assert left == [], f"worker processes {left} outlived their killed parent"
