"""fsck: every check of the ledger against its log (log entries, event index, citation indexes,
states and their fold entries, lookup indexes, evidence and its accounting, digest tree), pure parts run
on the workers.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import lmdb
import msgspec

import pithledger.store.tlog_tables as tlog_tables
from pithledger.audit import DEPTH, Pair, bucket_of, bucket_pair, inner_pair
from pithledger.errors import LedgerError, PithledgerError, TlogNotBuilt
from pithledger.fanout import Fanout
from pithledger.files import disk_full
from pithledger.merge import FOLD_VERSION, Fold, describes
from pithledger.records.events import Verdict, check_event, valid_verdict, verify_event
from pithledger.store.entries import Usage, _entry_decoder, _entry_encoder, _evidence_decoder, _usage_decoder
from pithledger.store.env import (
    _RELEASE_ENTRIES,
    _RELEASE_EVERY,
    _Environment,
    _event_key,
    _json_decoder,
    _rec_key,
    _release_mapped_pages,
    _seq_text,
)
from pithledger.store.lookup import _Lookup
from pithledger.store.scratch import Pair as _KV
from pithledger.store.scratch import Scratch, diff
from pithledger.store.translog import _Translog
from pithledger.store.tuning import StoreTuning
from pithledger.store.views import (
    _FINAL_BLOCK,
    _ZLIB_HEADER,
    _derive_as,
    _fold_decoder,
    _fold_entry_decoder,
    _FoldEntry,
    _inflated_index_keys,
    _Inputs,
    _outbound_of,
    _pair_decoder,
    _unpack_state,
    _Views,
)

#: How fsck reads a stored key as text: a damaged one (not UTF-8) is named with its bytes escaped, never a traceback.
_KEPT = "backslashreplace"


def _fsck_log_part(
    items: list[tuple[bytes, bytes]], *, reverify: bool
) -> list[tuple[bytes, list[str], bytes | None, bytes | None]]:
    """fsck of log entries (sequence key, stored entry): each one's faults, the event id key the
    ids index must map to it (None for an entry that is not a valid event) and the transparency log
    entry it implies (spec/storage.md §2.2; None: the entry is not readable, so neither is known). Pure: runs
    on workers.

    Every check of spec/events.md §2.2 runs again; the Ed25519 check only with ``reverify`` (the
    log holds only events whose signature verified on arrival)."""
    out: list[tuple[bytes, list[str], bytes | None, bytes | None]] = []
    for seq, raw in items:
        try:
            entry = _entry_decoder.decode(raw)
            event = _json_decoder.decode(entry.event)
            verdict = check_event(event, signature_known_good=not reverify)
            # The log holds valid events only, so the stored verdict is rebuilt (once) only for one
            # that still verifies; for any other, "valid" is what was stored.
            logged = valid_verdict(event, entry.facts, entry.event_id) if verdict.status == "valid" else None
        except _DAMAGE:  # fsck is run on damaged ledgers: what cannot be read is named, never a traceback
            out.append((seq, [f"log entry {_seq_text(seq)}: not readable (damaged ledger)"], None, None))
            continue
        where = f"log entry {entry.seq} ({entry.event_id or verdict.event_id})"
        faults = []
        if int.from_bytes(seq, "big") != entry.seq:
            faults.append(f"{where}: stored under sequence {_seq_text(seq)}")
        if logged is None or _verdict_key(verdict) != _verdict_key(logged):
            faults.append(f"{where}: stored verdict valid/ but it verifies as {verdict.status}/{verdict.reason}")
        if verdict.status != "valid":
            faults.append(f"{where}: the log holds an event that is not valid ({verdict.reason})")
        out.append(
            (
                seq,
                faults,
                _event_key(verdict.event_id) if verdict.status == "valid" else None,
                tlog_tables.entry_of_logged(entry.event, entry.event_id),
            )
        )
    return out


#: A record's stored inputs and its stored ``fold`` entry, as stored (None: it has none), or why its inputs
#: cannot be read (then the inputs are empty).
_StateInputs = tuple[_Inputs, bytes | None, str | None]


#: What fsck's workers find of one stored state (_fsck_state_part): subject, whether it equals its
#: recomputation, the digest leaf recomputed, the fold entry's fault, the outbound citations, the index
#: entries (or why they cannot be read), and why it cannot be recomputed at all (None: it can).
_StateFound = tuple[
    str, bool, bytes, str | None, list[tuple[str, str]] | None, list[tuple[bytes, bytes]] | str, str | None
]

#: What a damaged entry raises as it is decoded or read (a stored value of the wrong shape, a missing key).
#: Any of pithledger's errors too: a damaged event's bytes may decode yet fail a check its derivation makes
#: (a public key no longer base64: ``bad-encoding``, which ended fsck).
_DAMAGE = (msgspec.DecodeError, PithledgerError, KeyError, TypeError, ValueError, AttributeError)


def _fsck_state_part(part: list[_StateInputs]) -> list[_StateFound]:
    """fsck of stored states: whether each equals its derivation from the record's stored inputs
    (``old_state`` holds the stored state), the digest leaf derived with it, what is wrong with its fold
    entry (None: nothing), the standing outbound citations its events make (None: it has no events of its
    own) and the lookup index entries its stored state implies (or why they cannot be read). Pure.

    The citations and index entries are found here, from the inputs and the state this pass reads and
    decodes anyway, not by two more passes of the writer's thread over every record's events and every
    stored state (1 M events: 48 -> 3x s, spec/storage.md §6)."""
    out: list[_StateFound] = []
    for inputs, entry, damage in part:
        if damage is None:
            try:
                out.append(_fsck_state(inputs, entry))
                continue
            except _DAMAGE:  # its log entries do not decode (named where the log is checked)
                damage = "its log entries are not readable (damaged ledger)"
        # its stored state still says which index entries it implies
        out.append((inputs.subject, False, b"", None, None, _stored_index(inputs), damage))
    return out


def _stored_index(inputs: _Inputs) -> list[tuple[bytes, bytes]] | str:
    """The lookup index entries a record's stored state implies, or why they cannot be read."""
    if inputs.old_state is None:
        return []
    try:
        return _inflated_index_keys(inputs.subject, _unpack_state(inputs.old_state))
    except LedgerError as exc:
        return exc.message


