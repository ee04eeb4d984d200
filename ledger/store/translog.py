"""The transparency log's part of the Ledger: its reads (a tlog.HashReader) and the in-place upgrade
that builds it from the log. Its storage and tree arithmetic: ledger/store/tlog_tables.py; rules: spec/storage.md §2.2.
"""

from __future__ import annotations

import lmdb

import pithledger.store.tlog_tables as tlog_tables
from pithledger.errors import LedgerError, TlogNotBuilt
from pithledger.files import disk_full
from pithledger.store.env import _TLOG, LAYOUT_VERSION, _Environment, _Pinned, _release_mapped_pages
from pithledger.store.tuning import StoreTuning


class _Translog:
    """The tlog's methods (spec/storage.md §2.2), a part of a handle over its core. Every read reads the
    committed snapshot (inside the core's :meth:`~_Environment.snapshot`, the same one as every other read)."""

    def __init__(self, core: _Environment, tuning: StoreTuning) -> None:
        self._core = core
        self.db = core.db
        self.env = core.env
        self.path = core.path
        self.tuning = tuning

    def _upgrade(self) -> None:
        """Upgrade a layout-3 or -4 ledger in place (its missing databases were just created empty):
        build the transparency log from the log, in order, in transactions of ``tuning.upgrade_chunk`` log
        entries, and write the new layout version in the last one. A killed upgrade leaves the old
        layout and part of the tlog, from where the next writer goes on (spec/storage.md §2.2);
        another writer upgrading at the same time takes turns with this one, transaction by transaction."""
        dbs = tlog_tables.TlogDbs(self.db[tlog_tables.ENTRIES_DB], self.db[tlog_tables.HASHES_DB])
        while True:
            try:
                with self._core._begin(write=True) as txn:
                    if bytes(txn.get(b"layout_version", b"", db=self.db[b"meta"])) == str(LAYOUT_VERSION).encode():
                        return  # another writer finished it
                    if tlog_tables.build(txn, self.db[b"log"], dbs, self.tuning.upgrade_chunk):
                        txn.put(b"layout_version", str(LAYOUT_VERSION).encode(), db=self.db[b"meta"])
                        return
            except lmdb.MapFullError:
                self._core._grow()
            except lmdb.Error as exc:
                raise disk_full(
                    exc, self.path, f"the upgrade of the ledger at {self.path} to layout {LAYOUT_VERSION} failed"
                ) or LedgerError(
                    f"the upgrade of the ledger at {self.path} to layout {LAYOUT_VERSION} failed: {exc}",
                    hint="nothing is lost (an interrupted upgrade goes on where it stopped): free space if the "
                    "disk is full, then run the same command again",
                ) from None
            _release_mapped_pages(self._core)

    def _tlog_dbs(self) -> tlog_tables.TlogDbs:
        """The tlog's databases (a writer's handle, or a reader's once :meth:`_open_tlog` found them)."""
        if tlog_tables.ENTRIES_DB not in self.db:
            raise self._tlog_not_built()
        return tlog_tables.TlogDbs(self.db[tlog_tables.ENTRIES_DB], self.db[tlog_tables.HASHES_DB])

    def _open_tlog(self) -> bool:
        """On a reader's handle of an older layout, open the tlog's databases once a writer has
        created them; True when they were opened now. Called before a read begins its transaction:
        a handle opened after a transaction began is not valid in it (LMDB)."""
        if tlog_tables.ENTRIES_DB in self.db:
            return False
        try:
            self.db.update({name: self.env.open_db(name, create=False) for name in _TLOG})
        except lmdb.NotFoundError:
            return False
        return True

    def _tlog_not_built(self) -> TlogNotBuilt:
        return TlogNotBuilt(
            f"the ledger at {self.path} has layout {self._core.layout}, which holds no transparency log yet"
        )

    def _tlog_read(self, txn: lmdb.Transaction, opened_now: bool) -> tlog_tables.TlogDbs:
        """The tlog's databases for a read in ``txn``: on a handle opened before the upgrade, only once
        the upgrade is committed in that snapshot (until then the tlog is partial), and not in a
        :meth:`snapshot` that began before the databases were opened here (``opened_now``)."""
        if self._core.layout != LAYOUT_VERSION and (
            (opened_now and isinstance(txn, _Pinned))
            or bytes(txn.get(b"layout_version", b"", db=self.db[b"meta"])) != str(LAYOUT_VERSION).encode()
        ):
            raise self._tlog_not_built()
        return self._tlog_dbs()

    def tlog_size(self) -> int:
        """Entries in the transparency log: the events this mirror logged (the log's size)."""
        opened = self._open_tlog()
        with self._core._begin() as txn:
            return tlog_tables.size(txn, self._tlog_read(txn, opened))

    def tlog_hashes(self, level: int, start: int, end: int) -> list[bytes]:
        """The complete-subtree hashes at ``level`` for indices [start, end) (tlog.HashReader);
        TlogOutOfRange, a LookupError, for any not complete at the current size."""
        opened = self._open_tlog()
        _release_mapped_pages(self._core)  # publish reads every tile: the file's pages past the budget
        with self._core._begin() as txn:
            return tlog_tables.read_hashes(txn, self._tlog_read(txn, opened), level, start, end)

    read_hashes = tlog_hashes

    def tlog_entries(self, start: int, end: int) -> list[bytes]:
        """The entry bytes of indices [start, end)."""
        opened = self._open_tlog()
        _release_mapped_pages(self._core)  # publish reads every tile: the file's pages past the budget
        with self._core._begin() as txn:
            return tlog_tables.read_entries(txn, self._tlog_read(txn, opened), start, end)

    def tlog_index(self, event_id: str) -> int | None:
        """The tlog index of the event the ledger holds under ``event_id`` (``sha256:<hex>`` or the bare
        hex of an entry), or None: it is the event's log sequence number."""
        digest = event_id.removeprefix("sha256:")
        if len(digest) != 64 or digest.strip("0123456789abcdef"):
            return None
        opened = self._open_tlog()
        with self._core._begin() as txn:
            dbs = self._tlog_read(txn, opened)
            seq = txn.get(bytes.fromhex(digest), db=self.db[b"ids"])
            index = int.from_bytes(seq, "big") if seq is not None else None
            return index if index is not None and index < tlog_tables.size(txn, dbs) else None

    def tlog_root(self, size: int | None = None) -> bytes:
        """The root of the transparency log at ``size`` (default: its current size)."""
        opened = self._open_tlog()
        with self._core._begin() as txn:
            return tlog_tables.tree_hash(txn, self._tlog_read(txn, opened), size)
