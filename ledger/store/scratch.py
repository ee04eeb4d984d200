"""A scratch table for whole-ledger checks: sorted sets of (key, value) pairs kept on disk, in a temporary
LMDB environment of their own, so that what a check expects of a whole ledger (fsck's expected index
entries, digest-tree leaves) costs the process a bounded amount of memory however big the ledger is
(spec/storage.md §6, §10). Nothing is written to the ledger itself: fsck of a ledger opened read-only works
the same. The environment lives beside the ledger (on its disk, which has room for the ledger: a /tmp in
memory would hold the scratch in RAM), else in the system's temporary directory, and its directory is removed
as soon as it is open (the open file lives on), so no crash or signal leaves it behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import lmdb

from pithledger.errors import LedgerError
from pithledger.files import disk_full
from pithledger.store.env import _RELEASE_ENTRIES, _Mapped, _release_mapped_pages

#: Pairs added between two commits of the scratch: bounds LMDB's dirty pages (anonymous memory) held at once.
_COMMIT_EVERY = 1024
#: Map reserved for the scratch (address space only: the file grows as it fills); where the process may not
#: reserve that much (ulimit -v), the largest of the smaller ones it may (never grown: a map grown would be
#: looked up by a path the removed file no longer has).
_SCRATCH_MAPS = (1 << 40, 1 << 36, 1 << 34, 1 << 32, 1 << 30, 1 << 28)

Pair = tuple[bytes, bytes]


class Scratch:
    """Named sorted sets of (key, value) pairs (LMDB dupsort tables: adding a pair twice keeps one), in a
    temporary directory removed on :meth:`close`. Read back in (key, value) byte order, which is the order
    an LMDB cursor walks a dupsort table of the ledger, so the two can be compared by :func:`diff`."""

    def __init__(self, tables: Iterable[bytes], near: Path | None = None, owner: _Mapped | None = None) -> None:
        """``near``: a ledger's directory, to be beside; ``owner``: the handle whose budget of mapped pages
        the scratch's share (its releases drop both maps)."""
        names = list(tables)
        self._names = names
        failed: Exception | None = None
        # beside the ledger, else (a read-only or full disk there) in the system's temporary directory
        for place in (near, None) if near is not None else (None,):
            try:
                self._open(place, names)
                self._near = place
                break
            except (OSError, lmdb.Error) as exc:
                failed = exc
        else:
            assert failed is not None
            where = getattr(self, "_dir", Path(tempfile.gettempdir()))
            raise disk_full(failed, where, "fsck's scratch table") or LedgerError(
                f"fsck could not make its scratch table: {failed}",
                hint="free some space beside the ledger or in the temporary directory (TMPDIR), then run it again",
            ) from None
        self._batch: list[tuple[bytes, bytes, bytes]] = []  # the pairs of the open transaction, to move them
        self._owner: _Mapped = owner or self
        if owner is not None:
            owner._companions.append(self)
        self._max = self.env.max_key_size()
        self._txn: Any = None
        self._added = 0

    def _open(self, near: Path | None, names: list[bytes]) -> None:
        self._dir = _scratch_dir(near)
        try:
            for map_size in _SCRATCH_MAPS:
                try:
                    self.env = lmdb.open(
                        str(self._dir),
                        max_dbs=len(names),
                        map_size=map_size,
                        subdir=True,
                        sync=False,  # thrown away after the check: nothing to make durable
                        metasync=False,
                        lock=False,  # this process alone opens it
                    )
                    break
                except lmdb.MemoryError:  # no address space for the map (ulimit -v): a smaller one
                    if map_size == _SCRATCH_MAPS[-1]:
                        raise
            # what _release_mapped_pages reads of a handle (reading the scratch back maps its file): the map's
            # address ranges are found now, while /proc/self/maps still names the file by its path
            self._data_file = self._dir.resolve() / "data.mdb"
            self._map_ranges: tuple[int, list[tuple[int, int]]] | None = None
            self._mapped_floor: int | None = None
            self._companions: list[_Mapped] = []
            self._map_ranges = (self.env.info()["map_size"], _ranges_of(self._data_file))
            self.db = {name: self.env.open_db(name, dupsort=True) for name in names}  # writes: may find no room
        except BaseException:
            if hasattr(self, "env"):
                self.env.close()
                del self.env
            raise
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def add(self, table: bytes, key: bytes, value: bytes) -> bool:
        """Add a pair; False (nothing added) where LMDB cannot hold it (an empty key, or a key or value
        longer than its maximum): no table of a ledger can hold such a pair either."""
        if not key or len(key) > self._max or len(value) > self._max:
            return False
        self._batch.append((table, key, value))
        try:
            if self._txn is None:
                self._txn = self.env.begin(write=True)
            self._txn.put(key, value, db=self.db[table])
        except lmdb.Error as exc:  # LMDB spilling dirty pages to a full disk, say
            self._move(exc)
        self._added += 1
        if self._added >= _COMMIT_EVERY:
            self._commit()
        return True

    def _commit(self) -> None:
        if self._txn is not None:
            txn, self._txn = self._txn, None
            try:
                txn.commit()
            except lmdb.Error as exc:
                self._move(exc)
                self._txn, txn = None, self._txn
                if txn is not None:
                    try:
                        txn.commit()
                    except lmdb.Error as again:
                        raise _unwritable(again, self._dir) from None
        self._batch = []
        self._added = 0
        _release_mapped_pages(self._owner)

    def _move(self, exc: lmdb.Error) -> None:
        """The scratch beside the ledger filled its disk: go on in the system's temporary directory, as when it
        cannot be made there (spec/storage.md §6), with what it held (its committed pairs, and the open
        transaction's, kept in ``_batch``). Elsewhere, or another fault: ``_unwritable``."""
        if self._near is None or disk_full(exc, self._dir, "") is None:
            raise _unwritable(exc, self._dir) from None
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
        old_env, old_db = self.env, self.db
        try:
            self._open(None, self._names)
        except (OSError, lmdb.Error) as failed:
            self.env, self.db = old_env, old_db
            raise _unwritable(failed, self._dir) from None
        self._near = None
        try:
            with old_env.begin() as old:
                txn = self.env.begin(write=True)
                n = 0
                for name in self._names:
                    for key, value in old.cursor(db=old_db[name]).iternext():
                        txn.put(key, value, db=self.db[name])
                        n += 1
                        if n % _COMMIT_EVERY == 0:
                            txn.commit()
                            txn = self.env.begin(write=True)
                for table, key, value in self._batch:
                    txn.put(key, value, db=self.db[table])
                self._txn = txn  # committed by the caller (_commit) or with the next pairs (add)
        except lmdb.Error as failed:
            raise _unwritable(failed, self._dir) from None
        finally:
            old_env.close()

    def pairs(self, table: bytes) -> Iterator[Pair]:
        """The table's pairs, in (key, value) byte order."""
        self._commit()
        with self.env.begin() as txn:
            for n, (key, value) in enumerate(txn.cursor(db=self.db[table]).iternext(), 1):
                if n % (8 * _RELEASE_ENTRIES) == 0:
                    _release_mapped_pages(self._owner)
                yield bytes(key), bytes(value)

    def close(self) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
        if self in self._owner._companions:
            self._owner._companions.remove(self)
        self.env.close()

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unwritable(exc: BaseException, where: Path) -> LedgerError:
    if full := disk_full(exc, where, "fsck's scratch table could not be written"):
        return full
    if isinstance(exc, lmdb.MapFullError):  # the map was made smaller (ulimit -v) than this ledger needs
        hint = "raise the process's address-space limit (ulimit -v), then run it again"
    else:
        hint = "free some space beside the ledger or in the temporary directory (TMPDIR), then run it again"
    return LedgerError(f"fsck's scratch table could not be written: {exc}", hint=hint)


