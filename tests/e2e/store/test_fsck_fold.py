"""fsck checks each record's stored fold entry (spec/storage.md §6): the next apply derives a record of 256
events or more from its entry and only what came since (§3.3), so an entry that decodes but says something
else than the log would give a state no other mirror holding the same events derives. Vectors are named
after the mutation they carry; each corrupts one entry of a real ledger (really signed records of 700 events,
segmented states) and runs the real ``pithledger``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from helpers.eventpool import ALICE, BOB, EVE, IDS, RECS, P, bundles_of, t
from helpers.fsck_fold import (
    BIG,
    SMALL,
    B,
    O,
    _dbs,
    _enc,
    _entries,
    _events,
    _fold_of,
    _put,
    _with_fold,
)
from pithledger.records.bundle import write_bundle
from pithledger.records.events import make_event
from pithledger.store import Ledger, views

REMEDY = "`pithledger rebuild --force` rebuilds it"


Mutation = Callable[[dict[bytes, views._FoldEntry], dict[bytes, bytes]], tuple[str, bytes]]

#: mutation -> (the record whose entry it replaces, the bad entry bytes), given a sound ledger's entries (decoded, raw)
MUTATIONS: dict[str, Mutation] = {
    "fold-wrong-last-seq": lambda es, raw: (BIG, _enc(msgspec.structs.replace(es[B], last_seq=es[B].last_seq - 1))),
    "fold-of-another-record": lambda es, raw: (BIG, raw[O]),
    "fold-truncated": lambda es, raw: (BIG, raw[B][:-7]),
    "fold-wrong-inbound": lambda es, raw: (
        BIG,
        _enc(msgspec.structs.replace(es[B], inbound=b"")),
    ),  # SMALL's citation stands
    "fold-stale-segments": lambda es, raw: (
        BIG,
        _enc(msgspec.structs.replace(es[B], segments=[es[B].segments[1], es[B].segments[0], *es[B].segments[2:]])),
    ),
    "fold-for-a-small-record": lambda es, raw: (SMALL, raw[B]),
    "fold-wrong-ids": lambda es, raw: (
        BIG,
        _with_fold(es[B], ids=_fold_of(es[B])["ids"][1:]),
    ),  # as if one event were not held
}


def test_the_sound_ledger_keeps_segmented_entries_for_its_big_records_only(sound: Path, cli: Any) -> None:
    entries = _entries(sound)
    assert sorted(entries) == sorted([B, O]) and all(len(e.segments) >= 2 for e in entries.values())
    assert entries[B].inbound  # SMALL's citation
    r = cli("--ledger", str(sound), "fsck", "--json")
    assert r.code == 0 and r.json()["problems"] == [], r.out + r.err


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_fsck_names_the_record_of_a_bad_fold_entry_and_rebuild_force_repairs_it(
    tmp_path: Path, sound: Path, full_after_later: dict[str, dict[bytes, bytes]], cli: Any, mutation: str
) -> None:
    path = tmp_path / "l"
    shutil.copytree(sound, path)
    before = _dbs(path)
    key, bad = MUTATIONS[mutation](_entries(path), before["fold"])
    assert bad != before["fold"].get(key.encode())
    _put(path, key, bad)
    r = cli("--ledger", str(path), "fsck", "--json")
    problems = r.json()["problems"]
    assert r.code == 1 and "Traceback" not in r.err
    assert (
        len(problems) == 1 and problems[0].startswith(f"the fold entry of {key} ") and problems[0].endswith(REMEDY)
    ), problems
    r = cli("--ledger", str(path), "rebuild", "--force")
    assert r.code == 0, r.out + r.err
    r = cli("--ledger", str(path), "fsck", "--json")
    assert r.code == 0 and r.json()["problems"] == [], r.out + r.err
    assert _dbs(path) == before  # rebuilt identically: the states, leaves and fold entries of the sound ledger
    with Ledger(path) as ledger:  # the next apply folds onto the rebuilt entries
        ledger.apply_batch(bundles_of(_events()[2]))
    assert _dbs(path) == full_after_later


def test_the_cli_says_what_repairs_it(tmp_path: Path, sound: Path, cli: Any) -> None:
    path = tmp_path / "L"
    shutil.copytree(sound, path)
    key, bad = MUTATIONS["fold-wrong-last-seq"](_entries(path), _dbs(path)["fold"])
    _put(path, key, bad)
    r = cli("--ledger", str(path), "fsck")
    assert r.code == 1 and "Traceback" not in r.err
    assert f"MISMATCH the fold entry of {BIG} names log entry " in r.out + r.err and "rebuild --force" in r.out + r.err


HOT = P[0]


@lru_cache(maxsize=1)
def _withdrawn_citations() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(HOT's 196 events and 60 citations of it from records that never arrive (pending): 256, a fold entry;
    the revocations of those citations: 196, none; 60 citations by another signer: 256 again)."""
    own = [
        make_event(
            "record_created",
            HOT,
            {"canonical_record": RECS[0], "canonical_sha256": IDS[0].canonical_sha256},
            ALICE,
            created_at=t(1),
        )
    ]
    own += [
        make_event(
            "author_attestation",
            HOT,
            {"author_name": f"Author {n:04d}"},
            [ALICE, BOB, EVE][n % 3],
            created_at=f"2026-06-{2 + n % 27:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
        )
        for n in range(195)
    ]
    b32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    citing = [f"pith:2026:{b32[i // 32]}{b32[i % 32]}" + "Q" * 24 for i in range(60)]
    cites = [
        make_event("citation_signature", s, {"cited_pith_number": HOT, "relation": "supports"}, ALICE, created_at=t(3))
        for s in citing
    ]
    revoked = [
        make_event("revocation", c["subject_pith_number"], {"revoked_event_id": c["event_id"]}, ALICE, created_at=t(4))
        for c in cites
    ]
    again = [
        make_event("citation_signature", s, {"cited_pith_number": HOT, "relation": "extends"}, BOB, created_at=t(5))
        for s in citing
    ]
    return own + cites, revoked, again


