"""Issue #20 §4 and §6, as a user meets them: processes and concurrency (workers that outlive a killed
apply, evidence counted twice by two writers, a map grown by another process), and the command line
(a full stdout, --json errors, a directory that is not a ledger, rebuild, help, --key-dir, messages,
the progress line). Real processes, real LMDB ledgers, the real entry point."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import lmdb
import pytest

from helpers.adversary import unsigned_pith_event
from helpers.common import FIXTURES
from helpers.eventpool import ALICE

from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.store import Ledger
from helpers.common import ROOT

BUNDLES = ROOT / "bundles"
NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PITHLEDGER_LEDGER", "PITHLEDGER_KEYS")}
    return env | {"XDG_DATA_HOME": str(tmp_path / "xdg-data"), "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")} | extra


def _pith(n: int) -> str:
    import base64
    import hashlib

    return "pith:2026:" + base64.b32encode(hashlib.sha256(b"hardening %d" % n).digest()).decode()[:26]


def _junk(path: Path, subjects: int, per: int, first: int = 0) -> int:
    """A .jsonl file of Pith-envelope events nobody can check (kept as evidence), one subject a bundle."""
    with path.open("wb") as fh:
        for s in range(first, first + subjects):
            events = [unsigned_pith_event(_pith(s), n=s * 100_000 + i) for i in range(per)]
            fh.write(canonical_bytes(write_bundle(_pith(s), events)) + b"\n")
    return subjects * per


def _pithledger(*args: str, cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(cwd), timeout=120, **kw)


# --- §4.1 workers exit when their parent dies --------------------------------------------------------


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


@pytest.mark.skipif(not Path("/proc/self/task").exists() or (os.cpu_count() or 1) < 2, reason="needs /proc and 2 cores")
def test_workers_exit_when_apply_is_killed(tmp_path: Path) -> None:
    """kill -9 of an apply whose worker processes run: they end too, instead of waiting on their task
    queue forever (each ~45 MiB, holding the ledger's files open)."""
    ledger = tmp_path / "L"
    assert _pithledger("--ledger", str(ledger), "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode == 0
    data = tmp_path / "junk.jsonl"
    _junk(data, 3000, 10)  # 30,000 copies to verify in 3 batches: the 4th chunk of 512 starts the worker processes
    proc = subprocess.Popen([sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "apply", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path), cwd=tmp_path)
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


# --- §4.2 two writers offering the same junk --------------------------------------------------------


def _usage(ledger: Ledger) -> tuple[Any, dict[str, Any]]:
    return ledger.evidence_usage(), dict(ledger.evidence_subjects())


def test_two_writers_offering_the_same_junk_count_it_once(tmp_path: Path) -> None:
    """Both writers look the copies up before either writes (as two processes do when one waits for
    the other's lock): the second finds them held in its write transaction and counts nothing."""
    junk = [unsigned_pith_event(_pith(1), n=i) for i in range(40)]
    bundle = write_bundle(_pith(1), junk)
    from pithledger.records.bundle import read_bundle

    with Ledger(tmp_path / "L", create=True) as ledger:
        first, second = ledger.batch(), ledger.batch()
        first.add(read_bundle(bundle))
        second.add(read_bundle(bundle))  # looked up before the first commits: nothing held yet
        a, b = first.commit(), second.commit()
        assert a.unverified == b.unverified == 40 and all(r.kept for r in a.rejected + b.rejected)
        total, per_record = _usage(ledger)
        held = ledger.evidence(_pith(1))
        assert (total.entries, per_record[_pith(1)].entries) == (len(held), len(held)) == (40, 40)
        assert total.bytes == sum(len(e.event) for _, e in held)
        assert ledger.fsck() == []


def _miscount(path: Path) -> None:
    """What the old code left after a race: counters above what is held (no entry changed)."""
    from pithledger.store import Usage, _entry_encoder

    env = lmdb.open(str(path), max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:
        evsize, meta = env.open_db(b"evsize", txn=txn), env.open_db(b"meta", txn=txn)
        txn.put(_pith(2).encode(), _entry_encoder.encode(Usage(9, 9999)), db=evsize)
        txn.put(b"evidence_usage", _entry_encoder.encode(Usage(8256, 10**6)), db=meta)
    env.close()


def test_fsck_names_each_evidence_miscount_and_repair_recounts(tmp_path: Path) -> None:
    _junk(tmp_path / "junk.jsonl", 3, 5)
    assert _pithledger("--ledger", "L", "apply", "junk.jsonl", cwd=tmp_path).returncode == 0
    _miscount(tmp_path / "L")
    r = _pithledger("--ledger", "L", "fsck", cwd=tmp_path)
    assert r.returncode == 1
    assert f"MISMATCH evidence usage of {_pith(2)} counts 9 copies (9,999 bytes) but 5 copies (" in r.stdout
    assert "MISMATCH the total evidence usage counts 8,256 copies (1,000,000 bytes) but 15 copies (" in r.stdout
    assert "fsck --repair" in r.stderr
    fixed = _pithledger("--ledger", "L", "fsck", "--repair", "--json", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    doc = json.loads(fixed.stdout)
    assert doc["ok"] is True and len(doc["repaired"]) == 2 and doc["problems"] == []
    assert _pithledger("--ledger", "L", "fsck", cwd=tmp_path).returncode == 0
    with Ledger(tmp_path / "L", readonly=True) as ledger:
        assert ledger.evidence_usage().entries == 15


# --- §4.3 a map grown by another process -------------------------------------------------------------

_OPENED_EARLY = textwrap.dedent("""
    import json, sys
    from pithledger.records.bundle import read_bundle
    from pithledger.errors import PithledgerError
    from pithledger.store import Ledger
    mode, path, bundle = sys.argv[1], sys.argv[2], sys.argv[3]
    ledger = Ledger(path, readonly=mode == "read", map_size=1 << 16)  # this process's map: no larger than the file
    print("open", ledger.env.info()["map_size"], flush=True)
    sys.stdin.readline()  # meanwhile another process grows the ledger
    try:
        if mode == "read":
            print(json.dumps({"pending": ledger.pending(), "events": ledger.counts()["events"]}))
        else:
            r = ledger.apply_batch([read_bundle(json.loads(open(bundle).read()))])
            print(json.dumps({"unverified": r.unverified, "map_size": ledger.env.info()["map_size"]}))
    except PithledgerError as exc:
        print(json.dumps({"error": exc.code, "message": exc.message, "hint": exc.hint}))
""")


@pytest.mark.parametrize("mode", ["write", "read"])
def test_a_handle_opened_before_another_process_grew_the_map_adopts_it(tmp_path: Path, mode: str) -> None:
    """MDB_MAP_RESIZED (a ledger grown past this handle's map since it opened) is adopted and the
    transaction begun again, not reported as a full disk."""
    _junk(tmp_path / "small.jsonl", 1, 1)
    _pithledger("--ledger", "L", "apply", "small.jsonl", cwd=tmp_path)
    (tmp_path / "one.json").write_bytes(canonical_bytes(write_bundle(_pith(99), [unsigned_pith_event(_pith(99), n=1)])))
    early = subprocess.Popen([sys.executable, "-c", _OPENED_EARLY, mode, str(tmp_path / "L"), str(tmp_path / "one.json")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
    assert early.stdout is not None and early.stdin is not None
    opened = early.stdout.readline().split()
    assert opened[0] == "open"
    _junk(tmp_path / "grow.jsonl", 200, 20, first=1000)  # 4,000 copies as evidence: several MiB more file
    grown = _pithledger("--ledger", "L", "apply", "grow.jsonl", cwd=tmp_path)
    assert "unverified" in grown.stdout
    assert (tmp_path / "L" / "data.mdb").stat().st_size > int(opened[1])  # past the early handle's map
    out, _ = early.communicate("go\n", timeout=120)
    result = json.loads(out.splitlines()[-1])
    assert "error" not in result, result
    if mode == "read":
        assert result["events"] == 0 and result["pending"] == 0
    else:
        assert result["unverified"] == 1 and result["map_size"] > int(opened[1])


# --- §6 a full stdout ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    assert _pithledger("--ledger", "L", "apply", str(BUNDLES), cwd=root).returncode == 0
    return root


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["digest"], ["log"], ["state", "2605.00424"], ["state", "2605.00424", "--view"],
                                  ["export", "2605.00424"], ["--json", "fsck"], ["evidence"], ["--help"],
                                  ["verify", str(BUNDLES / "demo-1905.08204.json")], ["ids", str(BUNDLES / "demo-1905.08204.json")]],
                         ids=" ".join)
def test_a_full_stdout_is_a_named_error(demo: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--ledger", "L", *args], stdout=full, stderr=subprocess.PIPE,
                           text=True, cwd=demo, env=_env(demo), timeout=120)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error[cannot-write-output]: cannot write the output to stdout: No space left on device\nhint: ")
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


# --- §6 --json errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["apply", "missing.json"], ["state", "2605.99999"], ["state", "hello"],
                                  ["log", "--ledger", "nowhere"], ["fsck", "--ledger", "nowhere"], ["evidence", "hello"],
                                  ["export", "hello"], ["verify", "--digest", "zz", "--signature", "AA=="], ["verify"], ["keys", "export", "nobody"],
                                  ["digest", "--ledger", "nowhere"]], ids=" ".join)
def test_every_command_with_json_prints_its_error_as_json(demo: Path, args: list[str]) -> None:
    plain = _pithledger("--ledger", "L", *args, cwd=demo)
    r = _pithledger("--ledger", "L", *args, "--json", cwd=demo)
    assert r.returncode == plain.returncode != 0
    assert r.stderr == plain.stderr  # the message a person reads is unchanged
    doc = json.loads(r.stdout.splitlines()[-1])
    code = re.match(r"error\[([a-z-]+)\]: (.*)", r.stderr)
    assert code is not None
    assert doc["error"] == code[1] and doc["message"] in code[2] and doc["hint"] in r.stderr
    assert set(doc) == {"error", "message", "hint"}


def test_state_json_errors_are_the_same_on_the_fast_path(demo: Path) -> None:
    full = "import sys; sys.argv[0] = 'pithledger'; from pithledger.cli import full; full()"
    for args in (["--ledger", "L", "--json", "state", "hello"], ["--json", "--ledger", "nowhere", "state", "2605.00424"]):
        fast = _pithledger(*args, cwd=demo)
        slow = subprocess.run([sys.executable, "-c", full, *args], capture_output=True, text=True, cwd=demo,
                              env=_env(demo), timeout=60)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
        assert json.loads(fast.stdout)["error"] in ("malformed-id", "no-ledger")


# --- §6 a directory that is not a ledger -----------------------------------------------------------


def test_apply_refuses_a_non_empty_directory_that_is_not_a_ledger(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "bundles").mkdir(parents=True)
    (site / "index.html").write_text("<h1>a published tree</h1>")
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    for target in (site, site / "index.html"):
        r = _pithledger("--ledger", str(target), "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path)
        assert r.returncode == 1 and r.stderr.startswith("error[not-a-ledger]: "), r.stderr
        assert "hint: " in r.stderr and "data.mdb" in r.stderr
    assert r.stderr.startswith(f"error[not-a-ledger]: {site / 'index.html'} is a file")
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before  # nothing written
    (tmp_path / "empty").mkdir()
    for fresh in ("empty", "new/deeper"):  # an empty or new directory becomes a ledger, and stays one
        for _ in range(2):
            r = _pithledger("--ledger", fresh, "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path)
            assert r.returncode == 0, r.stderr
    sidecar = _pithledger("--ledger", "empty", "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"),
                          cwd=tmp_path)
    assert sidecar.returncode == 0, sidecar.stderr
    assert _pithledger("--ledger", "empty", "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode == 0


# --- §6 rebuild, help, --key-dir -------------------------------------------------------------------


def test_rebuild_of_a_current_ledger_does_nothing_unless_forced(tmp_path: Path) -> None:
    assert _pithledger("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path).returncode == 0
    for _ in range(2):
        r = _pithledger("--ledger", "L", "rebuild", cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith("nothing to rebuild: L is already at pithledger-merge-v"), r.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("L")) == ["L"]
    assert json.loads(_pithledger("--ledger", "L", "rebuild", "--json", cwd=tmp_path).stdout)["already_current"] is True
    forced = _pithledger("--ledger", "L", "rebuild", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "the old ledger is at" in forced.stdout
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("L.")]) == 1


def _commands() -> list[list[str]]:
    from pithledger.cli.app import app
    import typer

    root = typer.main.get_command(app)
    out = []
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        out += [[name, sub] for sub in subs] if subs else [[name]]
    return out


def test_help_names_values_not_python_types(tmp_path: Path) -> None:
    commands = _commands()
    assert ["apply"] in commands and ["keys", "new"] in commands
    for command in [[], *commands]:
        r = _pithledger(*command, "--help", cwd=tmp_path)
        assert r.returncode == 0, command
        assert not re.search(r"<(list\[|str>|int|float|path|bool)", r.stdout), (command, r.stdout)
    assert "INPUT  Bundle files" in _pithledger("apply", "--help", cwd=tmp_path).stdout
    assert "--batch-size EVENTS" in _pithledger("apply", "--help", cwd=tmp_path).stdout


def test_key_dir_is_global(tmp_path: Path) -> None:
    made = _pithledger("--key-dir", "K", "keys", "new", "alice", cwd=tmp_path)
    assert made.returncode == 0 and "in K" in made.stdout, made.stderr
    for args in (["--key-dir", "K", "keys", "list"], ["keys", "list", "--key-dir", "K"], ["keys", "--key-dir", "K", "list"]):
        r = _pithledger(*args, cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith("alice\t"), (args, r.stdout, r.stderr)
    # given on the line, it wins over $PITHLEDGER_KEYS
    r = subprocess.run([sys.executable, "-m", "pithledger.cli", "--key-dir", "K", "keys", "list"], capture_output=True, text=True,
                       cwd=tmp_path, env=_env(tmp_path, PITHLEDGER_KEYS=str(tmp_path / "elsewhere")), timeout=60)
    assert r.stdout.startswith("alice\t"), r.stdout + r.stderr
    # accepted after any command, and used by the commands that sign
    payload = json.dumps({"author_name": "A. Author"})
    ev = _pithledger("event", "author_attestation", "--subject", NUMBER, "--key", "alice", "--payload", payload,
                     "-o", "e.json", "--key-dir", "K", cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    assert _pithledger("--key-dir", "K", "--ledger", "nowhere", "digest", cwd=tmp_path).stderr.startswith("error[no-ledger]")


# --- §6 messages -----------------------------------------------------------------------------------


def test_a_flipped_signature_byte_says_the_event_was_altered(tmp_path: Path) -> None:
    event = make_event("author_attestation", NUMBER, {"author_name": "A. Author"}, ALICE, created_at="2026-06-01T00:00:00Z")
    sig = event["signature_b64"]
    event["signature_b64"] = ("B" if sig[0] != "B" else "C") + sig[1:]
    (tmp_path / "flipped.json").write_bytes(canonical_bytes(write_bundle(NUMBER, [event])))
    r = _pithledger("verify", "flipped.json", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("invalid") and "[id-mismatch]" in r.stdout
    assert "altered after it was signed" in r.stdout and "the signature too" in r.stdout


def test_verify_lines_name_their_file(tmp_path: Path) -> None:
    r = _pithledger("verify", str(FIXTURES / "bundles"), cwd=tmp_path)
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    assert lines and all(line.startswith(str(FIXTURES / "bundles") + "/") for line in lines)
    assert any(line.startswith(f"{FIXTURES / 'bundles' / 'altered-created-at.json'}: invalid ") for line in lines)
    one = _pithledger("verify", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path)  # one file, one document: as before
    assert one.stdout.startswith("valid ")


# --- §6 the progress line --------------------------------------------------------------------------


def _on_a_terminal(args: list[str], cwd: Path, columns: int) -> tuple[int, str]:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pithledger.cli", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, env=_env(cwd, TERM="xterm", COLUMNS=str(columns)), cwd=cwd)
    os.close(slave)
    screen = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        proc.wait(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, screen.decode(errors="replace")


def _lines(screen: str) -> list[str]:
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    return [x for x in re.split(r"[\r\n]", plain) if x.strip()]


def test_the_progress_line_fits_80_columns(tmp_path: Path) -> None:
    _junk(tmp_path / "junk.jsonl", 40, 5)
    code, screen = _on_a_terminal(["--ledger", "L", "apply", "--batch-size", "20", "junk.jsonl"], tmp_path, 80)
    assert code == 0
    lines = _lines(screen)
    drawn = [x for x in lines if x.startswith(("checking", "applying", "deriving"))]
    assert any(x.startswith("applying") and "/200 events" in x for x in drawn), lines
    assert max(len(x) for x in drawn) < 80, max(drawn, key=len)


def test_checking_a_single_big_file_moves_by_bytes(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from pithledger.cli._output import Input
    from pithledger.cli._progress import ApplyProgress

    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * 30_000_000)
    out = io.StringIO()
    with ApplyProgress(True, console=Console(file=out, width=80, force_terminal=True, color_system=None)) as progress:
        progress.checking([Input(str(big), "big.jsonl")])
        progress.checked(12_000_000)  # what check_bundles yields as a region's documents are checked
    lines = _lines(out.getvalue())
    assert any("12.0 MB/30.0 MB" in x for x in lines), lines
    assert all(len(x) < 80 for x in lines)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_on_every_interface_needs_a_base_url(tmp_path: Path, host: str) -> None:
    """Bound to a wildcard address, the bound address is no URL anyone can follow: every link, the
    manifest and the record documents would advertise http://0.0.0.0:PORT. Refused before binding."""
    r = _pithledger("--ledger", str(tmp_path / "L"), "serve", "--host", host, "--port", "0", cwd=tmp_path)
    assert r.returncode == 2 and "error[usage]" in r.stderr and "--base-url" in r.stderr, r.stderr
    assert "serving" not in r.stderr
