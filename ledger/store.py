"""The ledger: an append-only LMDB log of valid events as received, indexes, materialised states,
and a bounded evidence area for what was received but cannot be folded.

IO lives here and nowhere else in the library. One write transaction per batch (group commit): a
crash leaves the ledger exactly as before or after a batch. Layout and rules: spec/storage.md.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import threading
import zlib
from collections import deque
from itertools import count, islice
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar, cast

if TYPE_CHECKING:  # imported where used: `state` starts without them (tens of ms)
    from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import lmdb
import msgspec

from . import ids, keys
from .bundle import Bundle, served_pith_record_event, write_bundle
from .canonical import canonical_bytes
from .errors import (AmbiguousId, DerivationPending, LayoutMismatch, LedgerError, LedgerFull, NoLedger, NotALedger, NotFound,
                     PithledgerError)
from .events import (Verdict, check_event, claimed_event_id, copy_sha256, is_pithledger_envelope, valid_verdict,
                     verify_event)
from .ids import parse_id
from .audit import ALPHABET, DEPTH, Pair, bucket_of, bucket_pair, inner_pair, record_pair
from .merge import MERGE_VERSION, Entry, outbound_citations, reduce

LAYOUT_VERSION = 4
#: Layouts this version opens: layout 3 is layout 4 without the two pending sets (both empty), so a
#: writer upgrades it in place and a reader reads it as it is.
_UPGRADABLE_IN_PLACE = (3,)
#: Records derived per write transaction when pending work is finished (bounds one transaction).
FINISH_CHUNK = 2048
#: export_parts: at most this many bytes of events in one exported bundle (documents stay far below
#: the 64 MiB a reader accepts, whatever a record holds).
PART_BYTES = 4 * 1024 * 1024
#: Caps on the unknown top-level bundle fields kept for export (local policy, never consensus).
MAX_EXTRA_BYTES = 64 * 1024
MAX_EXTRA_PER_RECORD = 8
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
}
_PENDING = (b"pendcite", b"pendstate")
_pair_encoder = msgspec.msgpack.Encoder()
_pair_decoder = msgspec.msgpack.Decoder(Pair)


class LogEntry(msgspec.Struct, frozen=True, array_like=True):
    """One log record: the event's canonical bytes exactly as received and the facts verification
    found; the rest of its (valid) verdict is rebuilt from the event (spec/storage.md §2)."""

    seq: int
    event: bytes
    facts: dict[str, Any]
    event_id: str = ""  # only for a Pith-envelope event, whose ledger id is not in the event itself

    @property
    def verdict(self) -> Verdict:
        return valid_verdict(_json_decoder.decode(self.event), self.facts, self.event_id)

    def entry(self) -> Entry:
        event = _json_decoder.decode(self.event)
        return Entry(event=event, verdict=valid_verdict(event, self.facts, self.event_id))


class _Offer(NamedTuple):
    """An offered copy that needs verifying: its subject, value, recomputed id (ours) and canonical bytes."""

    subject: str
    event: dict[str, Any]
    claimed_id: str
    data: bytes


class Rejection(msgspec.Struct, frozen=True):
    """One offer of an input that cannot be folded, as apply and sync report it (every time)."""

    copy_sha256: str  # sha256 of the copy as received: its evidence key
    subject: str
    event_type: str
    declared_event_id: str
    status: str  # "invalid" | "unverified"
    reason: str
    message: str
    kept: bool  # held as evidence; False when an evidence cap was reached


class EvidenceEntry(msgspec.Struct, frozen=True):
    event: bytes  # canonical bytes of the copy as received
    verdict: Verdict


class Usage(msgspec.Struct, frozen=True, array_like=True):
    entries: int = 0
    bytes: int = 0


class EvidenceLimits(msgspec.Struct, frozen=True):
    """Caps on the evidence area (spec/storage.md §2.1). Local policy, never consensus."""

    per_record_entries: int = 256
    per_record_bytes: int = 16 * 1024 * 1024
    total_entries: int = 1_000_000
    total_bytes: int = 2 * 1024 * 1024 * 1024


class BatchWithdrawn(Exception):
    """A batch's ``admit`` callback declined it once the write lock was held: nothing was written."""


class BatchResult(msgspec.Struct):
    new: int = 0
    duplicate: int = 0
    invalid: int = 0
    unverified: int = 0
    touched: list[str] = []
    rejected: list[Rejection] = []


_entry_encoder = msgspec.msgpack.Encoder()
_entry_decoder = msgspec.msgpack.Decoder(LogEntry)
_evidence_decoder = msgspec.msgpack.Decoder(EvidenceEntry)
_usage_decoder = msgspec.msgpack.Decoder(Usage)
_json_decoder = msgspec.json.Decoder()


# Copies are verified in chunks of _VERIFY_CHUNK (each hand-over to a worker costs the reading thread
# a GIL round trip with the executor's threads: fewer, larger ones), on threads for a handle's first
# chunks (a small apply does not pay for processes), then on worker processes.
_VERIFY_CHUNK = 512
_PROCESS_AFTER_CHUNKS = 4  # a handle's 4th chunk starts the worker processes
_RELEASE_EVERY = 8  # records derived between two _release_mapped_pages (32 x as many events looked up or written)
_RELEASE_ENTRIES = 32 * _RELEASE_EVERY  # log entries read between two _release_mapped_pages
_WORKERS = min(4, os.cpu_count() or 1)
#: finish derives the states of a step on the worker processes when it holds at least this many
#: records (fewer: here, where starting processes would cost more than they save), in tasks of
#: _DERIVE_PART records (or _DERIVE_PART_ENTRIES log entries), at most _DERIVE_AHEAD tasks ahead of the
#: writer (bounds what waits in memory).
_PARALLEL_STATES = 256
_DERIVE_PART = 256
_DERIVE_PART_ENTRIES = 2048  # a part also closes at this many log entries gathered
_DERIVE_AHEAD = 2 * _WORKERS


def _verify_offers(items: list[tuple[bytes, str, bool]]) -> list[Verdict]:
    """The verdicts of a chunk of offered copies: (canonical bytes, recomputed id or "", whether the
    caller vouches that the Ed25519 signature of these exact bytes verified before: rebuild), run on the
    ledger's worker processes (or threads) while the thread that reads the input goes on. Every copy
    is verified from its canonical bytes (what the log and the evidence hold, what fsck re-verifies),
    decoded plainly: they are the encoding of a strictly decoded value."""
    return [check_event(_json_decoder.decode(data), event_id=cid or None, size=len(data), signature_known_good=known)
            for data, cid, known in items]


_T = TypeVar("_T", covariant=True)
_A = TypeVar("_A")
_R = TypeVar("_R")


class _Pending(Protocol[_T]):
    """What the writer needs of a result computed elsewhere (a Future, or _Done)."""

    def result(self) -> _T: ...
    def done(self) -> bool: ...
    def cancel(self) -> bool: ...


class _Done(Generic[_T]):
    """A result computed in place (no worker pool)."""

    def __init__(self, value: _T) -> None:
        self._value = value

    def result(self) -> _T:
        return self._value

    def done(self) -> bool:
        return True

    def cancel(self) -> bool:
        return False


