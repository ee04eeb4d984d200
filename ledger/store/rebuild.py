"""Rebuilding a ledger from its log (after a merge-version change, or to re-verify everything): a new
ledger is filled from the old log's events and swapped in, the old one kept beside it as a backup.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import lmdb
import msgspec

import pithledger.store.tlog_tables as tlog_tables
from pithledger.errors import LedgerError, NoLedger
from pithledger.fanout import current
from pithledger.files import disk_full, room_for_lmdb, write_failed
from pithledger.merge import MERGE_VERSION
from pithledger.records.bundle import Bundle
from pithledger.store.entries import BatchResult, Prepared, prepare
from pithledger.store.env import (
    _RELEASE_ENTRIES,
    _TLOG,
    DEFAULT_MAP_SIZE,
    LAYOUT_VERSION,
    _json_decoder,
    _Mapped,
    _MappedEnv,
    _release_mapped_pages,
)
from pithledger.store.ledger import Ledger
from pithledger.store.tuning import StoreTuning, default_tuning

# --- rebuilding from the log ---------------------------------------------------------------------

_REBUILT_MARK = "REBUILT"


def _file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _prepare_received(task: tuple[list[tuple[bytes, bool]], bool, bool]) -> bytes:
    """Each received event of a part (an old log entry, or evidence entry, as stored: :func:`_old_raw`)
    as the writer needs it, with whether the old ledger held it as valid: a bundle of that one event
    about its subject, :func:`prepare`d; msgpack-encoded (one bytes object crosses the pipe). Pure:
    runs on the new ledger's workers. Task: (part, whether each copy is verified here too, reverify):
    the Ed25519 check of an event held as valid is taken as passed unless ``reverify``, as the batch
    would take it (spec/storage.md §3.2, §8)."""
    part, check, reverify = task
    out = []
    for stored, logged in part:
        raw, was_valid = _received(stored, logged)
        event = _json_decoder.decode(raw)
        bundle = Bundle(pith_number=str(event.get("subject_pith_number")), events=[event])
        out.append((prepare(bundle, check=check, known=was_valid and not reverify), was_valid))
    return _received_encoder.encode(out)


_received_encoder = msgspec.msgpack.Encoder()
_received_decoder = msgspec.msgpack.Decoder(list[tuple[Prepared, bool]])


def _parts_of(items: Iterator[tuple[bytes, bool]], size: int) -> Iterator[list[tuple[bytes, bool]]]:
    while part := list(islice(items, size)):
        yield part


def _copy_sidecars(old: Path, new: Path) -> None:
    """Carry the sidecars beside a ledger (the LMDB environments in its subdirectories: display
    metadata, pull's cache; outside consensus, spec/storage.md §8) into its rebuilt copy, each as a
    consistent snapshot (``Environment.copy``), so a rebuild loses no title and re-fetches nothing."""
    for side in sorted(old.iterdir()):
        if not (side.is_dir() and not side.is_symlink() and (side / "data.mdb").is_file()):
            continue
        (new / side.name).mkdir()
        try:
            room_for_lmdb(side, f"cannot open the sidecar {side}", readonly=True)
            env = lmdb.open(str(side), readonly=True, subdir=True, max_dbs=32)
            try:
                env.copy(str(new / side.name))
            finally:
                env.close()
        except lmdb.Error as exc:
            raise disk_full(exc, new, f"the rebuild could not copy {side}") or LedgerError(
                f"the rebuild could not copy {side}: {exc}",
                hint="the old ledger is unchanged; free space if the disk is full, then run rebuild again",
            ) from None


def rebuild(
    path: Path,
    *,
    batch_events: int = 10_000,
    reverify: bool = False,
    force: bool = False,
    tuning: StoreTuning | None = None,
) -> dict[str, Any]:
    """Rebuild the ledger at ``path`` under this merge version from what its log received.

    The log of every layout keeps each received event's bytes (layout 1 kept every class of event
    there; layouts 2 to 4 keep valid events there and the rest as evidence), so re-applying them all
    loses nothing. Every check of spec/events.md §2.2 runs again under this version's rules, except,
    unless ``reverify``, the Ed25519 check of an event the old ledger held as valid: the same bytes
    verified under the same signature rule when they arrived. The new ledger is built beside the old
    one and swapped in by two renames; the old one stays as ``<name>.<old merge>-backup``. While it
    reads, it holds the old ledger's writer lock, so nothing is applied to the old ledger meanwhile.
    Re-running after an interruption finishes the job. A ledger already at this merge version is left
    as it is (``already_current``), unless ``force``: rebuilding it would only pile up backups.
    ``tuning``: the new ledger's knobs and this run's (ledger/store/tuning.py).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".rebuild-tmp")
    if not (path / "data.mdb").exists():
        if (tmp / _REBUILT_MARK).exists():  # interrupted between the two renames
            os.rename(tmp, path)
            return {
                "finished_interrupted_rebuild": True,
                "backup": "",
                "events_read": 0,
                "new": 0,
                "duplicate": 0,
                "invalid": 0,
                "unverified": 0,
            }
        raise NoLedger.at(path)
    tuning = tuning or default_tuning()
    fan = current()
    # a ledger file this big has finishing steps worth handing over whole: the run's workers are started
    # before it is opened (Fanout.start), so that they can read its snapshots themselves
    if fan is not None and _file_size(path / "data.mdb") >= tuning.start_workers_from:
        fan.start()  # before any handle is open: the workers may then read the new ledger's snapshots
    try:
        room_for_lmdb(path, f"cannot open the ledger at {path}")
        env = lmdb.open(str(path), max_dbs=32, subdir=True, map_size=DEFAULT_MAP_SIZE)
    except lmdb.Error as exc:
        raise write_failed(exc, path, f"cannot open the ledger at {path}") from None
    counts = {"events_read": 0, "new": 0, "duplicate": 0, "invalid": 0, "unverified": 0, "signatures_reused": 0}
    try:
        txn = env.begin(write=True)  # the writer lock: no apply lands in the old ledger while we read it
        try:
            meta = env.open_db(b"meta", txn=txn, create=False)
            old_merge = bytes(txn.get(b"merge_version", b"", db=meta)).decode() or "unknown"
            if old_merge == MERGE_VERSION and not force:
                return counts | {"already_current": True, "backup": "", "old_merge_version": old_merge}
            shutil.rmtree(tmp, ignore_errors=True)
            with Ledger(tmp, create=True, tuning=tuning) as new:
                batch = new.batch()
                # the writer reads the old ledger and commits; decoding and encoding each event (what
                # Batch.add would do in place) runs on the new ledger's workers, in order
                big = txn.stat(env.open_db(b"log", txn=txn, create=False))["entries"] >= tuning.parallel_states * 8
                # on the workers, each copy is verified where it is prepared (the new ledger is empty:
                # every copy is a candidate), so the batch hands nothing over again
                # the old file's pages are released as it is read, with the new one's, under one budget
                new._core._companions.append(_MappedEnv(env, path / "data.mdb"))
                parts = (
                    (part, big, reverify) for part in _parts_of(_old_raw(env, txn, new._core), tuning.rebuild_part)
                )
                for encoded in new._workers.fanout.map(_prepare_received, parts, parallel=big):
                    for prepared, was_valid in _received_decoder.decode(encoded):
                        counts["events_read"] += 1
                        reuse = was_valid and not reverify
                        counts["signatures_reused"] += reuse
                        batch.add(prepared, signatures_verified=reuse)
                        if batch.events >= batch_events:
                            _tally(counts, batch.commit(defer=True))
                            batch = new.batch()
                _tally(counts, batch.commit(defer=True))
                new.finish()
                _copy_db(env, txn, new, b"extra")
                tlog = _compare_tlog(env, txn, new)
        finally:
            txn.abort()
    except lmdb.Error as exc:
        raise LedgerError(
            f"the rebuild failed: {exc}",
            hint="the old ledger is unchanged; free space if the disk is full, then run rebuild again",
        ) from None
    finally:
        env.close()
    _copy_sidecars(path, tmp)
    (tmp / _REBUILT_MARK).write_text(old_merge + "\n")
    backup = path.with_name(f"{path.name}.{old_merge.rsplit('-', 1)[-1]}-backup")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.{old_merge.rsplit('-', 1)[-1]}-backup{n}")
        n += 1
    os.rename(path, backup)
    os.rename(tmp, path)
    (path / _REBUILT_MARK).unlink()
    return counts | {
        "backup": str(backup),
        "old_merge_version": old_merge,
        "tlog": tlog,
        "tlog_history_changed": tlog["extends_old"] is False,
    }


