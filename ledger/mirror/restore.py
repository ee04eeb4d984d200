"""``restore-log``: bring a restored ledger's log back to the mirror's own published log (spec/transparency.md
§4.1, docs/operating.md §6).

A backup holds the log as it was at the backup; the mirror went on and published more (its ``checkpoint``,
tiles and entry bundles, and every logged event in its records' bundles). Before the log key signs again,
the ledger's log must be a prefix of that published log — else signing forks it (``log-would-fork``). This
reads the published log (verified under the log key given, each tile against the signed root), checks that
the ledger's log is a prefix of it (the same root at the ledger's size), then appends the missing events in
exactly the log's order, in batches that each append exactly the published entries or nothing
(``Batch.commit(expect=...)``), so the ledger's tree at the published size has exactly the published root.
An interrupted run leaves the ledger at a prefix of the published log: run it again to go on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pithledger.errors import (
    BadCheckpoint,
    LogCheckFailed,
    LogDiverged,
    NoPublishedLog,
    NotTheSignedLog,
    PithledgerError,
)
from pithledger.mirror.checkpoints import read_source_log, tile_client
from pithledger.mirror.published import Published, ledger_id, record_parts
from pithledger.mirror.transport import DEFAULT_TIMEOUT, Deadline, as_deadline
from pithledger.records.bundle import Bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.tlog import witness as w
from pithledger.tlog.proofs import parse_entry, verifier_of
from pithledger.tlog.signing import record_path, recorded
from pithledger.tlog.tiles import tree_hash

if TYPE_CHECKING:
    from pithledger.store import Ledger
    from pithledger.tlog.note import NoteVerifier
    from pithledger.tlog.tiles import HashReader

#: Entries appended per batch (one durable transaction each): a batch holds its events in memory.
RESTORE_BATCH = 4096


def restore_log(
    ledger: Ledger,
    source: str,
    log_key: str | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    deadline: Deadline | float | None = 3600.0,
    batch: int = RESTORE_BATCH,
    progress: Callable[[int], None] | None = None,
    key_dir: Path | None = None,
) -> dict[str, Any]:
    """Append to ``ledger`` the events of the log SOURCE publishes (a published directory or an http(s)
    base URL of this mirror) that its log lacks, in log order, so that its log becomes the published one.
    ``log_key``: the log's verifier key (name+hash+key); None: the one SOURCE's manifest names.
    ``key_dir``: the key directory whose record (spec/transparency.md §4.1) of what the log key signed
    SOURCE's tree must extend — else :class:`NotTheSignedLog`, nothing written: restoring to an older copy
    or to another log would leave a ledger the key refuses to sign; with no ``log_key``, a key it holds no
    record of is refused too (the manifest is SOURCE's word only). None: no record is consulted.
    Returns {"origin", "size", "root", "log_key", "before", "appended", "status"} (status "restored",
    "same" or "extends": the ledger already holds the published tree, and more). Raises :class:`LogDiverged` when the ledger's log is not a prefix of the published log
    (nothing written), a named source or checkpoint error when the published log cannot be read or verified."""
    given = log_key is not None  # the operator named the key: it vouches for SOURCE without a record
    if log_key is not None:
        verifier_of(log_key)  # a mistyped key is named before anything is fetched
    run = as_deadline(deadline)
    log = read_source_log(source, timeout=timeout, deadline=run)
    if log is None:
        raise NoPublishedLog(f"{source} publishes no checkpoint: there is no published log to restore from")
    if log_key is None:
        if log.manifest_key is None:
            raise BadCheckpoint(
                f"{source} publishes a checkpoint, but no manifest names its log_key",
                hint="give the log's key with --log-key VKEY",
            )
        log_key = log.manifest_key
    verifier = verifier_of(log_key)
    try:
        cp = w.open_checkpoint(log.note, [log_key])
    except PithledgerError as exc:
        raise BadCheckpoint(
            f"{source}: the checkpoint does not verify under the log key {log_key[:120]}: {exc.message}",
            hint="give the log key this mirror publishes under (its manifest's log_key, from your own records)",
        ) from None
    if cp.origin != verifier.name:
        raise BadCheckpoint(f"{source}: the checkpoint is of the log {cp.origin[:200]!r}, not of {verifier.name!r}")
    client = tile_client(log, cp)
    if key_dir is not None:  # read after the checkpoint was fetched: a serve SOURCE moves the record as it signs
        _check_record(key_dir, verifier, cp.size, cp.root, client, source, vouched=given)
    with ledger.snapshot():
        have = ledger.tlog_size()
        ours = ledger.tlog_root()
        at_published = tree_hash(ledger, cp.size) if have >= cp.size else None
    report: dict[str, Any] = {
        "origin": cp.origin,
        "size": cp.size,
        "root": cp.root.hex(),
        "log_key": log_key,
        "before": have,
        "appended": 0,
    }
    if at_published is not None:
        if at_published != cp.root:
            raise LogDiverged(
                f"this ledger's log holds {have:,} entries, and its tree at the published size {cp.size:,} is not "
                f"the published one (root {cp.root.hex()[:16]}…): it has diverged from the log of {cp.origin!r}"
            )
        ledger.finish()  # a run killed between its last batch and the derivation left it pending
        return report | {"status": "same" if have == cp.size else "extends"}
    try:
        theirs = tree_hash(client, have)
    except LookupError as exc:  # a tile the signed tree needs is absent
        raise BadCheckpoint(f"{source}: a tile of the published log is missing: {exc}") from None
    if theirs != ours:
        raise LogDiverged(
            f"this ledger's log ({have:,} entries) is not a prefix of the log {cp.origin!r} published at "
            f"{source} (size {cp.size:,}): its tree at size {have:,} has another root"
        )
    source_tree = Published(source, timeout=timeout, deadline=run)
    for start in range(have, cp.size, batch):
        end = min(start + batch, cp.size)
        entries = client.entries(start, end, keep=False)  # each checked against the signed root
        _append(ledger, source_tree, start, entries)
        report["appended"] += len(entries)
        if progress is not None:
            progress(end)
    ledger.finish()
    with ledger.snapshot():
        size, root = ledger.tlog_size(), tree_hash(ledger, cp.size)
    if size != cp.size or root != cp.root:  # pragma: no cover - every batch appended exactly the published entries
        raise LogDiverged(f"after restoring, this ledger's log ({size:,} entries) is not the published one")
    return report | {"status": "restored"}


def _check_record(
    key_dir: Path, verifier: NoteVerifier, size: int, root: bytes, client: HashReader, source: str, *, vouched: bool
) -> None:
    """SOURCE's signed tree (``size``, ``root``) must extend the tree ``key_dir`` records its key last signed
    (spec/transparency.md §4.1): restored to anything else, the ledger could never be signed again."""
    last = recorded(key_dir, verifier)
    if last is None:
        if not vouched:
            raise NotTheSignedLog(
                f"{source}'s manifest names the log key {verifier.vkey[:120]}, and the key directory {key_dir} holds "
                f"no record of it signing (no {record_path(key_dir, verifier.vkey).name}): nothing vouches that this "
                "is this mirror's log"
            )
        return
    m, r = last
    if size < m:
        raise NotTheSignedLog(
            f"{source} publishes the log {verifier.name!r} at size {size:,}, but its key signed a tree of size {m:,} "
            f"(recorded in {key_dir}): an older copy, restored from, would leave a ledger the key refuses to sign"
        )
    try:
        theirs = root if m == size else tree_hash(client, m)
    except LookupError as exc:
        raise BadCheckpoint(f"{source}: a tile of the published log is missing: {exc}") from None
    if theirs != r:
        raise NotTheSignedLog(
            f"{source} publishes a log {verifier.name!r} whose tree at size {m:,} is not the one its key signed "
            f"(root {r.hex()[:16]}…, recorded in {key_dir}): it is another history"
        )


def _append(ledger: Ledger, source: Published, start: int, entries: list[bytes]) -> None:
    """Append the events of the published ``entries`` (from index ``start``) in their order, in one batch
    that appends exactly these entries or nothing."""
    parsed = [parse_entry(data, f"entry {start + n}") for n, data in enumerate(entries)]
    by_record: dict[str, list[str]] = {}
    for entry in parsed:
        by_record.setdefault(entry.record, []).append(entry.ledger_id)
    found: dict[str, dict[str, Any]] = {}
    for number, ids in by_record.items():
        wanted = set(ids)
        for bundle, _ in record_parts(source, number, sorted(wanted)):
            for event in bundle.events:
                eid = ledger_id(event)
                if eid in wanted and eid not in found:
                    found[eid] = event
    missing = [e for e in parsed if e.ledger_id not in found]
    if missing:
        raise LogCheckFailed(
            f"{source.name}: the published bundle of {missing[0].record} does not carry the event "
            f"{missing[0].ledger_id} its log names at index {start + parsed.index(missing[0]):,} "
            f"({len(missing):,} such in entries {start:,}-{start + len(entries) - 1:,}): nothing of them was appended",
            hint="the published tree is incomplete: restore from a complete copy of it (`pithledger verify-log` names what is missing)",
        )
    batch = ledger.batch()
    try:
        for entry in parsed:  # one bundle an event, in log order: the batch appends its candidates in this order
            event = found[entry.ledger_id]
            batch.add(Bundle(pith_number=entry.record, events=[event], size=len(canonical_bytes(event))))
    except BaseException:
        batch.abandon()
        raise
    try:
        batch.commit(defer=True, expect=(start, entries))
    except LogDiverged as exc:
        raise LogDiverged(
            f"the events the published log names at {start:,}-{start + len(entries) - 1:,} would not be appended "
            f"as its entries ({exc.message}): another writer appended meanwhile, this ledger holds one of them "
            "already, or a published event is not valid",
            hint="stop every writer of this ledger (sync, serve --accept-events), then run restore-log again; "
            "`pithledger verify-log SOURCE --log-key VKEY` checks the published log",
        ) from None