def _release_mapped_pages(ledger: Ledger) -> None:
    """Unmap the pages of the ledger's file that this process has touched (Linux; elsewhere nothing).

    A write transaction reads the pages it modifies through LMDB's read-only shared map, and the kernel
    maps up to 16 cached neighbours of each page it faults in, so after a few batches into a large
    ledger most of the file is mapped and counted in the RSS, although those are clean page-cache pages
    that any memory pressure reclaims. MADV_DONTNEED on a shared file mapping only drops the mappings
    (the data stays in the file and the cache; the next access maps it again), so the RSS shows what
    the process holds. The map's address range is looked up in /proc/self/maps once per handle and map
    size (LMDB maps again only when the size changes), never reused across handles: advising an address
    that has since been reused for private memory would zero it."""
    global _madvise
    if _madvise is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _madvise = libc.madvise
            _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        except (OSError, AttributeError):  # pragma: no cover - no libc madvise
            _madvise = False
    if not _madvise:
        return
    size = ledger.env.info()["map_size"]
    if ledger._map_ranges is None or ledger._map_ranges[0] != size:
        try:
            with open("/proc/self/maps") as maps:
                found = [line.split(None, 1)[0] for line in maps if line.rstrip().endswith(str(ledger._data_file))]
        except OSError:  # pragma: no cover - no /proc
            return
        ledger._map_ranges = (size, [(int(a, 16), int(b, 16)) for a, b in (r.split("-") for r in found)])
    for start, end in ledger._map_ranges[1]:
        _madvise(start, end - start, 4)  # MADV_DONTNEED


_madvise: Any = None


def _outcome(part: _Pending[list[Verdict]], items: list[tuple[bytes, str, bool]]) -> list[Verdict]:
    from concurrent.futures import BrokenExecutor

    try:
        return part.result()
    except BrokenExecutor:  # a worker process died (killed, out of memory): verify here instead
        return _verify_offers(items)


def ignore_interrupts(deathsig: bool = True) -> None:
    """The initializer of every worker process (the ledger's, and apply's checker in cli/_bundles.py).

    Workers leave Ctrl-C to the process that started them, which stops them cleanly (a worker
    interrupted mid-task would print a traceback), and they end when that process dies: a killed
    apply or sync (kill -9, the OOM killer) would otherwise leave them blocked on their task queue
    forever, each holding its memory and the ledger's deleted files open (spec/storage.md §3.2).
    ``deathsig``: the pool was started on the main thread (see :func:`_exit_with_parent`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(deathsig)


#: How often a worker's watchdog looks whether its parent is still there (seconds).
_WATCHDOG_SECONDS = 0.5


def _exit_with_parent(deathsig: bool) -> None:
    """End this worker as soon as its parent process is gone. A worker holds nothing but its
    current task, which its parent either redoes in place or no longer needs: no cleanup is owed.

    Linux, ``deathsig``: PR_SET_PDEATHSIG, the kernel sends SIGKILL when the parent dies. It fires
    when the *thread* that forked the worker ends, so it is asked for only for a pool started on
    the main thread. Everywhere: a daemon thread polls os.getppid(), and a reparented worker (its
    parent died before prctl, or there is no prctl) exits within _WATCHDOG_SECONDS."""
    import multiprocessing
    import sys
    import threading

    parent = multiprocessing.parent_process()
    expected = parent.pid if parent is not None and parent.pid is not None else os.getppid()
    if deathsig and sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog alone
            pass
    if os.getppid() != expected:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        import time

        while os.getppid() == expected:
            time.sleep(_WATCHDOG_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="pithledger-parent-watchdog", daemon=True).start()


_FSCK_PART = 512  # log entries per fsck task


def _fsck_log_part(items: list[tuple[bytes, bytes]], *, reverify: bool) -> list[tuple[bytes, list[str], bytes | None]]:
    """fsck of log entries (sequence key, stored entry): each one's faults, and the event id key the
    ids index must map to it (None for an entry that is not a valid event). Pure: runs on workers.

    Every check of spec/events.md §2.2 runs again; the Ed25519 check only with ``reverify`` (the
    log holds only events whose signature verified on arrival)."""
    out: list[tuple[bytes, list[str], bytes | None]] = []
    for seq, raw in items:
        entry = _entry_decoder.decode(raw)
        event = _json_decoder.decode(entry.event)
        verdict = check_event(event, signature_known_good=not reverify)
        # The log holds valid events only, so the stored verdict is rebuilt (once) only for one
        # that still verifies; for any other, "valid" is what was stored.
        logged = valid_verdict(event, entry.facts, entry.event_id) if verdict.status == "valid" else None
        where = f"log entry {entry.seq} ({entry.event_id or verdict.event_id})"
        faults = []
        if int.from_bytes(seq, "big") != entry.seq:
            faults.append(f"{where}: stored under sequence {int.from_bytes(seq, 'big')}")
        if logged is None or _verdict_key(verdict) != _verdict_key(logged):
            faults.append(f"{where}: stored verdict valid/ but it verifies as {verdict.status}/{verdict.reason}")
        if verdict.status != "valid":
            faults.append(f"{where}: the log holds an event that is not valid ({verdict.reason})")
        out.append((seq, faults, _event_key(verdict.event_id) if verdict.status == "valid" else None))
    return out


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


def _fsck_state_part(part: list[_Inputs]) -> list[tuple[str, bool, bytes]]:
    """fsck of stored states: whether each equals its derivation from the record's stored inputs
    (``old_state`` holds the stored state), and the digest leaf derived with it. Pure."""
    out = []
    for inputs in part:
        derived = _derive(inputs._replace(old_state=None))
        try:
            same = inputs.old_state is not None and _unpack_state(inputs.old_state) == derived.state
        except LedgerError:  # not even zlib: differs
            same = False
        out.append((inputs.subject, same, derived.pair))
    return out


def _derive_part(part: list[_Inputs]) -> list[tuple[_Derived, bytes]]:
    """Worker process: derive and compress a part of a finishing step's records."""
    out = []
    for inputs in part:
        derived = _derive(inputs)
        out.append((derived, _pack_state(derived.state)))
    return out


def _verdict_key(v: Verdict) -> tuple[Any, ...]:
    """What fsck compares: everything but the message, which explains the first fault found and may
    name another fault of the same code when the copy's keys come in another order."""
    return (v.event_id, v.event_type, v.subject, v.status, v.reason, v.trust, v.signer_key, v.facts)


def _pack_state(data: bytes) -> bytes:
    """States are stored zlib-compressed: a state repeats its record's events (views), so storing it
    plainly would double the ledger; canonical JSON compresses about fivefold (spec/storage.md §2)."""
    return zlib.compress(data, 1)


def _unpack_state(raw: bytes | memoryview) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error:
        raise LedgerError("a stored state is not readable (damaged ledger)") from None


#: fsck names at most this many records whose evidence usage is miscounted (then how many more).
_NAMED_MISCOUNTS = 20


def _usage_text(u: Usage) -> str:
    return f"{u.entries:,} cop{'y' if u.entries == 1 else 'ies'} ({u.bytes:,} bytes)"


def _rejection(copy: str, verdict: Verdict, kept: bool) -> Rejection:
    return Rejection(copy_sha256=copy, subject=verdict.subject, event_type=verdict.event_type, declared_event_id=verdict.event_id,
                     status=verdict.status, reason=verdict.reason, message=verdict.message, kept=kept)


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
    raise AmbiguousId(f"{text!r} matches {len(pool)} records: {listed}",
                      hint="name one of them by its long Pith Number; records without a Pith receipt are only claims of their signers")


def _rec_key(subject: str) -> bytes:
    return ids.suffix_of_pith_number(subject).encode() + b"\0" + subject.encode()


def _u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def _event_key(event_id: str) -> bytes:
    return bytes.fromhex(event_id[len("sha256:"):])


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
        raise NotALedger(f"{path} is not a ledger (it holds no data.mdb) and is not empty: it holds {shown}")


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