def _scratch_dir(near: Path | None) -> Path:
    """A new directory beside ``near`` (a ledger's directory), else in the system's temporary directory."""
    if near is not None:
        try:
            return Path(tempfile.mkdtemp(prefix=f".{near.name}.scratch-", dir=near.resolve().parent))
        except OSError:  # a read-only or full parent: the system's temporary directory
            pass
    return Path(tempfile.mkdtemp(prefix="pithledger-scratch-"))


def _ranges_of(path: Path) -> list[tuple[int, int]]:
    """The address ranges this process maps ``path`` at (Linux; elsewhere none)."""
    try:
        with open("/proc/self/maps") as maps:
            found = [line.split(None, 1)[0] for line in maps if line.rstrip().endswith(str(path))]
    except OSError:
        return []
    return [(int(a, 16), int(b, 16)) for a, b in (r.split("-") for r in found)]


def diff(want: Iterator[Pair], have: Iterator[Pair]) -> Iterator[tuple[bool, Pair]]:
    """The pairs only one of two sorted, duplicate-free streams holds: (True, pair) for one ``want`` lacks
    from ``have`` (missing), (False, pair) for one only ``have`` holds (stale); in pair order."""
    w, h = next(want, None), next(have, None)
    while w is not None and h is not None:
        if w < h:
            yield True, w
            w = next(want, None)
        elif h < w:
            yield False, h
            h = next(have, None)
        else:
            w, h = next(want, None), next(have, None)
    if w is not None:
        yield True, w
        yield from ((True, x) for x in want)
    if h is not None:
        yield False, h
        yield from ((False, x) for x in have)
