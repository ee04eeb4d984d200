"""The mirror's transparency log as stored in the ledger (spec/storage.md §2.2, issue #22 item 1).

An RFC 9162 tree over one entry per event the ledger logged, in log order (entry bytes: spec/storage.md
§2.2, the contract of spec/transparency.md §1). Two LMDB databases, both written append-only:

- ``tlog``: index (8-byte big-endian) -> entry bytes;
- ``tlogh``: post-order position (8-byte big-endian) -> the 32-byte hash of one complete subtree.

Every complete subtree at every level is stored, keyed by the order in which appends complete them
(post-order), so an append writes 2 hashes on average (at most 1 + log2 n), always at the end of the
database (LMDB's append mode: dense pages, no page splits in the middle), and any hash a tile, a root or
a proof needs is one read, never a recomputation. The log's sequence number is the tlog index: both
count the events appended, from 0, in the same transaction.

Functions here work on an open ``lmdb.Transaction`` and the two database handles (:class:`TlogDbs`);
the tree arithmetic is pure. The ledger (ledger/store) calls them from its write path, its upgrade,
``fsck`` and ``rebuild``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import lmdb
import msgspec

from pithledger.errors import LedgerError, TlogDamaged, TlogOutOfRange
from pithledger.layout import TLOG_ENTRIES_DB, TLOG_HASHES_DB
from pithledger.records.bundle import served_pith_record_event
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import is_pithledger_envelope
from pithledger.tlog.merkle import EMPTY_ROOT, HASH_LEN, leaf_hash, node_hash
from pithledger.tlog.tiles import log_entry

_U64 = 8
ENTRIES_DB = TLOG_ENTRIES_DB
HASHES_DB = TLOG_HASHES_DB
#: fsck names at most this many faults of the tlog one by one (then how many more).
NAMED_FAULTS = 20


class TlogDbs(NamedTuple):
    entries: Any  # lmdb database handle: index -> entry bytes
    hashes: Any  # lmdb database handle: post-order position -> 32-byte hash


# --- entry bytes (pure) ------------------------------------------------------------------------------


def entry_bytes(event_id: str, record: str, event_sha256: str) -> bytes:
    """The entry of one logged event from the SHA-256 (hex) of its served bytes (tlog.log_entry)."""
    return canonical_bytes({"event_id": event_id.removeprefix("sha256:"), "record": record, "sha256": event_sha256})


def served_bytes(event: dict[str, Any], data: bytes) -> bytes:
    """The canonical bytes of a valid event as this mirror serves it (spec/bundle.md §6): ours as held
    (``data``), a Pith-envelope ``record_created`` in its served form. The entry hashes these, so anyone
    can fetch every logged event from the mirror and check it against its entry."""
    if is_pithledger_envelope(event):
        return data
    try:
        return canonical_bytes(served_pith_record_event(event))
    except (KeyError, TypeError, AttributeError):  # not a Pith record_created: only in a damaged log, which fsck names
        return data


def entry_of_event(event_id: str, record: str, event: dict[str, Any], data: bytes) -> bytes:
    """The entry of a valid event being logged: its ledger id, subject, decoded value and held bytes."""
    return log_entry(event_id, record, served_bytes(event, data))


class _Names(msgspec.Struct):
    event_id: str = ""
    subject_pith_number: str = ""


_names_decoder = msgspec.json.Decoder(_Names)
_json_decoder = msgspec.json.Decoder()


def entry_of_logged(event: bytes, ledger_event_id: str = "") -> bytes:
    """The entry of a log entry, from what the log holds: the event's canonical bytes and, for a Pith
    envelope, the ledger id stored beside them (LogEntry.event_id; ours carries its own, and is served
    as held, so it is not decoded whole)."""
    if ledger_event_id:
        value = _json_decoder.decode(event)
        return entry_of_event(ledger_event_id, value["subject_pith_number"], value, event)
    names = _names_decoder.decode(event)
    return entry_bytes(names.event_id, names.subject_pith_number, hashlib.sha256(event).hexdigest())


class _Logged(msgspec.Struct, array_like=True):
    """A stored log entry (spec/storage.md §2: msgpack [seq, event, facts, event_id]), facts left undecoded."""

    seq: int
    event: bytes
    facts: msgspec.Raw
    event_id: str = ""


_logged_decoder = msgspec.msgpack.Decoder(_Logged)


def entry_of_log_record(raw: bytes | memoryview) -> tuple[int, bytes]:
    """(seq, entry) of a stored log entry."""
    logged = _logged_decoder.decode(raw)
    return logged.seq, entry_of_logged(logged.event, logged.event_id)


# --- tree arithmetic (pure) --------------------------------------------------------------------------


def position(level: int, index: int) -> int:
    """Where the hash of the complete subtree (level, index) is stored: the number of subtree hashes
    completed before it. It completes with leaf i = (index+1)·2^level − 1, after the 2i − popcount(i)
    hashes of the first i leaves and the ``level`` hashes that leaf completes below it."""
    i = ((index + 1) << level) - 1
    return 2 * i - i.bit_count() + level


def stored_hashes(size: int) -> int:
    """How many subtree hashes a tree of ``size`` leaves stores."""
    return 2 * size - size.bit_count()


def edge(size: int) -> list[tuple[int, int]]:
    """(level, index) of the complete subtrees a tree of ``size`` leaves splits into (RFC 9162: at the
    largest power of two below, recursively), left to right: one per bit set in ``size``, highest first."""
    return [(level, (size >> level) - 1) for level in range(size.bit_length() - 1, -1, -1) if size >> level & 1]


def root_of_frontier(frontier: list[bytes]) -> bytes:
    """The root of a tree from the hashes of its :func:`edge` subtrees (left to right)."""
    if not frontier:
        return EMPTY_ROOT
    r = frontier[-1]
    for h in reversed(frontier[:-1]):
        r = node_hash(h, r)
    return r


def append_leaf(frontier: list[bytes], size: int, leaf: bytes) -> list[bytes]:
    """Append one leaf hash to a tree of ``size`` leaves whose edge hashes are ``frontier`` (updated
    in place): returns the hashes this completes, in storing order (the leaf, then each parent up)."""
    done = [leaf]
    cur, n = leaf, size
    while n & 1:
        cur = node_hash(frontier.pop(), cur)
        done.append(cur)
        n >>= 1
    frontier.append(cur)
    return done


def all_hashes(leaves: Iterable[bytes]) -> Iterator[bytes]:
    """Every subtree hash of the tree over ``leaves`` (leaf hashes), in storing order (streamed)."""
    frontier: list[bytes] = []
    for size, leaf in enumerate(leaves):
        yield from append_leaf(frontier, size, leaf)


# --- reading ----------------------------------------------------------------------------------------


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def size(txn: lmdb.Transaction, dbs: TlogDbs) -> int:
    return int(txn.stat(dbs.entries)["entries"])


def _hash(txn: lmdb.Transaction, dbs: TlogDbs, level: int, index: int) -> bytes:
    raw = txn.get(_u64(position(level, index)), db=dbs.hashes)
    if raw is None or len(raw) != HASH_LEN:
        raise LedgerError(
            f"the transparency log lacks its hash at level {level}, index {index} (damaged ledger)",
            hint=TlogDamaged.hint,
        )
    return bytes(raw)


def read_hashes(txn: lmdb.Transaction, dbs: TlogDbs, level: int, start: int, end: int) -> list[bytes]:
    """The complete-subtree hashes at ``level`` for indices [start, end) (a tlog.HashReader);
    :class:`TlogOutOfRange` (a LookupError) for any not complete in the tree at its current size."""
    n = size(txn, dbs)
    if level < 0 or start < 0 or end < start or level > 63 or (end << level) > n:
        raise TlogOutOfRange(
            f"the transparency log of {n:,} entries holds no hashes at level {level} for [{start}, {end})"
        )
    return [_hash(txn, dbs, level, i) for i in range(start, end)]


def read_entries(txn: lmdb.Transaction, dbs: TlogDbs, start: int, end: int) -> list[bytes]:
    n = size(txn, dbs)
    if start < 0 or end < start or end > n:
        raise TlogOutOfRange(f"the transparency log of {n:,} entries holds no entries [{start}, {end})")
    out: list[bytes] = []
    if start == end:
        return out
    cursor = txn.cursor(db=dbs.entries)
    if cursor.set_key(_u64(start)):
        for key, value in cursor.iternext():
            if int.from_bytes(key, "big") != start + len(out):
                break
            out.append(bytes(value))
            if len(out) == end - start:
                break
    if len(out) != end - start:
        raise LedgerError(
            f"the transparency log lacks entry {start + len(out)} (damaged ledger)", hint=TlogDamaged.hint
        )
    return out


def frontier(txn: lmdb.Transaction, dbs: TlogDbs, n: int) -> list[bytes]:
    return [_hash(txn, dbs, level, index) for level, index in edge(n)]


def tree_hash(txn: lmdb.Transaction, dbs: TlogDbs, n: int | None = None) -> bytes:
    """The root of the tree at size ``n`` (default: the current size), from O(log n) stored hashes."""
    current = size(txn, dbs)
    n = current if n is None else n
    if n < 0 or n > current:
        raise TlogOutOfRange(f"the transparency log has {current:,} entries, not {n:,}")
    return root_of_frontier(frontier(txn, dbs, n))


# --- writing ----------------------------------------------------------------------------------------


class Appender:
    """Appends entries in one write transaction, keeping the tree's right edge in memory: per entry one
    entry write and 2 hash writes on average (all LMDB appends), nothing that grows with the log."""

    def __init__(self, txn: lmdb.Transaction, dbs: TlogDbs, expected_size: int | None = None) -> None:
        self._txn, self._dbs = txn, dbs
        self.size = size(txn, dbs)
        if expected_size is not None and self.size != expected_size:
            raise TlogDamaged(
                f"the transparency log holds {self.size:,} entries for {expected_size:,} log entries (damaged ledger): "
                "nothing was written"
            )
        if txn.stat(dbs.hashes)["entries"] != stored_hashes(self.size):
            raise TlogDamaged(
                f"the transparency log holds {txn.stat(dbs.hashes)['entries']:,} hashes for {self.size:,} entries "
                f"(a tree of that size has {stored_hashes(self.size):,}; damaged ledger): nothing was written"
            )
        self._frontier = frontier(txn, dbs, self.size)

    def append(self, entry: bytes) -> int:
        """Append one entry; returns its index."""
        n = self.size
        txn, dbs = self._txn, self._dbs
        if not txn.put(_u64(n), entry, db=dbs.entries, append=True):
            raise TlogDamaged(f"the transparency log already holds an entry at or after {n} (damaged ledger)")
        pos = stored_hashes(n)
        for k, h in enumerate(append_leaf(self._frontier, n, leaf_hash(entry))):
            if not txn.put(_u64(pos + k), h, db=dbs.hashes, append=True):
                raise TlogDamaged(
                    f"the transparency log already holds a hash at or after position {pos + k} (damaged ledger)"
                )
        self.size = n + 1
        return n

    def extend(self, entries: list[bytes]) -> None:
        """Append ``entries`` in order (what :meth:`append` does one by one), in one LMDB append call per
        database: the writer's path per batch, where a call per entry and hash costs more than the hashing."""
        if not entries:
            return
        n = self.size
        pos = stored_hashes(n)
        frontier, hashes = self._frontier, []
        for k, entry in enumerate(entries):
            hashes += append_leaf(frontier, n + k, leaf_hash(entry))
        txn, dbs = self._txn, self._dbs
        # an append out of order is skipped by LMDB, not raised: the counts tell (and the caller aborts)
        _, added = txn.cursor(db=dbs.entries).putmulti([(_u64(n + k), e) for k, e in enumerate(entries)], append=True)
        if added != len(entries):
            raise TlogDamaged(f"the transparency log already holds an entry at or after {n} (damaged ledger)")
        _, added = txn.cursor(db=dbs.hashes).putmulti([(_u64(pos + k), h) for k, h in enumerate(hashes)], append=True)
        if added != len(hashes):
            raise TlogDamaged(f"the transparency log already holds a hash at or after position {pos} (damaged ledger)")
        self.size = n + len(entries)

    def root(self) -> bytes:
        return root_of_frontier(self._frontier)


