"""The derived views of the log: citation indexes, materialised states, lookup indexes and the digest
tree (spec/audit.md). A record's state is a pure function of its log entries and the standing
citations naming it (_derive, run on workers); gathering its inputs and storing what was derived
is the writer's part.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import lmdb
import msgspec

from .. import ids
from ..audit import ALPHABET, DEPTH, Pair, bucket_pair, inner_pair, record_pair
from ..canonical import canonical_bytes
from ..errors import LedgerError
from ..merge import Entry, outbound_citations, reduce
from .entries import LogEntry, _entry_decoder
from .env import _Environment, _RELEASE_ENTRIES, _event_key, _json_decoder, _rec_key, _release_mapped_pages
from .workers import _DERIVE_PART, _DERIVE_PART_ENTRIES


_pair_encoder = msgspec.msgpack.Encoder()
_pair_decoder = msgspec.msgpack.Decoder(Pair)


class _Derived(NamedTuple):
    """What deriving one record yields, for the writer to store (see Ledger._derive)."""

    subject: str
    state: bytes  # canonical state bytes
    pair: bytes  # its digest leaf (msgpack Pair)
    old_keys: list[tuple[bytes, bytes]]  # lookup index entries of the state it replaces
    new_keys: list[tuple[bytes, bytes]]


class _Inputs(NamedTuple):
    """What deriving one record reads, as stored (gathered by the writer, see Ledger._gather)."""

    subject: str
    own: list[bytes]  # LogEntry (msgpack) of each of its events, in log order
    inbound: list[bytes]  # LogEntry of each standing citation naming it
    old_state: bytes | None  # its stored (compressed) state, if any


def _derive(inputs: _Inputs) -> _Derived:
    """One record's state, digest leaf and lookup index entries from its stored inputs. Pure: the
    same function runs on the writer's thread and on the worker processes."""
    subject, own, inbound, old = inputs
    # the lookup indexes follow the state: a record revoked away leaves them all
    old_keys = []
    if old is not None:
        try:
            old_keys = _stored_index_keys(subject, old)
        except LedgerError:  # a damaged stored state: its index entries cannot be known (fsck names them)
            pass
    entries = [_entry_decoder.decode(raw).entry() for raw in own]
    state = reduce(subject, entries, [_entry_decoder.decode(raw).entry() for raw in inbound])
    pair = record_pair((e.event_id for e in entries), state["state_sha256"])
    return _Derived(subject, canonical_bytes(state), _pair_encoder.encode(pair), old_keys, _index_keys(subject, state))


def _derive_part(part: list[_Inputs]) -> list[tuple[_Derived, bytes]]:
    """Worker process: derive and compress a part of a finishing step's records; what the writer
    stores (the compressed state, not its canonical bytes, which would only cross the pipe)."""
    out = []
    for inputs in part:
        derived = _derive(inputs)
        out.append((derived._replace(state=b""), _pack_state(derived.state)))
    return out


def _outbound_of(log: Iterable[LogEntry]) -> list[tuple[str, str]]:
    """(cited, event_id) of a record's standing outbound citations, sorted (what ``outcite`` holds),
    from its log entries.

    Only citations and revocations can decide which citations stand (a revocation of any other
    event revokes no citation), so only they are decoded, picked by their stored facts."""
    entries = [entry.entry() for entry in log if "cited" in entry.facts or "revokes" in entry.facts]
    return sorted((e.verdict.facts["cited"], e.event_id) for e in outbound_citations(entries))


def _outbound_part(part: list[tuple[str, list[bytes]]]) -> list[tuple[str, list[tuple[str, str]], bytes]]:
    """Finishing's first step for a part of its records (subject, stored log entries): each one's
    standing outbound citations and their canonical bytes, what ``outcite`` holds. Pure: runs on the
    workers, or in place (the same function)."""
    out = []
    for subject, own in part:
        new = _outbound_of(_entry_decoder.decode(raw) for raw in own)
        out.append((subject, new, canonical_bytes(new)))
    return out