class Ledger:
    """A ledger directory. Open one per process; any number of processes may read while one writes."""

    def __init__(self, path: Path, *, create: bool = False, readonly: bool = False, map_size: int = DEFAULT_MAP_SIZE,
                 evidence_limits: EvidenceLimits = EvidenceLimits()) -> None:  # noqa: B008 - frozen
        """``readonly``: for queries. A read-only handle never takes the writer lock, so it never waits
        for an apply in another process (LMDB gives it the last committed snapshot)."""
        self.path = Path(path)
        self._data_file = self.path.resolve() / "data.mdb"
        self._map_ranges: tuple[int, list[tuple[int, int]]] | None = None  # (map size, address ranges): _release_mapped_pages
        self.evidence_limits = evidence_limits
        if not (self.path / "data.mdb").exists():
            if not create:
                raise NoLedger(f"no ledger at {self.path}")
            _check_new_ledger_dir(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.env = lmdb.open(str(self.path), max_dbs=len(_DBS), map_size=map_size, subdir=True, readonly=readonly)
        except lmdb.Error as exc:
            raise LedgerError(f"cannot open the ledger at {self.path}: {exc}") from None
        except OSError as exc:
            raise LedgerError(f"cannot open the ledger at {self.path}: {exc.strerror}") from None
        self._pinned = threading.local()  # the read transaction of a snapshot() in progress, per thread
        self._pool: ThreadPoolExecutor | None = None
        self._procs: ProcessPoolExecutor | None = None  # signature checks of big runs (see _signature_pool)
        self._chunks_checked = 0
        self._no_procs = False
        try:
            self.db = {b"meta": self.env.open_db(b"meta", create=not readonly)}
            layout = self._check_layout()  # before the other databases: an older layout may lack some
            self.db.update({name: self.env.open_db(name, dupsort=dup, create=not readonly) for name, dup in _DBS.items()
                            if layout == LAYOUT_VERSION or name not in _PENDING})
        except lmdb.NotFoundError:  # read-only, and the creating apply has not committed yet
            self.env.close()
            raise NoLedger(f"no complete ledger at {self.path} (yet)") from None
        except PithledgerError:
            self.env.close()
            raise

    def close(self) -> None:
        self._map_ranges = None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._procs is not None:
            self._procs.shutdown(cancel_futures=True)
            self._procs = None
        self.env.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_layout(self) -> int:
        """The ledger's layout version, once it is known to be one this version reads (else raise).
        A writer upgrades a layout that differs only by empty databases in place (_UPGRADABLE_IN_PLACE)."""
        # A read transaction first: readers must not queue behind a writer just to open the ledger.
        with self._begin(db=self.db[b"meta"]) as txn:
            layout = txn.get(b"layout_version")
            merge = bytes(txn.get(b"merge_version", b"")).decode()
        readonly = self.env.flags()["readonly"]
        if layout is None and readonly:
            self.env.close()
            raise NoLedger(f"no complete ledger at {self.path} (yet)")
        if layout is None:
            with self._begin(write=True, db=self.db[b"meta"]) as txn:
                layout = txn.get(b"layout_version")
                if layout is None:
                    txn.put(b"layout_version", str(LAYOUT_VERSION).encode())
                    txn.put(b"merge_version", MERGE_VERSION.encode())
                    return LAYOUT_VERSION
                merge = bytes(txn.get(b"merge_version", b"")).decode()
        layout = bytes(layout)
        number = int(layout) if layout.isdigit() and layout.isascii() and len(layout) < 6 else -1
        if number in _UPGRADABLE_IN_PLACE and merge == MERGE_VERSION:
            if readonly:
                return number
            with self._begin(write=True, db=self.db[b"meta"]) as txn:
                txn.put(b"layout_version", str(LAYOUT_VERSION).encode())
            return LAYOUT_VERSION
        if 0 <= number < LAYOUT_VERSION or (merge != MERGE_VERSION and merge.startswith("pithledger-merge-v")):
            raise LayoutMismatch(
                f"the ledger at {self.path} was written under {merge or 'an older merge version'} (layout {layout.decode()}); "
                f"this pithledger computes {MERGE_VERSION} (layout {LAYOUT_VERSION})",
                hint=f"rebuild it from its log, which keeps everything it received: `pithledger --ledger {self.path} rebuild` "
                     f"(the old ledger is kept beside it as {self.path.name}.{(merge or 'old').rsplit('-', 1)[-1]}-backup)",
            )
        if number != LAYOUT_VERSION or merge != MERGE_VERSION:
            raise LayoutMismatch(f"the ledger at {self.path} has layout {layout.decode()!r} and merge {merge!r}; "
                                 f"this pithledger reads layout {LAYOUT_VERSION}, {MERGE_VERSION}",
                                 hint="use the pithledger version that wrote this ledger")
        return number

    # --- writing -----------------------------------------------------------------------------------

    def apply_batch(self, bundles: Iterable[Bundle], *, defer: bool = False) -> BatchResult:
        """Append the new valid events of ``bundles``, keep the rest as evidence, and recompute touched
        states, in ONE transaction.

        ``defer``: leave the derived views (citation indexes, states, lookup indexes, digest tree) of
        the touched records pending, in the same transaction, for :meth:`finish` to derive once per
        record however many batches touched it (spec/storage.md §3.1). Without it the batch also
        finishes every pending record, so the ledger is fully derived when it returns.
        """
        batch = self.batch()
        try:
            for bundle in bundles:
                batch.add(bundle)
        except BaseException:
            batch.abandon()
            raise
        return batch.commit(defer=defer)

    def batch(self) -> Batch:
        """A batch to fill bundle by bundle and commit as one transaction (what :meth:`apply_batch`
        does at once): each bundle's events are looked up and handed to the verifying threads as it
        is added, so signature checks run while the caller reads and decodes the next bundles."""
        self._start_pool()
        return Batch(self)

    def _signature_pool(self) -> Executor | None:
        """Where a chunk of Ed25519 checks runs. Threads would do (libsodium releases the GIL), but a
        thread must take the GIL back after every check, and while the caller's thread runs Python it
        gets it only once per switch interval, so checks crawl exactly when they should overlap
        (measured: a tenth of them done while the main thread decodes). From the _PROCESS_AFTER_CHUNKS-th
        chunk on (a big run), they go to worker processes, which need no GIL; if none can be started, to threads."""
        self._chunks_checked += 1
        if self._chunks_checked >= _PROCESS_AFTER_CHUNKS:
            self._process_pool()
        return self._procs or self._pool

    def _process_pool(self) -> Executor | None:
        """The worker processes (started if need be), or None where there are none (one core, no
        processes allowed, or one died: from then on this handle works in place)."""
        if self._procs is None and _WORKERS > 1 and not self._no_procs:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                # The workers never touch the ledger (an LMDB environment must not be used across fork,
                # nor opened twice in one process): they get bytes and return bytes.
                context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
                import threading

                on_main = threading.current_thread() is threading.main_thread()
                self._procs = ProcessPoolExecutor(max_workers=_WORKERS, mp_context=context, initializer=ignore_interrupts,
                                                  initargs=(on_main,))
            except (OSError, ValueError):  # pragma: no cover - no processes here: threads
                self._no_procs = True
        return self._procs

    def _verify(self, items: list[tuple[bytes, str, bool]]) -> _Pending[list[Verdict]]:
        pool = self._signature_pool()
        if pool is None:
            return _Done(_verify_offers(items))
        from concurrent.futures import BrokenExecutor

        try:
            return pool.submit(_verify_offers, items)
        except (BrokenExecutor, RuntimeError):  # a worker process died (killed, out of memory): no processes from now on
            if pool is self._procs:
                self._drop_procs()
            return _Done(_verify_offers(items))

    def _drop_procs(self) -> None:
        """A worker process died: no processes for this handle from now on (the work is done in place)."""
        if self._procs is not None:
            self._procs.shutdown(wait=False, cancel_futures=True)
            self._procs = None
        self._no_procs = True

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
        adopted and the transaction begun again (spec/storage.md §3.2)."""
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
                    raise LedgerError(f"another process grew the ledger at {self.path} while this one was reading it ({exc})",
                                      hint="nothing was written by this run's last step; run the same command again") from None
        raise LedgerError(f"the ledger at {self.path} kept growing in another process while this one tried to write",
                          hint="nothing was written by this run's last step; run the same command again")

    def _start_pool(self) -> None:
        if self._pool is None and _WORKERS > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="pithledger-work")

    def _grow(self) -> None:
        self._map_ranges = None
        size = self.env.info()["map_size"] * 2
        try:
            self.env.set_mapsize(size)
        except lmdb.Error as exc:
            raise LedgerFull(f"the ledger cannot grow to {size:,} bytes: {exc}") from None

    def _write(self, bundles: list[Bundle], candidates: dict[str, _Offer], verdicts: dict[str, Verdict], offers: list[str],
               held: dict[str, Verdict], duplicate: int, defer: bool,
               admit: Callable[[lmdb.Transaction], bool] | None = None) -> BatchResult:
        result = BatchResult(duplicate=duplicate)
        touched: set[str] = set()
        citing: set[str] = set()
        outcome: dict[str, Rejection | str] = {}  # copy -> "new" | "duplicate" | Rejection
        try:
            with self._begin(write=True) as txn:
                if admit is not None and not admit(txn):  # the writer lock is held: last chance to withdraw
                    raise BatchWithdrawn()
                seq = int(txn.get(b"next_seq", b"0", db=self.db[b"meta"]))
                for n, (copy, c) in enumerate(candidates.items(), 1):
                    if n % (32 * _RELEASE_EVERY) == 0:
                        _release_mapped_pages(self)
                    verdict = verdicts[copy]
                    if verdict.status != "valid":
                        kept = self._keep_evidence(txn, copy, c.subject, c.data, verdict)
                        outcome[copy] = _rejection(copy, verdict, kept)
                        continue
                    if not txn.put(_event_key(verdict.event_id), _u64(seq), db=self.db[b"ids"], overwrite=False):
                        outcome[copy] = "duplicate"  # held already: another copy of a Pith record, or another writer
                        continue
                    entry = LogEntry(seq=seq, event=c.data, facts=verdict.facts,
                                     event_id="" if is_pithledger_envelope(c.event) else verdict.event_id)
                    txn.put(_u64(seq), _entry_encoder.encode(entry), db=self.db[b"log"], append=True)
                    txn.put(c.subject.encode(), _u64(seq), db=self.db[b"subject"])
                    seq += 1
                    outcome[copy] = "new"
                    touched.add(c.subject)
                    if "cited" in verdict.facts or "revokes" in verdict.facts:
                        citing.add(c.subject)
                for copy, verdict in held.items():
                    outcome[copy] = _rejection(copy, verdict, True)
                counted: set[str] = set()
                for copy in offers:  # every offer is answered, not only the first
                    done = outcome[copy]
                    if isinstance(done, Rejection):
                        result.rejected.append(done)
                        if done.status == "invalid":
                            result.invalid += 1
                        else:
                            result.unverified += 1
                    elif done == "new" and copy not in counted:
                        result.new += 1
                        counted.add(copy)
                    else:
                        result.duplicate += 1
                for bundle in bundles:
                    if bundle.extra:
                        self._keep_extra(txn, bundle.pith_number, canonical_bytes(bundle.extra))
                txn.put(b"next_seq", str(seq).encode(), db=self.db[b"meta"])
                for subject in touched:  # b"c": it received a citation or a revocation, which may change what it cites
                    if subject in citing:
                        txn.put(subject.encode(), b"c", db=self.db[b"pendcite"])
                    else:
                        txn.put(subject.encode(), b"", db=self.db[b"pendcite"], overwrite=False)
                if not defer:
                    while self._finish_some(txn, None) is not None:
                        pass
                result.touched = sorted(touched)
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            raise LedgerError(
                f"the batch was not written: {exc}",
                hint="the ledger is as it was before this batch; if the disk is full, free space, then run the same command again",
            ) from None
        return result

    def _keep_extra(self, txn: lmdb.Transaction, subject: str, blob: bytes) -> None:
        """Keep a bundle's unknown top-level fields for export, within caps (spec/storage.md §2): only
        for a record that holds valid events, at most MAX_EXTRA_BYTES a blob and MAX_EXTRA_PER_RECORD
        blobs a record, so bundles without events cannot fill the disk."""
        if len(blob) > MAX_EXTRA_BYTES or txn.get(subject.encode(), db=self.db[b"subject"]) is None:
            return
        prefix = subject.encode() + b"\0"
        key = prefix + hashlib.sha256(blob).hexdigest().encode()
        if txn.get(key, db=self.db[b"extra"]) is not None:
            return
        cursor, held = txn.cursor(db=self.db[b"extra"]), 0
        if cursor.set_range(prefix):
            for k in cursor.iternext(values=False):
                if not bytes(k).startswith(prefix) or held >= MAX_EXTRA_PER_RECORD:
                    break
                held += 1
        if held < MAX_EXTRA_PER_RECORD:
            txn.put(key, blob, db=self.db[b"extra"])

    def _keep_evidence(self, txn: lmdb.Transaction, copy: str, subject: str, data: bytes, verdict: Verdict) -> bool:
        """Hold one rejected copy (its canonical bytes) as evidence, within the caps; False when a cap is reached.

        Everything is read in the write transaction: another writer may have kept the same copy since
        this batch looked it up, and a copy already held is not counted again (spec/storage.md §2.1)."""
        if txn.get(bytes.fromhex(copy), db=self.db[b"evidence"]) is not None:
            return True
        lim = self.evidence_limits
        raw = txn.get(subject.encode(), db=self.db[b"evsize"])
        mine = _usage_decoder.decode(raw) if raw is not None else Usage()
        raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        total = _usage_decoder.decode(raw) if raw is not None else Usage()
        if (mine.entries + 1 > lim.per_record_entries or mine.bytes + len(data) > lim.per_record_bytes
                or total.entries + 1 > lim.total_entries or total.bytes + len(data) > lim.total_bytes):
            return False
        txn.put(bytes.fromhex(copy), _entry_encoder.encode(EvidenceEntry(event=data, verdict=verdict)), db=self.db[b"evidence"])
        txn.put(subject.encode(), bytes.fromhex(copy), db=self.db[b"evsubj"])
        txn.put(subject.encode(), _entry_encoder.encode(Usage(mine.entries + 1, mine.bytes + len(data))), db=self.db[b"evsize"])
        txn.put(b"evidence_usage", _entry_encoder.encode(Usage(total.entries + 1, total.bytes + len(data))), db=self.db[b"meta"])
        return True

    def _update_citations(self, txn: lmdb.Transaction, subject: str) -> set[str]:
        """Bring the citation indexes up to date for one record whose events changed; return the records
        whose inbound citations changed and that hold events (their states must be derived again).

        A record's standing outbound citations depend on its own events only, so they change only when
        it receives events; the ``inbound`` index then lets a cited record's state read exactly its
        standing inbound citations, never every event of every record that cites it."""
        changed: set[str] = set()
        new, old = self._outbound(txn, subject), self._stored_outbound(txn, subject)
        if new == old:
            return changed
        for cited, eid in set(old) - set(new):
            txn.delete(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        for cited, eid in set(new) - set(old):
            txn.put(cited.encode(), _event_key(eid), db=self.db[b"inbound"])
            changed.add(cited)
        if new:
            txn.put(subject.encode(), canonical_bytes(new), db=self.db[b"outcite"])
        else:
            txn.delete(subject.encode(), db=self.db[b"outcite"])
        return {c for c in changed if txn.get(c.encode(), db=self.db[b"subject"]) is not None}

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

    def pending(self) -> int:
        """How many records have derivation pending (0 once every apply and sync has finished)."""
        dbs = self._pending_dbs()
        with self._begin() as txn:
            return sum(txn.stat(db)["entries"] for db in dbs)

    def pending_among(self, subjects: Iterable[str]) -> list[str]:
        """Those of ``subjects`` whose derivation is pending, in order."""
        self._pending_dbs()
        with self._begin() as txn:
            return [s for s in subjects if self.is_pending(txn, s)]

    def is_pending(self, txn: lmdb.Transaction, subject: str) -> bool:
        key = subject.encode()
        # the sets of a handle opened on layout 3 are opened by the readers before their transaction
        return any(txn.get(key, db=self.db[name]) is not None for name in _PENDING if name in self.db)

    def finish(self, progress: Callable[[int], None] | None = None, *, steps: int | None = None) -> int:
        """Derive everything pending (spec/storage.md §3.1), in transactions of FINISH_CHUNK records:
        first every pending record's standing outbound citations (which marks the records whose inbound
        citations changed), then each pending record's state, lookup indexes and digest leaf, once, and
        the digest tree above them. Killed half-way, it resumes where it stopped. Returns the records
        whose state was derived. ``progress`` is called with that running count. ``steps``: stop after
        that many transactions (the rest stays pending: :meth:`pending` tells)."""
        done = 0
        for _ in count() if steps is None else range(steps):
            try:
                with self._begin(write=True) as txn:
                    n = self._finish_some(txn, FINISH_CHUNK)
            except lmdb.MapFullError:
                self._grow()
                continue
            except lmdb.Error as exc:
                raise LedgerError(f"deriving pending states failed: {exc}",
                                  hint="nothing is lost: the events are in the log; free space if the disk is full, then run "
                                       "`pithledger apply` again (with no new input it only finishes the pending work)") from None
            _release_mapped_pages(self)
            if n is None:
                return done
            done += n
            if progress is not None:
                progress(done)
        return done

    def _finish_some(self, txn: lmdb.Transaction, limit: int | None) -> int | None:
        """One step of :meth:`finish` in ``txn``: up to ``limit`` records (None: all) of the first
        non-empty pending set. Returns the states derived in this step, or None when nothing is pending.
        A step of _PARALLEL_STATES records or more derives its states on the worker processes."""
        cites = self._take(txn, b"pendcite", limit)
        if cites:
            for n, (subject, flag) in enumerate(cites, 1):
                if n % _RELEASE_EVERY == 0:
                    _release_mapped_pages(self)
                # Only a new citation or revocation can change which of a record's citations stand.
                for cited in self._update_citations(txn, subject) if flag else ():
                    txn.put(cited.encode(), b"", db=self.db[b"pendstate"])
                txn.put(subject.encode(), b"", db=self.db[b"pendstate"])
            return 0
        states = [subject for subject, _ in self._take(txn, b"pendstate", limit)]
        if not states:
            return None
        parts = self._input_parts(txn, states)
        for results in self._on_workers(_derive_part, parts, parallel=len(states) >= _PARALLEL_STATES):
            for derived, packed in results:
                self._store_derived(txn, derived, packed)
        self._update_tree(txn, {bucket_of(s) for s in states})
        return len(states)

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

    def _on_workers(self, func: Callable[[list[_A]], _R], parts: Iterator[list[_A]], *, parallel: bool) -> Iterator[_R]:
        """``func(part)`` of each part, in order: computed on the worker processes (at most
        _DERIVE_AHEAD parts ahead) when ``parallel`` (work big enough to pay for them) and there are
        any, else here. A part whose worker fails (killed, out of memory) is computed here instead:
        the outcome never depends on the workers."""
        from concurrent.futures import BrokenExecutor

        running: deque[tuple[list[_A], _Pending[_R] | None]] = deque()
        while True:
            while len(running) < _DERIVE_AHEAD and (part := next(parts, None)) is not None:
                pool, future = self._process_pool() if parallel else None, None
                if pool is not None:
                    try:
                        future = pool.submit(func, part)
                    except (BrokenExecutor, RuntimeError):
                        self._drop_procs()
                running.append((part, future))
            if not running:
                return
            part, waiting = running.popleft()
            if waiting is None:
                yield func(part)
                continue
            try:
                result = waiting.result()
            except BrokenExecutor:
                self._drop_procs()
                result = func(part)
            yield result

    def _take(self, txn: lmdb.Transaction, name: bytes, limit: int | None) -> list[tuple[str, bytes]]:
        """Remove and return up to ``limit`` (key, value) of a pending set (key order)."""
        out: list[tuple[str, bytes]] = []
        cursor = txn.cursor(db=self.db[name])
        if cursor.first():
            while limit is None or len(out) < limit:
                out.append((bytes(cursor.key()).decode(), bytes(cursor.value())))
                if not cursor.delete():  # deletes and moves to the next key; False at the end
                    break
                if not cursor.key():
                    break
        return out

    def _outbound(self, txn: lmdb.Transaction, subject: str) -> list[tuple[str, str]]:
        """(cited, event_id) of the record's standing outbound citations, sorted: what ``outcite`` holds.

        Only citations and revocations can decide which citations stand (a revocation of any other
        event revokes no citation), so only they are decoded, picked by their stored facts."""
        entries = [entry.entry() for entry in self._log_entries(txn, subject) if "cited" in entry.facts or "revokes" in entry.facts]
        return sorted((e.verdict.facts["cited"], e.event_id) for e in outbound_citations(entries))

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
        own = []
        cursor = txn.cursor(db=self.db[b"subject"])
        if cursor.set_key(subject.encode()):
            own = [self._raw_entry(txn, bytes(seq)) for seq in cursor.iternext_dup()]
        inbound = [self._raw_entry(txn, seq) for seq in self._inbound_seqs(txn, subject)]
        old = txn.get(subject.encode(), db=self.db[b"state"])
        return _Inputs(subject, own, inbound, bytes(old) if old is not None else None)

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

    # --- the audit Source interface -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self.path)

    def root(self) -> Pair:
        with self._begin() as txn:
            raw = txn.get(b"/", db=self.db[b"node"])
        return _pair_decoder.decode(raw) if raw is not None else inner_pair("", {})

    def children(self, prefix: str) -> dict[str, Pair]:
        with self._begin() as txn:
            return self._children(txn, prefix)

    def bucket(self, prefix: str) -> dict[str, Pair]:
        with self._begin() as txn:
            return self._bucket(txn, prefix)

    def holds(self, txn: lmdb.Transaction, event_id: str) -> bool:
        """Whether a valid event with this ledger id is held, read in ``txn``."""
        return txn.get(_event_key(event_id), db=self.db[b"ids"]) is not None

    def record_events(self, pith_number: str) -> list[str]:
        with self._begin() as txn:
            return sorted(e.event_id for e in self._entries(txn, pith_number))

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

    def compute_state(self, txn: lmdb.Transaction, subject: str) -> dict[str, Any]:
        """The state of ``subject`` from the log: its own entries and its indexed inbound citations."""
        return reduce(subject, self._entries(txn, subject), self._inbound(txn, subject))

    def state_bytes(self, subject: str) -> bytes:
        """The record's canonical state bytes. For a record whose derivation is pending (an apply or
        sync is running or was killed), the state is computed here from its events as held: citations
        made by other records still pending are counted once the run is finished (spec/storage.md §3.1)."""
        self._pending_dbs()
        with self._begin() as txn:
            if self.is_pending(txn, subject):
                return canonical_bytes(self.compute_state(txn, subject))
            data = txn.get(subject.encode(), db=self.db[b"state"])
            if data is None:
                raise NotFound(f"no events for {subject} in this ledger")
            return _unpack_state(data)

    def subjects(self) -> Iterator[str]:
        with self._begin() as txn:
            for key in txn.cursor(db=self.db[b"state"]).iternext(values=False):
                yield bytes(key).decode()

    def resolve(self, text: str) -> str:
        """The long Pith Number that an identifier of any form names in this ledger (spec/identifiers.md §7).

        A function of the stored states alone, so of the valid event set: a record with a verifying Pith
        receipt is always preferred to self-signed ones, and self-signed claims that disagree are listed
        (``ambiguous-id``) rather than picked from."""
        self._pending_dbs()
        q = parse_id(text)
        with self._begin() as txn:
            if q.kind == "pith_number":
                if txn.get(q.value.encode(), db=self.db[b"state"]) is None and not self.is_pending(txn, q.value):
                    raise NotFound(f"no record {q.value} in this ledger" + self._evidence_note(txn, q.value))
                return q.value
            if q.kind == "suffix":
                cands = [c for p in self._by_suffix(txn, q.suffix) if (c := self._candidate(txn, p)) is not None]
                if not cands:
                    raise NotFound(f"no record whose suffix starts with {q.suffix} in this ledger",
                                   hint="a record whose record_created event has not arrived is found by its long Pith Number only")
                return _choose(text, cands, by_version=False)
            if q.version is not None:
                cands = self._candidates(txn, f"arxiv_version:{q.value}v{q.version}".lower())
                if not cands:
                    known = self._candidates(txn, f"arxiv:{q.value}".lower())
                    versions = ", ".join(f"v{c.version} ({c.pith_number})" for c in known[:20])
                    raise NotFound(f"no record of arXiv {q.value}v{q.version} in this ledger" + (f"; it holds {versions}" if known else ""))
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
        derivation is pending: the indexes are those of the last finished run, its state is current)."""
        state = self._stored_state(txn, subject)
        if state.get("record_status") != "present":
            return None
        current = state["current"]
        return _Candidate(subject, int(current["canonical_record"]["source"]["version"]), bool(current["record_receipts"]),
                          tuple(current["record_signers"]))

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

    def log(self, since: int = 0) -> Iterator[LogEntry]:
        with self._begin() as txn:
            cursor = txn.cursor(db=self.db[b"log"])
            if cursor.set_range(_u64(since)):
                for _, raw in cursor.iternext():
                    yield _entry_decoder.decode(raw)

    def export(self, subject: str) -> dict[str, Any]:
        """A bundle of the record, its valid events (event_id order; Pith-envelope ones in their served
        form, :func:`~pithledger.bundle.served_pith_record_event`), then the unverified
        copies held as evidence about it (copy digest order: a Pith bundle keeps its Pith-signed events).
        Invalid copies are not exported: they are this mirror's evidence, not anybody's data."""
        return self.export_parts(subject, part_bytes=None)[0]

    def export_parts(self, subject: str, part_bytes: int | None = 0) -> list[dict[str, Any]]:
        """:meth:`export` cut into bundles of at most ``part_bytes`` of events each (at least one event
        a part): the first carries the record and the unknown fields, the others events only. A record
        flooded with events then still travels in documents every reader accepts (spec/storage.md §5).
        ``part_bytes``: 0 for :data:`PART_BYTES`, None for one bundle whatever its size."""
        self._pending_dbs()
        part_bytes = PART_BYTES if part_bytes == 0 else part_bytes
        with self._begin() as txn:
            entries = sorted(self._entries(txn, subject), key=lambda e: e.verdict.event_id)
            if not entries:
                raise NotFound(f"no events for {subject} in this ledger" + self._evidence_note(txn, subject))
            unverified = [_json_decoder.decode(held.event) for _, held in self._evidence(txn, subject)
                          if held.verdict.status == "unverified"]
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
        # A valid Pith-envelope event is served in the form its receipt authenticates, not as the first
        # copy received (the log keeps that): every mirror holding the event serves these bytes.
        served: dict[str, dict[str, Any]] = {}
        for e in entries:
            served.setdefault(e.event_id, e.event if is_pithledger_envelope(e.event) else served_pith_record_event(e.event))
        events = list(served.values()) + unverified
        chunks: list[list[dict[str, Any]]] = [[]]
        size = 0
        for event in events:
            n = len(canonical_bytes(event))
            if part_bytes is not None and chunks[-1] and size + n > part_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append(event)
            size += n
        first = write_bundle(
            subject,
            chunks[0],
            canonical_record=current.get("canonical_record"),
            aliases_created_at=current["source_aliases"][0]["created_at"] if current.get("source_aliases") else None,
            extra=extra,
        )
        return [first] + [write_bundle(subject, chunk) for chunk in chunks[1:]]

    def fsck(self, *, reverify: bool = False) -> list[str]:
        """Re-verify every logged event and recompute every state; return every mismatch found.

        Every check of spec/events.md §2.2 runs again, except, unless ``reverify``, the Ed25519 check
        of a logged event: the log holds only events whose signature verified on arrival, and that
        check is most of the cost (spec/storage.md §6)."""
        dbs = self._pending_dbs()
        problems: list[str] = []
        with self._begin() as txn:
            seen = 0
            log = txn.cursor(db=self.db[b"log"]).iternext()

            def log_part() -> list[tuple[bytes, bytes]]:
                _release_mapped_pages(self)  # a reader of the whole file would otherwise map all of it
                return [(bytes(seq), bytes(raw)) for seq, raw in islice(log, _FSCK_PART)]

            parts = iter(log_part, [])
            check = functools.partial(_fsck_log_part, reverify=reverify)
            many = txn.stat(self.db[b"log"])["entries"] >= 2 * _FSCK_PART
            for checked in self._on_workers(check, parts, parallel=many):
                for seq, faults, key in checked:
                    seen += 1
                    problems += faults
                    if key is not None and txn.get(key, db=self.db[b"ids"]) != seq:
                        problems.append(f"log entry {int.from_bytes(seq, 'big')}: the event_id index does not point at it")
            if txn.stat(self.db[b"ids"])["entries"] != seen:
                problems.append(f"the event_id index holds {txn.stat(self.db[b'ids'])['entries']} ids for {seen} log entries")
            pending = sum(txn.stat(db)["entries"] for db in dbs)
            if pending:  # the derived views are checked once derived: open_settled() / finish() first
                problems.append(f"{pending:,} records have derivation pending; finish() (the next apply or sync) derives them")
                return problems + self._fsck_evidence(txn)
            problems += self._fsck_citations(txn)
            # each record's inputs as stored, its stored state as "old": compared with, not replaced
            subjects = (bytes(key).decode() for key in txn.cursor(db=self.db[b"state"]).iternext(values=False))
            many = txn.stat(self.db[b"state"])["entries"] >= _PARALLEL_STATES
            leaves: dict[str, Pair] = {}
            for found in self._on_workers(_fsck_state_part, self._input_parts(txn, subjects), parallel=many):
                for subject, same, pair in found:
                    if not same:
                        problems.append(f"state of {subject} differs from its recomputation from the log")
                    leaves[subject] = _pair_decoder.decode(pair)
            cursor = txn.cursor(db=self.db[b"subject"])
            for subject_key in cursor.iternext_nodup(values=False):
                if txn.get(subject_key, db=self.db[b"state"]) is None:
                    problems.append(f"{bytes(subject_key).decode()} has events but no stored state")
            problems += self._fsck_indexes(txn)
            problems += self._fsck_evidence(txn)
            problems += self._fsck_tree(txn, leaves)
        return problems

    def _fsck_citations(self, txn: lmdb.Transaction) -> list[str]:
        """The citation indexes equal a recomputation from every record's own events."""
        problems: list[str] = []
        want_in: set[tuple[bytes, bytes]] = set()
        cursor = txn.cursor(db=self.db[b"subject"])
        for key in cursor.iternext_nodup(values=False):
            subject = bytes(key).decode()
            new = self._outbound(txn, subject)
            if new != self._stored_outbound(txn, subject):
                problems.append(f"the outbound citation index of {subject} differs from its recomputation")
            want_in |= {(cited.encode(), _event_key(eid)) for cited, eid in new}
        have_in = {(bytes(k), bytes(v)) for k, v in txn.cursor(db=self.db[b"inbound"]).iternext()}
        if have_in != want_in:
            problems.append(f"the inbound citation index differs from its recomputation ({len(have_in - want_in)} stale, "
                            f"{len(want_in - have_in)} missing)")
        return problems

    def _fsck_indexes(self, txn: lmdb.Transaction) -> list[str]:
        """The suffix and alias indexes hold exactly what the stored states imply."""
        want: set[tuple[bytes, bytes, bytes]] = set()
        unreadable = []
        for key, stored in txn.cursor(db=self.db[b"state"]).iternext():
            try:
                for ikey, db in _stored_index_keys(bytes(key).decode(), bytes(stored)):
                    want.add((db, ikey, bytes(key)))
            except LedgerError as exc:
                unreadable.append(exc.message)
        have = {(db, bytes(k), bytes(v)) for db in (b"suffix", b"alias") for k, v in txn.cursor(db=self.db[db]).iternext()}
        return unreadable + ([f"{db.decode()} index lacks {k.decode()} -> {v.decode()}" for db, k, v in sorted(want - have)]
                + [f"{db.decode()} index holds a stale entry {k.decode()} -> {v.decode()}" for db, k, v in sorted(have - want)])

    def _fsck_evidence(self, txn: lmdb.Transaction) -> list[str]:
        problems: list[str] = []
        for key, raw in txn.cursor(db=self.db[b"evidence"]).iternext():
            held = _evidence_decoder.decode(raw)
            where = f"evidence {bytes(key).hex()}"
            if hashlib.sha256(held.event).digest() != bytes(key):
                problems.append(f"{where}: its bytes do not hash to its key")
            verdict = verify_event(_json_decoder.decode(held.event))
            if _verdict_key(verdict) != _verdict_key(held.verdict):
                problems.append(f"{where}: stored verdict {held.verdict.status}/{held.verdict.reason} but it verifies as {verdict.status}/{verdict.reason}")
        return problems + self._fsck_evidence_usage(txn)

    def _evidence_held(self, txn: lmdb.Transaction) -> tuple[dict[str, Usage], Usage]:
        """What the evidence area holds, counted from the entries: per record and in all."""
        usage: dict[str, Usage] = {}
        entries = size = 0
        for raw in txn.cursor(db=self.db[b"evidence"]).iternext(keys=False):
            held = _evidence_decoder.decode(raw)
            u = usage.get(held.verdict.subject, Usage())
            usage[held.verdict.subject] = Usage(u.entries + 1, u.bytes + len(held.event))
            entries, size = entries + 1, size + len(held.event)
        return usage, Usage(entries, size)

    def _fsck_evidence_usage(self, txn: lmdb.Transaction) -> list[str]:
        """The evidence usage counters (what the caps are checked against) against what is held, each
        miscount named: a counter above the truth fills a cap early, one below lets it overflow."""
        usage, total = self._evidence_held(txn)
        stored = {bytes(k).decode(): _usage_decoder.decode(v) for k, v in txn.cursor(db=self.db[b"evsize"]).iternext()}
        wrong = sorted(s for s in usage.keys() | stored.keys() if usage.get(s, Usage()) != stored.get(s, Usage()))
        problems = [f"evidence usage of {s} counts {_usage_text(stored.get(s, Usage()))} but {_usage_text(usage.get(s, Usage()))} "
                    f"are held" for s in wrong[:_NAMED_MISCOUNTS]]
        if len(wrong) > _NAMED_MISCOUNTS:
            problems.append(f"... and the evidence usage of {len(wrong) - _NAMED_MISCOUNTS:,} more records is miscounted")
        raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        counted = _usage_decoder.decode(raw) if raw is not None else Usage()
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
                with self._begin(write=True) as txn:
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
                self._grow()
            except lmdb.Error as exc:
                raise LedgerError(f"the evidence usage was not repaired: {exc}",
                                  hint="the ledger is as it was; if the disk is full, free space and run it again") from None

    def _fsck_tree(self, txn: lmdb.Transaction, leaves: dict[str, Pair]) -> list[str]:
        """Recompute every digest-tree node from the records' leaves derived from the log."""
        problems: list[str] = []
        buckets: dict[str, dict[str, Pair]] = {}
        for subject, pair in leaves.items():
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

    def lacking(self, event_ids: Iterable[str]) -> list[str]:
        """The ids among ``event_ids`` that this ledger holds no valid event under."""
        with self._begin() as txn:
            return sorted(i for i in event_ids if txn.get(_event_key(i), db=self.db[b"ids"]) is None)

    def inbound_bundles(self, subject: str) -> list[dict[str, Any]]:
        """One event bundle per record citing ``subject``, holding exactly its standing citations of it
        (citing Pith Number order): with :meth:`export`, what reproduces ``subject``'s state anywhere."""
        by_citing: dict[str, list[Entry]] = {}
        with self._begin() as txn:
            for e in self._inbound(txn, subject):
                by_citing.setdefault(e.verdict.subject, []).append(e)
        return [write_bundle(citing, [e.event for e in sorted(group, key=lambda e: e.event_id)])
                for citing, group in sorted(by_citing.items())]

    # --- evidence ------------------------------------------------------------------------------------

    def _evidence(self, txn: lmdb.Transaction, subject: str) -> list[tuple[str, EvidenceEntry]]:
        out = []
        cursor = txn.cursor(db=self.db[b"evsubj"])
        if cursor.set_key(subject.encode()):
            for key in cursor.iternext_dup():
                raw = txn.get(bytes(key), db=self.db[b"evidence"])
                if raw is None:
                    raise LedgerError(f"evidence entry {bytes(key).hex()} of {subject} is missing (damaged ledger)")
                out.append((bytes(key).hex(), _evidence_decoder.decode(raw)))
        return out

    def evidence(self, subject: str) -> list[tuple[str, EvidenceEntry]]:
        """(copy sha256, entry) of every rejected input held about ``subject``, in copy digest order."""
        with self._begin() as txn:
            return self._evidence(txn, subject)

    def evidence_subjects(self) -> Iterator[tuple[str, Usage]]:
        with self._begin() as txn:
            for key, raw in txn.cursor(db=self.db[b"evsize"]).iternext():
                yield bytes(key).decode(), _usage_decoder.decode(raw)

    def evidence_usage(self) -> Usage:
        with self._begin() as txn:
            raw = txn.get(b"evidence_usage", db=self.db[b"meta"])
        return _usage_decoder.decode(raw) if raw is not None else Usage()

    def counts(self) -> dict[str, int]:
        """Events in the log, records with a derived state, records whose derivation is pending."""
        dbs = self._pending_dbs()
        with self._begin() as txn:
            return {"events": txn.stat(self.db[b"log"])["entries"], "records": txn.stat(self.db[b"state"])["entries"],
                    "pending": sum(txn.stat(db)["entries"] for db in dbs)}


