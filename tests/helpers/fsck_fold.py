"""What tests/unit/store/test_fsck_fold.py and tests/e2e/store/test_fsck_fold.py share: Two records of 700 events
(with a fold entry) and a small one, the `sound` and `full_after_later` ledgers, and raw access to a ledger's tables
to damage a fold entry."""

from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import lmdb
import msgspec
import pytest

from helpers.eventpool import ALICE, BOB, EVE, IDS, RECS, P, bundles_of, t
from pithledger.records.events import make_event
from pithledger.store import Ledger, views

BIG, OTHER, SMALL = P[0], P[1], P[2]
B, O = BIG.encode(), OTHER.encode()


@lru_cache(maxsize=1)
def _events() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(first batch, second batch, what a later apply brings): two records of 700 events (a fold entry
    each, their states segmented), one small record citing the big one (an inbound citation)."""
    first = [
        make_event(
            "record_created",
            P[i],
            {"canonical_record": RECS[i], "canonical_sha256": IDS[i].canonical_sha256},
            ALICE,
            created_at=t(1, i),
        )
        for i in range(3)
    ]
    signers = [ALICE, BOB, EVE]
    for n in range(700):
        when = f"2026-06-{2 + n % 27:02d}T{n % 24:02d}:{n % 60:02d}:00Z"
        for subject in (BIG, OTHER):
            first.append(
                make_event(
                    "author_attestation", subject, {"author_name": f"Author {n:04d}"}, signers[n % 3], created_at=when
                )
            )
    first.append(
        make_event(
            "citation_signature", SMALL, {"cited_pith_number": BIG, "relation": "supports"}, ALICE, created_at=t(3)
        )
    )
    # the second batch is folded onto the first's entries: the ledger's entries are a fold's, not fold_all's
    second = [
        make_event("author_attestation", s, {"author_name": f"Second {s}"}, BOB, created_at=t(28, 1))
        for s in (BIG, OTHER)
    ]
    later = [
        make_event("author_attestation", s, {"author_name": f"Later {s}"}, EVE, created_at=t(28, 2))
        for s in (BIG, OTHER)
    ]
    return first, second, later


def _build(path: Path, batches: list[list[dict[str, Any]]]) -> None:
    with Ledger(path, create=True) as ledger:
        for batch in batches:
            ledger.apply_batch(bundles_of(batch))


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound ledger, built once (each test corrupts a copy)."""
    path = tmp_path_factory.mktemp("sound") / "l"
    first, second, _ = _events()
    _build(path, [first, second])
    return path


@pytest.fixture(scope="module")
def full_after_later(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[bytes, bytes]]:
    """Every event, the later ones too, applied in one batch: the full derivation the next apply must equal."""
    path = tmp_path_factory.mktemp("full") / "l"
    first, second, later = _events()
    _build(path, [first + second + later])
    return _dbs(path)


def _dbs(path: Path) -> dict[str, dict[bytes, bytes]]:
    """The stored states (inflated), digest leaves and fold entries."""
    env = lmdb.open(str(path), max_dbs=32, readonly=True, lock=False)
    with env.begin() as txn:
        out = {
            name: {bytes(k): bytes(v) for k, v in txn.cursor(db=env.open_db(name.encode(), txn=txn))}
            for name in ("state", "rec", "fold")
        }
    env.close()
    out["state"] = {k: zlib.decompress(v) for k, v in out["state"].items()}
    return out


def _entries(path: Path) -> dict[bytes, views._FoldEntry]:
    return {k: msgspec.msgpack.decode(v, type=views._FoldEntry) for k, v in _dbs(path)["fold"].items()}


def _put(path: Path, key: str, value: bytes | None) -> None:
    """Corrupt one fold entry in a write transaction (None: delete it)."""
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        db = env.open_db(b"fold", txn=txn)
        if value is None:
            txn.delete(key.encode(), db=db)
        else:
            txn.put(key.encode(), value, db=db)
    env.close()


def _enc(entry: views._FoldEntry) -> bytes:
    return msgspec.msgpack.encode(entry)


def _fold_of(entry: views._FoldEntry) -> dict[str, Any]:
    return msgspec.msgpack.decode(entry.fold)  # type: ignore[no-any-return]


def _with_fold(entry: views._FoldEntry, **changes: Any) -> bytes:
    return _enc(msgspec.structs.replace(entry, fold=msgspec.msgpack.encode({**_fold_of(entry), **changes})))
