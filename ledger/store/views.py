"""The derived views of the log: citation indexes, materialised states, lookup indexes and the digest
tree (spec/audit.md). A record's state is a pure function of its log entries and the standing
citations naming it (_derive, run on workers); gathering its inputs and storing what was derived
is the writer's part.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, NamedTuple

import lmdb
import msgspec

from pithledger.audit import ALPHABET, DEPTH, Pair, bucket_pair, inner_pair, record_pair
from pithledger.errors import LedgerError
from pithledger.merge import (
    Entry,
    Fold,
    FoldCitations,
    fold,
    fold_all,
    fold_outbound,
    outbound_citations,
    reduce,
    with_inbound,
)
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes
from pithledger.store.entries import LogEntry, _entry_decoder
from pithledger.store.env import (
    _RELEASE_ENTRIES,
    _RELEASE_EVERY,
    _Environment,
    _event_key,
    _json_decoder,
    _rec_key,
    _release_mapped_pages,
    _seq_text,
    _u64,
)
from pithledger.store.lookup import _unpack_state as _unpack_state  # re-exported: fsck and the package name it here

_pair_encoder = msgspec.msgpack.Encoder()
_pair_decoder = msgspec.msgpack.Decoder(Pair)


class _Derived(NamedTuple):
    """What deriving one record yields, for the writer to store (see Ledger._derive)."""

    subject: str
    state: bytes  # canonical state bytes
    pair: bytes  # its digest leaf (msgpack Pair)
    old_keys: list[tuple[bytes, bytes]]  # lookup index entries of the state it replaces
    new_keys: list[tuple[bytes, bytes]]
    fold: bytes | None = None  # the _FoldEntry to keep beside the state (None: delete any); see _packed
    how: str = "derived"  # "inbound": updated from the stored state (_update_inbound); "unchanged": nothing to store


class _Inputs(NamedTuple):
    """What deriving one record reads, as stored (gathered by the writer, see Ledger._gather).

    With ``fold`` (the Fold of its stored state, spec/storage.md §3.3), ``own`` and ``inbound`` hold only
    what came since: its log entries after the last one folded, and its new standing inbound citations."""

    subject: str
    own: list[bytes]  # LogEntry (msgpack) of each of its events, in log order
    inbound: list[bytes]  # LogEntry of each standing citation naming it
    old_state: bytes | None  # its stored (compressed) state, if any
    fold: bytes | None = None  # msgpack Fold of the stored state
    inbound_removed: list[str] = []  # event ids of the folded inbound citations that no longer stand
    last_seq: int = -1  # the record's last log entry read
    inbound_ids: bytes = b""  # the 32-byte id digests of every standing inbound citation, sorted
    segments: list[tuple[bytes, int]] = []  # how ``old_state`` is segmented (_pack_state), if it is
    pair: bytes | None = None  # inbound only (_update_inbound): its stored digest leaf; ``own`` is then empty


class _FoldEntry(msgspec.Struct, array_like=True):
    """A ``fold`` database value (spec/storage.md §3.3): the record's last log entry folded, the inbound
    citations folded (32-byte id digests, sorted), and the Fold (msgpack) of its stored state."""

    last_seq: int
    inbound: bytes
    fold: bytes
    segments: list[tuple[bytes, int]] = []  # the stored state's segments (_pack_state): key, compressed length
    packed_sha256: bytes = b""  # of the stored (compressed) state those segments make up


_fold_encoder = msgspec.msgpack.Encoder()
#: Records with at least this many events (own and inbound) are folded (spec/storage.md §3.3).
_FOLD_FROM = 256
_fold_decoder = msgspec.msgpack.Decoder(Fold)
_fold_citations_decoder = msgspec.msgpack.Decoder(FoldCitations)
_fold_entry_decoder = msgspec.msgpack.Decoder(_FoldEntry)


def _keeps_fold(own: int, inbound: int) -> bool:
    """Whether a present record with ``own`` events and ``inbound`` standing inbound citations keeps a fold
    entry (spec/storage.md §3.3): the one rule for a full derivation and a fold alike."""
    return own + inbound >= _FOLD_FROM


def _derive(inputs: _Inputs) -> _Derived | None:
    """One record's state, digest leaf and lookup index entries from its stored inputs. Pure: the
    same function runs on the writer's thread and on the worker processes. With a Fold, the new events
    are folded into the stored state; None where the fold falls back (spec/merge.md §10): the writer then
    derives from the record's whole inputs."""
    return _derive_as(inputs, reference=False)