def _jsonl(path: Path, events: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(write_bundle(b.pith_number, b.events)) + "\n" for b in bundles_of(events)))
    return str(path)


def test_a_record_whose_inbound_citations_are_withdrawn_keeps_no_entry_whatever_the_batches(
    tmp_path: Path, cli: Any
) -> None:
    """A record holds 256 events only while 60 citations from pending records stand; revoked in a later apply,
    it falls below the threshold: its entry goes (spec/storage.md §3.3), so fsck passes, and the ledger keeps
    the entries, states and digests the same events applied at once give; citations that come back bring it
    back."""
    first, second, third = _withdrawn_citations()
    batches, once, again = tmp_path / "batches", tmp_path / "once", tmp_path / "again"
    for ledger, parts in ((batches, [first, second]), (once, [first + second])):
        for n, part in enumerate(parts):
            r = cli("--ledger", str(ledger), "apply", _jsonl(tmp_path / f"{ledger.name}{n}.jsonl", part))
            assert r.code == 0, r.out + r.err
    for ledger in (batches, once):
        r = cli("--ledger", str(ledger), "fsck", "--json")
        assert r.code == 0 and r.json()["problems"] == [], r.out + r.err
    assert _dbs(batches) == _dbs(once) and _dbs(once)["fold"] == {}  # states, digest leaves and (no) fold entries
    assert cli("--ledger", str(batches), "state", HOT).out == cli("--ledger", str(once), "state", HOT).out
    assert cli("--ledger", str(batches), "digest").out == cli("--ledger", str(once), "digest").out
    # the citations come back: the entry too, as applying everything at once keeps it
    assert cli("--ledger", str(batches), "apply", _jsonl(tmp_path / "third.jsonl", third)).code == 0
    assert cli("--ledger", str(again), "apply", _jsonl(tmp_path / "all.jsonl", first + second + third)).code == 0
    for ledger in (batches, again):
        r = cli("--ledger", str(ledger), "fsck", "--json")
        assert r.code == 0 and r.json()["problems"] == [], r.out + r.err
    got, want = _dbs(batches), _dbs(again)
    assert (
        got["state"] == want["state"]
        and got["rec"] == want["rec"]
        and sorted(got["fold"]) == sorted(want["fold"]) == [HOT.encode()]
    )
    assert cli("--ledger", str(batches), "digest").out == cli("--ledger", str(again), "digest").out
