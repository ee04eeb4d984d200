"""Pith's record document (``pith_number_record``, what pith.science/pith/<suffix> returns for JSON) is
read wherever a bundle is: it is its record's Pith-receipted record_created event, checked, identified
and folded exactly as the same record in a Pith bundle; its paper block is display metadata
(spec/bundle.md §5, spec/serve.md §6). The document is the real one, verbatim (tests/vectors)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.common import LMDB_EXAMPLES, VECTORS
from helpers.pith_document import (
    BUNDLES,
    DOC,
    DOC_PATH,
    EVENT_ID,
    EXPECTED,
    MUTATIONS,
    NUMBER,
    RECORD,
    pith_bundle,
    pith_bundle_event,
)
from pithledger.errors import BundleError, EventTooLarge, PithledgerError
from pithledger.ingest import bundles as _bundles
from pithledger.ingest.inputs import Input
from pithledger.records import keys
from pithledger.records.bundle import checked_bundle, pith_record_event, read_bundle, write_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode, text_sha256
from pithledger.records.display import DisplayMetadata, check, combine, from_pith_json
from pithledger.records.events import make_event, verify_event
from pithledger.records.keys import LocalKey
from pithledger.records.mint import mint
from pithledger.records.model import record_ids
from pithledger.store import Ledger, prepare

# --- the event a document is --------------------------------------------------------------------------


def test_the_document_is_the_record_event_of_a_pith_bundle() -> None:
    bundle = read_bundle(DOC)
    assert bundle.pith_number == NUMBER and bundle.canonical_record == RECORD and bundle.extra == {}
    assert bundle.events == [pith_bundle_event()] == [pith_record_event(DOC)]  # created_at: signed_at cut to the second
    (verdict,) = map(verify_event, bundle.events)
    assert (verdict.status, verdict.trust, verdict.event_id) == ("valid", "registry", EVENT_ID)
    assert verdict == verify_event(read_bundle(pith_bundle()).events[0])


def test_what_the_receipt_does_not_authenticate_changes_nothing_and_what_it_does_is_checked() -> None:
    unsigned = copy.deepcopy(DOC)
    unsigned.update(created_at="1999-01-01T00:00:00+00:00", updated_at="x", attestation_state="forged", events=[])
    unsigned["verification_status"] = {k: True for k in DOC["verification_status"]}
    unsigned["graph_snapshot"] = {"claims": {"count": 99}}
    unsigned["inbound_citations"] = {"count": 10**6, "sample": []}
    unsigned["links"] = unsigned["agent_actions"] = {"html": "https://evil.example/"}
    unsigned["receipt"] = {**DOC["receipt"], "signed_at": "2020-02-02T02:02:02.5Z", "last_reissued_at": "never"}
    (event,) = read_bundle(unsigned).events  # nothing but the record and the receipt (verbatim) goes in
    want = pith_bundle_event(created_at="2020-02-02T02:02:02Z")
    want["payload"]["receipt"] = unsigned["receipt"]
    assert event == want
    assert verify_event(event).event_id == EVENT_ID
    forged = copy.deepcopy(DOC)
    forged["receipt"]["signature_b64"] = keys.b64encode(bytes(64))
    assert verify_event(read_bundle(forged).events[0]).reason == "bad-receipt"
    unreadable_time = {**DOC, "receipt": {**DOC["receipt"], "signed_at": "2026-02-30T12:00:00Z"}}
    assert read_bundle(unreadable_time).events[0]["created_at"] == RECORD["metadata"]["submitted_at"]
    assert verify_event(read_bundle(unreadable_time).events[0]).event_id == EVENT_ID
    no_receipt = read_bundle({**DOC, "receipt": None}).events
    assert no_receipt == read_bundle({k: v for k, v in DOC.items() if k != "receipt"}).events
    assert (
        "receipt" not in no_receipt[0]["payload"] and no_receipt[0]["created_at"] == RECORD["metadata"]["submitted_at"]
    )
    assert (verify_event(no_receipt[0]).status, verify_event(no_receipt[0]).reason) == ("unverified", "no-receipt")


SIGNED_AT_TIME = DOC["receipt"]["signed_at"][:19] + "Z"
SUBMITTED_AT = RECORD["metadata"]["submitted_at"]
_ABSENT = object()


@pytest.mark.parametrize(
    ("field", "value", "signer_key_id", "created_at", "verdict"),
    [
        ("key_id", 5, "pith-v1-2026-05", SIGNED_AT_TIME, ("invalid", "bad-payload")),
        ("key_id", None, "pith-v1-2026-05", SIGNED_AT_TIME, ("invalid", "bad-payload")),
        ("key_id", _ABSENT, "pith-v1-2026-05", SIGNED_AT_TIME, ("invalid", "bad-payload")),
        ("key_id", "no-such-key", "no-such-key", SIGNED_AT_TIME, ("invalid", "unknown-registry-key")),
        ("signed_at", "2026-07-05T12:01:21.123456789Z", "pith-v1-2026-05", "2026-07-05T12:01:21Z", ("valid", "")),
        ("signed_at", "2026-07-05T12:01:21Z", "pith-v1-2026-05", "2026-07-05T12:01:21Z", ("valid", "")),
        ("signed_at", "2026-07-05T12:01:21.1234567890Z", "pith-v1-2026-05", SUBMITTED_AT, ("valid", "")),
        ("signed_at", "2026-07-05T12:01:21.5z", "pith-v1-2026-05", SUBMITTED_AT, ("valid", "")),
        ("signed_at", "2026-07-05T12:01:21+00:00", "pith-v1-2026-05", SUBMITTED_AT, ("valid", "")),
        ("signed_at", "2026-06-30T23:59:60.5Z", "pith-v1-2026-05", SUBMITTED_AT, ("valid", "")),
        ("signed_at", 1783253281, "pith-v1-2026-05", SUBMITTED_AT, ("invalid", "bad-payload")),
        ("signed_at", _ABSENT, "pith-v1-2026-05", SUBMITTED_AT, ("invalid", "bad-payload")),
    ],
)
def test_a_documents_receipt_key_id_and_signed_at_fall_back_as_spec_bundle_5_writes(
    field: str, value: Any, signer_key_id: str, created_at: str, verdict: tuple[str, str]
) -> None:
    receipt = {k: v for k, v in DOC["receipt"].items() if k != field}
    if value is not _ABSENT:
        receipt[field] = value
    (event,) = read_bundle({**DOC, "receipt": receipt}).events
    assert (event["signer"]["key_id"], event["created_at"]) == (signer_key_id, created_at)
    got = verify_event(event)
    assert (got.status, got.reason) == verdict


def test_a_document_receipt_that_is_not_an_object_falls_back_on_both_and_is_unreadable() -> None:
    (event,) = read_bundle({**DOC, "receipt": "pith"}).events
    assert (event["signer"]["key_id"], event["created_at"]) == ("pith-v1-2026-05", SUBMITTED_AT)
    assert (verify_event(event).status, verify_event(event).reason) == ("unverified", "unreadable-receipt")


def test_a_document_without_canonical_sha256_carries_the_records_digest() -> None:
    (event,) = read_bundle({k: v for k, v in DOC.items() if k != "canonical_sha256"}).events
    assert event["payload"]["canonical_sha256"] == record_ids(RECORD).canonical_sha256
    assert verify_event(event).event_id == EVENT_ID


def test_both_readings_of_apply_give_equal_bundles(tmp_path: Path) -> None:
    """Pass 1 (strict decode, read_bundle) and pass 2 (plain decode, checked_bundle, prepared for the
    writer) agree on documents, as one pretty-printed file, and as lines of a .jsonl beside a bundle."""
    data = DOC_PATH.read_bytes()
    strict, plain = read_bundle(strict_decode(data)), checked_bundle(msgspec.json.decode(data), len(data))
    plain.size = strict.size
    assert strict == plain
    (tmp_path / "doc.json").write_text(json.dumps(DOC, indent=2))
    lines = [canonical_bytes(DOC), canonical_bytes(pith_bundle()), canonical_bytes({**DOC, "receipt": None})]
    (tmp_path / "mix.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    files = [Input(str(tmp_path / n), n) for n in ("doc.json", "mix.jsonl")]
    plan = _bundles.Plan()
    checked = list(_bundles.check_bundles(files, plan))
    assert [c.events for _, c in checked] == [1, 1, 1, 1]  # type: ignore[union-attr]
    again = list(_bundles.reread_bundles(files, plan))
    assert [w for w, _ in again] == [w for w, _ in checked] == ["doc.json", "mix.jsonl:1", "mix.jsonl:2", "mix.jsonl:3"]
    for (where, bundle), line in zip(again, [json.dumps(DOC, indent=2).encode(), *lines], strict=True):
        expect = prepare(read_bundle(strict_decode(line)))
        assert bundle is not None and bundle.size == len(line), where
        bundle.size = expect.size
        assert bundle == expect, where
    assert again[0][1].display is not None and again[2][1].display is None  # type: ignore[union-attr]


# --- hostile documents --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda d: d.update(schema_version=None), "bad-bundle", "schema_version is null, not '1.0'"),
        (
            lambda d: d.update(record_type=7),
            "bad-bundle",
            "record_type is a number (7), not the string 'pith_number_record'",
        ),
        (lambda d: d.pop("canonical_record"), "bad-bundle", "must carry its canonical_record"),
        (lambda d: d.update(pith_number="pith:FHIBFT2F"), "bad-bundle", "is not a long Pith Number"),
        (
            lambda d: d.update(source={"kind": "arxiv", "id": "2502.21231", "version": 2}),
            "bundle-inconsistent",
            "source is",
        ),
        (lambda d: d.update(aliases="2502.21231"), "bundle-inconsistent", "aliases must be a list"),
        (lambda d: d["aliases"].pop(), "bundle-inconsistent", "aliases do not match"),
        (lambda d: d.update(events={}), "bad-bundle", "events must be a list"),
        (
            lambda d: d.update(events=[{"event_type": "graph_snapshot"}]),
            "bad-bundle",
            "events[0]: subject_pith_number 'None'",
        ),
        (lambda d: d.update(paper="ByteScale"), "bad-bundle", "paper: paper must be an object"),
        (lambda d: d["paper"].update(title="x" * 2001), "bad-bundle", "paper: field 'title' is longer than 2,000"),
        (lambda d: d["receipt"].update(padding="x" * (1 << 20)), "event-too-large", "is larger than 1,048,576 bytes"),
    ],
)
def test_a_malformed_document_is_refused_whole_with_its_reason(change: Any, error: str, message: str) -> None:
    doc = copy.deepcopy(DOC)
    change(doc)
    with pytest.raises(BundleError) as exc:
        read_bundle(doc)
    assert exc.value.code == error and message in exc.value.message, exc.value.message
    assert len(exc.value.message) < 300  # a hostile value is named, not echoed


def test_a_huge_receipt_is_refused_as_the_same_event_in_a_bundle_would_be() -> None:
    doc = {**DOC, "receipt": {**DOC["receipt"], "padding": "x" * (1 << 20)}}
    with pytest.raises(EventTooLarge):
        read_bundle(doc)
    with pytest.raises(EventTooLarge):
        read_bundle(pith_bundle(pith_record_event(doc)))


def test_the_document_events_are_read_as_a_bundle_events_and_folded_by_the_same_rules() -> None:
    unsigned = {
        "event_type": "graph_snapshot",
        "subject_pith_number": NUMBER,
        "target": "graph",
        "created_at": "2026-07-05T12:01:21Z",
        "signer": pith_bundle_event()["signer"],
        "payload": {"graph_snapshot": DOC["graph_snapshot"]},
    }
    bundle = read_bundle({**DOC, "events": [unsigned]})
    assert bundle.events == [pith_bundle_event(), unsigned]
    assert verify_event(unsigned).reason == "unverifiable-signature"  # Pith's say-so: never folded


# --- the command line ---------------------------------------------------------------------------------


def test_every_record_document_fixture_is_exercised_here() -> None:
    assert sorted(MUTATIONS) == sorted(n[:-5] for n in EXPECTED if n.startswith("record-document-"))


# --- display metadata ---------------------------------------------------------------------------------


def test_an_excerpt_never_replaces_an_abstract_that_matches() -> None:
    full = "Scaling long-context ability is essential. " * 20
    record = mint(
        {
            "id": "2502.21231",
            "title": "T",
            "abstract": full,
            "categories": "cs.DC",
            "license": None,
            "versions": [{"version": "v1", "created": "Fri, 28 Feb 2025 17:01:03 GMT"}],
        }
    )
    snapshot = DisplayMetadata(title="T", abstract=full, source="arxiv-snapshot")
    excerpt = DisplayMetadata(
        title="T", authors="B. Cui", abstract=full[:100], source="pith-record-document", abstract_excerpt=True
    )
    assert {f.name: f.check for f in check(excerpt, record)} == {
        "title": "match",
        "authors": "unchecked",
        "abstract": "excerpt",
    }
    kept = combine(snapshot, excerpt, record)
    assert (kept.abstract, kept.abstract_excerpt, kept.authors) == (full, False, "B. Cui")
    assert combine(None, excerpt, record) == excerpt
    wrong = DisplayMetadata(title="Forged", abstract="Forged", source="arxiv-snapshot")
    assert combine(wrong, excerpt, record) == excerpt  # a mismatch is replaced
    forged_full = DisplayMetadata(abstract="Forged", source="pith-record-document")  # not an excerpt: a mismatch
    assert {f.name: f.check for f in check(forged_full, record)}["abstract"] == "mismatch"
    assert text_sha256(full) == record["metadata"]["abstract_canon_sha256"]


def test_the_demo_titles_match_their_records() -> None:
    lines = (BUNDLES / "display" / "titles.jsonl").read_text().splitlines()
    records = {
        record_ids(json.loads(x)).pith_number
        for x in (BUNDLES / "source-data" / "pith-records.jsonl").read_text().splitlines()
    }
    assert len(lines) == 21
    for line in lines:
        key, meta = from_pith_json(json.loads(line))
        record = json.loads(line)["canonical_record"]
        assert record_ids(record).pith_number in records
        assert {f.name: f.check for f in check(meta, record)}["title"] == "match", key


# --- the property -------------------------------------------------------------------------------------

ALICE = LocalKey(name="alice", seed=bytes(range(32)))
ATTESTATION = make_event(
    "author_attestation", NUMBER, {"author_name": "Bin Cui"}, ALICE, created_at="2026-07-06T00:00:00Z"
)
# forms one record's valid events travel in: the document, with or without an event of its own, and Pith
# bundles whose record_created events differ only in what the receipt does not authenticate
FORMS: dict[str, dict[str, Any]] = {
    "doc": DOC,
    "doc+attestation": {**DOC, "events": [ATTESTATION]},
    "bundle": pith_bundle(),
    "bundle-other-time": pith_bundle(pith_bundle_event(created_at="2031-01-01T00:00:00Z", signer_id="someone")),
    "bundle+attestation": pith_bundle(pith_bundle_event(), ATTESTATION),
    "attestation": write_bundle(NUMBER, [ATTESTATION]),
}
AS_BUNDLE = {"doc": "bundle", "doc+attestation": "bundle+attestation"}


def _apply(path: Path, batches: list[list[str]]) -> tuple[bytes, Any]:
    with Ledger(path, create=True) as ledger:
        for batch in batches:
            ledger.apply_batch([read_bundle(copy.deepcopy(FORMS[f])) for f in batch])
        return ledger.state_bytes(NUMBER), ledger.root()


@settings(max_examples=LMDB_EXAMPLES)
@given(
    st.lists(st.sampled_from(sorted(FORMS)), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
    st.integers(1, 4),
)
def test_a_document_and_its_bundle_in_any_order_and_mix_give_the_same_state_and_digest(
    tmp_path_factory: pytest.TempPathFactory, forms: list[str], rnd: Any, parts: int
) -> None:
    order = list(forms)
    rnd.shuffle(order)
    step = max(1, len(order) // parts)
    got = _apply(tmp_path_factory.mktemp("mix"), [order[i : i + step] for i in range(0, len(order), step)])
    # every document replaced by the Pith bundle of the same events, all at once, in the drawn order
    want = _apply(tmp_path_factory.mktemp("bundles"), [[AS_BUNDLE.get(f, f) for f in forms]])
    assert got == want


def test_a_document_that_is_not_one_is_named() -> None:
    for value, message in (
        ({"record_type": "pith_number_record"}, "the record document has no schema_version \\(expected '1.0'\\)"),
        ({"hello": "world"}, "the document has no bundle_type \\(expected 'pith_open_graph_bundle'\\)$"),
        ({"record_type": "pith_number_record", "bundle_type": "x"}, "bundle_type is 'x'"),
    ):
        with pytest.raises(PithledgerError, match=message):
            read_bundle(value)


def test_a_receipt_nested_to_the_document_limit_is_refused_not_logged_deeper_than_strict_reading_allows(
    tmp_path: Path,
) -> None:
    """Found by the adversarial review: the receipt lies one level deeper in the derived event than in the
    document, so a document at the nesting limit gave a valid event that strict decoding refuses."""
    from pithledger.errors import BundleError
    from pithledger.records.bundle import read_bundle
    from pithledger.records.canonical import strict_decode

    doc = json.loads((VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json").read_text())
    junk: list = []  # type: ignore[type-arg]
    for _ in range(61):
        junk = [junk]
    doc["receipt"]["junk"] = junk
    data = json.dumps(doc).encode()
    value = strict_decode(data)  # the document itself is within the limit
    with pytest.raises(BundleError, match="nests deeper than 64"):
        read_bundle(value)