def _derive_as(inputs: _Inputs, *, reference: bool) -> _Derived | None:
    """:func:`_derive`; ``reference``: by the reducer itself, never a fold (fsck)."""
    subject, own, inbound, old = inputs[:4]
    entries = [_entry_decoder.decode(raw).entry() for raw in own]
    inbound_entries = [_entry_decoder.decode(raw).entry() for raw in inbound]
    if inputs.fold is not None and not reference:
        if old is None:
            return None
        try:
            got = fold(
                subject,
                _unpack_state(old),
                _fold_decoder.decode(inputs.fold),
                entries,
                inbound_entries,
                inputs.inbound_removed,
            )
        except (LedgerError, msgspec.DecodeError, KeyError, ValueError):  # a damaged state or Fold: derive in full
            return None
        if got is None:
            return None
        data, folded = got
        # A record whose standing inbound citations were withdrawn may fall below the threshold: it keeps no
        # entry then, as if derived in full, so which records keep one follows the events, not their batches.
        kept = (
            _fold_encoder.encode(folded)
            if _keeps_fold(len(folded.ids), len(folded.lists["inbound_citations"]))
            else None
        )
        # a fold never changes record_status or the aliases: the lookup index entries stay as they are
        return _Derived(subject, data, _pair_encoder.encode(folded.pair()), [], [], kept)
    # the lookup indexes follow the state: a record revoked away leaves them all
    old_keys = []
    if old is not None:
        try:
            old_keys = _stored_index_keys(subject, old)
        except LedgerError:  # a damaged stored state: its index entries cannot be known (fsck names them)
            pass
    # A record worth folding keeps a Fold; a small one is derived in full each time, which costs less than
    # keeping one (a Fold holds every event id: for a 20-event paper it would add a third to the ledger).
    big = _keeps_fold(len(entries), len(inbound_entries))
    full = fold_all(subject, entries, inbound_entries) if big and not reference else None
    if full is None:  # small, pending (or fsck): the reducer
        state = reduce(subject, entries, inbound_entries)
        pair = record_pair((e.event_id for e in entries), state["state_sha256"])
        return _Derived(
            subject, canonical_bytes(state), _pair_encoder.encode(pair), old_keys, _index_keys(subject, state)
        )
    data, folded = full
    aliases = _json_decoder.decode(folded.static["source_aliases"])
    new_keys = _index_keys(subject, {"record_status": "present", "current": {"source_aliases": aliases}})
    return _Derived(
        subject, data, _pair_encoder.encode(folded.pair()), old_keys, new_keys, _fold_encoder.encode(folded)
    )


def _packed(inputs: _Inputs, derived: _Derived) -> tuple[_Derived, bytes]:
    """The derived state compressed, reusing the stored state's unchanged segments where it is segmented,
    and the fold entry to keep beside it (in ``fold``, replacing the bare Fold)."""
    old = inputs.old_state if inputs.segments else None
    packed, segments = _pack_state(derived.state, old, inputs.segments)
    if derived.fold is None:
        return derived, packed
    entry = _FoldEntry(
        inputs.last_seq,
        inputs.inbound_ids,
        derived.fold,
        segments,
        hashlib.sha256(packed).digest() if segments else b"",
    )
    return derived._replace(fold=_fold_encoder.encode(entry)), packed


