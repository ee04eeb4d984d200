"""merge.with_inbound refuses (None: derive in full) every stored state it cannot prove is reduce's for this record
(spec/storage.md §3.5): one case per mutation of a real state, named after it, so a failure reads like a sentence.
The differential properties (tests/unit/store/test_inbound_update.py) show the update equals the full derivation on
sound ledgers; these show a damaged or foreign stored state is never updated."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from helpers.eventpool import entries, pool
from pithledger.merge import Entry, _joined, _raw_object, reduce_all, with_inbound
from pithledger.records.canonical import canonical_bytes


def _cited() -> tuple[str, dict[str, Any], list[Entry]]:
    """A present record of the pool with inbound citations, its state, and every entry of the pool."""
    every = entries(pool())
    states = reduce_all(every)
    for subject, state in sorted(states.items()):
        if state["record_status"] == "present" and state["current"]["inbound_citations"]:
            return subject, state, every
    raise AssertionError("the pool has no cited present record")


SUBJECT, STATE, ENTRIES = _cited()
STANDING = {v["event_id"] for v in STATE["current"]["inbound_citations"]}


def _sealed(pieces: dict[str, Any]) -> bytes:
    """A state's top-level pieces (bytes) joined with a state_sha256 that is their own: only the mutation differs."""
    body = {k: v for k, v in pieces.items() if k != "state_sha256"}
    return _joined(body | {"state_sha256": canonical_bytes(hashlib.sha256(_joined(body)).hexdigest())})


def _pieces(state: dict[str, Any]) -> dict[str, Any]:
    return {k: bytes(v) for k, v in _raw_object.decode(canonical_bytes(state)).items()}


def _with_current(change: Callable[[dict[str, Any]], None]) -> bytes:
    state = {**STATE, "current": dict(STATE["current"])}
    change(state["current"])
    return _sealed(_pieces(state))


def _spaced(data: bytes, after: bytes) -> bytes:
    at = data.index(after) + len(after)
    return data[:at] + b" " + data[at:]


MUTATIONS: dict[str, Callable[[], tuple[str, bytes, set[str]]]] = {
    "other-record": lambda: ("pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA", canonical_bytes(STATE), STANDING),
    "other-merge-version": lambda: (
        SUBJECT,
        _sealed(_pieces({**STATE, "merge_version": "pithledger-merge-v2"})),
        STANDING,
    ),
    "unknown-top-level-key": lambda: (SUBJECT, _sealed(_pieces({**STATE, "extra": 1})), STANDING),
    "stale-state-sha256": lambda: (
        SUBJECT,
        canonical_bytes({**STATE, "state_sha256": hashlib.sha256(b"another state").hexdigest()}),
        STANDING,
    ),
    "state-sha256-not-a-string": lambda: (SUBJECT, canonical_bytes({**STATE, "state_sha256": 7}), STANDING),
    "space-in-the-top-level": lambda: (SUBJECT, _spaced(canonical_bytes(STATE), b'"event_count":'), STANDING),
    "unknown-record-status": lambda: (SUBJECT, _sealed(_pieces({**STATE, "record_status": "archived"})), STANDING),
    "no-inbound-list": lambda: (SUBJECT, _with_current(lambda c: c.pop("inbound_citations")), STANDING),
    "space-in-current": lambda: (
        SUBJECT,
        _sealed(_pieces(STATE) | {"current": _spaced(_pieces(STATE)["current"], b'"badges":')}),
        STANDING,
    ),
    "space-in-the-inbound-list": lambda: (
        SUBJECT,
        _with_current(lambda c: None).replace(b'"inbound_citations":[', b'"inbound_citations":[ ', 1),
        STANDING,
    ),
    "inbound-view-without-event-id": lambda: (
        SUBJECT,
        _with_current(
            lambda c: c.update(inbound_citations=[{"created_at": "2026-01-01T00:00:00Z"}] + c["inbound_citations"])
        ),
        STANDING,
    ),
    "not-json": lambda: (SUBJECT, b'{"current":', STANDING),
    "a-standing-citation-nowhere": lambda: (SUBJECT, canonical_bytes(STATE), STANDING | {"sha256:" + "0" * 64}),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_stored_state_it_cannot_vouch_for_is_derived_in_full(mutation: str) -> None:
    subject, data, standing = MUTATIONS[mutation]()
    assert with_inbound(subject, data, standing, lambda ids: []) is None


def test_the_unmutated_state_is_kept_as_it_is() -> None:
    # the control: every mutation above differs from this by the one change its name says
    data = canonical_bytes(STATE)
    assert with_inbound(SUBJECT, data, STANDING, lambda ids: []) == (data, STATE["state_sha256"], STATE["state_sha256"])


def test_the_sealed_control_is_the_canonical_state() -> None:
    assert _sealed(_pieces(STATE)) == canonical_bytes(STATE)


def test_a_pending_record_is_unchanged_by_citations() -> None:
    states = reduce_all(ENTRIES)
    subject, pending = next((s, st) for s, st in sorted(states.items()) if st["record_status"] == "pending")
    data = canonical_bytes(pending)
    got = with_inbound(subject, data, {"sha256:" + "1" * 64}, lambda ids: [])
    assert got == (data, pending["state_sha256"], pending["state_sha256"])


def test_a_withdrawn_citation_leaves_the_list_and_the_hash_follows() -> None:
    gone = sorted(STANDING)[0]
    got = with_inbound(SUBJECT, canonical_bytes(STATE), STANDING - {gone}, lambda ids: [])
    assert got is not None
    data, sha, old = got
    views = [v for v in STATE["current"]["inbound_citations"] if v["event_id"] != gone]
    expected = {**STATE, "current": {**STATE["current"], "inbound_citations": views}}
    expected.pop("state_sha256")
    assert old == STATE["state_sha256"]
    assert sha == hashlib.sha256(canonical_bytes(expected)).hexdigest()
    assert data == canonical_bytes(expected | {"state_sha256": sha})
