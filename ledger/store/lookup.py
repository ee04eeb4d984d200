"""Finding a record and reading its state: identifier resolution (spec/identifiers.md §7), the stored
state, whether a record's derivation is pending. The base of every ledger handle, and, with
:class:`StateReader`, a handle of its own for ``pithledger state``, which then imports nothing of the
merge algorithm, the log's writing or the transparency log (issue #23: `state` <= 2 x the bare import).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import msgspec

from pithledger.errors import AmbiguousId, LedgerError, NotFound
from pithledger.records import ids
from pithledger.records.canonical import canonical_bytes
from pithledger.records.ids import parse_id
from pithledger.store.env import _DBS, _PENDING, DEFAULT_MAP_SIZE, _Environment, _json_decoder, _rec_key


def _unpack_state(raw: bytes | memoryview) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error:
        raise LedgerError("a stored state is not readable (damaged ledger)") from None


class _Candidate(msgspec.Struct, frozen=True):
    pith_number: str
    version: int
    registry: bool  # a standing record_created carries a verifying Pith receipt
    signers: tuple[str, ...]

    def describe(self) -> str:
        trust = "Pith receipt" if self.registry else "self-signed by " + ", ".join(s[:24] + "…" for s in self.signers)
        return f"{self.pith_number} (v{self.version}, {trust})"


def _choose(text: str, cands: list[_Candidate], *, by_version: bool) -> str:
    """Pick the record an identifier names, or raise ``ambiguous-id`` listing the candidates with their trust.

    Records with a Pith receipt win over self-signed ones. Among the winners, ``by_version`` (an arXiv
    id or DOI without a version) takes the highest version, as arXiv does, provided no two records
    share it and, for self-signed records, one single key signed them all."""
    cands = sorted(set(cands), key=lambda c: c.pith_number)
    pool = [c for c in cands if c.registry] or cands
    if len(pool) == 1:
        return pool[0].pith_number
    if by_version:
        top = max(c.version for c in pool)
        at_top = [c for c in pool if c.version == top]
        one_signer = len({k for c in pool for k in c.signers}) == 1
        if len(at_top) == 1 and (pool[0].registry or one_signer):
            return at_top[0].pith_number
    listed = "; ".join(c.describe() for c in pool[:20])
    raise AmbiguousId(
        f"{text!r} matches {len(pool)} records: {listed}",
        hint="name one of them by its long Pith Number; records without a Pith receipt are only claims of their signers",
    )


class Usage(msgspec.Struct, frozen=True, array_like=True):
    """An ``evsize`` value (and the total in ``meta``): the evidence held, entries and bytes (spec/storage.md §2.1)."""

    entries: int = 0
    bytes: int = 0


_usage_decoder = msgspec.msgpack.Decoder(Usage)


class StatePending(Exception):
    """The record's derivation is pending: a :class:`StateReader` cannot compute its state (a full
    ledger handle does, from its events)."""


#: _Lookup._candidate's answers by (subject, stored state_sha256): content-addressed, so one table
#: serves every handle of the process (a server's threads, any ledger). Bounded; cleared when full.
_CANDIDATES: dict[tuple[str, bytes], _Candidate | None] = {}
_CANDIDATES_HELD = 4096
#: A record's digest leaf, audit.Pair (event_root, state_sha256), read without importing the audit module.
_leaf_decoder = msgspec.msgpack.Decoder(tuple[bytes, bytes])


class _Lookup:
    """Resolution and state reads, over the databases that hold them (a part of a handle: the core's
    tables; with ``compute_state``, a record whose derivation is pending is computed from its events, else it
    raises :class:`StatePending`)."""

    def __init__(
        self, core: _Environment, compute_state: Callable[[lmdb.Transaction, str], dict[str, Any]] | None = None
    ) -> None:
        self._core = core
        self.db = core.db
        self.env = core.env
        self._compute_state = compute_state

    def compute_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        """The state of a record whose derivation is pending, from its events (a Ledger's views compute it:
        views.py); a handle without views raises :class:`StatePending`."""
        if self._compute_state is None:
            raise StatePending(subject)
        return self._compute_state(txn, subject)

    def _pending_dbs(self) -> list[Any]:
        """The pending sets; on a handle opened on a layout-3 ledger, opened once a writer has
        upgraded it (until then there are none, and nothing is pending)."""
        if b"pendstate" not in self.db:
            try:
                for name in _PENDING:
                    self.db[name] = self.env.open_db(name, create=False)
            except lmdb.NotFoundError:
                for name in _PENDING:
                    self.db.pop(name, None)
                return []
        return [self.db[name] for name in _PENDING]

    def is_pending(self, txn: lmdb.Transaction, subject: str) -> bool:
        key = subject.encode()
        # the sets of a handle opened on layout 3 are opened by the readers before their transaction
        return any(txn.get(key, db=self.db[name]) is not None for name in _PENDING if name in self.db)

    def state_bytes(self, subject: str) -> bytes:
        """The record's canonical state bytes. For a record whose derivation is pending (an apply or
        sync is running or was killed), the state is computed here from its events as held: citations
        made by other records still pending are counted once the run is finished (spec/storage.md §3.1)."""
        self._pending_dbs()
        with self._core._begin() as txn:
            if self.is_pending(txn, subject):
                return canonical_bytes(self.compute_state(txn, subject))
            data = txn.get(subject.encode(), db=self.db[b"state"])
            if data is None:
                raise NotFound(f"no events for {subject} in this ledger")
            return _unpack_state(data)

    def resolve(self, text: str) -> str:
        """The long Pith Number that an identifier of any form names in this ledger (spec/identifiers.md §7).

        A function of the stored states alone, so of the valid event set: a record with a verifying Pith
        receipt is always preferred to self-signed ones, and self-signed claims that disagree are listed
        (``ambiguous-id``) rather than picked from."""
        self._pending_dbs()
        q = parse_id(text)
        with self._core._begin() as txn:
            if q.kind == "pith_number":
                if txn.get(q.value.encode(), db=self.db[b"state"]) is None and not self.is_pending(txn, q.value):
                    raise NotFound(f"no record {q.value} in this ledger" + self._evidence_note(txn, q.value))
                return q.value
            if q.kind == "suffix":
                cands = [c for p in self._by_suffix(txn, q.suffix) if (c := self._candidate(txn, p)) is not None]
                if not cands:
                    raise NotFound(
                        f"no record whose suffix starts with {q.suffix} in this ledger",
                        hint="a record whose record_created event has not arrived is found by its long Pith Number only",
                    )
                return _choose(text, cands, by_version=False)
            if q.version is not None:
                cands = self._candidates(txn, f"arxiv_version:{q.value}v{q.version}".lower())
                if not cands:
                    known = self._candidates(txn, f"arxiv:{q.value}".lower())
                    versions = ", ".join(f"v{c.version} ({c.pith_number})" for c in known[:20])
                    raise NotFound(
                        f"no record of arXiv {q.value}v{q.version} in this ledger"
                        + (f"; it holds {versions}" if known else "")
                    )
                return _choose(text, cands, by_version=False)
            key = f"doi:{ids.arxiv_doi(q.value)}" if q.kind == "doi" else f"arxiv:{q.value}"
            cands = self._candidates(txn, key.lower())
            if not cands:
                raise NotFound(f"no record of arXiv {q.value} in this ledger")
            return _choose(text, cands, by_version=True)

    def _candidates(self, txn: lmdb.Transaction, key: str) -> list[_Candidate]:
        cursor = txn.cursor(db=self.db[b"alias"])
        if not cursor.set_key(key.encode()):
            return []
        return [c for v in cursor.iternext_dup() if (c := self._candidate(txn, bytes(v).decode())) is not None]

    def _candidate(self, txn: lmdb.Transaction, subject: str) -> _Candidate | None:
        """The record as a lookup candidate; None when it is not present (possible only while its
        derivation is pending: the indexes are those of the last finished run, its state is current).
        A function of the state, so remembered under the sha256 of the stored state, read from the
        record's digest leaf: a state (a hot record's is tens of MB) is decoded when it changed only."""
        sha = self._stored_sha(txn, subject)
        if sha is not None:
            try:
                return _CANDIDATES[(subject, sha)]
            except KeyError:  # not seen, or cleared meanwhile by another thread
                pass
        state = self._stored_state(txn, subject)
        found = None
        if state.get("record_status") == "present":
            current = state["current"]
            found = _Candidate(
                subject,
                int(current["canonical_record"]["source"]["version"]),
                bool(current["record_receipts"]),
                tuple(current["record_signers"]),
            )
        if sha is not None:
            if len(_CANDIDATES) >= _CANDIDATES_HELD:
                _CANDIDATES.clear()
            _CANDIDATES[(subject, sha)] = found
        return found

    def suffix_candidates(self, prefix: str) -> list[tuple[str, bool]]:
        """(pith_number, carries a verifying Pith receipt) of each present record whose suffix starts with
        ``prefix``, sorted: what resolving a short form chooses from (``publish``'s resolve index,
        spec/serve.md §7.1)."""
        self._pending_dbs()
        with self._core._begin() as txn:
            return [
                (c.pith_number, c.registry)
                for p in self._by_suffix(txn, prefix)
                if (c := self._candidate(txn, p)) is not None
            ]

    def arxiv_ids(self, prefix: str = "") -> list[str]:
        """The (lower-case) arXiv ids of present records starting with ``prefix``, sorted, each once."""
        found: list[str] = []
        start = f"arxiv:{prefix}".encode()
        with self._core._begin() as txn:
            cursor = txn.cursor(db=self.db[b"alias"])
            if cursor.set_range(start):
                for key in cursor.iternext_nodup(keys=True, values=False):
                    if not bytes(key).startswith(start):
                        break
                    found.append(bytes(key)[len(b"arxiv:") :].decode())
        return found

    def arxiv_resolutions(self, arxiv_id: str) -> dict[str, str | None]:
        """What :meth:`resolve` answers for an arXiv id (lower case, as the alias index holds it) and each
        of its versions held: ``""`` for the id without a version (and its DOI, which names the same
        records), ``"N"`` for ``vN``; None where the answer is ``ambiguous-id``. Empty when no present
        record has that id. The same choice as :meth:`resolve`, so a static index answers as ``serve``."""
        self._pending_dbs()
        with self._core._begin() as txn:
            cands = self._candidates(txn, f"arxiv:{arxiv_id}")
        out: dict[str, str | None] = {}
        if not cands:
            return out
        groups: list[tuple[str, list[_Candidate], bool]] = [("", cands, True)]
        groups += [(str(v), [c for c in cands if c.version == v], False) for v in sorted({c.version for c in cands})]
        for key, group, by_version in groups:
            try:
                out[key] = _choose(arxiv_id, group, by_version=by_version)
            except AmbiguousId:
                out[key] = None
        return out

    def stored_state_sha256(self, subject: str) -> bytes | None:
        """The ``state_sha256`` of the record's stored state (it covers the whole document) as its digest
        leaf holds it, read without the state: what a reader may cache what it made of the state under.
        None while its derivation is pending (the state is then computed from its events when read) or
        when none is stored."""
        self._pending_dbs()
        with self._core._begin() as txn:
            return self._stored_sha(txn, subject)

    def _stored_sha(self, txn: lmdb.Transaction, subject: str) -> bytes | None:
        if self.is_pending(txn, subject):
            return None
        raw = txn.get(_rec_key(subject), db=self.db[b"rec"])
        return None if raw is None else _leaf_decoder.decode(raw)[1]

    def _by_suffix(self, txn: lmdb.Transaction, prefix: str) -> list[str]:
        """Present records whose suffix starts with ``prefix``. Not capped: each entry is a present record,
        which costs a record hash with that prefix, and capping would let such records hide the real one."""
        cursor = txn.cursor(db=self.db[b"suffix"])
        found: set[str] = set()
        if cursor.set_range(prefix.encode()):
            for key, value in cursor.iternext():
                if not bytes(key).startswith(prefix.encode()):
                    break
                found.add(bytes(value).decode())
        return sorted(found)

    def _evidence_note(self, txn: lmdb.Transaction, subject: str) -> str:
        raw = txn.get(subject.encode(), db=self.db[b"evsize"])
        if raw is None:
            return ""
        n = _usage_decoder.decode(raw).entries
        return f"; {n} rejected input{'s' if n != 1 else ''} about it {'are' if n != 1 else 'is'} held as evidence (`pithledger evidence {subject}`)"

    def _stored_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        if self.is_pending(txn, subject):
            return self.compute_state(txn, subject)
        raw = txn.get(subject.encode(), db=self.db[b"state"])
        if raw is None:
            raise NotFound(f"no events for {subject} in this ledger")
        state: dict[str, Any] = _json_decoder.decode(_unpack_state(raw))
        return state


class StateReader:
    """A read-only handle that resolves identifiers and reads stored states, and nothing else (``pithledger
    state``). Opened and checked as a ledger handle is (the same errors); a record whose derivation is
    pending raises :class:`StatePending`, for the caller to ask a full :class:`~pithledger.store.Ledger`."""

    def __init__(self, path: Path) -> None:
        core = _Environment(path, readonly=True, map_size=DEFAULT_MAP_SIZE)
        self._core = core
        self.path = core.path
        try:
            core.db = {b"meta": core.env.open_db(b"meta", create=False)}
            core.layout = core._check_layout()
            for name in (b"state", b"suffix", b"alias", b"evsize", b"rec"):
                core.db[name] = core.env.open_db(name, dupsort=_DBS[name], create=False)
        except lmdb.NotFoundError:
            core.env.close()
            from pithledger.errors import NoLedger

            raise NoLedger(f"no complete ledger at {self.path} (yet)") from None
        except BaseException:
            core.env.close()
            raise
        self._lookup = _Lookup(core)
        self.resolve = self._lookup.resolve
        self.state_bytes = self._lookup.state_bytes

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> StateReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
