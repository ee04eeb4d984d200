"""fsck checks each record's stored fold entry (spec/storage.md §6): an entry that decodes but says
something else than a full derivation from the log would have the next apply derive a wrong state, which
no other mirror holding the same events derives. Vectors are named after the mutation they carry."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import msgspec
import pytest

from pithledger.store import Ledger, rebuild, views

from eventpool import bundles_of, pool

REMEDY = "`pithledger rebuild --force` rebuilds it"


@pytest.fixture(autouse=True)
def fold_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger folds only records of 256 events or more, and segments states of 256 KiB or more; the
    pool's records are small: fold them all, and segment their states."""
    monkeypatch.setattr(views, "_FOLD_FROM", 0)
    monkeypatch.setattr(views, "_SEGMENTED_FROM", 512)
    monkeypatch.setattr(views, "_CUT", b'","event_id":"sha256:')  # a segment per view, not per 256th


def _batches() -> list[list[dict[str, Any]]]:
    events = sorted(pool(), key=lambda e: e["event_type"] != "record_created")
    return [events[:4]] + [events[i:i + 3] for i in range(4, len(events), 3)]


def _ledger(path: Path) -> None:
    with Ledger(path, create=True) as ledger:
        for batch in _batches():
            ledger.apply_batch(bundles_of(batch))


def _entries(path: Path) -> dict[bytes, views._FoldEntry]:
    env = lmdb.open(str(path), max_dbs=32, readonly=True)
    with env.begin() as txn:
        out = {bytes(k): msgspec.msgpack.decode(bytes(v), type=views._FoldEntry) for k, v in txn.cursor(db=env.open_db(b"fold", txn=txn))}
    env.close()
    return out


def _put(path: Path, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=env.open_db(b"fold", txn=txn))
    env.close()


def _segmented(entries: dict[bytes, views._FoldEntry]) -> bytes:
    return next(k for k, e in entries.items() if len(e.segments) >= 2)


def _enc(entry: views._FoldEntry) -> bytes:
    return msgspec.msgpack.encode(entry)


def _fold_of(entry: views._FoldEntry) -> dict[str, Any]:
    return msgspec.msgpack.decode(entry.fold)  # type: ignore[no-any-return]


#: mutation -> (which record, the bad entry bytes), from the entries of a sound ledger
MUTATIONS: dict[str, Callable[[dict[bytes, views._FoldEntry]], tuple[bytes, bytes]]] = {
    "fold-wrong-last-seq": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], last_seq=es[k].last_seq + 3))),
    "fold-of-a-later-state": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], fold=msgspec.msgpack.encode(
        {**_fold_of(es[k]), "ids": _fold_of(es[k])["ids"] + ["sha256:" + "f" * 64]})))),
    "fold-wrong-inbound": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], inbound=es[k].inbound + hashlib.sha256(b"x").digest()))),
    "fold-wrong-members": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], fold=msgspec.msgpack.encode(
        {**_fold_of(es[k]), "members": {**_fold_of(es[k])["members"], "author\0someone\0": [["2026-01-01T00:00:00Z", "sha256:" + "0" * 64]]}})))),
    "fold-stale-segments": lambda es: (k := _segmented(es), _enc(msgspec.structs.replace(
        es[k], segments=[es[k].segments[1], es[k].segments[0], *es[k].segments[2:]]))),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_fsck_names_a_fold_entry_that_would_derive_another_state(tmp_path: Path, mutation: str) -> None:
    path = tmp_path / "l"
    _ledger(path)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.fsck() == []  # sound, with an entry for every present record
    key, bad = MUTATIONS[mutation](_entries(path))
    _put(path, key, bad)
    with Ledger(path, readonly=True) as ledger:
        problems = ledger.fsck()
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"the fold entry of {key.decode()} ") and problems[0].endswith(REMEDY)
    # the remedy: rebuilt, fsck is clean and the entries are those of a ledger that never held the bad
    # one, given the same events in one batch (as rebuild re-applies its log)
    rebuild(path, force=True)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.fsck() == []
    with Ledger(tmp_path / "fresh", create=True) as fresh:
        fresh.apply_batch(bundles_of([e for batch in _batches() for e in batch]))
    assert _entries(path) == _entries(tmp_path / "fresh")


def test_a_fold_entry_for_a_record_that_keeps_none_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fold-for-a-small-record: entries kept where this pithledger keeps none (a record under 256 events)."""
    path = tmp_path / "l"
    _ledger(path)
    monkeypatch.setattr(views, "_FOLD_FROM", 256)
    with Ledger(path, readonly=True) as ledger:
        problems = ledger.fsck()
    assert problems and all("is kept for a record that keeps none" in p and p.endswith(REMEDY) for p in problems)
    assert len(problems) == len(_entries(path))


def test_the_cli_exits_1_naming_the_record(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "L"
    _ledger(path)
    key, bad = MUTATIONS["fold-wrong-last-seq"](_entries(path))
    _put(path, key, bad)
    r = cli("--ledger", str(path), "fsck")
    assert r.code == 1 and "Traceback" not in r.err
    assert f"the fold entry of {key.decode()} " in r.out + r.err and "rebuild --force" in r.out + r.err


#: entries the next derivation would not use (it derives in full, spec/storage.md §3.3): no fault
UNUSED: dict[str, Callable[[dict[bytes, views._FoldEntry]], tuple[bytes, bytes]]] = {
    "fold-truncated": lambda es: (k := sorted(es)[0], _enc(es[k])[:-7]),
    "fold-of-another-record": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], fold=es[sorted(es)[1]].fold))),
    "fold-of-another-state-length": lambda es: (k := sorted(es)[0], _enc(msgspec.structs.replace(es[k], fold=msgspec.msgpack.encode(
        {**_fold_of(es[k]), "size": _fold_of(es[k])["size"] + 1})))),
}


@pytest.mark.parametrize("mutation", sorted(UNUSED))
def test_a_fold_entry_the_next_derivation_would_not_use_is_no_fault(tmp_path: Path, mutation: str) -> None:
    path = tmp_path / "l"
    _ledger(path)
    key, bad = UNUSED[mutation](_entries(path))
    _put(path, key, bad)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.fsck() == []
