"""The ledger: an append-only LMDB log of events as received, indexes, and materialised states.

IO lives here and nowhere else in the library. One write transaction per batch (group commit): a
crash leaves the ledger exactly as before or after a batch. Layout and rules: spec/storage.md.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lmdb
import msgspec

from . import ids
from .bundle import Bundle, write_bundle
from .canonical import canonical_bytes
from .errors import AmbiguousId, LayoutMismatch, LedgerError, LedgerFull, NoLedger, NotFound
from .events import Verdict, identity, verify_event
from .ids import parse_id
from .audit import ALPHABET, DEPTH, Pair, bucket_of, bucket_pair, inner_pair, record_pair
from .merge import MERGE_VERSION, Entry, outbound_citations, reduce

LAYOUT_VERSION = 1
DEFAULT_MAP_SIZE = 1 << 30  # address space, not disk: LMDB files grow as pages are used
_U64 = 8

_DBS = {
    # name: dupsort
    b"meta": False,
    b"log": False,  # seq -> LogEntry (msgpack)
    b"ids": False,  # event_id digest (32 bytes) -> seq
    b"subject": True,  # pith_number -> seq of each of its events
    b"suffix": True,  # 26-char suffix -> pith_number (a forged year can share a suffix)
    b"alias": True,  # "arxiv:<id>" | "arxiv_version:<id>vN" | "doi:<doi>" -> pith_number
    b"state": False,  # pith_number -> canonical state bytes
    b"cites": True,  # cited pith_number -> citing pith_number
    b"extra": False,  # pith_number + "\0" + sha256 -> canonical unknown bundle top-level fields
    b"rec": False,  # suffix + "\0" + pith_number -> Pair(event_root, state_sha256) (spec/audit.md)
    b"node": False,  # "/" + suffix prefix (0..DEPTH chars) -> Pair(events, states) digest of that subtree
}
_pair_encoder = msgspec.msgpack.Encoder()
_pair_decoder = msgspec.msgpack.Decoder(Pair)


class LogEntry(msgspec.Struct, frozen=True):
    """One log record: the event's canonical bytes exactly as received, and its verdict."""

    seq: int
    event: bytes
    verdict: Verdict


class BatchResult(msgspec.Struct):
    new: int = 0
    duplicate: int = 0
    invalid: int = 0
    unverified: int = 0
    touched: list[str] = []
    invalid_events: list[tuple[str, str, str]] = []  # (event_id, reason, message)


_entry_encoder = msgspec.msgpack.Encoder()
_entry_decoder = msgspec.msgpack.Decoder(LogEntry)
_json_decoder = msgspec.json.Decoder()


_VERIFY_CHUNK = 256
_WORKERS = min(4, os.cpu_count() or 1)


def _verify_chunk(events: list[tuple[str, dict[str, Any]]]) -> list[Verdict]:
    return [verify_event(e, event_id=eid) for eid, e in events]


def _rec_key(subject: str) -> bytes:
    return ids.suffix_of_pith_number(subject).encode() + b"\0" + subject.encode()


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def _event_key(event_id: str) -> bytes:
    return bytes.fromhex(event_id[len("sha256:"):])


