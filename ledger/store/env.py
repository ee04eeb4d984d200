"""The ledger's LMDB environment: its databases (_DBS), the layout check and in-place upgrade,
transactions (snapshots, adopting a map another process grew, growing it), the release of mapped
pages, and the key encodings every table shares. Layout: spec/storage.md.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, Self, cast

import lmdb
import msgspec

from pithledger.errors import LayoutMismatch, LedgerDamaged, LedgerError, LedgerFull, NoLedger, NotALedger
from pithledger.files import room_for_lmdb, write_failed
from pithledger.layout import MERGE_VERSION, TLOG_ENTRIES_DB, TLOG_HASHES_DB
from pithledger.records import ids

LAYOUT_VERSION = 5
#: Layouts this version opens: layout 4 is layout 5 without the transparency log (which the first writer
#: builds from the log, spec/storage.md §2.2), layout 3 also without the two pending sets (both empty); a
#: reader reads them as they are.
_UPGRADABLE_IN_PLACE = (3, 4)
DEFAULT_MAP_SIZE = 1 << 30  # address space, not disk: LMDB files grow as pages are used
_RESIZE_TRIES = 8  # times a transaction is begun again after another process grew the map
_U64 = 8

_DBS = {
    # name: dupsort
    b"meta": False,
    b"log": False,  # seq -> LogEntry (msgpack): valid events only
    b"ids": False,  # event_id digest (32 bytes) -> seq
    b"subject": True,  # pith_number -> seq of each of its events
    b"suffix": True,  # 26-char suffix -> pith_number of each PRESENT record (pruned when it stops being one)
    b"alias": True,  # "arxiv:<id>" | "arxiv_version:<id>vN" | "doi:<doi>" -> pith_number (present records)
    b"state": False,  # pith_number -> canonical state bytes
    b"outcite": False,  # citing pith_number -> msgpack [[cited, event_id], ...]: its standing outbound citations
    b"inbound": True,  # cited pith_number -> event id digest (32 bytes) of each standing citation naming it
    b"extra": False,  # pith_number + "\0" + sha256 -> canonical unknown bundle top-level fields
    b"rec": False,  # suffix + "\0" + pith_number -> Pair(event_root, state_sha256) (spec/audit.md)
    b"node": False,  # "/" + suffix prefix (0..DEPTH chars) -> Pair(events, states) digest of that subtree
    # Evidence: outside consensus (never in a state or digest), bounded by EvidenceLimits.
    b"evidence": False,  # sha256 of a received copy (32 bytes) -> EvidenceEntry (msgpack)
    b"evsubj": True,  # pith_number -> copy digest of each evidence entry about it
    b"evsize": False,  # pith_number -> Usage(entries, bytes) of its evidence
    # Pending derivation (spec/storage.md §3.1): what a deferred batch left for ``finish``.
    b"pendcite": False,  # pith_number -> b"c" (a citation or revocation among them) | b"": it received events
    b"pendstate": False,  # pith_number -> b"": its state is to be derived (its own events or its inbound citations changed)
    # The transparency log (spec/storage.md §2.2, ledger/store/tlog_tables.py): written with the log, in its order.
    TLOG_ENTRIES_DB: False,  # index (= log seq) -> entry bytes
    TLOG_HASHES_DB: False,  # post-order position -> 32-byte complete-subtree hash
}
_PENDING = (b"pendcite", b"pendstate")
_TLOG = (TLOG_ENTRIES_DB, TLOG_HASHES_DB)
#: Optional databases, outside consensus and outside the layout: a ledger without one (written by an older
#: pithledger, or opened read-only before a writer made it) works the same, only slower.
_OPTIONAL = {
    b"fold": False,  # pith_number -> _FoldEntry: what the next derivation of a present record folds onto (spec/storage.md §3.3)
}
_json_decoder = msgspec.json.Decoder()
_RELEASE_EVERY = 8  # records derived between two _release_mapped_pages (32 x as many events looked up or written)
_RELEASE_ENTRIES = 32 * _RELEASE_EVERY  # log entries read between two _release_mapped_pages


def _file_id(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a file, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _open_env(path: Path, *, readonly: bool, map_size: int, create: bool = False) -> lmdb.Environment:
    """The LMDB environment of the ledger at ``path`` (``create``: a new one, in an empty directory)."""
    if not (path / "data.mdb").exists():
        if not create:
            raise NoLedger.at(path)
        _check_new_ledger_dir(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        room_for_lmdb(path, f"cannot open the ledger at {path}", readonly=readonly)
        return lmdb.open(
            str(path), max_dbs=len(_DBS) + len(_OPTIONAL), map_size=map_size, subdir=True, readonly=readonly
        )
    except (lmdb.Error, OSError) as exc:
        raise write_failed(exc, path, f"cannot open the ledger at {path}", readonly=readonly) from None


class _Mapped(Protocol):
    """What :func:`_release_mapped_pages` reads and keeps of a handle (a ledger's, a scratch's, an old ledger's)."""

    env: lmdb.Environment
    _data_file: Path
    _map_ranges: tuple[int, list[tuple[int, int]]] | None
    _mapped_floor: int | None
    _companions: list[_Mapped]  # other maps released with this one, under its budget (fsck's scratch)


class _MappedEnv:
    """An LMDB environment opened outside a handle (rebuild's old ledger), for :func:`_release_mapped_pages`."""

    def __init__(self, env: lmdb.Environment, data_file: Path) -> None:
        self.env = env
        self._data_file = data_file.resolve()
        self._map_ranges: tuple[int, list[tuple[int, int]]] | None = None
        self._mapped_floor: int | None = None
        self._companions: list[_Mapped] = []


def _release_mapped_pages(ledger: _Mapped) -> None:
    """Unmap the pages of the ledger's file that this process has touched (Linux; elsewhere nothing).

    A write transaction reads the pages it modifies through LMDB's read-only shared map, and the kernel
    maps up to 16 cached neighbours of each page it faults in, so after a few batches into a large
    ledger most of the file is mapped and counted in the RSS, although those are clean page-cache pages
    that any memory pressure reclaims. MADV_DONTNEED on a shared file mapping only drops the mappings
    (the data stays in the file and the cache; the next access maps it again), so the RSS shows what
    the process holds. The map's address range is looked up in /proc/self/maps once per handle and map
    size (LMDB maps again only when the size changes), never reused across handles: advising an address
    that has since been reused for private memory would zero it.

    Dropping them costs the kernel a walk of the map's page tables and every later read a page fault
    (the B-tree's upper pages, faulted in again after every call), so it is done only once the process
    maps _MAPPED_BUDGET more bytes of files than when the handle first looked (its libraries, mostly):
    the RSS stays bounded by that, and the writer does not pay for it per 256 events."""
    madvise = libc_madvise()
    if madvise is None:
        return
    try:  # statm's third field: this process's resident pages of file mappings (the ledger's map, mostly)
        with open("/proc/self/statm", "rb") as statm:
            mapped: int | None = int(statm.read().split()[2]) * PAGE
    except (OSError, ValueError, IndexError):  # pragma: no cover - no /proc: drop them every time
        mapped = None
    if ledger._mapped_floor is None:
        ledger._mapped_floor = mapped or 0
    if mapped is not None and mapped - ledger._mapped_floor < _MAPPED_BUDGET:
        return
    # one budget for the handle and its companions: each counted against its own floor, they could hold
    # a budget each (fsck's scratch, read while the ledger's pages are mapped, held 173 MiB at 1.2 M events)
    for one in (ledger, *ledger._companions):
        size = one.env.info()["map_size"]
        if one._map_ranges is None or one._map_ranges[0] != size:
            try:
                with open("/proc/self/maps") as maps:
                    found = [line.split(None, 1)[0] for line in maps if line.rstrip().endswith(str(one._data_file))]
            except OSError:  # pragma: no cover - no /proc
                return
            one._map_ranges = (size, [(int(a, 16), int(b, 16)) for a, b in (r.split("-") for r in found)])
        for start, end in one._map_ranges[1]:
            madvise(start, end - start, 4)  # MADV_DONTNEED


def libc_madvise() -> Any:
    """libc's ``madvise(addr, length, advice)``, loaded once; None where there is none (not Linux)."""
    global _madvise
    if _madvise is None:
        try:
            import ctypes

            _madvise = ctypes.CDLL(None, use_errno=True).madvise
            _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        except (OSError, AttributeError):  # pragma: no cover - no libc madvise
            _madvise = False
    return _madvise or None


_madvise: Any = None
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: File-backed resident bytes a handle may add before _release_mapped_pages drops the map's pages.
_MAPPED_BUDGET = 64 * 1024 * 1024


def _rec_key(subject: str) -> bytes:
    return ids.suffix_of_pith_number(subject).encode() + b"\0" + subject.encode()


#: What LMDB raises where a page it reads is damaged (seeded random damage met each as a table opened or its
#: first get): never a full reader table or a map another process grew, which are not damage.
DAMAGE_ERRORS: tuple[type[lmdb.Error], ...] = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.BadValsizeError,
    lmdb.InvalidError,
    lmdb.IncompatibleError,
    lmdb.BadTxnError,
)


