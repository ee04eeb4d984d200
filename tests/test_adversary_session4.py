"""Adversarial review of session 4 (apply's two readings, finishing/fsck/verification on worker processes).

Each test carries one finding; each failed at 6581123, before the fixes it now guards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from pithledger.records import keys
from pithledger.records.bundle import read_bundle, write_bundle
from pithledger.errors import PithledgerError
from pithledger.records.events import EVENT_VERSION, compute_event_id, signing_message, verify_event
from pithledger.store import Ledger

from helpers.common import ROOT, derive_on_workers
from helpers.eventpool import ALICE, P, t
from helpers.ledgers import example_bundles

FIFTY = ROOT / "bundles" / "demo-50-records.jsonl"

# --- 1. a checking worker that dies ----------------------------------------------------------------

KILL_A_CHECKING_WORKER = """
import os, signal, sys
from pithledger.cli import _bundles
_bundles.REGION_BYTES = 3000  # demo-50-records.jsonl is ~32 regions: checked on worker processes
flag = sys.argv[1]
checked = _bundles._check_span  # the workers read their regions from the file (path, offset, length)
def dying(part):  # the OOM killer, or a user's kill -9, takes one worker mid-region
    if part[1] > 40000 and not os.path.exists(flag):
        open(flag, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return checked(part)
_bundles._check_span = dying
sys.argv = ["pithledger"] + sys.argv[2:]
from pithledger.cli import main
main()
"""


def test_a_checking_worker_killed_mid_region_is_no_traceback(tmp_path: Path) -> None:
    """cli/_bundles.py _take: future.result() of a region whose worker died raises BrokenProcessPool,
    which nothing catches: apply dies with a Python traceback (errors.py: 'nothing a user types or
    feeds in should ever surface as a traceback'), where finishing and verification fall back to
    working in place (store._on_workers, _outcome). Expected: the region is checked in place, the run
    goes on and applies all 50 bundles."""
    r = subprocess.run([sys.executable, "-c", KILL_A_CHECKING_WORKER, str(tmp_path / "killed"),
                        "--ledger", str(tmp_path / "l"), "apply", str(FIFTY)], capture_output=True, text=True, timeout=120)
    assert (tmp_path / "killed").exists()
    assert "Traceback" not in r.stderr, r.stderr[-600:]
    assert r.returncode == 0 and "50 new" in r.stderr + r.stdout


# --- 2. fsck stops at a stored state of the wrong shape --------------------------------------------

SUBJECT = "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"


@pytest.mark.parametrize("on_workers", [False, True], ids=["in-place", "on-workers"])
@pytest.mark.parametrize("tamper", [(b'"record_status":"present"', b'"record_status":1'),
                                    (b'"record_status":"present"', b'"record_status":null')], ids=["int", "null"])
def test_fsck_names_a_state_tampered_to_the_wrong_type_instead_of_stopping(tmp_path: Path, on_workers: bool,
                                                                              tamper: tuple[bytes, bytes]) -> None:
    """store.py _stored_index_keys (typed _IndexView, record_status: str) raises LedgerError 'not
    readable (damaged ledger)' from _fsck_indexes for a state whose JSON is fine but whose
    record_status is not a string: fsck reports no list at all, though _fsck_state_part has already
    found the mismatch (before 867f64f, fsck listed it). The same raise stops every later finishing
    step that re-derives this record (_derive reads the old state's index keys), so re-deriving can
    no longer overwrite the damage."""
    old, new = tamper
    with Ledger(tmp_path, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        ledger.apply_batch(example_bundles())
        with ledger.env.begin(write=True) as txn:
            raw = zlib.decompress(txn.get(SUBJECT.encode(), db=ledger.db[b"state"]))
            assert old in raw
            txn.put(SUBJECT.encode(), zlib.compress(raw.replace(old, new, 1)), db=ledger.db[b"state"])
        try:
            problems = ledger.fsck()
        except PithledgerError as exc:
            pytest.fail(f"fsck raised instead of listing the mismatch: {exc}")
    assert f"state of {SUBJECT} differs from its recomputation from the log" in problems


# --- 3. verify and apply word the same verdict differently -----------------------------------------


def _event_with_two_mistyped_payload_fields() -> dict:  # type: ignore[type-arg]
    """Signed and intact (the id and signature cover canonical, sorted bytes), its payload's keys in
    reverse order, both mistyped: step 10 fails on whichever msgspec.convert meets first."""
    pk = ALICE.public_key
    event = {"created_at": t(5), "event_type": "citation_signature", "event_version": EVENT_VERSION,
             "payload": {"relation": 1, "cited_pith_number": 2},
             "signer": {"key_id": ALICE.name, "public_key_b64": keys.b64encode(pk), "public_key_fingerprint": keys.fingerprint_hex(pk),
                        "signer_id": f"ed25519:{keys.fingerprint_hex(pk)}", "signer_type": "self_signed"},
             "subject_pith_number": P[0], "target": "record"}
    event["signature_b64"] = keys.b64encode(ALICE.sign(signing_message(event)))
    event["event_id"] = compute_event_id(event)
    return event


def test_verify_and_apply_give_one_verdict_message_whatever_the_key_order(tmp_path: Path) -> None:
    """716d8b6 verifies apply's copies from their canonical (key-sorted) bytes, so apply's evidence
    says '... at `$.cited_pith_number`', while `pithledger verify` (app.py _check_document ->
    verify_event on the input's own key order) says '... at `$.relation`' for the same event: what a
    user checks with verify is not what the ledger records. Root: events.py _payload,
    msgspec.convert reports the first bad field in dict order."""
    event = _event_with_two_mistyped_payload_fields()
    said_by_verify = verify_event(event)
    with Ledger(tmp_path, create=True) as ledger:
        result = ledger.apply_batch([read_bundle(json.loads(json.dumps(write_bundle(P[0], [event]))))])
    (rejected,) = result.rejected
    assert (rejected.reason, rejected.message) == (said_by_verify.reason, said_by_verify.message)


# --- 4. bare-CR line endings -------------------------------------------------------------------------


def test_apply_reads_a_bare_cr_jsonl_file_as_verify_and_the_previous_apply_did(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """cli/_bundles.py _lines splits regions on b"\\n" only; _output.iter_documents (verify, and apply
    before b713297) splits a small file with bytes.splitlines(), which also breaks on a bare "\\r".
    A classic-Mac/CR-terminated .jsonl file now fails apply with trailing-data on line 1 while
    `pithledger verify` of the same file finds every event valid (a regression, fail-closed)."""
    lines = FIFTY.read_bytes().split(b"\n")[:3]
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b"\r".join(lines) + b"\r")
    assert cli("--ledger", str(tmp_path / "l"), "verify", str(path)).code == 0
    r = cli("--ledger", str(tmp_path / "l"), "apply", str(path))
    assert r.code == 0, r.err
