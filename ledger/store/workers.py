"""The store's parallel work: how it is cut into parts and the pure function of bytes that verifies a
chunk of offered copies. Where the parts run — in place, on local worker processes or on a Dask
cluster, in order, falling back to the writer's thread — is ledger/fanout.py's business: each ledger
handle holds one :class:`~pithledger.fanout.Fanout`. A worker never touches the ledger (ADR 0009): it
gets bytes and returns bytes.
"""

from __future__ import annotations

from .. import translog
from ..events import check_event, is_pithledger_envelope
from ..fanout import Fanout
from .entries import EvidenceEntry, LogEntry, _Checked, _checked_encoder, _entry_encoder
from .env import _event_key, _json_decoder

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
    """What the writer stores for a chunk of offered copies (a msgpack list of :class:`_Checked`):
    each copy's verdict, and for a valid one its ids key, its log entry's bytes and its transparency-log
    entry, for another its evidence entry's. Items: (canonical bytes, recomputed id or "", whether the caller vouches that
    the Ed25519 signature of these exact bytes verified before: rebuild). Runs on the ledger's worker
    processes (or threads) while the thread that reads the input goes on. Every copy is verified from
    its canonical bytes (what the log and the evidence hold, what fsck re-verifies), decoded plainly:
    they are the encoding of a strictly decoded value."""
    out = []
    for data, cid, known in items:
        event = _json_decoder.decode(data)
        v = check_event(event, event_id=cid or None, size=len(data), signature_known_good=known)
        if v.status == "valid":
            entry = LogEntry(seq=0, event=data, facts=v.facts, event_id="" if is_pithledger_envelope(event) else v.event_id)
            out.append(_Checked(_event_key(v.event_id), _entry_encoder.encode(entry), "cited" in v.facts or "revokes" in v.facts,
                                tlog=translog.entry_of_event(v.event_id, v.subject, event, data)))
        else:
            out.append(_Checked(None, _entry_encoder.encode(EvidenceEntry(event=data, verdict=v)), verdict=v))
    return _checked_encoder.encode(out)


class _Workers:
    """A ledger handle's fan-out (set when it opens: see Ledger.__init__)."""

    _fanout: Fanout
