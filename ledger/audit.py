"""Order-independent digests of a mirror, and the comparison of two mirrors. Pure: sources do the IO.

The digest tree (spec/audit.md) groups records by the first DEPTH characters of their suffix; every
node carries two RFC 9162 roots, one over event sets and one over states. Two mirrors compare roots,
then descend only into children that differ, so the digests read grow with the number of
differences, not with the size of the ledgers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import msgspec

from pithledger.tlog import merkle

DEPTH = 3
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
DIGEST_VERSION = "pithledger-digest-v1"


class Pair(msgspec.Struct, frozen=True, array_like=True):
    """(events, states) digests of a node, or (event_root, state_sha256) of one record."""

    events: bytes
    states: bytes


def event_leaf(event_id: str) -> bytes:
    return merkle.leaf_hash(b"pithledger-event\x00" + bytes.fromhex(event_id[len("sha256:") :]))


def record_event_root(event_ids: Iterable[str]) -> bytes:
    """RFC 9162 root over the record's event ids, in sorted order."""
    return merkle.root([event_leaf(i) for i in sorted(set(event_ids))])


def record_pair(event_ids: Iterable[str], state_sha256: str) -> Pair:
    return Pair(record_event_root(event_ids), bytes.fromhex(state_sha256))


def leaves_pair(leaves: bytes, state_sha256: str) -> Pair:
    """:func:`record_pair` from the event leaves already hashed (32 bytes each, in event id order, each
    id once): what an incremental derivation keeps so that it hashes only the new ones."""
    return Pair(
        merkle.root([leaves[i : i + merkle.HASH_LEN] for i in range(0, len(leaves), merkle.HASH_LEN)]),
        bytes.fromhex(state_sha256),
    )


def bucket_pair(records: Mapping[str, Pair]) -> Pair:
    names = sorted(records)
    ev = [merkle.leaf_hash(b"pithledger-record-events\x00" + n.encode() + b"\x00" + records[n].events) for n in names]
    st = [merkle.leaf_hash(b"pithledger-record-state\x00" + n.encode() + b"\x00" + records[n].states) for n in names]
    return Pair(merkle.root(ev), merkle.root(st))


def inner_pair(prefix: str, children: Mapping[str, Pair]) -> Pair:
    names = [c for c in ALPHABET if c in children]
    ev = [
        merkle.leaf_hash(b"pithledger-node-events\x00" + (prefix + c).encode() + b"\x00" + children[c].events)
        for c in names
    ]
    st = [
        merkle.leaf_hash(b"pithledger-node-states\x00" + (prefix + c).encode() + b"\x00" + children[c].states)
        for c in names
    ]
    return Pair(merkle.root(ev), merkle.root(st))


def bucket_of(pith_number: str) -> str:
    return pith_number.rsplit(":", 1)[-1][:DEPTH]


class Source(Protocol):
    """What the audit reads from a mirror (a ledger, a published directory, a URL)."""

    @property
    def name(self) -> str: ...

    def root(self) -> Pair: ...

    def children(self, prefix: str) -> dict[str, Pair]: ...

    def bucket(self, prefix: str) -> dict[str, Pair]: ...

    def record_events(self, pith_number: str) -> list[str]: ...


class Divergence(msgspec.Struct):
    """``a_lacks`` / ``b_lacks``: the ids one side lacks, sorted, at most the walk's ``max_ids`` of them
    (the first ones); ``a_lacks_count`` / ``b_lacks_count``: how many there are in all."""

    pith_number: str
    kind: str  # "missing-on-a" | "missing-on-b" | "events-differ" | "state-differs-with-equal-events"
    a_lacks: list[str] = []
    b_lacks: list[str] = []
    a_lacks_count: int = 0
    b_lacks_count: int = 0


class AuditResult(msgspec.Struct):
    """``merge_bug_suspected``: every divergence is a state difference over equal event sets, so both
    mirrors hold the same events everywhere and still disagree on a state (a merge bug, or a stored
    state altered behind the ledger's back). With other divergences about, a state difference may be
    explained by inbound citations from a record whose events differ."""

    consistent: bool
    a_root: dict[str, str]
    b_root: dict[str, str]
    divergent: list[Divergence]
    digests_read: int
    merge_bug_suspected: bool = False


