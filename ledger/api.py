"""The public entry points that are more than a name re-exported (ledger/__init__.py declares them all).

Each takes a ledger as an open :class:`~pithledger.store.Ledger` (left open) or as the path of its directory
(opened for the call and closed), does what the command it names does, with the same checks, limits and
counts, and raises a :class:`~pithledger.errors.PithledgerError` (a code and a hint) for what it refuses.
Nothing here prints: the command line renders what these return.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from pithledger.audit import AuditResult
    from pithledger.errors import PithledgerError
    from pithledger.ingest.apply import ApplyProgress, ApplyReport
    from pithledger.mirror.transport import Deadline
    from pithledger.records.bitcoin import TimestampCheck
    from pithledger.records.events import Verdict
    from pithledger.records.keys import LocalKey
    from pithledger.store import Ledger
    from pithledger.tlog.proofs import Inclusion
    from pithledger.tlog.signing import LogSigner


def open_ledger(path: str | Path, *, create: bool = False, readonly: bool = False) -> Ledger:
    """Open the ledger in directory ``path``: a :class:`~pithledger.store.Ledger`, a context manager
    (``with open_ledger(p) as ledger: ...`` closes it). ``create``: make it if absent (what ``apply`` and
    ``sync`` do); ``readonly``: for queries, which never wait for a writer in another process. LMDB allows
    one handle on a ledger per process: while it is open, pass it (not its path) to the entry points.

    Raises :class:`~pithledger.errors.NoLedger` when there is none (and not ``create``),
    :class:`~pithledger.errors.LayoutMismatch` for a ledger of another layout. The CLI's ``--ledger PATH``."""
    from pithledger.store import Ledger

    return Ledger(Path(path), create=create, readonly=readonly)


@contextmanager
def _opened(ledger: Ledger | str | Path, *, write: bool = False, settled: bool = False) -> Iterator[Ledger]:
    """The handle given (left open), or one opened on the path for the call (closed after it);
    ``settled``: the path's pending derivation finished first (store.open_settled), for readers of the
    derived views as a whole (digest, export --all, publish)."""
    from pithledger.store import Ledger, open_settled

    if isinstance(ledger, Ledger):
        yield ledger
        return
    with open_settled(Path(ledger)) if settled else Ledger(Path(ledger), create=write, readonly=not write) as opened:
        yield opened


def apply(
    ledger: Ledger | str | Path,
    *inputs: str | Path,
    batch_size: int = 10_000,
    keep_going: bool = False,
    workers: int | None = None,
    progress: ApplyProgress | None = None,
    on_skip: Callable[[PithledgerError, str], None] | None = None,
) -> ApplyReport:
    """Verify and ingest bundles into ``ledger``, idempotently: ``pithledger apply INPUT...``.

    ``inputs``: bundle files (``.json``, or ``.jsonl`` with one bundle per line), directories of them,
    ``"-"`` for stdin. Every input is checked before anything is written; then one durable transaction
    per ``batch_size`` events, and each touched record's state derived once. A path ledger is created
    if absent (once the inputs are checked). ``workers``: processes for the pure work (0: in place;
    default: the running fan-out's, else all cores). ``progress``: an
    :class:`~pithledger.ingest.apply.ApplyProgress` told of each phase; ``on_skip(error, where)``: told of
    each input skipped under ``keep_going``.

    Returns an :class:`~pithledger.ingest.apply.ApplyReport` (new / duplicate / invalid / unverified
    counts, rejections, skipped inputs, records touched); ``report.ok`` is false where the CLI exits 1.
    Raises the first structural fault (``PithledgerError``; nothing written) unless ``keep_going``, and
    :class:`~pithledger.errors.InputChanged` if an input changed between the passes (what was committed
    came from checked bytes). On KeyboardInterrupt the ledger is consistent: run it again to finish."""
    from pithledger.ingest.apply import apply_inputs

    with ExitStack() as stack:
        if workers is not None:
            from pithledger.fanout import Fanout, using

            stack.enter_context(using(Fanout.processes(workers)))
        return apply_inputs(
            ledger, inputs, batch_size=batch_size, keep_going=keep_going, progress=progress, on_skip=on_skip
        )


