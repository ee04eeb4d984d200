"""The store's parallel work: how it is cut into parts and the pure function of bytes that verifies a
chunk of offered copies. Where the parts run — in place, on local worker processes or on a Dask
cluster, in order, falling back to the writer's thread — is ledger/fanout.py's business: each ledger
handle holds one :class:`~pithledger.fanout.Fanout`. A worker never touches the ledger (ADR 0009): it
gets bytes and returns bytes.
"""

from __future__ import annotations

from pithledger.fanout import Fanout, current
from pithledger.store.entries import _check_copy, _checked_encoder

# How the work is cut (chunk and part sizes, when the workers start): StoreTuning (tuning.py).


def _verify_offers(items: list[tuple[bytes, str, bool]]) -> bytes:
    """What the writer stores for a chunk of offered copies (a msgpack list of :class:`_Checked`, one
    :func:`_check_copy` each). Items: (canonical bytes, recomputed id or "", whether the caller vouches
    that the Ed25519 signature of these exact bytes verified before: rebuild). Runs on the ledger's
    worker processes (or threads) while the thread that reads the input goes on."""
    return _checked_encoder.encode([_check_copy(data, cid, known) for data, cid, known in items])


class _Workers:
    """A handle's fan-out, set when it opens: the one given, else the running command's
    (``fanout.current()``: --workers, --scheduler), else the handle's own local workers on all cores,
    started when first needed and closed with the handle. The parts that hand work out hold its ``fanout``."""

    def __init__(self, fanout: Fanout | None) -> None:
        shared = fanout or current()
        self._own = shared is None
        self.fanout = shared or Fanout.processes()

    def close(self) -> None:
        if self._own:
            self.fanout.close()
