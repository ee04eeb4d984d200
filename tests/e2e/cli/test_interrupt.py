"""Ctrl-C at any moment of an ``apply`` (issue #31): while the command's modules load, while its worker
processes start, while it works — it ends, exit 130, one line on stderr and no traceback; the ledger is
consistent, the same command run again finishes and ``fsck`` is clean. Each SIGINT goes to the whole
process group, as a terminal's Ctrl-C does (the workers get it too).

The moments are found by watching the real process (Linux /proc), not by sleeping: the first worker
process appearing (the pool is being forked, one worker after another), and the command's own imports
under way (msgspec's extension mapped). bench/bench_interrupt.py spreads 50 signals over the first 3 s
of an apply of 20,000 events."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches the process in /proc")

#: A run that has not ended this long after its SIGINT hangs (before the fix: for ever).
BOUND = 60.0


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(XDG_DATA_HOME=str(tmp / "xdg-data"), XDG_CONFIG_HOME=str(tmp / "xdg-config"))
    env.pop("PITHLEDGER_LEDGER", None)
    env.pop("PITHLEDGER_KEYS", None)
    return env


def _command() -> list[str]:
    """The console script, as people run it (its wrapper imports the package before main())."""
    script = Path(sys.executable).parent / "pithledger"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pithledger.cli"]


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~11 MB of really signed events: more than two 4 MiB regions, so apply checks them on its pool."""
    from pithledger.records.bundle import write_bundle
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import make_event
    from pithledger.records.keys import LocalKey

    key = LocalKey(name="interrupt", seed=hashlib.sha256(b"interrupt test key").digest())
    text = " ".join(f"finding {i} of the reproduction notes." for i in range(60))  # ~2 KB an event
    path = tmp_path_factory.mktemp("interrupt") / "big.jsonl"
    with path.open("wb") as fh:
        for b in range(250):
            subject = (
                "pith:2026:" + base64.b32encode(hashlib.sha256(b"interrupt subject %d" % b).digest()).decode()[:26]
            )
            events = [
                make_event(
                    "integrity_finding",
                    subject,
                    {"finding_type": "statistics_check", "severity": "info", "description": f"{b}-{i}: {text}"},
                    key,
                    created_at="2026-06-01T00:00:00Z",
                )
                for i in range(20)
            ]
            fh.write(canonical_bytes(write_bundle(subject, events)) + b"\n")
    assert path.stat().st_size > 2 * 4 * 1024 * 1024
    return path


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _mapped(pid: int, needle: str) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _as_from_a_terminal() -> None:
    """A suite started in the background (``pytest &`` in a script) runs with SIGINT ignored, and so
    would the command (which keeps it ignored, as nohup wants): start it as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _in_phase(pid: int, ledger: Path, when: str) -> bool:
    """Is the command still in the phase a test names, just before its signal? "workers": its pool has a
    worker and nothing is written yet (the ledger is created after the inputs are checked on the pool);
    "imports": it loads and parses — no worker yet, nothing written."""
    started = bool(_children(pid))
    return not ledger.exists() and (started if when == "workers" else not started)


def _interrupt(args: list[str], tmp: Path, when: str, delay: float) -> tuple[int | None, str, bool, bool]:
    """Start the command in its own process group; once ``when`` ("workers": its first worker process
    exists; "imports": msgspec is mapped) and ``delay`` seconds more, SIGINT the group. The exit code
    (None: still running after BOUND, then killed), stderr, whether the signal was sent, and whether it
    was sent in the phase ``when`` names (:func:`_in_phase`)."""
    ledger = Path(args[args.index("--ledger") + 1])
    proc = subprocess.Popen(
        _command() + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(tmp),
        cwd=tmp,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        start = time.monotonic()
        while proc.poll() is None and time.monotonic() - start < BOUND:
            if _children(proc.pid) if when == "workers" else _mapped(proc.pid, "msgspec/_core"):
                break
        end = time.monotonic() + delay
        while time.monotonic() < end:  # a busy wait: milliseconds, and the window is that short
            pass
        in_phase = _in_phase(proc.pid, ledger, when)
        sent = proc.poll() is None
        if sent:
            os.killpg(proc.pid, signal.SIGINT)
        in_phase = in_phase and sent
        try:
            _, err = proc.communicate(timeout=BOUND)
            return proc.returncode, err.decode(errors="replace"), sent, in_phase
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            return None, err.decode(errors="replace"), sent, in_phase
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command() + args, capture_output=True, text=True, env=_env(tmp), cwd=tmp, timeout=300)


def _interrupt_in_phase(args: list[str], tmp: Path, when: str, delay: float) -> tuple[int | None, str]:
    """SIGINT the command ``delay`` s into the phase ``when``; a signal that lands after the phase (a fast
    machine, a busy one) is tried again sooner (delay halved, then 0), and a run the signal never caught
    in its phase fails: a test that passes because the run finished first proves nothing. Every attempt
    must end quietly, whatever it caught. Returns the exit code and stderr of the attempt in phase."""
    tried = []
    for attempt, wait in enumerate((delay, delay / 2, 0.0, 0.0)):
        shutil.rmtree(Path(args[args.index("--ledger") + 1]), ignore_errors=True)
        code, err, sent, in_phase = _interrupt(args, tmp, when, wait)
        assert code is not None, f"still running {BOUND:g} s after Ctrl-C: {err[-2000:]}"
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
        assert code == 130 if sent else code == 0, (code, err[-2000:])
        if code == 130:
            assert len(err.strip().splitlines()) == 1 and err.startswith("interrupted"), err
        if in_phase:
            return code, err
        tried.append(f"{wait:g} s: {'after the phase' if sent else 'the run had finished'}")
    raise AssertionError(f"the signal never landed while the command was in phase {when!r}: {tried}")


@pytest.mark.parametrize("delay", [0.0, 0.001, 0.002, 0.004])
def test_ctrl_c_while_the_workers_start(big_input: Path, tmp_path: Path, delay: float) -> None:
    """Before: the pool caught between two forks kept its workers with no manager thread to stop
    them, and the exit waited for them for ever (or the parent's KeyboardInterrupt was raised in an
    at-fork hook, printed and dropped, and the run went on to exit 0 with a traceback on stderr).
    The signal must land while the pool starts (a worker exists, nothing is written yet)."""
    ledger = tmp_path / "L"
    _interrupt_in_phase(
        ["--ledger", str(ledger), "apply", "-q", "--workers", "8", str(big_input)], tmp_path, "workers", delay
    )
    again = _run(["--ledger", str(ledger), "apply", "-q", "--json", "--workers", "8", str(big_input)], tmp_path)
    assert again.returncode == 0, again.stderr
    fsck = _run(["--ledger", str(ledger), "fsck"], tmp_path)
    assert fsck.returncode == 0 and fsck.stdout.startswith("fsck: ok (5,000 events"), fsck.stdout + fsck.stderr


@pytest.mark.parametrize("delay", [0.0, 0.006, 0.05, 0.1, 0.15, 0.2, 0.3])  # imports, then typer parsing
def test_ctrl_c_while_the_command_loads(big_input: Path, tmp_path: Path, delay: float) -> None:
    """Before: a KeyboardInterrupt traceback out of an import (about one start in 30 over the first
    second), or, once typer parses the arguments, a silent exit 130 (typer turns a KeyboardInterrupt
    there into Exit(130)). Now: the entry point ends the run with its one line until the command runs
    (nothing is open yet). The signal must land while the command loads (no worker yet, nothing written)."""
    _interrupt_in_phase(["--ledger", str(tmp_path / "L"), "apply", "-q", str(big_input)], tmp_path, "imports", delay)
    again = _run(["--ledger", str(tmp_path / "L"), "apply", "-q", str(big_input)], tmp_path)
    assert again.returncode == 0, again.stderr
    fsck = _run(["--ledger", str(tmp_path / "L"), "fsck"], tmp_path)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def _half_a_result(marker: str) -> int:
    """On a worker: what a worker killed while it sends a big result leaves behind — the start of a
    message in the result pipe (its header announces 1 MiB, 10 bytes follow) — then nothing more."""
    import gc
    import multiprocessing.queues
    import struct

    for obj in gc.get_objects():
        if isinstance(obj, multiprocessing.queues.SimpleQueue):  # the pool's result queue
            os.write(obj._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 10)
    Path(marker).touch()
    time.sleep(3600)
    return 0


def test_a_stopped_run_does_not_wait_for_a_result_half_written(tmp_path: Path) -> None:
    """Before: the pool's manager thread waited for the rest of that message for ever (this process
    holds a write end of the pipe too), and Python's exit joins that thread: bench_interrupt.py saw 2
    hangs in 50 Ctrl-Cs. Now closing a stopped run's pool kills its workers and closes that write end."""
    from pithledger.fanout import Fanout

    fan = Fanout.processes(1)
    marker = tmp_path / "written"
    stream = fan.stream(_half_a_result)
    stream.add(str(marker))
    procs = fan._procs
    assert procs is not None
    manager = procs._executor_manager_thread  # type: ignore[attr-defined]
    results = procs._result_queue  # type: ignore[attr-defined]
    try:
        deadline = time.monotonic() + BOUND
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists()
        fan.close(abandon=True)  # what using() does when the run raised (Ctrl-C, an error)
        assert manager is not None and not manager.is_alive()
    finally:  # a regression fails this test, not the suite's exit (which would join that thread)
        results._writer.close()
