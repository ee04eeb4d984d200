"""The Ledger: one class composed of its parts, each in its own module (see ledger/store/__init__.py)."""

from __future__ import annotations

from pathlib import Path

import lmdb

from ..errors import LedgerDamaged, NoLedger, PithledgerError
from ..fanout import Fanout, current
from .entries import EvidenceLimits
from .env import DAMAGE_ERRORS, DEFAULT_MAP_SIZE, LAYOUT_VERSION, lost_layout
from .fsck import _Fsck
from .log import _Log
from .reads import _Reads
from .tuning import StoreTuning, default_tuning


class Ledger(_Log, _Reads, _Fsck):
    """A ledger directory. Open one per process; any number of processes may read while one writes.

    Its methods live in the parts it is composed of, one module each (listed in ledger/store/__init__.py);
    each part's class builds on the parts it calls. This class opens and closes the handle."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = False,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        evidence_limits: EvidenceLimits = EvidenceLimits(),  # noqa: B008 - frozen
        fanout: Fanout | None = None,
        tuning: StoreTuning | None = None,
    ) -> None:
        """``readonly``: for queries. A read-only handle never takes the writer lock, so it never waits
        for an apply in another process (LMDB gives it the last committed snapshot). ``fanout``: where
        its pure parallel work runs (ledger/fanout.py; the caller closes it); default: the running
        command's (``fanout.current()``: --workers, --scheduler), else the handle's own local workers on
        all cores, started when first needed and closed with the handle. ``tuning``: how its work is cut
        (ledger/store/tuning.py); default: :func:`~pithledger.store.tuning.tuned`'s, else StoreTuning()."""
        self.evidence_limits = evidence_limits
        self.tuning = tuning or default_tuning()  # before _upgrade, which reads it
        self._open_handle(path, readonly=readonly, map_size=map_size, create=create)
        shared = fanout or current()
        self._own_fanout = shared is None
        self._fanout = shared or Fanout.processes()
        try:
            layout = self._open_dbs(readonly=readonly)
            if not readonly:
                # the reader slots of processes that died holding one (a killed worker or reader) would keep
                # LMDB from reusing the pages of their snapshots: a writer clears them when it opens
                self.env.reader_check()
            if layout != LAYOUT_VERSION and not readonly:
                self._upgrade()
            self.layout = (
                LAYOUT_VERSION if not readonly else layout
            )  # a reader's view of an older layout stays as it is
        except lmdb.NotFoundError:  # read-only, and the creating apply has not committed yet (or damage lost it)
            lost = lost_layout(self.env, self.path)
            self.env.close()
            raise lost or NoLedger(f"no complete ledger at {self.path} (yet)") from None
        except DAMAGE_ERRORS as exc:
            self.env.close()  # a table's root page damaged: opening it is where LMDB first reads it
            raise LedgerDamaged(f"the ledger at {self.path} is damaged: LMDB cannot read it ({exc})") from None
        except PithledgerError:
            self.env.close()
            raise

    def close(self) -> None:
        if self._own_fanout:
            self._fanout.close()
        super().close()


def open_settled(path: Path, *, tuning: StoreTuning | None = None) -> Ledger:
    """Open a ledger read-only for a reader that needs its derived views whole (digest tree, fsck,
    publish, audit): if derivation is pending (an apply or sync was killed, or is running), finish it
    first, as a writer, which waits for a running one (spec/storage.md §3.1); a ledger of an older layout
    is upgraded first the same way (spec/storage.md §2.2). ``tuning``: the handles' (Ledger)."""
    ledger = Ledger(path, readonly=True, tuning=tuning)
    if not ledger.pending() and ledger.layout == LAYOUT_VERSION:
        return ledger
    ledger.close()
    with Ledger(path, tuning=tuning) as writer:
        writer.finish()
    return Ledger(path, readonly=True, tuning=tuning)