def build(txn: lmdb.Transaction, log_db: Any, dbs: TlogDbs, limit: int) -> bool:
    """Append the entries of up to ``limit`` more log entries, from where the tlog stops (the upgrade of
    a layout-4 ledger, in bounded transactions: a killed upgrade resumes where its last commit left it).
    Returns whether the tlog now covers the whole log."""
    appender = Appender(txn, dbs)
    start = appender.size
    cursor = txn.cursor(db=log_db)
    if limit > 0 and cursor.set_range(_u64(start)):
        for key, raw in cursor.iternext():
            if appender.size - start >= limit:
                break
            seq, entry = entry_of_log_record(raw)
            if int.from_bytes(key, "big") != appender.size or seq != appender.size:
                raise TlogDamaged(
                    f"the log holds entry {seq} under sequence {int.from_bytes(key, 'big')} where {appender.size} "
                    "was expected: its sequence numbers are not 0, 1, 2, ... (damaged ledger)"
                )
            appender.append(entry)
    return appender.size == int(txn.stat(log_db)["entries"])


# --- checking ---------------------------------------------------------------------------------------


class Checker:
    """fsck of the tlog, streamed: fed the entry each log entry implies, in log order, it compares it
    with the stored entry and every hash with its recomputation from the implied entries (the log is
    the truth), walking both databases with one cursor each, in lockstep. Each fault is named once: a
    damaged entry does not spoil the hashes above it (they are recomputed from the log)."""

    def __init__(self, txn: lmdb.Transaction, dbs: TlogDbs) -> None:
        self._entries = txn.cursor(db=dbs.entries).iternext()
        self._hashes = txn.cursor(db=dbs.hashes).iternext()
        self._frontier: list[bytes] = []
        self._size = 0
        self._pos = 0
        self._faults: list[str] = []
        self._more = 0
        self._short = self._short_hashes = False  # a database ran out before the log did
        self._stored_size = size(txn, dbs)
        self._stored_hashes = int(txn.stat(dbs.hashes)["entries"])

    def _fault(self, text: str) -> None:
        if len(self._faults) < NAMED_FAULTS:
            self._faults.append(text)
        else:
            self._more += 1

    def feed(self, expected: bytes) -> None:
        n = self._size
        stored = next(self._entries, None)
        if stored is None:
            if not self._short:  # named once: the count in finish() says how many
                self._fault(f"transparency log entry {n} is missing (the log holds it), and every one after it")
            self._short = True
        elif int.from_bytes(stored[0], "big") != n:
            self._fault(
                f"transparency log entry {n} is missing: the next one is stored under {int.from_bytes(stored[0], 'big')}"
            )
            self._entries = iter(())  # out of step: the count below names the rest
        elif bytes(stored[1]) != expected:
            self._fault(f"transparency log entry {n} differs from its log entry")
        for level, h in enumerate(append_leaf(self._frontier, n, leaf_hash(expected))):
            got = next(self._hashes, None)
            index = (n + 1 >> level) - 1
            if got is None:
                if not self._short_hashes:
                    self._fault(
                        f"transparency log hash at level {level}, index {index} is missing, and every one after it"
                    )
                self._short_hashes = True
            elif int.from_bytes(got[0], "big") != self._pos:
                self._fault(f"transparency log hash at level {level}, index {index} is stored out of place")
                self._hashes = iter(())
            elif bytes(got[1]) != h:
                self._fault(f"transparency log hash at level {level}, index {index} differs from its recomputation")
            self._pos += 1
        self._size = n + 1

    def abandon(self, seq: int) -> list[str]:
        """The faults found before log entry ``seq``, which is not readable: the tlog entry it implies, and
        every hash above it, cannot be known, so the check ends there (the log's fault is named with it)."""
        faults = self._faults + ([f"... and {self._more:,} more faults of the transparency log"] if self._more else [])
        return faults + [f"the transparency log cannot be checked from entry {seq} on: log entry {seq} is not readable"]

    def finish(self) -> list[str]:
        """The faults found, once every log entry was fed."""
        if self._stored_size != self._size:
            self._fault(f"the transparency log holds {self._stored_size:,} entries for {self._size:,} log entries")
        if self._stored_hashes != stored_hashes(self._size):
            self._fault(
                f"the transparency log holds {self._stored_hashes:,} hashes; a tree of {self._size:,} entries has "
                f"{stored_hashes(self._size):,}"
            )
        faults = self._faults + ([f"... and {self._more:,} more faults of the transparency log"] if self._more else [])
        if faults:  # the remedy, once (fsck --repair does not repair the tlog: it is derived from the log)
            faults[-1] += "; the transparency log is derived from the log: `pithledger rebuild --force` rebuilds it"
        return faults


