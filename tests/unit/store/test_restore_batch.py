"""``Batch.commit(expect=...)`` (spec/storage.md §2.2, used by restore-log): a batch appends exactly the tlog
entries it is given at exactly the index given, or aborts and writes nothing. Real LMDB in temp dirs, real
Ed25519-signed events."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.tlogkit import SUBJECT, attestations
from pithledger.errors import LogDiverged
from pithledger.records.bundle import Bundle
from pithledger.store import Ledger

EVENTS = attestations(9, 0)  # record_created + 9 attestations, all valid


def _bundles(events: list[dict]) -> list[Bundle]:  # type: ignore[type-arg]
    return [Bundle(pith_number=SUBJECT, events=[e]) for e in events]


def _published(tmp_path: Path) -> tuple[list[bytes], bytes]:
    """The entries and root of a ledger that applied EVENTS in this order (the log to restore)."""
    with Ledger(tmp_path / "published", create=True) as ledger:
        ledger.apply_batch(_bundles(EVENTS))
        return ledger.tlog_entries(0, ledger.tlog_size()), ledger.tlog_root()


def _commit(ledger: Ledger, events: list[dict], expect: tuple[int, list[bytes]]) -> None:  # type: ignore[type-arg]
    batch = ledger.batch()
    for bundle in _bundles(events):
        batch.add(bundle)
    batch.commit(expect=expect)


def test_a_batch_appends_exactly_the_expected_entries_or_nothing(tmp_path: Path) -> None:
    entries, root = _published(tmp_path)
    with Ledger(tmp_path / "restored", create=True) as ledger:
        ledger.apply_batch(_bundles(EVENTS[:4]))  # the backup: a prefix of the published log
        with pytest.raises(LogDiverged):  # the right events in another order
            _commit(ledger, list(reversed(EVENTS[4:])), (4, entries[4:]))
        with pytest.raises(LogDiverged):  # the right events at another index
            _commit(ledger, EVENTS[4:], (5, entries[4:]))
        with pytest.raises(LogDiverged):  # one event missing
            _commit(ledger, EVENTS[4:-1], (4, entries[4:]))
        assert ledger.tlog_size() == 4 and ledger.counts()["events"] == 4  # nothing was written
        _commit(ledger, EVENTS[4:], (4, entries[4:]))
        assert (ledger.tlog_size(), ledger.tlog_root()) == (10, root)


def test_restore_log_rerun_after_an_interruption_finishes_the_derivation_left_pending(tmp_path: Path) -> None:
    """restore-log commits its batches deferred, then derives: killed between the last commit and the
    derivation, the ledger holds the published tree with states pending. Run again (as the docs say), it
    answered "same" and left them pending (every reader then: derivation-pending)."""
    import nacl.signing

    from pithledger import api
    from pithledger.mirror.restore import restore_log
    from pithledger.tlog.signing import LogSigner

    signer = LogSigner("example.org/log", nacl.signing.SigningKey(bytes(range(32))), tmp_path / "keys")
    with Ledger(tmp_path / "published", create=True) as ledger:
        ledger.apply_batch(_bundles(EVENTS))
        api.publish(ledger, tmp_path / "site", log=signer)
    entries, _ = _published(tmp_path / "again")
    with Ledger(tmp_path / "restored", create=True) as ledger:
        batch = ledger.batch()
        for bundle in _bundles(EVENTS):
            batch.add(bundle)
        batch.commit(defer=True, expect=(0, entries))  # the last batch, then killed before deriving
        assert ledger.pending() > 0
        report = restore_log(ledger, str(tmp_path / "site"), signer.vkey, key_dir=tmp_path / "keys")
        assert report["status"] == "same"
        assert ledger.pending() == 0
