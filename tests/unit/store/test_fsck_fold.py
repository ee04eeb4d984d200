"""fsck checks each record's stored fold entry (spec/storage.md §6): the next apply derives a record of 256
events or more from its entry and only what came since (§3.3), so an entry that decodes but says something
else than the log would give a state no other mirror holding the same events derives. Vectors are named
after the mutation they carry; each corrupts one entry of a real ledger (really signed records of 700 events,
segmented states) and runs the real ``pithledger``.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/store/test_fsck_fold.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.eventpool import bundles_of
from helpers.fsck_fold import BIG, B, _dbs, _entries, _events, _fold_of, _put, _with_fold
from pithledger.store import Ledger, views

#: entries a sound writer may leave, which mean a full derivation next (spec/storage.md §3.3): no fault
FINE: dict[str, Callable[[dict[bytes, views._FoldEntry], dict[bytes, bytes]], tuple[str, bytes | None]]] = {
    "fold-missing": lambda es, raw: (BIG, None),  # a ledger written before entries existed
    "fold-of-an-earlier-state": lambda es, raw: (
        BIG,
        _with_fold(es[B], size=_fold_of(es[B])["size"] - 1),
    ),  # an older pithledger derived since
    "fold-of-another-version": lambda es, raw: (BIG, _with_fold(es[B], version=_fold_of(es[B])["version"] + 1)),
}


@pytest.mark.parametrize("mutation", sorted(FINE))
def test_an_entry_that_only_means_a_full_derivation_is_no_fault(
    tmp_path: Path, sound: Path, full_after_later: dict[str, dict[bytes, bytes]], mutation: str
) -> None:
    path = tmp_path / "l"
    shutil.copytree(sound, path)
    key, bad = FINE[mutation](_entries(path), _dbs(path)["fold"])
    _put(path, key, bad)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.fsck() == []
    with Ledger(path) as ledger:
        ledger.apply_batch(bundles_of(_events()[2]))
        assert ledger.fsck() == []
    assert _dbs(path) == full_after_later