def _compare_tlog(env: lmdb.Environment, txn: lmdb.Transaction, new: Ledger) -> dict[str, Any]:
    """Whether the rebuilt ledger's transparency log extends the old one's identically (spec/storage.md
    §8): when it does not, the history this mirror published changes, and its operator must publish
    under a new origin. An old ledger of a layout before 5 had no tlog (``old_size`` None)."""
    meta = env.open_db(b"meta", txn=txn, create=False)
    with new.env.begin() as new_txn:
        mine = new._tlog._tlog_dbs()
        if bytes(txn.get(b"layout_version", b"", db=meta)) != str(LAYOUT_VERSION).encode():
            return {
                "old_size": None,
                "size": tlog_tables.size(new_txn, mine),
                "extends_old": None,
                "first_difference": None,
            }
        old = tlog_tables.TlogDbs(*(env.open_db(name, txn=txn, create=False) for name in _TLOG))

        return tlog_tables.rebuilt_extends(
            txn, old, new_txn, mine, lambda: _release_mapped_pages(new._core)
        )  # and the old file's


def _old_events(env: lmdb.Environment, txn: lmdb.Transaction) -> Iterator[tuple[bytes, bool]]:
    """Every received event's bytes in a ledger of any layout, and whether that ledger held it as
    valid: its log (layouts 2 to 4 log valid events only; layout 1 logged every class with its verdict),
    then (layout 2 on) its evidence."""
    return (
        _received(stored, logged)
        for stored, logged in _old_raw(env, txn, _MappedEnv(env, Path(env.path()) / "data.mdb"))
    )