def _fsck_state(inputs: _Inputs, entry: bytes | None) -> _StateFound:
    """:func:`_fsck_state_part` of one record whose inputs could be read."""
    derived = _derive_as(
        inputs._replace(old_state=None), reference=True
    )  # never a fold: fsck must catch a fold's fault
    assert derived is not None  # without a Fold, a full derivation
    index: list[tuple[bytes, bytes]] | str = []  # no stored state: no index entries implied
    try:
        stored = _unpack_state(inputs.old_state) if inputs.old_state is not None else None
    except LedgerError as exc:  # not even zlib: differs
        stored, index = None, exc.message
    fault = None if entry is None else _fold_fault(inputs, entry, stored)  # no entry: nothing more to pay
    if stored is not None:
        try:
            index = _inflated_index_keys(inputs.subject, stored)
        except LedgerError as exc:
            index = exc.message
    outbound = _outbound_of(_entry_decoder.decode(raw) for raw in inputs.own) if inputs.own else None
    return (inputs.subject, stored == derived.state, derived.pair, fault, outbound, index, None)


def _fold_fault(inputs: _Inputs, raw: bytes, stored_state: bytes | None) -> str | None:
    """What is wrong with a record's stored fold entry ``raw``, against what a full derivation from its
    stored inputs would store beside its state (``stored_state``, inflated; None: unreadable, which the
    state check names); None if nothing. Pure.

    The next apply derives the record from this entry and only what came since (spec/storage.md §3.3), so
    an entry that says something else than the log (another last entry, other inbound citations, another
    Fold, segments that are not the stored state's) would derive a state no other mirror holding the same
    events derives. An entry that does not decode, that holds another record's Fold, or that is kept for a
    record that keeps none cannot arise from a sound writer: named too. Two kinds are no fault, as they
    only mean a full derivation next: a Fold of another FOLD_VERSION, and a Fold of an earlier state of
    this record (an older pithledger may have derived it since without updating the entry, §3.3); nor is
    a missing entry (a ledger written before entries existed has none)."""
    try:
        entry = _fold_entry_decoder.decode(raw)
        stored_fold = _fold_decoder.decode(entry.fold)
    except msgspec.DecodeError:  # (msgspec.ValidationError is one)
        return "does not decode"
    if stored_fold.version != FOLD_VERSION:
        return None
    full = _derive_as(inputs._replace(old_state=None), reference=False)  # fold=None (not incremental): fold_all
    assert full is not None  # without a Fold, a full derivation
    if full.fold is None:
        return "is kept for a record that keeps none (fewer than 256 events, or pending)"
    if stored_fold.pith_number != inputs.subject:
        return f"holds the Fold of another record ({stored_fold.pith_number})"
    if stored_state is None or inputs.old_state is None or not describes(stored_fold, inputs.subject, stored_state):
        return None  # an earlier state's: the next fold falls back (or the state itself is named)
    faults = []
    if entry.last_seq != inputs.last_seq:
        faults.append(
            f"names log entry {entry.last_seq} as the last folded, but the record's last is {inputs.last_seq}"
        )
    if entry.inbound != inputs.inbound_ids:
        faults.append("names other inbound citations than the standing ones")
    if _comparable(stored_fold) != _comparable(_fold_decoder.decode(full.fold)):
        faults.append("holds a Fold that differs from its recomputation from the log")
    if not _segments_describe(entry, inputs.old_state, stored_state):
        faults.append("has segments that are not those of the stored state")
    return "; ".join(faults) or None