def _update_inbound(inputs: _Inputs) -> _Derived | None:
    """A record whose own events did not change and whose standing inbound citations did (spec/storage.md
    §3.5), from its stored state and digest leaf (``inputs.pair``), the ids of its standing inbound citations
    and their log entries (``inputs.inbound``, in that order): merge.with_inbound, the events root kept.
    None where it cannot be (a damaged stored state or leaf): the writer derives it in full."""
    if inputs.old_state is None or inputs.pair is None:
        return None
    try:
        data = _unpack_state(inputs.old_state)
        pair = _pair_decoder.decode(inputs.pair)
    except (LedgerError, msgspec.DecodeError):
        return None
    digests = [inputs.inbound_ids[i : i + 32] for i in range(0, len(inputs.inbound_ids), 32)]
    if len(digests) != len(inputs.inbound):
        return None
    raw = {"sha256:" + d.hex(): entry for d, entry in zip(digests, inputs.inbound, strict=True)}
    got = with_inbound(
        inputs.subject, data, set(raw), lambda ids: [_entry_decoder.decode(raw[i]).entry() for i in sorted(ids)]
    )
    if got is None or pair.states != bytes.fromhex(got[2]):  # a leaf that is not the stored state's: in full
        return None
    state, sha, _ = got
    if state == data:  # nothing a full derivation would change (a pending record): nothing to store
        return _Derived(inputs.subject, b"", b"", [], [], None, "unchanged")
    # the events root is a function of the record's own events, which did not change; the lookup index
    # entries follow record_status and the aliases, which inbound citations never change
    return _Derived(
        inputs.subject, state, _pair_encoder.encode(Pair(pair.events, bytes.fromhex(sha))), [], [], None, "inbound"
    )


def _derive_part(part: list[_Inputs]) -> list[tuple[str, _Derived | None, bytes]]:
    """Worker process: derive and compress a part of a finishing step's records (None: a fold or an
    inbound update fell back: the writer derives it from its whole inputs)."""
    out: list[tuple[str, _Derived | None, bytes]] = []
    for inputs in part:
        derived = _update_inbound(inputs) if inputs.pair is not None else _derive(inputs)
        if derived is None:
            out.append((inputs.subject, None, b""))
        elif derived.how == "unchanged":
            out.append((inputs.subject, derived, b""))
        else:
            packed_as, packed = _packed(inputs, derived)
            # the writer stores the compressed state only: the canonical bytes (5 x as many) stay here
            out.append((inputs.subject, packed_as._replace(state=b""), packed))
    return out


#: States this long or longer are stored as segments compressed one by one, so that a fold recompresses only
#: the segments it changed (spec/storage.md §2). A segment starts where a view's event id starts with "00"
#: (about every 256th view, wherever it lands: the cuts move with the content, not with offsets).
_SEGMENTED_FROM = 256 * 1024
_CUT = b'","event_id":"sha256:00'
_ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, fastest level
_FINAL_BLOCK = b"\x03\x00"  # an empty final fixed-Huffman block


