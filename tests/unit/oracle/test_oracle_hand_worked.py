"""Expected states of the rule vectors worked out by hand from spec/merge.md, not copied from a state: each fact
is asserted on the oracle's state AND on the vector's expected state (which pithledger's code wrote), so a rule
both get wrong the same way still fails here."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from oracle.reduce import reduce_all
from oracle.verify import Verifier

VECTORS = Path(__file__).resolve().parents[3] / "spec" / "vectors" / "merge"
RECORD = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"  # the vectors' record (alice's record_created)
CITED = "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"  # the record it cites


def states(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(the vector's events, [oracle state, expected state] per subject asked) — both decoded."""
    vector = json.loads((VECTORS / f"{name}.json").read_text())
    verifier = Verifier(vector.get("registry_keys"), vector.get("bitcoin_chain", "mainnet"))
    ours = reduce_all([(e, verifier(e)) for e in vector["events"]])
    oracle = {s: json.loads(b) for s, b in ours.items()}
    expected = {s: json.loads(t) for s, t in vector["expected"]["states"].items()}
    assert set(oracle) == set(expected)
    return vector["events"], [oracle], [expected]


def both(name: str, subject: str = RECORD) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events, (oracle,), (expected,) = states(name)
    return events, [oracle[subject], expected[subject]]


def ids(events: list[dict[str, Any]], *indexes: int) -> list[str]:
    return sorted(events[i]["event_id"] for i in indexes)


def signer_key(event: dict[str, Any]) -> str:
    return "ed25519:" + base64.b64decode(event["signer"]["public_key_b64"]).hex()


def test_revocation_by_the_signer_revokes_the_citation_and_the_cited_record_loses_it() -> None:
    # 2: bob cites CITED; 3: bob revokes 2. Same signer, same subject: effective (§2).
    events, docs = both("revocation-by-the-signer-takes-effect")
    for doc in docs:
        assert doc["revoked_event_ids"] == ids(events, 2)
        assert doc["current"]["revocations"] == [
            {"event_id": events[3]["event_id"], "revoked_event_id": events[2]["event_id"]}
        ]
        assert doc["ineffective_revocations"] == []
        assert doc["current"]["citations"] == []
        assert doc["current"]["badges"]["references"] == "refs pending"
        assert doc["event_count"] == 3  # the revoked citation still counts (§7)
    for doc in both("revocation-by-the-signer-takes-effect", CITED)[1]:
        assert doc["current"]["inbound_citations"] == []


def test_revocation_by_another_signer_is_not_the_signer() -> None:
    # 1: bob attests an author (self-signed, with an ORCID: weak); 2: mallory revokes it.
    events, docs = both("revocation-by-another-signer-is-ineffective")
    for doc in docs:
        assert doc["revoked_event_ids"] == []
        assert doc["ineffective_revocations"] == [
            {"event_id": events[2]["event_id"], "reason": "not-the-signer", "revoked_event_id": events[1]["event_id"]}
        ]
        assert [v["event_id"] for v in doc["current"]["author_attestations"]] == ids(events, 1)
        assert doc["current"]["author_attestations"][0]["strength"] == "weak"
        assert doc["current"]["badges"]["author"] == "claimed"


def test_a_revocation_received_before_its_target_takes_effect() -> None:
    # 0: bob's revocation of 2, received first; 2: bob's citation. The rule reads the set, not the order.
    events, docs = both("revocation-arriving-before-its-target")
    for doc in docs:
        assert doc["revoked_event_ids"] == ids(events, 2)
        assert doc["ineffective_revocations"] == []
        assert doc["current"]["citations"] == []


def test_revoking_another_signers_revocation_is_final_and_the_first_still_applies() -> None:
    # 2: bob revokes his author attestation 1; 3: mallory revokes 2. §2's order: revocations-are-final first.
    events, docs = both("revocation-of-another-signers-revocation-is-final")
    for doc in docs:
        assert doc["revoked_event_ids"] == ids(events, 1)
        assert doc["ineffective_revocations"] == [
            {
                "event_id": events[3]["event_id"],
                "reason": "revocations-are-final",
                "revoked_event_id": events[2]["event_id"],
            }
        ]
        assert doc["current"]["author_attestations"] == []
        assert doc["current"]["badges"]["author"] == "not attested"