def lost_layout(env: lmdb.Environment, path: Path) -> LedgerDamaged | None:
    """A ledger with no layout record (or no meta table, or without a table its layout has) that committed more
    than its creating writer's first transactions (the meta table's creation, then the layout, then the tables)
    lost it to damage: a ledger being created is "not complete (yet)", this one is damaged (fsck: a fault found,
    exit 1, not 3).

    Read in one fresh snapshot: the caller's read may predate the creating writer's later commits, and counting
    the commits made since would call a ledger being created damaged (a reader racing `apply`'s creation: found
    by CI). So a ledger complete in the fresh snapshot was being created: None, and the caller's reader retries."""
    try:
        with env.begin() as txn:
            committed = txn.id()
            if committed <= 1:
                return None
            meta = _table_in(env, txn, b"meta")
            layout = bytes(txn.get(b"layout_version", b"", db=meta)) if meta is not None else b""
            if layout and committed <= 2:
                return None  # its tables are created in the next commit
            if layout.isdigit() and all(_table_in(env, txn, name) is not None for name in _tables_of(int(layout))):
                return None  # complete now: the caller read an older snapshot
    except lmdb.Error:  # the snapshot cannot be read: what the environment says it committed
        committed = int(env.info()["last_txnid"])
        if committed <= 1:
            return None
    return LedgerDamaged(
        f"the ledger at {path} has no layout record, though it committed {committed:,} transactions: it is damaged"
    )