def apply_bytes(
    ledger: Ledger | str | Path, data: bytes, *, keep_going: bool = False, workers: int | None = None
) -> ApplyReport:
    """:func:`apply` of bytes held in memory (one bundle document, or JSON lines of bundles), read as a
    file holding them would be, with the same checks and report; errors name the input ``bytes``."""
    with tempfile.TemporaryDirectory(prefix="pithledger-bytes-") as tmp:
        path = Path(tmp, "bytes")
        path.write_bytes(data)
        return apply(ledger, path, keep_going=keep_going, workers=workers)


def resolve(ledger: Ledger | str | Path, ident: str) -> str:
    """The long Pith Number ``ident`` names in ``ledger``: any identifier form (long or short Pith Number,
    8/12/16/26-character suffix, arXiv id with or without version, DOI). Raises
    :class:`~pithledger.errors.MalformedId`, :class:`~pithledger.errors.NotFound` or ``AmbiguousId``."""
    with _opened(ledger) as opened:
        return opened.resolve(ident)


def state(ledger: Ledger | str | Path, ident: str) -> bytes:
    """The merged state document of the record ``ident`` names (any form, as :func:`resolve`): its
    canonical JSON bytes, the consensus bytes every mirror holding the same valid events prints
    (``pithledger state ID``, without its newline). Raises as :func:`resolve`."""
    with _opened(ledger) as opened:
        return opened.state_bytes(opened.resolve(ident))


def state_document(ledger: Ledger | str | Path, ident: str) -> dict[str, Any]:
    """:func:`state` decoded: the state document as a dict (e.g. ``["verification_status"]``)."""
    value: dict[str, Any] = msgspec.json.decode(state(ledger, ident))
    return value


def export(ledger: Ledger | str | Path, ident: str) -> bytes:
    """JSON lines that, applied to an empty ledger, reproduce the record's state exactly: its bundle (its
    events as received), then one bundle per record citing it (``pithledger export ID``)."""
    from pithledger.records.canonical import canonical_bytes

    with _opened(ledger) as opened:
        subject = opened.resolve(ident)
        return b"".join(
            canonical_bytes(b) + b"\n" for b in [*opened.export_parts(subject), *opened.inbound_bundles(subject)]
        )


def export_all(ledger: Ledger | str | Path) -> Iterator[bytes]:
    """Every record's bundle as JSON lines (``pithledger export --all``): its valid events as received,
    then its unverified copies, record by record from one snapshot; applied to an empty ledger they give
    the same ``digest``. Streams (memory does not grow with the ledger): consume it in one thread. A path
    ledger's pending derivation is finished first (as ``digest`` does); an open handle must have none."""
    from pithledger.records.canonical import canonical_bytes

    with _opened(ledger, settled=True) as opened:
        for bundle in opened.export_all():
            yield canonical_bytes(bundle) + b"\n"


class Digest(msgspec.Struct, frozen=True):
    """What ``pithledger digest`` prints: the mirror's order-independent roots of its event sets and of its
    states (hex; spec/audit.md), which two mirrors holding the same valid events share, and its counts."""

    events_root: str
    states_root: str
    records: int
    events: int
    digest_version: str = "pithledger-digest-v1"


def digest(ledger: Ledger | str | Path) -> Digest:
    """This mirror's digest (``pithledger digest``): a directory is opened with its pending derivation
    finished first (the roots cover every state); an open ``Ledger`` is read as it is."""
    with _opened(ledger, settled=True) as opened:
        root = opened.root()
        counts = opened.counts()
    return Digest(root.events.hex(), root.states.hex(), counts["records"], counts["events"])


def backup(ledger: str | Path, dest: str | Path) -> dict[str, Any]:
    """Copy the ledger directory ``ledger`` to ``dest``, which must not exist (``pithledger backup DEST``):
    one consistent snapshot while other processes write (compacted; its pending derivation copied as
    pending), its sidecars and remembered checkpoints, verified (spec/storage.md §9), then renamed into
    place; restoring is using ``dest`` as a ledger directory. Returns what it copied (``events``,
    ``pending``, ``tlog_size``, ``bytes``, ...). Raises :class:`~pithledger.errors.BackupExists`, or
    :class:`~pithledger.errors.BackupFailed` (a full disk: nothing is left at ``dest``). A path only: LMDB
    allows one handle per process, and the copy is opened to be verified."""
    from pithledger.store.backup import backup as backup_ledger

    return backup_ledger(Path(ledger), Path(dest))


