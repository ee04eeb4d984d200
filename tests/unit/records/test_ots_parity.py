"""The strict OpenTimestamps reading against the reference library (python-opentimestamps 0.4.5):
the same accept/refuse verdict and the same attestations (with the message each attests) on the reference's
example proofs, every truncation of them, a seeded sample of single-byte mutations, and crafted proofs
for each rule the default reading does not check (spec/events.md §3.1.1). The default reading (merge v2's
event validity) is checked unchanged on the crafted proofs: consensus does not move in this change.
"""

from __future__ import annotations

import random
import warnings

import pytest
from opentimestamps.core import notary
from opentimestamps.core.serialize import BytesDeserializationContext
from opentimestamps.core.timestamp import DetachedTimestampFile

from helpers.common import FIXTURES
from pithledger.errors import OtsError
from pithledger.records import ots

OTS = FIXTURES / "ots"
EXAMPLES = sorted(OTS.rglob("*.ots"))
VALID = [p for p in EXAMPLES if p.parent.name != "invalid"]
Fact = tuple[str, str, object]


def reference(data: bytes) -> list[Fact] | None:
    """The reference's reading: None when it refuses (any exception), else its (msg, kind, value) facts."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # OpReverse's PendingDeprecationWarning
            stamp = DetachedTimestampFile.deserialize(BytesDeserializationContext(data))
    except Exception:  # noqa: BLE001 - a refusal, whatever its class
        return None
    facts: list[Fact] = []
    for msg, att in stamp.timestamp.all_attestations():
        if isinstance(att, notary.PendingAttestation):
            facts.append((msg.hex(), "pending", att.uri))
        elif isinstance(att, notary.BitcoinBlockHeaderAttestation):
            if att.height > ots.MAX_HEIGHT:  # the one written limit the reference lacks that a mutation can reach
                return None
            facts.append((msg.hex(), "bitcoin", att.height))
        elif isinstance(att, notary.LitecoinBlockHeaderAttestation):
            facts.append((msg.hex(), "litecoin", att.height))
        else:
            facts.append((msg.hex(), "unknown", None))
    return sorted(facts, key=repr)


def strict(data: bytes) -> list[Fact] | None:
    try:
        proof = ots.parse(data, strict=True)
    except OtsError:
        return None
    facts: list[Fact] = []
    for c in proof.commitments:
        a = c.attestation
        facts.append((c.msg.hex(), a.kind, a.calendar if a.kind == "pending" else a.height))
    assert [c.attestation for c in proof.commitments] == proof.attestations
    return sorted(facts, key=repr)


def same(data: bytes) -> None:
    assert strict(data) == reference(data), data.hex()


def test_the_examples_read_the_same_and_the_invalid_ones_are_refused_by_both() -> None:
    assert len(VALID) == 14 and len(EXAMPLES) == 17
    for path in EXAMPLES:
        data = path.read_bytes()
        same(data)
        assert (reference(data) is None) == (path.parent.name == "invalid"), path


def test_every_truncation_is_refused_by_both() -> None:
    n = 0
    for path in VALID:
        data = path.read_bytes()
        for cut in range(len(data)):
            assert strict(data[:cut]) is None and reference(data[:cut]) is None, (path, cut)
            n += 1
    assert n > 10_000


def test_a_seeded_sample_of_byte_mutations_gets_the_same_verdict_and_facts() -> None:
    rng = random.Random(34)
    proofs = [p.read_bytes() for p in VALID]
    refused = 0
    for _ in range(2000):
        data = bytearray(rng.choice(proofs))
        i = rng.randrange(len(data))
        data[i] = (data[i] + rng.randrange(1, 256)) % 256
        same(bytes(data))
        refused += reference(bytes(data)) is None
    assert 100 < refused < 1900  # the sample exercises both verdicts


def _proof(body: bytes, digest: bytes = bytes(32)) -> bytes:
    return ots.MAGIC + b"\x01\x08" + digest + body


def _bitcoin(height: int, extra: bytes = b"") -> bytes:
    payload = ots._varuint_bytes(height) + extra
    return b"\x00" + bytes.fromhex("0588960d73d71901") + ots._varbytes(payload)


def _pending(uri: bytes) -> bytes:
    return b"\x00" + bytes.fromhex("83dfe30d2ef90c8e") + ots._varbytes(ots._varbytes(uri))


CRAFTED_REFUSED = {
    "empty-append-argument": _proof(b"\xf0\x00" + _bitcoin(1)),
    "empty-prepend-argument": _proof(b"\xf1\x00" + _bitcoin(1)),
    "result-over-4096": _proof(b"\xf0" + ots._varbytes(b"x" * 4065) + _bitcoin(1)),
    "hexlify-input-over-2048": _proof(b"\xf0" + ots._varbytes(b"x" * 2017) + b"\xf3" + _bitcoin(1)),
    "trailing-bitcoin-attestation-byte": _proof(_bitcoin(100, b"\x00")),
    "trailing-pending-attestation-byte": _proof(
        b"\x00" + bytes.fromhex("83dfe30d2ef90c8e") + ots._varbytes(ots._varbytes(b"https://a.example") + b"!")
    ),
    "uri-query-string": _proof(_pending(b"https://a.example/?q=1")),
    "uri-space": _proof(_pending(b"https://a.example/a b")),
    "uri-control-character": _proof(_pending(b"https://a.example/\x07")),
    "trailing-ethereum-attestation-byte": _proof(
        b"\x00" + bytes.fromhex("30fe8087b5c7ead7") + ots._varbytes(b"\x05\x00")
    ),
}


@pytest.mark.parametrize("name", sorted(CRAFTED_REFUSED))
def test_what_the_reference_refuses_strict_refuses_and_merge_v2_still_accepts(name: str) -> None:
    data = CRAFTED_REFUSED[name]
    assert reference(data) is None
    with pytest.raises(OtsError):
        ots.parse(data, strict=True)
    ots.parse(data)  # the default reading: event validity under pithledger-merge-v2, unchanged


def test_exceeds_max_msg_length_is_refused_strictly_and_read_by_default() -> None:
    data = (OTS / "invalid" / "exceeds-max-msg-length.ots").read_bytes()
    with pytest.raises(OtsError, match="result of 4112 bytes"):
        ots.parse(data, strict=True)
    assert ots.parse(data).attestations  # merge v2 reads it (issue #34): the next merge version will not


def test_limits_at_their_edge_are_accepted_by_both() -> None:
    for data in (
        _proof(b"\xf0" + ots._varbytes(b"x" * 4064) + _bitcoin(1)),  # result exactly 4096
        _proof(b"\xf0" + ots._varbytes(b"x" * 2016) + b"\xf3" + _bitcoin(1)),  # hexlify of 2048
        _proof(_pending(b"")),  # an empty URI: no character outside the set
        _proof(b"\xf2\x67\x03\x02" + _bitcoin(7)),
    ):  # reverse, keccak256, ripemd160, sha1 computed
        assert reference(data) is not None
        same(data)


def test_a_repeated_operation_at_a_fork_keeps_the_later_branch_as_the_reference_does() -> None:
    # issue #31: ff f0 01 78 <bitcoin 100> f0 01 78 <bitcoin 200>
    data = _proof(b"\xff\xf0\x01x" + _bitcoin(100) + b"\xf0\x01x" + _bitcoin(200))
    same(data)
    assert [a.height for a in ots.parse(data, strict=True).attestations] == [200]
    assert [a.height for a in ots.parse(data).attestations] == [100, 200]  # merge v2's reading, unchanged
    # the dropped branch is still read and checked: a fault in it refuses the proof
    bad = _proof(b"\xff\xf0\x01x" + _bitcoin(100, b"\x00") + b"\xf0\x01x" + _bitcoin(200))
    assert reference(bad) is None and strict(bad) is None


def test_repeated_attestations_at_one_node_are_one() -> None:
    data = _proof(b"\xff" + _bitcoin(5) + _bitcoin(5))
    same(data)
    assert len(ots.parse(data, strict=True).attestations) == 1


def test_the_written_limits_that_stand_refuse_what_the_reference_reads() -> None:
    deep = _proof(b"\x08" * 256 + _bitcoin(1))  # 256 operations on one path: depth 257
    assert strict(deep) is None and reference(deep) is None
    assert strict(_proof(b"\x08" * 255 + _bitcoin(1))) is not None
    wide = _proof((b"\xff" + _bitcoin(1)) * 10_000 + _bitcoin(1))
    assert reference(wide) is not None and strict(wide) is None  # 10 001 nodes: our written limit stands
    high = _proof(_bitcoin(2**32))
    assert strict(high) is None  # a height over 2^32 - 1: our written limit stands (the reference reads it)


def test_a_uri_refusal_names_the_first_bad_character_by_position_not_the_smallest() -> None:
    # "?" (0x3f) comes first; " " (0x20) is the smaller byte, later in the URI
    with pytest.raises(OtsError, match=r"holds the character b'\?'"):
        ots.parse(_proof(_pending(b"https://a.example/?q=a b")), strict=True)