class Batch:
    """A batch being filled bundle by bundle (:meth:`Ledger.batch`), then committed as one transaction.

    Identity (spec/storage.md §3): a copy whose declared event_id equals its recomputed id and is
    already held is byte-identical to a held valid event, so it is a duplicate without verifying.
    Anything else is looked up by the hash of the copy itself in the evidence area (an input offered
    again is reported again, from its stored verdict), and only then verified, outside the write lock,
    on the ledger's threads while the caller goes on. Nothing an input declares decides where it is
    filed: only verification does."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._txn = ledger._begin()  # lookups; ended before the write transaction begins
        self._bundles: list[Bundle] = []
        self._offers: list[str] = []  # copy digest of each offered input that is not a plain duplicate
        self._candidates: dict[str, _Offer] = {}  # copy -> what it is, for verifying and writing (insertion = verify order)
        self._held: dict[str, Verdict] = {}  # copy -> verdict of evidence offered again
        self._duplicate = 0
        self._chunk: list[tuple[bytes, str, bool]] = []  # candidates not yet handed to the workers
        self._parts: list[_Pending[list[Verdict]]] = []  # verdicts of the candidates, a chunk each, in order
        self._items: list[list[tuple[bytes, str, bool]]] = []  # what each part verifies (verified here if a worker died)
        self.events = 0  # events added
        self._released = 0  # self.events at the last _release_mapped_pages
        self.fill = 0  # what a batch closes on: events, a bundle without events counting one
        self.bytes = 0  # canonical bytes of the bundles added

    def add(self, bundle: Bundle, *, signatures_verified: bool = False) -> None:
        """Add a bundle's events. ``signatures_verified``: the caller vouches that every Ed25519
        signature of these exact bytes verified before (``rebuild`` re-applying its own log, which holds
        only events that verified): step 7 is taken as passed, every other step runs again."""
        self._bundles.append(bundle)
        self.events += len(bundle.events)
        self.fill += max(1, len(bundle.events))
        self.bytes += bundle.size
        txn, ids_db, evidence_db = self._txn, self._ledger.db[b"ids"], self._ledger.db[b"evidence"]
        if self.events - self._released >= 32 * _RELEASE_EVERY:  # lookups fault in index pages (and their neighbours)
            _release_mapped_pages(self._ledger)
            self._released = self.events
        for event in bundle.events:
            cid = claimed_event_id(event)
            if cid and event.get("event_id") == cid and txn.get(_event_key(cid), db=ids_db) is not None:
                self._duplicate += 1
                continue
            data = canonical_bytes(event)  # encoded once: the copy's key and, if new, its log bytes
            copy = copy_sha256(data)
            self._offers.append(copy)
            if copy in self._candidates or copy in self._held:
                continue
            raw = txn.get(bytes.fromhex(copy), db=evidence_db)
            if raw is not None:
                self._held[copy] = _evidence_decoder.decode(raw).verdict
                continue
            self._candidates[copy] = _Offer(bundle.pith_number, event, cid, data)
            self._chunk.append((data, cid, signatures_verified))
            if len(self._chunk) >= _VERIFY_CHUNK:
                self._submit()

    def _submit(self) -> None:
        if not self._chunk:
            return
        self._parts.append(self._ledger._verify(self._chunk))
        self._items.append(self._chunk)
        self._chunk = []

    def commit(self, *, defer: bool = False, admit: Callable[[lmdb.Transaction], bool] | None = None) -> BatchResult:
        """Wait for the verdicts, then append, keep evidence and (unless ``defer``) derive, in one
        durable transaction (see :meth:`Ledger.apply_batch`).

        ``admit``: called in the write transaction as soon as it holds the writer lock, before anything
        is written; when it returns False the transaction is aborted and :class:`BatchWithdrawn` raised
        (``serve --accept-events``: a request whose bounded wait for the lock ran out is not written)."""
        self._submit()
        self._txn.abort()
        checked = [v for part, items in zip(self._parts, self._items, strict=True)
                   for v in _outcome(part, items)]
        verdicts = dict(zip(self._candidates, checked, strict=True))
        while True:
            try:
                result = self._ledger._write(self._bundles, self._candidates, verdicts, self._offers, self._held,
                                             self._duplicate, defer, admit)
                _release_mapped_pages(self._ledger)
                return result
            except lmdb.MapFullError:
                self._ledger._grow()

    def abandon(self) -> None:
        """Drop the batch unwritten (the caller was interrupted)."""
        self._txn.abort()
        for part in self._parts:
            part.cancel()


def open_settled(path: Path) -> Ledger:
    """Open a ledger read-only for a reader that needs its derived views whole (digest tree, fsck,
    publish, audit): if derivation is pending (an apply or sync was killed, or is running), finish it
    first, as a writer, which waits for a running one (spec/storage.md §3.1)."""
    ledger = Ledger(path, readonly=True)
    if not ledger.pending():
        return ledger
    ledger.close()
    with Ledger(path) as writer:
        writer.finish()
    return Ledger(path, readonly=True)


# --- rebuilding from the log ---------------------------------------------------------------------

_REBUILT_MARK = "REBUILT"


def _copy_sidecars(old: Path, new: Path) -> None:
    """Carry the sidecars beside a ledger (the LMDB environments in its subdirectories: display
    metadata, pull's cache; outside consensus, spec/storage.md §8) into its rebuilt copy, each as a
    consistent snapshot (``Environment.copy``), so a rebuild loses no title and re-fetches nothing."""
    for side in sorted(old.iterdir()):
        if not (side.is_dir() and not side.is_symlink() and (side / "data.mdb").is_file()):
            continue
        (new / side.name).mkdir()
        try:
            env = lmdb.open(str(side), readonly=True, subdir=True, max_dbs=32)
            try:
                env.copy(str(new / side.name))
            finally:
                env.close()
        except lmdb.Error as exc:
            raise LedgerError(f"the rebuild could not copy {side}: {exc}",
                              hint="the old ledger is unchanged; free space if the disk is full, then run rebuild again") from None


def rebuild(path: Path, *, batch_events: int = 10_000, reverify: bool = False, force: bool = False) -> dict[str, Any]:
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
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".rebuild-tmp")
    if not (path / "data.mdb").exists():
        if (tmp / _REBUILT_MARK).exists():  # interrupted between the two renames
            os.rename(tmp, path)
            return {"finished_interrupted_rebuild": True, "backup": "", "events_read": 0, "new": 0, "duplicate": 0,
                    "invalid": 0, "unverified": 0}
        raise NoLedger(f"no ledger at {path}")
    try:
        env = lmdb.open(str(path), max_dbs=32, subdir=True, map_size=DEFAULT_MAP_SIZE)
    except lmdb.Error as exc:
        raise LedgerError(f"cannot open the ledger at {path}: {exc}") from None
    counts = {"events_read": 0, "new": 0, "duplicate": 0, "invalid": 0, "unverified": 0, "signatures_reused": 0}
    try:
        txn = env.begin(write=True)  # the writer lock: no apply lands in the old ledger while we read it
        try:
            meta = env.open_db(b"meta", txn=txn, create=False)
            old_merge = bytes(txn.get(b"merge_version", b"", db=meta)).decode() or "unknown"
            if old_merge == MERGE_VERSION and not force:
                return counts | {"already_current": True, "backup": "", "old_merge_version": old_merge}
            shutil.rmtree(tmp, ignore_errors=True)
            with Ledger(tmp, create=True) as new:
                batch = new.batch()
                for raw, was_valid in _old_events(env, txn):
                    event = _json_decoder.decode(raw)
                    counts["events_read"] += 1
                    reuse = was_valid and not reverify
                    counts["signatures_reused"] += reuse
                    batch.add(Bundle(pith_number=str(event.get("subject_pith_number")), events=[event]), signatures_verified=reuse)
                    if batch.events >= batch_events:
                        _tally(counts, batch.commit(defer=True))
                        batch = new.batch()
                _tally(counts, batch.commit(defer=True))
                new.finish()
                _copy_db(env, txn, new, b"extra")
        finally:
            txn.abort()
    except lmdb.Error as exc:
        raise LedgerError(f"the rebuild failed: {exc}", hint="the old ledger is unchanged; free space if the disk is full, then run rebuild again") from None
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
    return counts | {"backup": str(backup), "old_merge_version": old_merge}


def _old_events(env: lmdb.Environment, txn: lmdb.Transaction) -> Iterator[tuple[bytes, bool]]:
    """Every received event's bytes in a ledger of any layout, and whether that ledger held it as
    valid: its log (layouts 2 to 4 log valid events only; layout 1 logged every class with its verdict),
    then (layout 2 on) its evidence."""
    generic = msgspec.msgpack.Decoder()
    log = env.open_db(b"log", txn=txn, create=False)
    for _, raw in txn.cursor(db=log).iternext():
        entry = generic.decode(raw)  # layouts 1 and 2: a map; layouts 3 and 4: an array [seq, event, facts, event_id]
        if isinstance(entry, list):
            yield bytes(entry[1]), True
        else:
            verdict = entry.get("verdict")
            yield bytes(entry["event"]), not isinstance(verdict, dict) or verdict.get("status") == "valid"
    try:
        evidence = env.open_db(b"evidence", txn=txn, create=False)
    except lmdb.NotFoundError:
        return
    for _, raw in txn.cursor(db=evidence).iternext():
        yield bytes(generic.decode(raw)["event"]), False


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