def _table_in(env: lmdb.Environment, txn: lmdb.Transaction, name: bytes) -> Any:
    try:
        return env.open_db(name, txn=txn, create=False, dupsort=_DBS.get(name, False))
    except lmdb.NotFoundError:
        return None


def _tables_of(layout: int) -> list[bytes]:
    """The tables a ledger of ``layout`` holds (layout 4 lacks the transparency log, 3 the pending sets too)."""
    absent = () if layout >= LAYOUT_VERSION else _TLOG + (_PENDING if layout <= 3 else ())
    return [name for name in _DBS if name not in absent]


def _seq_text(seq: bytes) -> str:
    """A log sequence key as a problem names it: decimal, or its hex where damage made it longer than a
    u64 (a bit flip in a length: int() of thousands of digits raised ValueError, a traceback in fsck)."""
    return str(int.from_bytes(seq, "big")) if len(seq) <= 8 else f"0x{seq[:8].hex()}... ({len(seq):,} bytes)"


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def _event_key(event_id: str) -> bytes:
    return bytes.fromhex(event_id[len("sha256:") :])


#: What a directory may hold for a new ledger to be created in it: LMDB's lock file, left by an
#: opener that stopped before creating the data file.
_NEW_LEDGER_MAY_HOLD = frozenset({"lock.mdb"})


def _check_new_ledger_dir(path: Path) -> None:
    """A new ledger is created only where nothing else lives: a directory that does not exist yet, or
    an empty one. Anything else (a published tree, a home directory, a typo) would silently become a
    ledger, and in a served tree its files would be served (spec/storage.md §1)."""
    try:
        if not path.exists():
            return
        if not path.is_dir():
            raise NotALedger(f"{path} is a file, not a ledger directory")
        others = sorted(p.name for p in islice(path.iterdir(), 64) if p.name not in _NEW_LEDGER_MAY_HOLD)
    except OSError as exc:
        raise LedgerError(f"cannot open the ledger at {path}: {exc.strerror}") from None
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise NotALedger.holding(path, shown)


def default_ledger_path() -> Path:
    if env := os.environ.get("PITHLEDGER_LEDGER"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pithledger"


class _Pinned:
    """A snapshot's read transaction lent to one read: leaving the read's ``with`` does not end it."""

    def __init__(self, txn: lmdb.Transaction) -> None:
        self._txn = txn

    def __enter__(self) -> lmdb.Transaction:
        return self._txn

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)