def _comparable(f: Fold) -> Fold:
    """A Fold with its order-free parts sorted: a fold appends where a full derivation sorts (the
    members of a slot are a set, see merge._chosen), and the bytes of either describe the same state."""
    return msgspec.structs.replace(
        f,
        members={k: sorted(v) for k, v in f.members.items()},
        ineffective=sorted(f.ineffective),
        unknown=sorted(f.unknown),
    )


def _segments_describe(entry: _FoldEntry, packed: bytes, state: bytes) -> bool:
    """Whether an entry's segments and ``packed_sha256`` are those of the stored (compressed) state
    ``packed``, whose inflated bytes are ``state``: the next fold copies a segment's bytes out of it by
    key and length (views._pack_state), so a wrong length or key would store a damaged state. A sound
    writer keeps a hash exactly where it keeps segments. Each segment is inflated on its own, so this
    holds whatever zlib compressed it."""
    if not entry.segments:
        return entry.packed_sha256 == b""
    if entry.packed_sha256 != hashlib.sha256(packed).digest() or packed[: len(_ZLIB_HEADER)] != _ZLIB_HEADER:
        return False
    at, pieces = len(_ZLIB_HEADER), []
    for key, n in entry.segments:
        if n <= 0:
            return False
        try:
            piece = zlib.decompressobj(-15).decompress(packed[at : at + n])
        except zlib.error:
            return False
        if hashlib.sha256(piece).digest()[:16] != key:
            return False
        pieces.append(piece)
        at += n
    return at + len(_FINAL_BLOCK) + 4 == len(packed) and b"".join(pieces) == state


def _usage_of(raw: bytes | memoryview) -> Usage:
    """A stored evidence usage counter; an unreadable one counts nothing (so it differs from what is held)."""
    try:
        return _usage_decoder.decode(raw)
    except msgspec.DecodeError:
        return Usage()


def _stored_pair(raw: bytes | memoryview) -> Pair | None:
    """A stored digest leaf or node; None where it does not decode (a damaged one differs)."""
    try:
        return _pair_decoder.decode(raw)
    except msgspec.DecodeError:
        return None


def _copy(raw: bytes | memoryview | None) -> bytes | None:
    return None if raw is None else bytes(raw)  # the worker's input outlives the transaction


def _verdict_key(v: Verdict) -> tuple[Any, ...]:
    """What fsck compares: everything but the message, which explains the first fault found and may
    name another fault of the same code when the copy's keys come in another order."""
    return (v.event_id, v.event_type, v.subject, v.status, v.reason, v.trust, v.signer_key, v.facts)


#: fsck names at most this many records whose evidence usage is miscounted (then how many more).
_NAMED_MISCOUNTS = 20


def _usage_text(u: Usage) -> str:
    return f"{u.entries:,} cop{'y' if u.entries == 1 else 'ies'} ({u.bytes:,} bytes)"


class _Citations:
    """What fsck finds of the citation indexes as it checks the states: the records whose outbound entry
    differs, and the inbound entries expected that no LMDB table can hold (only faults, never per record)."""

    def __init__(self) -> None:
        self.faults: list[bytes] = []
        self.odd: set[_KV] = set()


