"""Deferred derivation (spec/storage.md §3.1): batches mark records pending, finishing derives each once,
what is pending survives the process and is finished by the next writer or whole-view reader.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/store/test_pending.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.common import TESTS
from helpers.eventpool import P, bundles_of, pool
from helpers.ledgers import make_layout_3
from helpers.pending import reference, states
from pithledger.fanout import Fanout
from pithledger.store import Ledger, StoreTuning, open_settled


def test_work_left_by_a_killed_run_is_finished_by_a_whole_view_reader(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger(path, create=True) as ledger:  # as a killed apply leaves it: batches committed, not derived
        ledger.apply_batch(bundles_of(pool()), defer=True)
    with reference(tmp_path) as ref:
        want = ref.root()
    out = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "digest", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert (doc["events_root"], doc["states_root"]) == (want.events.hex(), want.states.hex())
    with open_settled(path) as settled:
        assert settled.pending() == 0 and settled.fsck() == []


def test_apply_finishes_what_an_earlier_run_left_pending(tmp_path: Path) -> None:
    path = tmp_path / "l"
    events = pool()
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(events), defer=True)
    data = tmp_path / "again.jsonl"
    data.write_text(
        "".join(
            json.dumps(b) + "\n"
            for b in [
                {
                    "bundle_type": "pith_open_graph_bundle",
                    "bundle_version": "1.0",
                    "pith_number": events[0]["subject_pith_number"],
                    "events": [events[0]],
                }
            ]
        )
    )
    subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "apply", "-q", str(data)],
        capture_output=True,
        check=True,
    )  # only a duplicate: the run still finishes the pending work
    with Ledger(path) as ledger, reference(tmp_path) as ref:
        assert ledger.pending() == 0 and states(ledger) == states(ref) and ledger.fsck() == []


# A finding of the adversarial review of session 3 (deferred derivation, split verification, signature
# reuse, page release); fails on 5098d9d.
def test_worker_process_killed_breaks_every_later_batch_of_the_handle(tmp_path: Path) -> None:
    """_outcome falls back only for futures already submitted; self._procs stays the broken pool, so the next
    _submit (same batch or any later batch: a long apply/rebuild) raises BrokenProcessPool from pool.submit."""
    tuning = StoreTuning(verify_chunk=2, process_after_chunks=1)
    events = pool()
    with Fanout.processes(2) as fan, Ledger(tmp_path / "l", create=True, fanout=fan, tuning=tuning) as ledger:
        first = ledger.apply_batch(bundles_of(events[:6]), defer=True)
        assert first.new > 0 and fan.worker_pids()
        for pid in fan.worker_pids():
            os.kill(pid, signal.SIGKILL)  # the OOM killer picks a worker
        time.sleep(0.5)
        ledger.apply_batch(bundles_of(events[6:]), defer=True)
        ledger.finish()
        assert ledger.fsck() == []


# A finding of the adversarial review of session 3 (deferred derivation, split verification, signature
# reuse, page release); fails on 5098d9d.
def test_reader_opened_on_layout_3_never_sees_pending_work_after_a_writer_upgrades(tmp_path: Path) -> None:
    """A long-lived read-only handle (serve) opened on a layout-3 ledger did not open pendcite/pendstate;
    after an apply in another process upgrades it to 4 and defers, is_pending() is always False for that
    handle: a pending record is not-found by its long number (and a pending one's stale state is served)."""
    path = tmp_path / "l"
    events = pool()
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of([e for e in events if e["subject_pith_number"] != P[2]]))
    make_layout_3(path)
    with Ledger(path, readonly=True) as reader:
        code = (
            f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
            "from pathlib import Path\nfrom helpers.eventpool import pool, bundles_of, P\nfrom pithledger.store import Ledger\n"
            f"with Ledger(Path({str(path)!r})) as w:\n"
            "    w.apply_batch(bundles_of([e for e in pool() if e['subject_pith_number'] == P[2]]), defer=True)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        assert reader.resolve(P[2]) == P[2]  # a fresh read-only handle finds it (spec/storage.md §3.1)