class _Environment:
    """The core every part of a handle shares: the LMDB environment at ``path``, its tables (``db``), the
    layout it reads, transactions for every part (:meth:`_begin`, :meth:`snapshot`), map growth and the
    release of mapped pages. Opened here; its tables are opened by the handle (:meth:`_open_dbs`)."""

    db: dict[bytes, Any]
    layout: int  # the layout this handle reads: LAYOUT_VERSION, or an older one a reader reads as it is

    def __init__(self, path: Path, *, readonly: bool, map_size: int, create: bool = False) -> None:
        """Open the environment at ``path`` and set what every handle holds (Ledger, StateReader)."""
        self.path = Path(path)
        self._data_file = self.path.resolve() / "data.mdb"
        # (map size, address ranges): _release_mapped_pages
        self._map_ranges: tuple[int, list[tuple[int, int]]] | None = None
        self._mapped_floor: int | None = None  # file-backed resident bytes when _release_mapped_pages first looked
        # maps released with this handle's, under its budget (fsck's scratch, rebuild's old ledger)
        self._companions: list[_Mapped] = []
        before = _file_id(self.path / "data.mdb")
        self.env = _open_env(self.path, readonly=readonly, map_size=map_size, create=create)
        after = _file_id(self.path / "data.mdb")
        # (st_dev, st_ino) of the data.mdb this handle has open, if nothing replaced it while it opened
        # (snapshot.py compares it; None: not known)
        self._opened_file = after if before in (None, after) else None
        self._pinned = threading.local()  # the read transaction of a snapshot() in progress, per thread
        #: held while the map grows (a server's reads hold it: no transaction of the process may be open then)
        self.grow_gate: AbstractContextManager[object] = nullcontext()

    def close(self) -> None:
        self._map_ranges = None
        self.env.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_dbs(self, *, readonly: bool) -> int:
        """Open the ledger's databases (a writer creates those missing) once the layout is known to be one
        this version reads; returns the layout. Every handle that reads the views opens them so (Ledger,
        and the workers' views handle, snapshot.py); the caller closes the environment if this raises."""
        try:  # a writer's open_db of a new database commits: a full disk fails here first
            self.db = {b"meta": self.env.open_db(b"meta", create=not readonly)}
        except lmdb.NotFoundError:  # read-only, and the creating apply has not committed yet (Ledger says so)
            raise
        except DAMAGE_ERRORS as exc:  # the meta table's record damaged: a ledger-error sent fsck to exit 3
            raise LedgerDamaged(f"the ledger at {self.path} is damaged: LMDB cannot read it ({exc})") from None
        except lmdb.Error as exc:
            raise write_failed(exc, self.path, f"cannot open the ledger at {self.path}") from None
        layout = self._check_layout()  # before the other databases: an older layout may lack some
        absent = () if layout == LAYOUT_VERSION or not readonly else _TLOG + (_PENDING if layout == 3 else ())
        # a writer opens them in one transaction (a transaction each costs a durable commit each); a
        # reader one by one (py-lmdb drops the handles a read transaction opened when it ends)
        txn = self._begin(write=True) if not readonly else None
        try:
            self.db.update(
                {
                    name: self.env.open_db(name, txn=txn, dupsort=dup, create=not readonly)
                    for name, dup in _DBS.items()
                    if name not in absent
                }
            )
            for name, dup in _OPTIONAL.items():
                try:
                    self.db[name] = self.env.open_db(name, txn=txn, dupsort=dup, create=not readonly)
                except lmdb.NotFoundError:  # read-only on a ledger without it: only writers use it
                    pass
        except BaseException:
            if txn is not None:
                txn.abort()
            raise
        if txn is not None:
            try:
                txn.commit()
            except lmdb.Error as exc:
                raise write_failed(exc, self.path, f"cannot open the ledger at {self.path}") from None
        return layout

    def _check_layout(self) -> int:
        """The ledger's layout version, once it is known to be one this version reads (else raise).
        A writer upgrades a layout that differs only by empty databases in place (_UPGRADABLE_IN_PLACE)."""
        # A read transaction first: readers must not queue behind a writer just to open the ledger.
        damaged: Exception | None = None
        try:
            with self._begin(db=self.db[b"meta"]) as txn:
                layout = txn.get(b"layout_version")
                merge = bytes(txn.get(b"merge_version", b"")).decode()
        except DAMAGE_ERRORS as exc:  # its meta table's page damaged
            damaged = exc
        except UnicodeDecodeError as exc:  # the version's bytes damaged
            damaged = exc
        if damaged is not None:
            self.env.close()
            raise LedgerDamaged(f"cannot read the layout of the ledger at {self.path}: {damaged}")
        if layout is not None and not bytes(layout).isascii():  # no version ever written is: damage
            self.env.close()
            raise LedgerDamaged(f"the layout of the ledger at {self.path} is not readable: {bytes(layout)[:40]!r}")
        readonly = self.env.flags()["readonly"]
        if layout is None and (lost := lost_layout(self.env, self.path)):
            self.env.close()
            raise lost
        if layout is None and readonly:
            self.env.close()
            raise NoLedger(f"no complete ledger at {self.path} (yet)")
        if layout is None:
            try:
                with self._begin(write=True, db=self.db[b"meta"]) as txn:
                    layout = txn.get(b"layout_version")
                    if layout is None:
                        txn.put(b"layout_version", str(LAYOUT_VERSION).encode())
                        txn.put(b"merge_version", MERGE_VERSION.encode())
                        return LAYOUT_VERSION
                    merge = bytes(txn.get(b"merge_version", b"")).decode(errors="backslashreplace")
            except lmdb.Error as exc:  # a new ledger's first commit: a full disk, say
                raise write_failed(exc, self.path, f"cannot create the ledger at {self.path}") from None
        layout = bytes(layout)
        number = int(layout) if layout.isdigit() and layout.isascii() and len(layout) < 6 else -1
        if number in _UPGRADABLE_IN_PLACE and merge == MERGE_VERSION:
            return number  # a writer upgrades it once every database is open (_Translog._upgrade)
        if 0 <= number < LAYOUT_VERSION or (merge != MERGE_VERSION and merge.startswith("pithledger-merge-v")):
            raise LayoutMismatch(
                f"the ledger at {self.path} was written under {merge or 'an older merge version'} (layout {layout.decode()}); "
                f"this pithledger computes {MERGE_VERSION} (layout {LAYOUT_VERSION})",
                hint=f"rebuild it from its log, which keeps everything it received: `pithledger --ledger {self.path} rebuild` "
                f"(the old ledger is kept beside it as {self.path.name}.{(merge or 'old').rsplit('-', 1)[-1]}-backup)",
            )
        if number != LAYOUT_VERSION or merge != MERGE_VERSION:
            raise LayoutMismatch(
                f"the ledger at {self.path} has layout {layout.decode()!r} and merge {merge!r}; "
                f"this pithledger reads layout {LAYOUT_VERSION}, {MERGE_VERSION}",
                hint="use the pithledger version that wrote this ledger",
            )
        return number

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read this thread makes inside the block reads one LMDB snapshot (one read transaction),
        so a document built from several reads is consistent while another process commits (a node
        document's records and its digest, a page's state and events). Re-entrant."""
        if getattr(self._pinned, "txn", None) is not None:
            yield
            return
        txn = self._begin()
        self._pinned.txn = txn
        try:
            yield
        finally:
            self._pinned.txn = None
            txn.abort()

    def _begin(self, *, write: bool = False, db: Any = None) -> lmdb.Transaction:
        """A transaction (inside :meth:`snapshot`, a read is the snapshot's own). When another process has grown the ledger past this handle's map since it was
        opened (MDB_MAP_RESIZED: a writer opened before another one grew the file), the grown size is
        adopted and the transaction begun again (spec/storage.md §7.2)."""
        pinned = getattr(self._pinned, "txn", None)
        if pinned is not None and not write and db is None:
            return cast(lmdb.Transaction, _Pinned(pinned))
        for _ in range(_RESIZE_TRIES):
            try:
                return self.env.begin(write=write, db=db)
            except lmdb.MapResizedError:
                self._map_ranges = None
                try:
                    self.env.set_mapsize(0)  # LMDB: 0 adopts the size the other process set
                except lmdb.Error as exc:  # a transaction of this handle is still open
                    raise LedgerError(
                        f"another process grew the ledger at {self.path} while this one was reading it ({exc})",
                        hint="nothing was written by this run's last step; run the same command again",
                    ) from None
        raise LedgerError(
            f"the ledger at {self.path} kept growing in another process while this one tried to write",
            hint="nothing was written by this run's last step; run the same command again",
        )

    def _grow(self) -> None:
        with self.grow_gate:
            self._map_ranges = None
            size = self.env.info()["map_size"] * 2
            try:
                self.env.set_mapsize(size)
            except lmdb.Error as exc:
                raise LedgerFull(f"the ledger cannot grow to {size:,} bytes: {exc}") from None