class _StateChecks:
    """What fsck's walk of the stored states found, held until each check names it in its turn (only faults
    are held in memory; what the ledger should hold is in the scratch)."""

    def __init__(self) -> None:
        self.citations = _Citations()
        self.index_unreadable: list[str] = []
        self.index_lacks: set[tuple[bytes, bytes, bytes]] = set()
        self.state_faults: list[str] = []
        self.leaf_faults: list[str] = []  # named where the tree is checked, as before
        self.odd: dict[str, dict[str, Pair]] = {}  # leaves the scratch cannot hold (a subject too long to be a key)
        # the buckets in the order their first record comes in the state table (at most 32^DEPTH): the
        # order the tree's faults were always named in (the scratch gives them in bucket order)
        self.order: dict[str, None] = {}


class _Fsck:
    """Checking a ledger against its log, and repairing the evidence accounting: a part of a handle over
    its core, reading through its lookup, views and tlog parts, checking on its fan-out."""

    def __init__(
        self,
        core: _Environment,
        lookup: _Lookup,
        views: _Views,
        tlog: _Translog,
        fanout: Fanout,
        tuning: StoreTuning,
    ) -> None:
        self._core = core
        self.db = core.db
        self.path = core.path
        self._lookup = lookup
        self._views = views
        self._tlog = tlog
        self._fanout = fanout
        self.tuning = tuning

    def fsck(self, *, reverify: bool = False) -> list[str]:
        """Re-verify every logged event and recompute every state; return every mismatch found.

        Every check of spec/events.md §2.2 runs again, except, unless ``reverify``, the Ed25519 check
        of a logged event: the log holds only events whose signature verified on arrival, and that
        check is most of the cost (spec/storage.md §6). A file LMDB finds damaged under a table's walk
        (a page of the wrong type, a page past the end) ends the check there, named after what was found
        before it: LMDB's read transaction is unusable after it (MDB_BAD_TXN), and nothing read after it could be trusted."""
        problems: list[str] = []
        try:
            self._fsck_into(problems, reverify=reverify)
        except lmdb.MapResizedError:
            raise
        except (
            lmdb.Error
        ) as exc:  # CorruptedError, PageNotFoundError, BadValsizeError (an index value of a wrong size)...
            problems.append(
                f"the ledger's file is damaged: LMDB cannot read it ({exc}); the check stopped there "
                "(restore a backup, or rebuild it with `pithledger rebuild --force` if its log is readable)"
            )
        return problems

    def _fsck_into(self, problems: list[str], *, reverify: bool) -> None:
        """:meth:`fsck`, each fault appended to ``problems`` as it is found: the log (and the tlog and the
        event_id index beside it), then, once nothing is pending, the derived views against the log."""
        dbs = self._lookup._pending_dbs()
        opened = self._tlog._open_tlog()
        with self._core._begin() as txn:
            self._fsck_log(txn, problems, reverify=reverify, opened=opened)
            pending = sum(txn.stat(db)["entries"] for db in dbs)
            if pending:  # the derived views are checked once derived: open_settled() / finish() first
                problems.append(
                    f"{pending:,} records have derivation pending; finish() (the next apply or sync) derives them"
                )
                problems += self._fsck_evidence(txn)
                return
            # what the whole ledger should hold is kept in a scratch table on disk, never per record in
            # memory: each check then walks it beside the stored table (spec/storage.md §6)
            with Scratch((b"inbound", b"suffix", b"alias", b"leaf"), near=self.path, owner=self._core) as scratch:
                found = _StateChecks()
                self._fsck_states(txn, scratch, found)
                self._fsck_unstated(txn, scratch, found)
                problems += self._fsck_citations(txn, scratch, found.citations) + found.state_faults
                problems += self._fsck_indexes(txn, scratch, found.index_unreadable, found.index_lacks)
                problems += self._fsck_evidence(txn)
                problems += found.leaf_faults + self._fsck_tree(txn, self._buckets(scratch, found.odd), found.order)

    def _fsck_log(self, txn: lmdb.Transaction, problems: list[str], *, reverify: bool, opened: bool) -> None:
        """Every log entry checked (on the workers), the transparency log fed as the log streams by, and the
        event_id index checked against it; ``opened``: the tlog's databases were opened now (_tlog_read)."""
        seen = 0
        try:  # the tlog is checked against the log as it streams by (a reader of a layout-4 ledger has none yet)
            tlog: tlog_tables.Checker | None = tlog_tables.Checker(txn, self._tlog._tlog_read(txn, opened))
        except TlogNotBuilt:
            tlog = None
        log = txn.cursor(db=self.db[b"log"]).iternext()

        def log_part() -> list[tuple[bytes, bytes]]:
            _release_mapped_pages(self._core)  # a reader of the whole file would otherwise map all of it
            return [(bytes(seq), bytes(raw)) for seq, raw in islice(log, self.tuning.fsck_part)]

        parts = iter(log_part, [])
        check = functools.partial(_fsck_log_part, reverify=reverify)
        many = txn.stat(self.db[b"log"])["entries"] >= 2 * self.tuning.fsck_part
        for checked in self._fanout.map(check, parts, parallel=many):
            for seq, faults, key, tlog_entry in checked:
                seen += 1
                if seen % 64 == 0:  # each id looked up faults in its leaf and up to 15 neighbours (64 KiB)
                    _release_mapped_pages(self._core)
                problems += faults
                if tlog is not None:
                    if tlog_entry is None:  # the log cannot say what the tlog should hold
                        problems += tlog.abandon(int.from_bytes(seq, "big"))
                        tlog = None
                    else:
                        tlog.feed(tlog_entry)
                if key is not None and txn.get(key, db=self.db[b"ids"]) != seq:
                    problems.append(f"log entry {_seq_text(seq)}: the event_id index does not point at it")
        if txn.stat(self.db[b"ids"])["entries"] != seen:
            problems.append(
                f"the event_id index holds {txn.stat(self.db[b'ids'])['entries']} ids for {seen} log entries"
            )
        if tlog is not None:
            problems += tlog.finish()

    def _fsck_states(self, txn: lmdb.Transaction, scratch: Scratch, found: _StateChecks) -> None:
        """Each stored state recomputed from the log (on the workers; its inputs as stored, its stored state
        as "old": compared with, not replaced), and what the ledger should hold kept in ``scratch``."""
        subjects = (bytes(key).decode(errors=_KEPT) for key in txn.cursor(db=self.db[b"state"]).iternext(values=False))
        many = txn.stat(self.db[b"state"])["entries"] >= self.tuning.parallel_states
        for part in self._fanout.map(_fsck_state_part, self._state_inputs(txn, subjects), parallel=many):
            for k, one in enumerate(part):
                if k % _RELEASE_EVERY == 0:  # each record's checks read random pages (outcite, rec, the scratch)
                    _release_mapped_pages(self._core)
                self._fsck_record(txn, scratch, found, one)

    def _fsck_record(self, txn: lmdb.Transaction, scratch: Scratch, found: _StateChecks, one: _StateFound) -> None:
        """One record's recomputation (:func:`_fsck_state`) held against what it stores."""
        subject, same, pair, fold_fault, outbound, index, damage = one
        if damage is not None:  # its leaf is unknown: the tree differs
            found.state_faults.append(f"state of {subject} cannot be recomputed: {damage}")
            found.order.setdefault(bucket_of(subject), None)
            if txn.get(subject.encode(), db=self.db[b"subject"]) is not None:
                try:  # its own events may be readable (an inbound citation was the damage)
                    outbound = self._views._outbound(txn, subject)
                except _DAMAGE:
                    outbound = None
        if outbound is not None:
            self._expect_citations(txn, scratch, subject, outbound, found.citations)
        if isinstance(index, str):
            found.index_unreadable.append(index)
        else:
            for ikey, db in index:
                if not scratch.add(db, ikey, subject.encode()):  # no LMDB table can hold it: lacking
                    found.index_lacks.add((db, ikey, subject.encode()))
        if damage is not None:
            return
        if not same:
            found.state_faults.append(f"state of {subject} differs from its recomputation from the log")
        if fold_fault is not None:
            found.state_faults.append(
                f"the fold entry of {subject} {fold_fault}: `pithledger rebuild --force` rebuilds it"
            )
        leaf = _pair_decoder.decode(pair)
        raw = txn.get(_rec_key(subject), db=self.db[b"rec"])
        if raw is None or _stored_pair(raw) != leaf:
            found.leaf_faults.append(f"digest entry of {subject} differs from its recomputation")
        bucket = bucket_of(subject)
        found.order.setdefault(bucket, None)
        if not scratch.add(b"leaf", b"b" + bucket.encode(), bytes([len(pair)]) + pair + subject.encode()):
            found.odd.setdefault(bucket, {})[subject] = leaf

    def _fsck_unstated(self, txn: lmdb.Transaction, scratch: Scratch, found: _StateChecks) -> None:
        """The records with events but no stored state: named, their citations recomputed here."""
        cursor = txn.cursor(db=self.db[b"subject"])
        for n, subject_key in enumerate(cursor.iternext_nodup(values=False), 1):
            if txn.get(subject_key, db=self.db[b"state"]) is None:
                subject = bytes(subject_key).decode(errors=_KEPT)
                found.state_faults.append(f"{subject} has events but no stored state")
                # not among the states: its citations are recomputed here
                try:
                    outbound = self._views._outbound(txn, subject)
                except _DAMAGE:  # its log entries are damaged (named where the log is checked)
                    continue
                self._expect_citations(txn, scratch, subject, outbound, found.citations)
            if n % _RELEASE_ENTRIES == 0:
                _release_mapped_pages(self._core)

    def _pairs(self, txn: lmdb.Transaction, name: bytes) -> Iterator[_KV]:
        """Every (key, value) of one of the ledger's tables, in order, its pages released as it goes."""
        for n, (key, value) in enumerate(txn.cursor(db=self.db[name]).iternext(), 1):
            if n % (8 * _RELEASE_ENTRIES) == 0:
                _release_mapped_pages(self._core)
            yield bytes(key), bytes(value)

    @staticmethod
    def _buckets(scratch: Scratch, odd: dict[str, dict[str, Pair]]) -> Iterator[tuple[str, dict[str, Pair]]]:
        """Each digest-tree bucket's leaves (record -> Pair), one bucket at a time, from the scratch."""
        current: bytes | None = None
        records: dict[str, Pair] = {}
        for key, value in scratch.pairs(b"leaf"):
            if key != current:
                if current is not None:
                    bucket = current[1:].decode(errors=_KEPT)
                    yield bucket, records | odd.pop(bucket, {})
                current, records = key, {}
            n = value[0]
            records[value[1 + n :].decode(errors=_KEPT)] = _pair_decoder.decode(value[1 : 1 + n])
        if current is not None:
            bucket = current[1:].decode(errors=_KEPT)
            yield bucket, records | odd.pop(bucket, {})
        yield from list(odd.items())

    def _state_inputs(self, txn: lmdb.Transaction, subjects: Iterator[str]) -> Iterator[list[_StateInputs]]:
        """Each record's stored inputs, in parts (:meth:`_input_parts`), with its stored fold entry (bytes,
        checked on the workers), or why they cannot be read: a damaged index naming a log entry the log
        lacks is a fault of that record, not the end of the check (its stored state is still handed over)."""
        fold = self.db.get(b"fold")  # optional: a ledger of an older pithledger has none
        damaged: dict[str, str] = {}  # the part's records whose inputs cannot be read (only faults are held)

        def gather(txn: lmdb.Transaction, subject: str) -> _Inputs:
            try:
                return self._views._gather(txn, subject)
            except LedgerError as exc:
                damaged[subject] = exc.message
                return _Inputs(subject, [], [], _copy(txn.get(subject.encode(), db=self.db[b"state"])))

        tuning = self.tuning
        for part in self._views._input_parts(
            txn, subjects, tuning.derive_part_records, tuning.derive_part_entries, gather=gather
        ):
            yield [
                (inputs, None, damaged.pop(inputs.subject))
                if inputs.subject in damaged
                else (inputs, None if fold is None else _copy(txn.get(inputs.subject.encode(), db=fold)), None)
                for inputs in part
            ]

    def _expect_citations(
        self,
        txn: lmdb.Transaction,
        scratch: Scratch,
        subject: str,
        outbound: list[tuple[str, str]],
        citations: _Citations,
    ) -> None:
        """One record's recomputed outbound citations (a record with events of its own): compared with its
        stored ``outcite`` entry, and the inbound entries they imply gathered in ``scratch``."""
        try:
            stored: list[tuple[str, str]] | None = self._views._stored_outbound(txn, subject)
        except _DAMAGE:  # not a list of pairs: differs
            stored = None
        if outbound != stored:
            citations.faults.append(subject.encode())
        for cited, eid in outbound:
            try:
                key = _event_key(eid)
            except ValueError:  # a damaged log entry's id is not hex: no stored entry can be it (missing)
                citations.odd.add((cited.encode(), eid.encode()))
                continue
            if not scratch.add(b"inbound", cited.encode(), key):
                citations.odd.add((cited.encode(), key))

    def _fsck_citations(self, txn: lmdb.Transaction, scratch: Scratch, citations: _Citations) -> list[str]:
        """The citation indexes equal a recomputation from every record's own events: the records whose
        outbound entry differs (in key order), then the inbound entries expected (gathered in ``scratch``)
        walked beside the stored ones."""
        problems = [
            f"the outbound citation index of {key.decode(errors=_KEPT)} differs from its recomputation"
            for key in sorted(citations.faults)
        ]
        stale, missing = 0, len(citations.odd)  # expected entries no LMDB table can hold: missing, whatever is stored
        for lacking, _ in diff(scratch.pairs(b"inbound"), self._pairs(txn, b"inbound")):
            missing += lacking
            stale += not lacking
        if stale or missing:
            problems.append(
                f"the inbound citation index differs from its recomputation ({stale} stale, {missing} missing)"
            )
        return problems

    def _fsck_indexes(
        self,
        txn: lmdb.Transaction,
        scratch: Scratch,
        unreadable: list[str],
        lacks: set[tuple[bytes, bytes, bytes]],
    ) -> list[str]:
        """The suffix and alias indexes hold exactly what the stored states imply (the entries expected
        were gathered in ``scratch`` as the states were checked, then are walked beside the stored ones;
        ``unreadable``: the states whose entries cannot be known; ``lacks``: expected entries no table
        can hold)."""
        stale: list[tuple[bytes, bytes, bytes]] = []
        for db in (b"alias", b"suffix"):
            for lacking, (k, v) in diff(scratch.pairs(db), self._pairs(txn, db)):
                if lacking:
                    lacks.add((db, k, v))
                else:
                    stale.append((db, k, v))
        return unreadable + (
            [
                f"{db.decode(errors=_KEPT)} index lacks {k.decode(errors=_KEPT)} -> {v.decode(errors=_KEPT)}"
                for db, k, v in sorted(lacks)
            ]
            + [
                f"{db.decode(errors=_KEPT)} index holds a stale entry {k.decode(errors=_KEPT)} -> {v.decode(errors=_KEPT)}"
                for db, k, v in stale
            ]
        )

    def _fsck_evidence(self, txn: lmdb.Transaction) -> list[str]:
        problems: list[str] = []
        for n, (key, raw) in enumerate(txn.cursor(db=self.db[b"evidence"]).iternext(), 1):
            if n % _RELEASE_ENTRIES == 0:
                _release_mapped_pages(self._core)
            where = f"evidence {bytes(key).hex()}"
            try:
                held = _evidence_decoder.decode(raw)
            except msgspec.DecodeError:
                problems.append(f"{where}: not readable (damaged ledger)")
                continue
            if hashlib.sha256(held.event).digest() != bytes(key):
                problems.append(f"{where}: its bytes do not hash to its key")
            try:
                verdict = verify_event(_json_decoder.decode(held.event))
            except msgspec.DecodeError:
                problems.append(f"{where}: its bytes are not JSON (damaged ledger)")
                continue
            if _verdict_key(verdict) != _verdict_key(held.verdict):
                problems.append(
                    f"{where}: stored verdict {held.verdict.status}/{held.verdict.reason} but it verifies as {verdict.status}/{verdict.reason}"
                )
        return problems + self._fsck_evidence_usage(txn)

    def _evidence_held(self, txn: lmdb.Transaction) -> tuple[dict[str, Usage], Usage]:
        """What the evidence area holds, counted from the entries: per record and in all."""
        usage: dict[str, Usage] = {}
        entries = size = 0
        for raw in txn.cursor(db=self.db[b"evidence"]).iternext(keys=False):
            try:
                held = _evidence_decoder.decode(raw)
            except msgspec.DecodeError:  # not counted: fsck names it
                continue
            u = usage.get(held.verdict.subject, Usage())
            usage[held.verdict.subject] = Usage(u.entries + 1, u.bytes + len(held.event))
            entries, size = entries + 1, size + len(held.event)
        return usage, Usage(entries, size)

    def _fsck_evidence_usage(self, txn: lmdb.Transaction) -> list[str]:
        """The evidence usage counters (what the caps are checked against) against what is held, each
        miscount named: a counter above the truth fills a cap early, one below lets it overflow."""
        usage, total = self._evidence_held(txn)
        # an unreadable counter counts nothing: named as miscounted (`fsck --repair` rewrites it)
        stored = {bytes(k).decode(errors=_KEPT): _usage_of(v) for k, v in txn.cursor(db=self.db[b"evsize"]).iternext()}
        wrong = sorted(s for s in usage.keys() | stored.keys() if usage.get(s, Usage()) != stored.get(s, Usage()))
        problems = [
            f"evidence usage of {s} counts {_usage_text(stored.get(s, Usage()))} but {_usage_text(usage.get(s, Usage()))} "
            f"are held"
            for s in wrong[:_NAMED_MISCOUNTS]
        ]
        if len(wrong) > _NAMED_MISCOUNTS:
            problems.append(
                f"... and the evidence usage of {len(wrong) - _NAMED_MISCOUNTS:,} more records is miscounted"
            )
        raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        counted = _usage_of(raw) if raw is not None else Usage()
        if counted != total:
            problems.append(f"the total evidence usage counts {_usage_text(counted)} but {_usage_text(total)} are held")
        return problems

    def repair_evidence_usage(self) -> list[str]:
        """Recount the evidence usage counters from the evidence held (one write transaction); return
        what was wrong, as fsck names it. Only these counters are repaired: they are local bookkeeping
        of the caps, outside consensus, and the entries they count are the truth. Everything else fsck
        checks is derived from the log, which ``rebuild`` re-derives."""
        while True:
            try:
                with self._core._begin(write=True) as txn:
                    found = self._fsck_evidence_usage(txn)
                    if not found:
                        return []
                    usage, total = self._evidence_held(txn)
                    txn.drop(self.db[b"evsize"], delete=False)
                    for subject, u in sorted(usage.items()):
                        txn.put(subject.encode(), _entry_encoder.encode(u), db=self.db[b"evsize"])
                    txn.put(b"evidence_usage", _entry_encoder.encode(total), db=self.db[b"meta"])
                    return found
            except lmdb.MapFullError:
                self._core._grow()
            except lmdb.Error as exc:
                raise disk_full(exc, self.path, "the evidence usage was not repaired") or LedgerError(
                    f"the evidence usage was not repaired: {exc}",
                    hint="the ledger is as it was; if the disk is full, free space and run it again",
                ) from None

    def _fsck_tree(
        self, txn: lmdb.Transaction, buckets: Iterator[tuple[str, dict[str, Pair]]], order: Iterable[str]
    ) -> list[str]:
        """Recompute every digest-tree node from the records' leaves derived from the log, given one
        bucket at a time: what is held is one bucket's leaves and the tree's nodes (at most 32^DEPTH
        buckets), never every record's. ``order``: the buckets in the order their faults are named."""
        problems: list[str] = []
        computed = {b: bucket_pair(r) for b, r in buckets}
        # a bucket whose only records cannot be recomputed (damaged) has no leaves: an empty one, which differs
        level: dict[str, Pair] = {b: computed[b] if b in computed else bucket_pair({}) for b in order}
        for depth in range(DEPTH, -1, -1):
            for prefix, pair in level.items():
                raw = txn.get(b"/" + prefix.encode(), db=self.db[b"node"])
                if raw is None or _stored_pair(raw) != pair:
                    problems.append(f"digest node {prefix or '(root)'} differs from its recomputation")
            if depth == 0:
                break
            parents: dict[str, dict[str, Pair]] = {}
            for prefix, pair in level.items():
                parents.setdefault(prefix[:-1], {})[prefix[-1]] = pair
            level = {p: inner_pair(p, ch) for p, ch in parents.items()}
        return problems