def _hex(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


#: Event ids an audit report lists per divergent record and side (the counts are always whole): a
#: hostile source advertising millions of ids must not turn into millions of strings held for a report.
LISTED_IDS = 100


class Walk:
    """The comparison of two mirrors as a stream: :meth:`divergences` yields each divergent record as
    its bucket is read (digest-tree order: suffix prefix, then Pith Number), holding one bucket's
    records and one record's event ids at a time, so a caller acting per record (sync) needs memory for
    one record, not for every difference. ``reads`` counts the digests read so far."""

    def __init__(self, a: Source, b: Source, *, max_ids: int | None = LISTED_IDS) -> None:
        self.a, self.b = a, b
        self.max_ids = max_ids
        self.a_root, self.b_root = a.root(), b.root()
        self.reads = 2

    def _lacks(self, ids: list[str]) -> list[str]:
        return ids if self.max_ids is None else ids[: self.max_ids]

    def divergences(self) -> Iterator[Divergence]:
        a, b = self.a, self.b
        if self.a_root == self.b_root:
            return
        stack = [""]
        while stack:
            prefix = stack.pop()
            if len(prefix) < DEPTH:
                ca, cb = a.children(prefix), b.children(prefix)
                self.reads += len(ca) + len(cb)
                differing = sorted(c for c in set(ca) | set(cb) if ca.get(c) != cb.get(c))
                stack += [prefix + c for c in reversed(differing)]
                continue
            ba, bb = a.bucket(prefix), b.bucket(prefix)
            self.reads += len(ba) + len(bb)
            for number in sorted(set(ba) | set(bb)):
                pa, pb = ba.get(number), bb.get(number)
                if pa == pb:
                    continue
                if pa is not None and pb is not None and pa.events == pb.events:
                    yield Divergence(number, "state-differs-with-equal-events")
                    continue
                ids_a = set(a.record_events(number)) if pa is not None else set()
                ids_b = set(b.record_events(number)) if pb is not None else set()
                self.reads += len(ids_a) + len(ids_b)
                kind = "missing-on-a" if pa is None else "missing-on-b" if pb is None else "events-differ"
                a_lacks, b_lacks = sorted(ids_b - ids_a), sorted(ids_a - ids_b)
                del ids_a, ids_b
                yield Divergence(
                    number,
                    kind,
                    a_lacks=self._lacks(a_lacks),
                    b_lacks=self._lacks(b_lacks),
                    a_lacks_count=len(a_lacks),
                    b_lacks_count=len(b_lacks),
                )


def compare(a: Source, b: Source, *, max_ids: int | None = LISTED_IDS) -> AuditResult:
    """Name every record where two mirrors differ, reading only the differing branches; at most
    ``max_ids`` event ids listed per record and side (None: all), with whole counts."""
    walk = Walk(a, b, max_ids=max_ids)
    divergent = sorted(walk.divergences(), key=lambda d: d.pith_number)
    ra, rb = walk.a_root, walk.b_root
    suspect = bool(divergent) and all(d.kind == "state-differs-with-equal-events" for d in divergent)
    return AuditResult(
        consistent=not divergent and ra == rb,
        a_root=_hex(ra),
        b_root=_hex(rb),
        divergent=divergent,
        digests_read=walk.reads,
        merge_bug_suspected=suspect,
    )


def report_value(result: AuditResult, a_name: str, b_name: str) -> dict[str, Any]:
    """The audit report as a JSON value (canonical when encoded with canonical_bytes)."""
    return {
        "report_type": "pithledger_audit_report",
        "report_version": "1",
        "digest_version": DIGEST_VERSION,
        "a": {"source": a_name, "root": result.a_root},
        "b": {"source": b_name, "root": result.b_root},
        "consistent": result.consistent,
        "divergent": [msgspec.to_builtins(d) for d in result.divergent],
        "merge_bug_suspected": result.merge_bug_suspected,
    }


REPORT_DOMAIN = b"pithledger-audit-report-v1\x00"


def _report_message(report: dict[str, Any]) -> bytes:
    from pithledger.records.canonical import canonical_bytes

    return REPORT_DOMAIN + canonical_bytes({k: v for k, v in report.items() if k != "signature_b64"})


def sign_report(report: dict[str, Any], key: Any, created_at: str) -> dict[str, Any]:
    """Make the report self-contained evidence: the signer's public key and an Ed25519 signature."""
    from pithledger.records.keys import b64encode, fingerprint_hex

    pk = key.public_key
    signed = dict(report)
    signed["created_at"] = created_at
    signed["signer"] = {
        "key_id": key.name,
        "public_key_b64": b64encode(pk),
        "public_key_fingerprint": fingerprint_hex(pk),
        "signer_type": "self_signed",
    }
    signed["signature_b64"] = b64encode(key.sign(_report_message(signed)))
    return signed


def verify_report(report: dict[str, Any]) -> str:
    """Check a signed audit report; return who signed it, or raise VerificationFailed."""
    from pithledger.errors import PithledgerError, VerificationFailed
    from pithledger.records.keys import PUBLIC_KEY_LEN, SIGNATURE_LEN, b64decode_strict, fingerprint_hex, signature_ok

    signer = report.get("signer")
    if not isinstance(signer, dict) or "public_key_b64" not in signer or "signature_b64" not in report:
        raise VerificationFailed("the audit report carries no signer or signature")
    if not isinstance(signer["public_key_b64"], str) or not isinstance(report["signature_b64"], str):
        raise VerificationFailed("the audit report's signer.public_key_b64 and signature_b64 must be base64 strings")
    try:
        pk = b64decode_strict(signer["public_key_b64"], length=PUBLIC_KEY_LEN, what="signer.public_key_b64")
        sig = b64decode_strict(report["signature_b64"], length=SIGNATURE_LEN, what="signature_b64")
    except PithledgerError as exc:
        raise VerificationFailed(exc.message) from None
    if signer.get("public_key_fingerprint") != fingerprint_hex(pk):
        raise VerificationFailed("the report's public_key_fingerprint is not its key's")
    if not signature_ok(pk, _report_message(report), sig):
        raise VerificationFailed("the audit report's signature does not verify (altered after signing?)")
    return f"{signer.get('key_id')} (fingerprint {fingerprint_hex(pk)})"
