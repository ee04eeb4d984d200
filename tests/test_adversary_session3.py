"""Adversarial review of session 3 (deferred derivation, split verification, signature reuse, page release).

Each test carries one finding and fails on 5098d9d. Helpers are those of tests/test_pending.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pithledger.fanout import Fanout
from pithledger.audit import DEPTH, record_event_root
from pithledger.errors import DerivationPending, NotFound
from pithledger.records.events import make_event
from pithledger.mirror.publish import node_doc
from pithledger.store import Ledger, StoreTuning, open_settled

from helpers.eventpool import ALICE, P, RECS, bundles_of, pool, t
from helpers.ledgers import make_layout_3
from helpers.common import TESTS



def _revocation_of_record_1() -> dict:  # type: ignore[type-arg]
    created = [e for e in pool() if e["event_type"] == "record_created" and e["subject_pith_number"] == P[1]]
    assert len(created) == 1 and created[0]["signer"]["key_id"] == ALICE.name
    return make_event("revocation", P[1], {"revoked_event_id": created[0]["event_id"]}, ALICE, created_at=t(20))


@pytest.mark.parametrize("how", ["suffix", "arxiv", "arxiv-version"])
def test_record_revoked_away_in_a_pending_batch_crashes_resolve_by_suffix_or_alias(tmp_path: Path, how: str) -> None:
    """A record found by the suffix/alias index of the last finished run, whose record_created was revoked
    in a deferred batch: _candidate computes its pending state, whose `current` is {} -> KeyError
    'canonical_record' (resolve, state/export by any short form, serve's /resolve -> 500)."""
    source = RECS[1]["source"]
    text = {"suffix": "pith:" + P[1].rsplit(":", 1)[1][:8], "arxiv": f"arXiv:{source['id']}",
            "arxiv-version": f"arXiv:{source['id']}v{source['version']}"}[how]
    with Ledger(tmp_path / "l", create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        assert ledger.resolve(text) == P[1]
        ledger.apply_batch(bundles_of([_revocation_of_record_1()]), defer=True)  # an apply run, not finished yet
        try:
            ledger.resolve(text)  # the index of the last finished run still names it: found, or not-found
        except NotFound:
            pass
        ledger.finish()
        with pytest.raises(NotFound):
            ledger.resolve(text)


def test_pending_record_makes_the_live_node_document_refuse_until_finished(tmp_path: Path) -> None:
    """serve's /pithledger/nodes/<bucket>: node_doc would list event_ids from the log (pending events included)
    next to the stored, not-yet-derived event_root, which sync/audit rightly reject as a lie. A bucket holding a
    pending record is refused with derivation-pending (serve: 503, Retry-After) until the work is finished."""
    path = tmp_path / "l"
    with Ledger(path, create=True) as ledger:
        ledger.apply_batch(bundles_of(pool()))
        late = make_event("author_attestation", P[0], {"author_name": "Late Author"}, ALICE, created_at=t(20))
        ledger.apply_batch(bundles_of([late]), defer=True)  # apply/sync in progress (or killed): pending
    bucket = P[0].rsplit(":", 1)[1][:DEPTH]
    with Ledger(path, readonly=True) as served:  # serve's handle
        with pytest.raises(DerivationPending):
            node_doc(served, bucket)
    with open_settled(path) as settled:
        doc = node_doc(settled, bucket)
        assert doc is not None
        rec = doc["records"][P[0]]
        assert record_event_root(rec["event_ids"]).hex() == rec["event_root"]


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
        code = (f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
                "from pathlib import Path\nfrom eventpool import pool, bundles_of, P\nfrom pithledger.store import Ledger\n"
                f"with Ledger(Path({str(path)!r})) as w:\n"
                "    w.apply_batch(bundles_of([e for e in pool() if e['subject_pith_number'] == P[2]]), defer=True)\n")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        assert reader.resolve(P[2]) == P[2]  # a fresh read-only handle finds it (spec/storage.md §3.1)