def default_ledger_path() -> Path:
    if env := os.environ.get("PITHLEDGER_LEDGER"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pithledger"


class Ledger:
    """A ledger directory. Open one per process; any number of processes may read while one writes."""

    def __init__(self, path: Path, *, create: bool = False, readonly: bool = False, map_size: int = DEFAULT_MAP_SIZE) -> None:
        """``readonly``: for queries. A read-only handle never takes the writer lock, so it never waits
        for an apply in another process (LMDB gives it the last committed snapshot)."""
        self.path = Path(path)
        if not create and not (self.path / "data.mdb").exists():
            raise NoLedger(f"no ledger at {self.path}")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.env = lmdb.open(str(self.path), max_dbs=len(_DBS), map_size=map_size, subdir=True, readonly=readonly)
        except lmdb.Error as exc:
            raise LedgerError(f"cannot open the ledger at {self.path}: {exc}") from None
        except OSError as exc:
            raise LedgerError(f"cannot open the ledger at {self.path}: {exc.strerror}") from None
        try:
            self.db = {name: self.env.open_db(name, dupsort=dup, create=not readonly) for name, dup in _DBS.items()}
        except lmdb.NotFoundError:  # read-only, and the creating apply has not committed yet
            self.env.close()
            raise NoLedger(f"no complete ledger at {self.path} (yet)") from None
        self._pool: ThreadPoolExecutor | None = None
        self._check_layout()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self.env.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_layout(self) -> None:
        # A read transaction first: readers must not queue behind a writer just to open the ledger.
        with self.env.begin(db=self.db[b"meta"]) as txn:
            layout = txn.get(b"layout_version")
            merge = bytes(txn.get(b"merge_version", b"")).decode()
        if layout is None and self.env.flags()["readonly"]:
            self.env.close()
            raise NoLedger(f"no complete ledger at {self.path} (yet)")
        if layout is None:
            with self.env.begin(write=True, db=self.db[b"meta"]) as txn:
                layout = txn.get(b"layout_version")
                if layout is None:
                    txn.put(b"layout_version", str(LAYOUT_VERSION).encode())
                    txn.put(b"merge_version", MERGE_VERSION.encode())
                    return
                merge = bytes(txn.get(b"merge_version", b"")).decode()
        layout = bytes(layout)
        if layout != str(LAYOUT_VERSION).encode():
            raise LayoutMismatch(f"the ledger at {self.path} has layout version {layout.decode()!r}; this pithledger reads {LAYOUT_VERSION}")
        if merge != MERGE_VERSION:
            raise LayoutMismatch(f"the ledger at {self.path} holds states of {merge!r}; this pithledger computes {MERGE_VERSION!r}")

    # --- writing -----------------------------------------------------------------------------------

    def apply_batch(self, bundles: Iterable[Bundle]) -> BatchResult:
        """Append the new events of ``bundles`` and recompute touched states, in ONE transaction.

        Verification (pure, CPU-bound) happens before the write transaction opens, so the write lock
        is held only for the appends and the reductions.
        """
        bundles = list(bundles)
        candidates: dict[str, tuple[str, dict[str, Any]]] = {}
        duplicate = 0
        with self.env.begin() as txn:
            for bundle in bundles:
                for event in bundle.events:
                    eid = identity(event)
                    if eid in candidates or txn.get(_event_key(eid), db=self.db[b"ids"]) is not None:
                        duplicate += 1
                    else:
                        candidates[eid] = (bundle.pith_number, event)
        verdicts = dict(zip(candidates, self._verify_all([(eid, event) for eid, (_, event) in candidates.items()]), strict=True))
        while True:
            try:
                return self._write(bundles, candidates, verdicts, duplicate)
            except lmdb.MapFullError:
                self._grow()

    def _verify_all(self, events: list[tuple[str, dict[str, Any]]]) -> list[Verdict]:
        """verify_event over many (event_id, event) pairs. libsodium releases the GIL, so chunks run on a
        few threads overlap their signature checks (about 1.5x on two cores); the result is the same list."""
        if len(events) < 2 * _VERIFY_CHUNK or _WORKERS < 2:
            return _verify_chunk(events)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="pithledger-verify")
        chunks = [events[i : i + _VERIFY_CHUNK] for i in range(0, len(events), _VERIFY_CHUNK)]
        return [v for part in self._pool.map(_verify_chunk, chunks) for v in part]

    def _grow(self) -> None:
        size = self.env.info()["map_size"] * 2
        try:
            self.env.set_mapsize(size)
        except lmdb.Error as exc:
            raise LedgerFull(f"the ledger cannot grow to {size:,} bytes: {exc}") from None

    def _write(self, bundles: list[Bundle], candidates: dict[str, tuple[str, dict[str, Any]]],
               verdicts: dict[str, Verdict], duplicate: int) -> BatchResult:
        result = BatchResult(duplicate=duplicate)
        touched: set[str] = set()
        try:
            with self.env.begin(write=True) as txn:
                seq = int(txn.get(b"next_seq", b"0", db=self.db[b"meta"]))
                for eid, (subject, event) in candidates.items():
                    if not txn.put(_event_key(eid), _u64(seq), db=self.db[b"ids"], overwrite=False):
                        result.duplicate += 1  # another writer got there first
                        continue
                    verdict = verdicts[eid]
                    entry = LogEntry(seq=seq, event=canonical_bytes(event), verdict=verdict)
                    txn.put(_u64(seq), _entry_encoder.encode(entry), db=self.db[b"log"], append=True)
                    txn.put(subject.encode(), _u64(seq), db=self.db[b"subject"])
                    txn.put(ids.suffix_of_pith_number(subject).encode(), subject.encode(), db=self.db[b"suffix"])
                    seq += 1
                    result.new += 1
                    touched.add(subject)
                    if verdict.status == "invalid":
                        result.invalid += 1
                        result.invalid_events.append((eid, verdict.reason, verdict.message))
                    elif verdict.status == "unverified":
                        result.unverified += 1
                    if verdict.status == "valid" and verdict.event_type == "citation_signature":
                        txn.put(verdict.facts["cited"].encode(), subject.encode(), db=self.db[b"cites"])
                for bundle in bundles:
                    if bundle.extra:
                        blob = canonical_bytes(bundle.extra)
                        key = bundle.pith_number.encode() + b"\0" + hashlib.sha256(blob).hexdigest().encode()
                        txn.put(key, blob, db=self.db[b"extra"])
                txn.put(b"next_seq", str(seq).encode(), db=self.db[b"meta"])
                cache: dict[str, list[Entry]] = {}
                changed = self._with_cited(txn, touched, cache)
                for subject in changed:
                    self._materialise(txn, subject, cache)
                self._update_tree(txn, {bucket_of(s) for s in changed})
                result.touched = sorted(touched)
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            raise LedgerError(
                f"the batch was not written: {exc}",
                hint="the ledger is as it was before this batch; if the disk is full, free space, then run the same command again",
            ) from None
        return result

    def _with_cited(self, txn: lmdb.Transaction, touched: set[str], cache: dict[str, list[Entry]]) -> list[str]:
        """Touched records plus every record their citations name (its inbound list may change)."""
        out = set(touched)
        for subject in touched:
            for e in self._entries(txn, subject, cache):
                if e.verdict.status == "valid" and e.verdict.event_type == "citation_signature":
                    cited = e.verdict.facts["cited"]
                    if txn.get(cited.encode(), db=self.db[b"subject"]) is not None:
                        out.add(cited)
        return sorted(out)

    def _materialise(self, txn: lmdb.Transaction, subject: str, cache: dict[str, list[Entry]]) -> dict[str, Any]:
        state = self.compute_state(txn, subject, cache)
        txn.put(subject.encode(), canonical_bytes(state), db=self.db[b"state"])
        pair = record_pair((e.event_id for e in self._entries(txn, subject, cache)), state["state_sha256"])
        txn.put(_rec_key(subject), _pair_encoder.encode(pair), db=self.db[b"rec"])
        record = state["current"].get("canonical_record")
        if record is not None:
            for alias in state["current"]["source_aliases"]:
                if alias["alias_kind"] in ("arxiv", "arxiv_version", "doi"):
                    key = f"{alias['alias_kind']}:{alias['alias_value'].lower()}".encode()
                    txn.put(key, subject.encode(), db=self.db[b"alias"])
        return state

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

    # --- the audit Source interface -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.path)

    def root(self) -> Pair:
        with self.env.begin() as txn:
            raw = txn.get(b"/", db=self.db[b"node"])
        return _pair_decoder.decode(raw) if raw is not None else inner_pair("", {})

    def children(self, prefix: str) -> dict[str, Pair]:
        with self.env.begin() as txn:
            return self._children(txn, prefix)

    def bucket(self, prefix: str) -> dict[str, Pair]:
        with self.env.begin() as txn:
            return self._bucket(txn, prefix)

    def record_events(self, pith_number: str) -> list[str]:
        with self.env.begin() as txn:
            return sorted(e.event_id for e in self._entries(txn, pith_number))

    # --- reading -----------------------------------------------------------------------------------

    def _entries(self, txn: lmdb.Transaction, subject: str, cache: dict[str, list[Entry]] | None = None) -> list[Entry]:
        """The entries of one subject; ``cache`` (one transaction's) avoids decoding them twice."""
        if cache is not None and subject in cache:
            return cache[subject]
        out = []
        cursor = txn.cursor(db=self.db[b"subject"])
        if cursor.set_key(subject.encode()):
            for seq in cursor.iternext_dup():
                entry = self._log_entry(txn, bytes(seq))
                out.append(Entry(event=_json_decoder.decode(entry.event), verdict=entry.verdict))
        if cache is not None:
            cache[subject] = out
        return out

    def _log_entry(self, txn: lmdb.Transaction, seq: bytes) -> LogEntry:
        raw = txn.get(seq, db=self.db[b"log"])
        if raw is None:
            raise LedgerError(f"log entry {int.from_bytes(seq, 'big')} is missing (damaged ledger)")
        return _entry_decoder.decode(raw)

    def compute_state(self, txn: lmdb.Transaction, subject: str, cache: dict[str, list[Entry]] | None = None) -> dict[str, Any]:
        """The state of ``subject`` recomputed from the log (what fsck compares with the stored one)."""
        inbound: list[Entry] = []
        cursor = txn.cursor(db=self.db[b"cites"])
        if cursor.set_key(subject.encode()):
            for citing in cursor.iternext_dup():
                citing_entries = self._entries(txn, bytes(citing).decode(), cache)
                inbound += [e for e in outbound_citations(citing_entries) if e.verdict.facts["cited"] == subject]
        return reduce(subject, self._entries(txn, subject, cache), inbound)

    def state_bytes(self, subject: str) -> bytes:
        with self.env.begin() as txn:
            data = txn.get(subject.encode(), db=self.db[b"state"])
        if data is None:
            raise NotFound(f"no events for {subject} in this ledger")
        return bytes(data)

    def subjects(self) -> Iterator[str]:
        with self.env.begin() as txn:
            for key in txn.cursor(db=self.db[b"state"]).iternext(values=False):
                yield bytes(key).decode()

    def resolve(self, text: str) -> str:
        """The long Pith Number that an identifier of any form names in this ledger."""
        q = parse_id(text)
        with self.env.begin() as txn:
            if q.kind == "pith_number":
                if txn.get(q.value.encode(), db=self.db[b"state"]) is None:
                    raise NotFound(f"no record {q.value} in this ledger")
                return q.value
            if q.kind == "suffix":
                found = self._by_suffix(txn, q.suffix)
                if not found:
                    raise NotFound(f"no record whose suffix starts with {q.suffix} in this ledger")
                if len(found) > 1:
                    raise AmbiguousId(f"{text!r} matches {len(found)} records: " + ", ".join(found[:20]))
                return found[0]
            if q.version is not None:
                found = self._dups(txn, f"arxiv_version:{q.value}v{q.version}".lower())
                if not found:
                    known = self._dups(txn, f"arxiv:{q.value}".lower())
                    versions = ", ".join(f"v{self._arxiv_version(txn, p)} ({p})" for p in known)
                    raise NotFound(f"no record of arXiv {q.value}v{q.version} in this ledger" + (f"; it holds {versions}" if known else ""))
            else:
                key = f"doi:{ids.arxiv_doi(q.value)}" if q.kind == "doi" else f"arxiv:{q.value}"
                found = self._dups(txn, key.lower())
                if not found:
                    raise NotFound(f"no record of arXiv {q.value} in this ledger")
                # One paper, several versions, each its own record: the latest version answers, as on arXiv.
                top = max(self._arxiv_version(txn, p) for p in found)
                found = [p for p in found if self._arxiv_version(txn, p) == top]
            if len(found) > 1:
                raise AmbiguousId(f"{text!r} matches {len(found)} records: " + ", ".join(found))
            return found[0]

    def _dups(self, txn: lmdb.Transaction, key: str) -> list[str]:
        cursor = txn.cursor(db=self.db[b"alias"])
        if not cursor.set_key(key.encode()):
            return []
        return sorted(bytes(v).decode() for v in cursor.iternext_dup())

    def _by_suffix(self, txn: lmdb.Transaction, prefix: str) -> list[str]:
        cursor = txn.cursor(db=self.db[b"suffix"])
        found: set[str] = set()
        if cursor.set_range(prefix.encode()):
            for key, value in cursor.iternext():
                if not bytes(key).startswith(prefix.encode()):
                    break
                found.add(bytes(value).decode())
                if len(found) > 50:
                    break
        return sorted(found)

    def _stored_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        raw = txn.get(subject.encode(), db=self.db[b"state"])
        if raw is None:
            raise NotFound(f"no events for {subject} in this ledger")
        state: dict[str, Any] = _json_decoder.decode(raw)
        return state

    def _arxiv_version(self, txn: lmdb.Transaction, subject: str) -> int:
        state = self._stored_state(txn, subject)
        return int(state["current"]["canonical_record"]["source"]["version"])

    def log(self, since: int = 0) -> Iterator[LogEntry]:
        with self.env.begin() as txn:
            cursor = txn.cursor(db=self.db[b"log"])
            if cursor.set_range(_u64(since)):
                for _, raw in cursor.iternext():
                    yield _entry_decoder.decode(raw)

    def export(self, subject: str) -> dict[str, Any]:
        """A bundle of the record and all its events as received (event_id order): applied to an
        empty ledger it reproduces the same state bytes."""
        with self.env.begin() as txn:
            entries = sorted(self._entries(txn, subject), key=lambda e: e.verdict.event_id)
            if not entries:
                raise NotFound(f"no events for {subject} in this ledger")
            state = self._stored_state(txn, subject)
            extra: dict[str, Any] = {}
            cursor = txn.cursor(db=self.db[b"extra"])
            prefix = subject.encode() + b"\0"
            if cursor.set_range(prefix):
                for key, blob in cursor.iternext():
                    if not bytes(key).startswith(prefix):
                        break
                    for k, v in _json_decoder.decode(blob).items():
                        extra.setdefault(k, v)  # lowest-hash bundle first: deterministic
        current = state["current"]
        return write_bundle(
            subject,
            [e.event for e in entries],
            canonical_record=current.get("canonical_record"),
            aliases_created_at=current["source_aliases"][0]["created_at"] if current.get("source_aliases") else None,
            extra=extra,
        )

    def fsck(self) -> list[str]:
        """Re-verify every logged event and recompute every state; return every mismatch found."""
        problems: list[str] = []
        with self.env.begin() as txn:
            seen = 0
            for seq, raw in txn.cursor(db=self.db[b"log"]).iternext():
                entry = _entry_decoder.decode(raw)
                seen += 1
                event = _json_decoder.decode(entry.event)
                verdict = verify_event(event)
                where = f"log entry {entry.seq} ({entry.verdict.event_id})"
                if int.from_bytes(seq, "big") != entry.seq:
                    problems.append(f"{where}: stored under sequence {int.from_bytes(seq, 'big')}")
                if verdict != entry.verdict:
                    problems.append(f"{where}: stored verdict {entry.verdict.status}/{entry.verdict.reason} but it verifies as {verdict.status}/{verdict.reason}")
                if txn.get(_event_key(verdict.event_id), db=self.db[b"ids"]) != seq:
                    problems.append(f"{where}: the event_id index does not point at it")
            if txn.stat(self.db[b"ids"])["entries"] != seen:
                problems.append(f"the event_id index holds {txn.stat(self.db[b'ids'])['entries']} ids for {seen} log entries")
            for key, stored in txn.cursor(db=self.db[b"state"]).iternext():
                subject = bytes(key).decode()
                recomputed = canonical_bytes(self.compute_state(txn, subject))
                if bytes(stored) != recomputed:
                    problems.append(f"state of {subject} differs from its recomputation from the log")
            cursor = txn.cursor(db=self.db[b"subject"])
            for key in cursor.iternext_nodup(values=False):
                if txn.get(key, db=self.db[b"state"]) is None:
                    problems.append(f"{bytes(key).decode()} has events but no stored state")
            problems += self._fsck_tree(txn)
        return problems

    def _fsck_tree(self, txn: lmdb.Transaction) -> list[str]:
        """Recompute every digest-tree node from the stored states and the log."""
        problems: list[str] = []
        buckets: dict[str, dict[str, Pair]] = {}
        for key, stored in txn.cursor(db=self.db[b"state"]).iternext():
            subject = bytes(key).decode()
            state = _json_decoder.decode(stored)
            pair = record_pair((e.event_id for e in self._entries(txn, subject)), state["state_sha256"])
            buckets.setdefault(bucket_of(subject), {})[subject] = pair
            raw = txn.get(_rec_key(subject), db=self.db[b"rec"])
            if raw is None or _pair_decoder.decode(raw) != pair:
                problems.append(f"digest entry of {subject} differs from its recomputation")
        level: dict[str, Pair] = {b: bucket_pair(r) for b, r in buckets.items()}
        for depth in range(DEPTH, -1, -1):
            for prefix, pair in level.items():
                raw = txn.get(b"/" + prefix.encode(), db=self.db[b"node"])
                if raw is None or _pair_decoder.decode(raw) != pair:
                    problems.append(f"digest node {prefix or '(root)'} differs from its recomputation")
            if depth == 0:
                break
            parents: dict[str, dict[str, Pair]] = {}
            for prefix, pair in level.items():
                parents.setdefault(prefix[:-1], {})[prefix[-1]] = pair
            level = {p: inner_pair(p, ch) for p, ch in parents.items()}
        return problems

    def counts(self) -> dict[str, int]:
        with self.env.begin() as txn:
            return {"events": txn.stat(self.db[b"log"])["entries"], "records": txn.stat(self.db[b"state"])["entries"]}
