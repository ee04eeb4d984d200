"""The store's parallel work: how it is cut into parts and the pure function of bytes that verifies a
chunk of offered copies. Where the parts run — in place, on local worker processes or on a Dask
cluster, in order, falling back to the writer's thread — is ledger/fanout.py's business: each ledger
handle holds one :class:`~pithledger.fanout.Fanout`. A worker never touches the ledger (ADR 0009): it
gets bytes and returns bytes.
"""

from __future__ import annotations

from ..fanout import Fanout
from .entries import _check_copy, _checked_encoder

# Copies are verified in chunks of _VERIFY_CHUNK (each hand-over to a worker costs the reading thread
# a GIL round trip with the executor's threads: fewer, larger ones), on threads for a run's first
# chunks (a small apply does not pay for processes), then on the workers.
_VERIFY_CHUNK = 512
_PROCESS_AFTER_CHUNKS = 4  # a run's 4th chunk starts the worker processes (Fanout.stream's threads_first)
#: finish derives the states of a step on the workers when it holds at least this many records
#: (fewer: here, where handing them over would cost more than it saves), in tasks of _DERIVE_PART
#: records (or _DERIVE_PART_ENTRIES log entries), at most twice the workers' number of tasks ahead of
#: the writer (Fanout.map: bounds what waits in memory).
_PARALLEL_STATES = 256
_DERIVE_PART = 256
_DERIVE_PART_ENTRIES = 2048  # a part also closes at this many log entries gathered
#: Records per part where the workers read a finishing step's inputs themselves (snapshot.py): the writer
#: hands over names only, so parts are cut by records (a worker holds one part's inputs at a time).
_SNAPSHOT_PART = 64
#: A part of a smaller step holding this many bytes of stored (compressed) states, or _DERIVE_PART_ENTRIES
#: log entries, is derived on the workers all the same (a hot record's fold).
_BIG_STATE = 256 * 1024


def _verify_offers(items: list[tuple[bytes, str, bool]]) -> bytes:
    """What the writer stores for a chunk of offered copies (a msgpack list of :class:`_Checked`, one
    :func:`_check_copy` each). Items: (canonical bytes, recomputed id or "", whether the caller vouches
    that the Ed25519 signature of these exact bytes verified before: rebuild). Runs on the ledger's
    worker processes (or threads) while the thread that reads the input goes on."""
    return _checked_encoder.encode([_check_copy(data, cid, known) for data, cid, known in items])


class _Workers:
    """A ledger handle's fan-out (set when it opens: see Ledger.__init__)."""

    _fanout: Fanout