def _segments(data: bytes) -> list[bytes]:
    cuts, at = [0], data.find(_CUT)
    while at >= 0:
        cuts.append(at)
        at = data.find(_CUT, at + 1)
    cuts.append(len(data))
    return [data[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def _pack_state(
    data: bytes, old: bytes | None = None, segments: list[tuple[bytes, int]] = []
) -> tuple[bytes, list[tuple[bytes, int]]]:  # noqa: B006
    """States are stored zlib-compressed: a state repeats its record's events (views), so storing it
    plainly would double the ledger; canonical JSON compresses about fivefold (spec/storage.md §2).

    A long state is one zlib stream of raw deflate segments, each compressed alone and closed by a full
    flush (so any segment may follow any other), then an empty final block and the Adler-32 of the whole:
    what every inflater reads. ``old``, made of ``segments`` (key, compressed length): its segments whose
    bytes recur are copied, not compressed again. Returns the bytes and their segments ([]: not segmented)."""
    if len(data) < _SEGMENTED_FROM:
        return zlib.compress(data, 1), []
    have: dict[bytes, tuple[int, int]] = {}
    if old is not None:
        at = len(_ZLIB_HEADER)
        for key, n in segments:
            have[key] = (at, n)
            at += n
    parts, made = [_ZLIB_HEADER], []
    for segment in _segments(data):
        key = hashlib.sha256(segment).digest()[:16]
        hit = have.get(key)
        if hit is not None and old is not None:
            chunk = old[hit[0] : hit[0] + hit[1]]
        else:
            z = zlib.compressobj(1, zlib.DEFLATED, -15)
            chunk = z.compress(segment) + z.flush(zlib.Z_FULL_FLUSH)
        parts.append(chunk)
        made.append((key, len(chunk)))
    parts.append(_FINAL_BLOCK + zlib.adler32(data).to_bytes(4, "big"))
    return b"".join(parts), made


class _CurrentView(msgspec.Struct):
    source_aliases: Any = None


class _IndexView(msgspec.Struct):
    """The part of a stored state its lookup index entries depend on (the rest, most of all the views
    of every event in ``current``, is skipped unbuilt: a hot record's state is megabytes). Loosely
    typed: a damaged state must not stop fsck or finishing (_index_keys takes any shape)."""

    record_status: Any = None
    current: _CurrentView | None = None


_index_view_decoder = msgspec.json.Decoder(_IndexView)


def _outbound_of(entries: Iterable[LogEntry]) -> list[tuple[str, str]]:
    """(cited, event_id) of the standing outbound citations among a record's log entries (all of them, in
    log order), sorted: what ``outcite`` holds. Only citations and revocations can decide which citations
    stand (a revocation of any other event revokes no citation), so only they are decoded, picked by their
    stored facts. Pure."""
    picked = [entry.entry() for entry in entries if "cited" in entry.facts or "revokes" in entry.facts]
    return sorted((e.verdict.facts["cited"], e.event_id) for e in outbound_citations(picked))


def _stored_index_keys(subject: str, packed: bytes) -> list[tuple[bytes, bytes]]:
    """:func:`_index_keys` of a stored (compressed) state; raises LedgerError if it is not JSON."""
    return _inflated_index_keys(subject, _unpack_state(packed))


def _inflated_index_keys(subject: str, state: bytes) -> list[tuple[bytes, bytes]]:
    """:func:`_index_keys` of a stored state's inflated bytes; raises LedgerError if they are not JSON."""
    try:
        view = _index_view_decoder.decode(state)
    except msgspec.DecodeError:
        raise LedgerError(f"the stored state of {subject} is not readable (damaged ledger)") from None
    current = {"source_aliases": view.current.source_aliases} if view.current is not None else None
    return _index_keys(subject, {"record_status": view.record_status, "current": current})


def _index_keys(subject: str, state: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """(key, database) of every lookup index entry a state puts its record under: only a present
    record is found by suffix, arXiv id or DOI (spec/identifiers.md §7). A state of another shape
    (only a damaged stored one can be) puts it under none."""
    if state.get("record_status") != "present":
        return []
    out = [(ids.suffix_of_pith_number(subject).encode(), b"suffix")]
    current = state.get("current")
    aliases = current.get("source_aliases") if isinstance(current, dict) else None
    for alias in aliases if isinstance(aliases, list) else ():
        kind, value = (alias.get("alias_kind"), alias.get("alias_value")) if isinstance(alias, dict) else (None, None)
        if kind in ("arxiv", "arxiv_version", "doi") and isinstance(value, str):
            out.append((f"{kind}:{value.lower()}".encode(), b"alias"))
    return out


class _Views:
    """Gathering derivation inputs and storing derived states, indexes and digest-tree nodes: a part of a
    handle over its core (a Ledger's, or a worker's read-only one: snapshot.py)."""

    def __init__(self, core: _Environment) -> None:
        self._core = core
        self.db = core.db

    def compute_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        """The state of ``subject`` from the log: its own entries and its indexed inbound citations (what a
        Ledger's lookup reads for a record whose derivation is pending)."""
        return reduce(subject, self._entries(txn, subject), self._inbound(txn, subject))

    def _update_citations(
        self, txn: lmdb.Transaction, subject: str, new: list[tuple[str, str]] | None = None
    ) -> set[str]:
        """Bring the citation indexes up to date for one record whose events changed; return the records
        whose inbound citations changed and that hold events (their states must be derived again).
        ``new``: its standing outbound citations (:meth:`_outbound`) if a worker read them already.

        A record's standing outbound citations depend on its own events only, so they change only when
        it receives events; the ``inbound`` index then lets a cited record's state read exactly its
        standing inbound citations, never every event of every record that cites it."""
        changed: set[str] = set()
        if new is None:
            new = self._outbound(txn, subject, incremental=True)
        old = self._stored_outbound(txn, subject)
        if new == old:
            return changed
        for cited, eid in sorted(set(old) - set(new)):  # sorted: the same pages in every process
            txn.delete(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        for cited, eid in sorted(set(new) - set(old)):
            txn.put(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        if new:
            txn.put(subject.encode(), canonical_bytes(new), db=self.db[b"outcite"])
        else:
            txn.delete(subject.encode(), db=self.db[b"outcite"])
        return {c for c in changed if txn.get(c.encode(), db=self.db[b"subject"]) is not None}

    def _input_parts(
        self,
        txn: lmdb.Transaction,
        subjects: Iterable[str],
        records: int,
        log_entries: int,
        *,
        incremental: bool = False,
        gather: Callable[[lmdb.Transaction, str], _Inputs] | None = None,
        inbound_only: Collection[str] = (),
    ) -> Iterator[list[_Inputs]]:
        """The stored inputs of ``subjects`` (:meth:`_gather`, or ``gather``: fsck's, which names damage), in
        parts of ``records`` records or ``log_entries`` log entries (StoreTuning), for :func:`_derive` here or
        on the worker processes. A step writes no input of another record's derivation and reads each
        record's old state before writing it, so gathering ahead of storing changes nothing."""
        part: list[_Inputs] = []
        entries = read = 0
        for subject in subjects:
            inputs = (
                self._gather(txn, subject, incremental=incremental, inbound_only=subject in inbound_only)
                if gather is None
                else gather(txn, subject)
            )
            part.append(inputs)
            entries += len(inputs.own) + len(inputs.inbound)
            if entries - read >= _RELEASE_ENTRIES:  # reading faults in log pages (and their neighbours)
                _release_mapped_pages(self._core)
                read = entries
            if len(part) >= records or entries >= log_entries:
                yield part
                part, entries, read = [], 0, 0
        if part:
            yield part

    def _outbound(self, txn: lmdb.Transaction, subject: str, *, incremental: bool = False) -> list[tuple[str, str]]:
        """(cited, event_id) of the record's standing outbound citations, sorted: what ``outcite`` holds.

        Only citations and revocations can decide which citations stand (a revocation of any other
        event revokes no citation), so only they are decoded, picked by their stored facts.
        ``incremental``: from the record's stored Fold and its events since, where that is enough
        (spec/merge.md §10)."""
        stored = self._fold_entry(txn, subject) if incremental else None
        if stored is not None:
            try:
                light = _fold_citations_decoder.decode(stored.fold)
            except msgspec.DecodeError:
                light = None
            if light is not None:
                try:
                    got = fold_outbound(
                        subject,
                        light,
                        [entry.entry() for entry in self._log_entries(txn, subject, after=stored.last_seq)],
                    )
                except (KeyError, ValueError):  # a damaged Fold: from every event
                    got = None
                if got is not None:
                    return got
        return _outbound_of(self._log_entries(txn, subject))

    def _fold_entry(self, txn: lmdb.Transaction, subject: str) -> _FoldEntry | None:
        """The record's stored fold entry; None where there is none or it is unreadable (derive in full)."""
        if b"fold" not in self.db:
            return None
        raw = txn.get(subject.encode(), db=self.db[b"fold"])
        if raw is None:
            return None
        try:
            return _fold_entry_decoder.decode(raw)
        except msgspec.DecodeError:
            return None

    def _stored_outbound(self, txn: lmdb.Transaction, subject: str) -> list[tuple[str, str]]:
        raw = txn.get(subject.encode(), db=self.db[b"outcite"])
        return [(cited, eid) for cited, eid in _json_decoder.decode(raw)] if raw is not None else []

    def _inbound(self, txn: lmdb.Transaction, subject: str) -> list[Entry]:
        """The standing citations of other records that name ``subject``, from the inbound index."""
        return [self._log_entry(txn, seq).entry() for seq in self._inbound_seqs(txn, subject)]

    def _inbound_seqs(self, txn: lmdb.Transaction, subject: str) -> Iterator[bytes]:
        """The log sequence keys of the standing citations naming ``subject`` (the inbound index)."""
        cursor = txn.cursor(db=self.db[b"inbound"])
        if cursor.set_key(subject.encode()):
            for digest in cursor.iternext_dup():
                seq = txn.get(bytes(digest), db=self.db[b"ids"])
                if seq is None:
                    raise LedgerError(
                        f"an inbound citation of {subject} names event {bytes(digest).hex()}, which the log lacks (damaged ledger)"
                    )
                yield bytes(seq)

    def _gather(
        self, txn: lmdb.Transaction, subject: str, *, incremental: bool = False, inbound_only: bool = False
    ) -> _Inputs:
        """What :func:`_derive` needs of one record, as stored: no decoding here (the writer's thread
        only reads; the workers decode). ``incremental``: where the record has a Fold, only what came
        since it was made (spec/storage.md §3.3). ``inbound_only``: only its standing inbound citations
        changed; where the update applies (§3.5), what :func:`_update_inbound` needs, not its own events."""
        raw = txn.get(subject.encode(), db=self.db[b"state"])
        old = bytes(raw) if raw is not None else None
        if inbound_only and old is not None:
            got = self._gather_inbound(txn, subject, old)
            if got is not None:
                return got
        stored = self._fold_entry(txn, subject) if incremental and old is not None else None
        seqs = list(self._subject_seqs(txn, subject, after=stored.last_seq if stored is not None else -1))
        own = [self._raw_entry(txn, seq) for seq in seqs]
        last = int.from_bytes(seqs[-1], "big") if seqs else (stored.last_seq if stored is not None else -1)
        digests = sorted(self._inbound_digests(txn, subject))
        if stored is None:
            inbound = [self._inbound_entry(txn, subject, d) for d in digests]
            return _Inputs(subject, own, inbound, old, last_seq=last, inbound_ids=b"".join(digests))
        before = {stored.inbound[i : i + 32] for i in range(0, len(stored.inbound), 32)}
        inbound = [self._inbound_entry(txn, subject, d) for d in digests if d not in before]
        removed = sorted("sha256:" + d.hex() for d in before.difference(digests))
        # the stored state's segments are reused only if it is the state they describe
        segments = stored.segments if old is not None and hashlib.sha256(old).digest() == stored.packed_sha256 else []
        return _Inputs(subject, own, inbound, old, stored.fold, removed, last, b"".join(digests), segments)

    def _gather_inbound(self, txn: lmdb.Transaction, subject: str, old: bytes) -> _Inputs | None:
        """:meth:`_gather` for the inbound update (spec/storage.md §3.5), or None where its preconditions do
        not hold: a fold entry (the fold takes inbound changes itself), no digest leaf, or a record that a full
        derivation would give a fold entry (it keeps one from 256 events, own and inbound: §3.3)."""
        if b"fold" in self.db and txn.get(subject.encode(), db=self.db[b"fold"]) is not None:
            return None
        pair = txn.get(_rec_key(subject), db=self.db[b"rec"])
        if pair is None:
            return None
        cursor = txn.cursor(db=self.db[b"subject"])
        own = cursor.count() if cursor.set_key(subject.encode()) else 0
        digests = sorted(self._inbound_digests(txn, subject))
        if _keeps_fold(own, len(digests)):
            return None
        inbound = [self._inbound_entry(txn, subject, d) for d in digests]
        return _Inputs(subject, [], inbound, old, inbound_ids=b"".join(digests), pair=bytes(pair))

    def _subject_seqs(self, txn: lmdb.Transaction, subject: str, *, after: int = -1) -> Iterator[bytes]:
        """The log keys of the record's events, in log order; ``after``: only those past that entry (the
        ``subject`` index is a dupsort of big-endian seqs, so the cursor starts there)."""
        cursor = txn.cursor(db=self.db[b"subject"])
        found = (
            cursor.set_key(subject.encode()) if after < 0 else cursor.set_range_dup(subject.encode(), _u64(after + 1))
        )
        if found:
            for seq in cursor.iternext_dup():
                yield bytes(seq)

    def _inbound_digests(self, txn: lmdb.Transaction, subject: str) -> Iterator[bytes]:
        """The 32-byte id digests of the standing citations naming ``subject`` (the inbound index)."""
        cursor = txn.cursor(db=self.db[b"inbound"])
        if cursor.set_key(subject.encode()):
            for digest in cursor.iternext_dup():
                yield bytes(digest)

    def _inbound_entry(self, txn: lmdb.Transaction, subject: str, digest: bytes) -> bytes:
        seq = txn.get(digest, db=self.db[b"ids"])
        if seq is None:
            raise LedgerError(
                f"an inbound citation of {subject} names event {digest.hex()}, which the log lacks (damaged ledger)"
            )
        return self._raw_entry(txn, bytes(seq))

    def _raw_entry(self, txn: lmdb.Transaction, seq: bytes) -> bytes:
        raw = txn.get(seq, db=self.db[b"log"])
        if raw is None:
            raise LedgerError(f"log entry {_seq_text(seq)} is missing (damaged ledger)")
        return bytes(raw)  # a copy: the worker's input outlives the transaction

    def _store_derived(self, txn: lmdb.Transaction, d: _Derived, packed: bytes) -> None:
        key = d.subject.encode()
        for index_key, db in d.old_keys:
            txn.delete(index_key, key, db=self.db[db])
        txn.put(_rec_key(d.subject), d.pair, db=self.db[b"rec"])
        for index_key, db in d.new_keys:
            txn.put(index_key, key, db=self.db[db])
        txn.put(key, packed, db=self.db[b"state"])
        if b"fold" in self.db:
            if d.fold is not None:
                txn.put(key, d.fold, db=self.db[b"fold"])
            else:  # a pending record: derived in full until its record_created arrives
                txn.delete(key, db=self.db[b"fold"])

    def _update_tree(self, txn: lmdb.Transaction, buckets: set[str]) -> None:
        """Recompute the digest-tree nodes above changed buckets (spec/audit.md)."""
        # in key order: the B-tree's pages then split the same way in every process (a set's order
        # follows the interpreter's string hashing), so equal ledgers are equal files too
        for n, bucket in enumerate(sorted(buckets), 1):
            if n % _RELEASE_EVERY == 0:  # each bucket reads its records' digest leaves
                _release_mapped_pages(self._core)
            txn.put(
                b"/" + bucket.encode(),
                _pair_encoder.encode(bucket_pair(self._bucket(txn, bucket))),
                db=self.db[b"node"],
            )
        dirty = buckets
        for level in range(DEPTH - 1, -1, -1):
            dirty = {b[:level] for b in dirty}
            for prefix in sorted(dirty):
                pair = inner_pair(prefix, self._children(txn, prefix))
                txn.put(b"/" + prefix.encode(), _pair_encoder.encode(pair), db=self.db[b"node"])

    def _bucket(self, txn: lmdb.Transaction, bucket: str) -> dict[str, Pair]:
        out: dict[str, Pair] = {}
        cursor = txn.cursor(db=self.db[b"rec"])
        if cursor.set_range(bucket.encode()):
            for key, value in cursor.iternext():
                k = bytes(key)
                if not k.startswith(bucket.encode()):
                    break
                out[k.split(b"\0", 1)[1].decode()] = _pair_decoder.decode(value)
        return out

    def _children(self, txn: lmdb.Transaction, prefix: str) -> dict[str, Pair]:
        out: dict[str, Pair] = {}
        for c in ALPHABET:
            raw = txn.get(b"/" + (prefix + c).encode(), db=self.db[b"node"])
            if raw is not None:
                out[c] = _pair_decoder.decode(raw)
        return out

    # --- reading -----------------------------------------------------------------------------------

    def _entries(self, txn: lmdb.Transaction, subject: str) -> list[Entry]:
        """The entries of one subject."""
        return [entry.entry() for entry in self._log_entries(txn, subject)]

    def _log_entries(self, txn: lmdb.Transaction, subject: str, *, after: int = -1) -> Iterator[LogEntry]:
        for seq in self._subject_seqs(txn, subject, after=after):
            yield self._log_entry(txn, seq)

    def _log_entry(self, txn: lmdb.Transaction, seq: bytes) -> LogEntry:
        return _entry_decoder.decode(self._raw_entry(txn, seq))