def test_two_snapshots_at_one_time_are_one_equivocation_and_the_lowest_id_is_shown() -> None:
    events, docs = both("equivocating-snapshots")
    mallory = signer_key(events[1])
    for doc in docs:
        assert doc["equivocation_count"] == 1
        assert doc["equivocations"] == [
            {
                "created_at": "2026-06-05T00:00:00Z",
                "event_ids": ids(events, 1, 2),
                "signer": mallory,
                "slot": "graph_snapshot",
            }
        ]
        assert [v["event_id"] for v in doc["current"]["graph_snapshots"]] == ids(events, 1, 2)[:1]


def test_citation_equivocations_come_before_snapshot_ones_and_the_lowest_id_citation_stands() -> None:
    # 2, 3: bob cites CITED twice at one time ("cites", "refutes"); 4, 5: mallory's two snapshots at one time.
    events, docs = both("citation-and-snapshot-equivocations-in-spec-order")
    kept = ids(events, 2, 3)[0]
    for doc in docs:
        assert [(q["slot"], q["event_ids"]) for q in doc["equivocations"]] == [
            ("citation", ids(events, 2, 3)),
            ("graph_snapshot", ids(events, 4, 5)),
        ]
        assert doc["equivocations"][0]["cited_pith_number"] == CITED
        assert doc["equivocations"][0]["signer"] == signer_key(events[2])
        assert [v["event_id"] for v in doc["current"]["citations"]] == [kept]
    for doc in both("citation-and-snapshot-equivocations-in-spec-order", CITED)[1]:
        inbound = doc["current"]["inbound_citations"]
        assert [(v["event_id"], v["citing_pith_number"]) for v in inbound] == [(kept, RECORD)]


def test_events_without_a_record_wait_pending_in_event_id_order() -> None:
    events, docs = both("pending-events-wait-for-their-record")
    for doc in docs:
        assert doc["record_status"] == "pending"
        assert doc["current"] == {}
        assert doc["pending_event_ids"] == ids(events, 0, 1)
        assert doc["equivocations"] == []


def test_a_pending_record_still_cites() -> None:
    # 0: CITED's record_created; 1: bob's citation of CITED on RECORD, which has no record_created: pending.
    events, (oracle,), (expected,) = states("inbound-citation-from-a-pending-record")
    for docs in (oracle, expected):
        assert docs[RECORD]["record_status"] == "pending"
        assert docs[RECORD]["pending_event_ids"] == ids(events, 1)
        assert docs[CITED]["record_status"] == "present"
        inbound = docs[CITED]["current"]["inbound_citations"]
        assert [(v["event_id"], v["citing_pith_number"], v["payload"]["relation"]) for v in inbound] == [
            (events[1]["event_id"], RECORD, "supports")
        ]


def test_an_equivocation_is_detected_on_a_pending_record() -> None:
    events, (oracle,), (expected,) = states("equivocation-on-a-pending-record")
    for docs in (oracle, expected):
        (doc,) = docs.values()
        assert doc["record_status"] == "pending"
        assert [q["event_ids"] for q in doc["equivocations"]] == [ids(events, 0, 1)]


def test_an_anchor_sharing_only_the_suffix_is_valid_and_shown_nowhere() -> None:
    """spec/merge.md §4: the full 32-byte digest decides; the Pith suffix holds only 130 bits of it."""
    import base64

    from oracle.ots import MAGIC

    from helpers.consensus import NUMBER, REC, created, signed
    from helpers.eventpool import ALICE

    digest = bytes.fromhex(REC["canonical_sha256"])
    other = digest[:-1] + bytes([digest[-1] ^ 1])
    bitcoin = b"\x00" + bytes.fromhex("0588960d73d71901") + b"\x03\xa0\xf7\x36"  # height 900000
    proof = base64.b64encode(MAGIC + b"\x01\x08" + other + bitcoin).decode()
    anchor = signed({"event_type": "timestamp_anchor", "payload": {"ots_proof_b64": proof}})
    record = created(ALICE)
    verifier = Verifier()
    assert verifier(anchor).status == "valid"
    doc = json.loads(reduce_all([(record, verifier(record)), (anchor, verifier(anchor))])[NUMBER])
    assert doc["event_count"] == 2
    assert doc["current"]["timestamp_anchors"] == []
    assert doc["current"]["badges"]["timestamp"] == "not anchored"