def verify_bundle(bundle: bytes | Mapping[str, Any]) -> list[Verdict]:
    """Check one bundle offline, nothing written (``pithledger verify FILE``): the
    :class:`~pithledger.records.events.Verdict` of each of its events (``status``: valid, invalid or
    unverified; ``reason`` and ``message`` say why). ``bundle``: its bytes (decoded strictly: duplicate
    keys, lone surrogates, trailing data refused) or its decoded value (held to the same value space: integers,
    depth, lone surrogates). Raises a ``PithledgerError`` for a document that is not a structurally sound bundle."""
    from pithledger.records.bundle import read_bundle
    from pithledger.records.canonical import check_value, strict_decode
    from pithledger.records.events import verify_event

    if isinstance(bundle, (bytes, bytearray, memoryview)):
        value = strict_decode(bytes(bundle), what="the bundle")
    else:
        check_value(bundle)  # what strict decoding refuses, refused alike: no verdict on a value bytes cannot carry
        value = bundle
    return [verify_event(event) for event in read_bundle(value).events]


def publish(
    ledger: Ledger | str | Path,
    directory: str | Path,
    *,
    key: LocalKey | None = None,
    base_url: str = "",
    log: LogSigner | None = None,
) -> dict[str, int]:
    """Write (or bring up to date) a static mirror tree of ``ledger`` in ``directory`` (``pithledger
    publish DIR``); ``key`` names the mirror's key in the manifest, ``log`` signs the log's checkpoint
    (:func:`pithledger.tlog.proofs.log_signer`). Pending derivation is finished first. Returns the counts
    written and removed."""
    from pithledger.mirror.publish import publish as publish_mirror

    with _opened(ledger, settled=True) as opened:
        return publish_mirror(opened, Path(directory), key, base_url.rstrip("/"), log=log)


def sync(
    ledger: Ledger | str | Path,
    source: str,
    *,
    timeout: float | None = 30.0,
    deadline: Deadline | float | None = 3600.0,
) -> dict[str, Any]:
    """Fetch from a published mirror (a directory or an http(s) base URL) what ``ledger`` lacks, walking
    only where digests differ (``pithledger sync SOURCE``, without its checkpoint check). Returns the
    counts of spec/sync: records fetched, new / duplicate / invalid / unverified, ``rejected``,
    ``skipped`` and ``lying`` records."""
    from pithledger.mirror.publish import sync as sync_mirror

    with _opened(ledger, write=True) as opened:
        return sync_mirror(opened, source, timeout=timeout, deadline=deadline)


def restore_log(
    ledger: Ledger | str | Path,
    source: str,
    log_key: str | None = None,
    *,
    timeout: float | None = 30.0,
    deadline: Deadline | float | None = 3600.0,
    key_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Bring a restored ledger's log back to the log this mirror published at ``source`` (its publish
    directory or base URL), appending the events it lacks in exactly the published order (``pithledger
    restore-log SOURCE``, spec/transparency.md §4.1). ``log_key``: the log's verifier key (None: the one
    the source's manifest names). Returns ``{origin, size, root, log_key, before, appended, status}``;
    raises :class:`~pithledger.errors.LogDiverged` when the ledger's log is not a prefix of the published
    one (nothing written). ``key_dir``: the key directory whose record of what the log key signed SOURCE
    must extend (:class:`~pithledger.errors.NotTheSignedLog` otherwise; None: not consulted)."""
    from pithledger.mirror.restore import restore_log as restore

    with _opened(ledger, write=True) as opened:
        return restore(
            opened,
            source,
            log_key,
            timeout=timeout,
            deadline=deadline,
            key_dir=None if key_dir is None else Path(key_dir),
        )


def pull(
    ledger: Ledger | str | Path,
    source: str,
    ids: Sequence[str] | None = None,
    *,
    timeout: float | None = 30.0,
    deadline: float | None = 3600.0,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Fetch the records ``ids`` (any ID form; None: every record the ledger holds) from the mirrors a
    ``pith-mirrors.json`` (URL or file, or a mirror's base URL) names, and apply them in batches
    (``pithledger pull SOURCE ID...``). Returns the report of spec/pull.md §5. Raises
    :class:`~pithledger.errors.MalformedId` for a malformed ID before anything is fetched."""
    from pithledger.mirror.pull import pull as pull_records
    from pithledger.mirror.pull import targets_of_args

    targets = targets_of_args(ids) if ids is not None else None
    with _opened(ledger, write=True) as opened:
        return pull_records(opened, source, targets, timeout=timeout, deadline=deadline, progress=progress)


