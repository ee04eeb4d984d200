"""The ledger's sidecar LMDB environments, beside its own and outside consensus: the display metadata
(``<ledger>/display-metadata/``, records/display.py's pure rules) and the pull cache (``<ledger>/pull-cache/``,
mirror/pull.py). Each opens through :func:`open_sidecar`, which names a full, read-only or damaged disk as the
ledger's own environment does. Nothing here is read by the reducer, the digests, export, audit or fsck.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import msgspec

from pithledger.errors import LedgerError, NoLedger
from pithledger.files import disk_full, room_for_lmdb, write_failed
from pithledger.records.display import DECODER, ENCODER, MAP_SIZE, SIDECAR, DisplayMetadata, combine, record_key


def open_sidecar(path: Path, *, map_size: int, what: str, readonly: bool = False) -> lmdb.Environment:
    """The sidecar environment at ``path`` (created unless ``readonly``); ``what`` names it in errors
    ("the display metadata"): a full disk, a read-only one or a damaged file is a named error."""
    try:
        if not readonly:
            path.mkdir(exist_ok=True)
        room_for_lmdb(path, f"cannot open {what} at {path}", readonly=readonly)
        return lmdb.open(str(path), map_size=map_size, subdir=True, readonly=readonly, max_dbs=0)
    except (lmdb.Error, OSError) as exc:
        raise write_failed(exc, path, f"cannot open {what} at {path}", readonly=readonly) from None


class MetadataStore:
    """The sidecar: ``<arXiv id>v<version>`` (:func:`record_key`) -> canonical JSON of :class:`DisplayMetadata`.

    ``readonly``: never creates anything; :meth:`get` answers None while the sidecar does not exist,
    and opens it on the first call after another process has created it."""

    def __init__(self, ledger_path: Path, *, readonly: bool = True) -> None:
        self.path = Path(ledger_path) / SIDECAR
        self.readonly = readonly
        self.env: lmdb.Environment | None = None
        if not readonly:
            if not (Path(ledger_path) / "data.mdb").exists():
                raise NoLedger.at(ledger_path)
            self._open()

    def _open(self) -> bool:
        if self.env is not None:
            return True
        if self.readonly and not (self.path / "data.mdb").exists():
            return False
        self.env = open_sidecar(self.path, map_size=MAP_SIZE, what="the display metadata", readonly=self.readonly)
        return True

    def put_many(self, items: list[tuple[str, DisplayMetadata]]) -> int:
        """Keep each item (a later one for the same record replaces an earlier one); one transaction."""
        if not self._open() or self.env is None:  # pragma: no cover - writer always opens
            raise LedgerError("the display metadata is not open for writing")
        try:
            with self.env.begin(write=True) as txn:
                for key, meta in items:
                    txn.put(key.encode(), ENCODER.encode(meta))
        except lmdb.Error as exc:
            raise disk_full(exc, self.path, "the display metadata was not written") or LedgerError(
                f"the display metadata was not written: {exc}"
            ) from None
        return len(items)

    def keep_documents(self, items: list[tuple[dict[str, Any], DisplayMetadata]]) -> int:
        """Keep what record documents supplied ((canonical record, metadata) each), combined with what
        is held (:func:`combine`); one transaction."""
        if not self._open() or self.env is None:  # pragma: no cover - writer always opens
            raise LedgerError("the display metadata is not open for writing")
        try:
            with self.env.begin(write=True) as txn:
                for record, meta in items:
                    key = record_key(record).encode()
                    raw = txn.get(key)
                    old = None
                    if raw is not None:
                        try:
                            old = DECODER.decode(raw)
                        except msgspec.DecodeError:
                            old = None
                    txn.put(key, ENCODER.encode(combine(old, meta, record)))
        except lmdb.Error as exc:
            raise disk_full(exc, self.path, "the display metadata was not written") or LedgerError(
                f"the display metadata was not written: {exc}"
            ) from None
        return len(items)

    def get(self, record: dict[str, Any]) -> DisplayMetadata | None:
        """The metadata supplied for a canonical record, if any."""
        if not self._open() or self.env is None:
            return None
        try:
            with self.env.begin() as txn:
                raw = txn.get(record_key(record).encode())
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)
            return self.get(record)
        if raw is None:
            return None
        try:
            return DECODER.decode(raw)
        except msgspec.DecodeError:
            return None

    def count(self) -> int:
        if not self._open() or self.env is None:
            return 0
        return int(self.env.stat()["entries"])

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