def rebuilt_extends(
    old_txn: lmdb.Transaction,
    old: TlogDbs,
    new_txn: lmdb.Transaction,
    new: TlogDbs,
    release: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Whether the tlog ``new`` (a rebuilt ledger's) extends ``old`` identically: its first entries are the
    old ones, byte for byte, and its tree at the old size has the old stored root. The first differing
    index, if any (spec/storage.md §8). ``release`` is called every 4,096 entries read (the caller drops
    the files' mapped pages: reading both logs would map them whole)."""
    old_size, new_size = size(old_txn, old), size(new_txn, new)
    first: int | None = None
    mine = new_txn.cursor(db=new.entries).iternext()
    for n, (_, entry) in enumerate(old_txn.cursor(db=old.entries).iternext()):
        if n % 4096 == 4095:
            release()
        theirs = next(mine, None)
        if theirs is None or bytes(theirs[1]) != bytes(entry):
            first = n
            break
    if (
        first is None
        and new_size >= old_size
        and tree_hash(new_txn, new, old_size) != tree_hash(old_txn, old, old_size)
    ):
        first = 0  # same entries, different stored hashes: the old tree was damaged
    return {
        "old_size": old_size,
        "size": new_size,
        "extends_old": first is None and new_size >= old_size,
        "first_difference": first,
    }