def audit_mirrors(
    a: str | Path, b: str | Path, *, timeout: float | None = 30.0, deadline: float | None = 3600.0
) -> AuditResult:
    """Compare two mirrors (ledger directories, published directories or http(s) URLs), walking only
    where their order-independent digests differ (``pithledger audit A B``). The result's
    ``consistent`` is true when they hold the same valid events and states; otherwise ``divergent`` names
    each record and the event ids each side lacks (:func:`pithledger.audit.report_value` makes the
    report ``--json`` prints). Not named ``audit``: that is the internal module ``pithledger.audit``, which
    would replace a function of that name on the package as soon as it is imported."""
    from pithledger.audit import compare
    from pithledger.mirror.publish import open_source
    from pithledger.store import Ledger

    side_a = open_source(str(a), timeout=timeout, deadline=deadline)
    # LMDB allows one handle per environment and process: a ledger audited against itself is shared.
    side_b = (
        side_a if Path(a).resolve() == Path(b).resolve() else open_source(str(b), timeout=timeout, deadline=deadline)
    )
    try:
        return compare(side_a, side_b)
    finally:
        for side in {id(side_a): side_a, id(side_b): side_b}.values():
            if isinstance(side, Ledger):
                side.close()


def verify_proof(proof: bytes, log_key: str) -> Inclusion:
    """Check an inclusion proof document (what ``pithledger prove`` writes) offline against the log's
    verifier key ``log_key`` (a note verifier key, ``name+hex+base64``): the checkpoint's signature, then
    the entry's inclusion in the signed tree (``pithledger verify-proof FILE --log-key KEY``). Returns
    what it proves (origin, size, root, index, entry); raises :class:`~pithledger.tlog.proofs.BadProof`
    (a ``PithledgerError``) naming what does not hold."""
    from pithledger.tlog.proofs import verifier_of, verify_inclusion_document

    return verify_inclusion_document(proof, verifier_of(log_key))


#: A proof file larger than this is refused unread (spec/events.md §3.1.2): a real proof is a few KiB.
MAX_OTS_FILE = 8 << 20


def verify_timestamp(
    proof: bytes,
    headers: Sequence[str],
    *,
    digest: bytes | None = None,
    file: str | Path | None = None,
    run: bytes | None = None,
) -> TimestampCheck:
    """Check a detached OpenTimestamps proof offline against Bitcoin block headers (``pithledger ots verify``):
    the proof is read as the reference library reads it, must stamp ``digest`` (or the digest of ``file``,
    hashed with the proof's own hash operation), and one of its Bitcoin attestations must lead to the Merkle
    root of a given header that carries mainnet's proof of work. ``headers``: ``HEX`` or ``HEIGHT:HEX`` each.
    ``run``: instead, a run of headers (80 bytes each, the attested block's first) checked as an anchor carrying
    it is (spec/events.md §3.1.3); the result's ``run`` holds it: ``run.header.work`` against ``MAINNET.min_work``.
    Returns what checks (height, hash, time, work per attestation); raises :class:`~pithledger.errors.OtsError`
    for an unreadable proof, else the :class:`~pithledger.errors.OtsNotVerified` subclass naming why not."""
    from pithledger.errors import CannotRead
    from pithledger.records import bitcoin, ots

    if (digest is None) == (file is None):
        raise ValueError("give the stamped file's digest or the file, one of the two")
    parsed = [bitcoin.parse_header_arg(h) for h in headers]
    if file is not None:
        hasher = ots.hasher(ots.parse(proof, strict=True).hash_op)  # the proof's own file hash operation
        try:
            with open(file, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    hasher.update(chunk)
        except OSError as exc:
            raise CannotRead(f"cannot read {file}: {exc.strerror}") from None
        digest = hasher.digest()
    assert digest is not None
    if run is not None:
        return bitcoin.verify_run(proof, digest, run)
    return bitcoin.verify(proof, digest, parsed)