def _pack_state(data: bytes) -> bytes:
    """States are stored zlib-compressed: a state repeats its record's events (views), so storing it
    plainly would double the ledger; canonical JSON compresses about fivefold (spec/storage.md §2)."""
    return zlib.compress(data, 1)


def _unpack_state(raw: bytes | memoryview) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error:
        raise LedgerError("a stored state is not readable (damaged ledger)") from None


class _CurrentView(msgspec.Struct):
    source_aliases: Any = None


class _IndexView(msgspec.Struct):
    """The part of a stored state its lookup index entries depend on (the rest, most of all the views
    of every event in ``current``, is skipped unbuilt: a hot record's state is megabytes). Loosely
    typed: a damaged state must not stop fsck or finishing (_index_keys takes any shape)."""

    record_status: Any = None
    current: _CurrentView | None = None


_index_view_decoder = msgspec.json.Decoder(_IndexView)


def _stored_index_keys(subject: str, packed: bytes) -> list[tuple[bytes, bytes]]:
    """:func:`_index_keys` of a stored (compressed) state; raises LedgerError if it is not JSON."""
    try:
        view = _index_view_decoder.decode(_unpack_state(packed))
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


class _Views(_Environment):
    """Gathering derivation inputs and storing derived states, indexes and digest-tree nodes."""

    def _update_citations(self, txn: lmdb.Transaction, subject: str, new: list[tuple[str, str]], encoded: bytes) -> set[str]:
        """Bring the citation indexes up to date for one record whose events changed, whose standing
        outbound citations are ``new`` (``encoded``: their canonical bytes; :func:`_outbound_part`);
        return the records whose inbound citations changed and that hold events (their states must be
        derived again).

        A record's standing outbound citations depend on its own events only, so they change only when
        it receives events; the ``inbound`` index then lets a cited record's state read exactly its
        standing inbound citations, never every event of every record that cites it."""
        changed: set[str] = set()
        raw = txn.get(subject.encode(), db=self.db[b"outcite"])
        if (not new and raw is None) or (raw is not None and bytes(raw) == encoded):
            return changed  # the same canonical bytes of a sorted list: the same citations, nothing decoded
        old = [(cited, eid) for cited, eid in _json_decoder.decode(raw)] if raw is not None else []
        for cited, eid in set(old) - set(new):
            txn.delete(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        for cited, eid in set(new) - set(old):
            txn.put(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        if new:
            txn.put(subject.encode(), encoded, db=self.db[b"outcite"])
        else:
            txn.delete(subject.encode(), db=self.db[b"outcite"])
        return {c for c in changed if txn.get(c.encode(), db=self.db[b"subject"]) is not None}

    def _input_parts(self, txn: lmdb.Transaction, subjects: Iterable[str]) -> Iterator[list[_Inputs]]:
        """The stored inputs of ``subjects`` (:meth:`_gather`), in parts of _DERIVE_PART records or
        _DERIVE_PART_ENTRIES log entries, for :func:`_derive` here or on the worker processes. A step
        writes no input of another record's derivation and reads each record's old state before
        writing it, so gathering ahead of storing changes nothing."""
        part: list[_Inputs] = []
        entries = read = 0
        for subject in subjects:
            inputs = self._gather(txn, subject)
            part.append(inputs)
            entries += len(inputs.own) + len(inputs.inbound)
            if entries - read >= _RELEASE_ENTRIES:  # reading faults in log pages (and their neighbours)
                _release_mapped_pages(self)
                read = entries
            if len(part) >= _DERIVE_PART or entries >= _DERIVE_PART_ENTRIES:
                yield part
                part, entries, read = [], 0, 0
        if part:
            yield part

    def _outbound(self, txn: lmdb.Transaction, subject: str) -> list[tuple[str, str]]:
        """(cited, event_id) of the record's standing outbound citations, sorted: what ``outcite`` holds."""
        return _outbound_of(self._log_entries(txn, subject))

    def _own_parts(self, txn: lmdb.Transaction, subjects: list[str]) -> Iterator[list[tuple[str, list[bytes]]]]:
        """(subject, its log entries as stored) of each of ``subjects``, for :func:`_outbound_part`, in
        parts as :meth:`_input_parts`; the writer only reads."""
        part: list[tuple[str, list[bytes]]] = []
        entries = read = 0
        cursor = txn.cursor(db=self.db[b"subject"])
        for subject in subjects:
            own = self._raw_entries(txn, [bytes(seq) for seq in cursor.iternext_dup()] if cursor.set_key(subject.encode()) else [])
            part.append((subject, own))
            entries += len(own)
            if entries - read >= _RELEASE_ENTRIES:  # reading faults in log pages (and their neighbours)
                _release_mapped_pages(self)
                read = entries
            if len(part) >= _DERIVE_PART or entries >= _DERIVE_PART_ENTRIES:
                yield part
                part, entries, read = [], 0, 0
        if part:
            yield part

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
                    raise LedgerError(f"an inbound citation of {subject} names event {bytes(digest).hex()}, which the log lacks (damaged ledger)")
                yield bytes(seq)

    def _gather(self, txn: lmdb.Transaction, subject: str) -> _Inputs:
        """What :func:`_derive` needs of one record, as stored: no decoding here (the writer's thread
        only reads; the workers decode)."""
        cursor = txn.cursor(db=self.db[b"subject"])
        own = self._raw_entries(txn, [bytes(seq) for seq in cursor.iternext_dup()] if cursor.set_key(subject.encode()) else [])
        inbound = self._raw_entries(txn, list(self._inbound_seqs(txn, subject)))
        old = txn.get(subject.encode(), db=self.db[b"state"])
        return _Inputs(subject, own, inbound, bytes(old) if old is not None else None)

    def _raw_entries(self, txn: lmdb.Transaction, seqs: list[bytes]) -> list[bytes]:
        """The stored log entries at ``seqs``, in that order, read in one call (py-lmdb's getmulti)."""
        if not seqs:
            return []
        found = txn.cursor(db=self.db[b"log"]).getmulti(seqs)
        if len(found) != len(seqs):  # some is missing: name it
            held = {bytes(k) for k, _ in found}
            for seq in seqs:
                if seq not in held:
                    self._raw_entry(txn, seq)
        return [bytes(v) for _, v in found]  # copies: the worker's input outlives the transaction

    def _raw_entry(self, txn: lmdb.Transaction, seq: bytes) -> bytes:
        raw = txn.get(seq, db=self.db[b"log"])
        if raw is None:
            raise LedgerError(f"log entry {int.from_bytes(seq, 'big')} is missing (damaged ledger)")
        return bytes(raw)  # a copy: the worker's input outlives the transaction

    def _store_derived(self, txn: lmdb.Transaction, d: _Derived, packed: bytes) -> None:
        key = d.subject.encode()
        for index_key, db in d.old_keys:
            txn.delete(index_key, key, db=self.db[db])
        txn.put(_rec_key(d.subject), d.pair, db=self.db[b"rec"])
        for index_key, db in d.new_keys:
            txn.put(index_key, key, db=self.db[db])
        txn.put(key, packed, db=self.db[b"state"])

    def _update_tree(self, txn: lmdb.Transaction, buckets: set[str]) -> None:
        """Recompute the digest-tree nodes above changed buckets (spec/audit.md)."""
        for bucket in buckets:
            txn.put(b"/" + bucket.encode(), _pair_encoder.encode(bucket_pair(self._bucket(txn, bucket))), db=self.db[b"node"])
        dirty = buckets
        for level in range(DEPTH - 1, -1, -1):
            dirty = {b[:level] for b in dirty}
            for prefix in dirty:
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

    def _log_entries(self, txn: lmdb.Transaction, subject: str) -> Iterator[LogEntry]:
        cursor = txn.cursor(db=self.db[b"subject"])
        if cursor.set_key(subject.encode()):
            for seq in cursor.iternext_dup():
                yield self._log_entry(txn, bytes(seq))

    def _log_entry(self, txn: lmdb.Transaction, seq: bytes) -> LogEntry:
        return _entry_decoder.decode(self._raw_entry(txn, seq))