def _old_raw(env: lmdb.Environment, txn: lmdb.Transaction, mapped: _Mapped) -> Iterator[tuple[bytes, bool]]:
    """What :func:`_old_events` reads, as stored, undecoded (the writer only reads; :func:`_received`
    decodes): each log entry (True), then each evidence entry (False). The old file's pages are released
    as it goes (``mapped``: its handle, or one whose companion it is), as a writer's are (env._release_mapped_pages): reading all of it would map all of it."""
    log = env.open_db(b"log", txn=txn, create=False)
    for n, (_, raw) in enumerate(txn.cursor(db=log).iternext(), 1):
        if n % (8 * _RELEASE_ENTRIES) == 0:
            _release_mapped_pages(mapped)
        yield bytes(raw), True
    try:
        evidence = env.open_db(b"evidence", txn=txn, create=False)
    except lmdb.NotFoundError:
        return
    for n, (_, raw) in enumerate(txn.cursor(db=evidence).iternext(), 1):
        if n % (8 * _RELEASE_ENTRIES) == 0:
            _release_mapped_pages(mapped)
        yield bytes(raw), False


_generic = msgspec.msgpack.Decoder()


def _received(stored: bytes, logged: bool) -> tuple[bytes, bool]:
    """A received event's bytes from its old log entry (``logged``) or evidence entry, and whether the
    old ledger held it as valid. Pure."""
    entry = _generic.decode(stored)
    if not logged:
        return bytes(entry["event"]), False
    if isinstance(entry, list):  # layouts 3 and 4: an array [seq, event, facts, event_id]
        return bytes(entry[1]), True
    verdict = entry.get("verdict")  # layouts 1 and 2: a map
    return bytes(entry["event"]), not isinstance(verdict, dict) or verdict.get("status") == "valid"


def _copy_db(env: lmdb.Environment, txn: lmdb.Transaction, new: Ledger, name: bytes) -> None:
    try:
        old = env.open_db(name, txn=txn, create=False)
    except lmdb.NotFoundError:
        return
    with new.env.begin(write=True, db=new.db[name]) as out:
        for key, value in txn.cursor(db=old).iternext():
            out.put(bytes(key), bytes(value))


def _tally(counts: dict[str, int], result: BatchResult) -> None:
    for key in ("new", "duplicate", "invalid", "unverified"):
        counts[key] += getattr(result, key)
