"""Hostile and broken published mirrors: every fault is a named SourceError, never a traceback or a hang.

Broken HTTP comes from raw socket servers on 127.0.0.1 in threads (every wait bounded: socket
timeouts, stop events, joins with timeouts); broken directories are real published trees, damaged.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/mirror/test_hostile_sources.py."""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.eventpool import pool
from helpers.hostile_sources import buckets, chain, get, pair_of
from helpers.ledgers import ledger_with
from pithledger.audit import Pair, bucket_pair, compare, inner_pair
from pithledger.errors import MalformedSource, SourceError, SourceFileMissing, UnsafePath
from pithledger.mirror.publish import (
    DIGEST_FILE,
    Published,
    _node_file,
    publish,
    record_dir,
)
from pithledger.store import Ledger


def test_urls_with_credentials_or_bad_ports_are_refused() -> None:
    for url in (
        "http://user:pw@127.0.0.1/",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1/x#frag",
        "http://127.0.0.1/\u00e9",
    ):
        with pytest.raises(SourceError):
            get(url)


def pair_json(p: Pair) -> dict[str, str]:
    return {"events": p.events.hex(), "states": p.states.hex()}


def rewrite_bucket(pub: Path, prefix: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Mutate a bucket's records, then recompute every digest up to digest.json: the only fault is the mutation."""
    nodes = chain(pub, prefix)
    _, path, value = nodes[-1]
    mutate(value["records"])
    new = bucket_pair(
        {n: Pair(bytes.fromhex(r["event_root"]), bytes.fromhex(r["state_sha256"])) for n, r in value["records"].items()}
    )
    value["digest"] = pair_json(new)
    (pub / _node_file(prefix, new)).write_text(json.dumps(value))
    for p, _, parent in reversed(nodes[:-1]):
        parent["children"][prefix[len(p)]] = pair_json(new)
        new = inner_pair(p, {c: pair_of(v) for c, v in parent["children"].items()})
        parent["digest"] = pair_json(new)
        (pub / _node_file(p, new)).write_text(json.dumps(parent))
    digest = json.loads((pub / DIGEST_FILE).read_text())
    digest["root"] = pair_json(new)
    (pub / DIGEST_FILE).write_text(json.dumps(digest))


def full_walk(source: Published, ledger: Ledger) -> tuple[Any, ...]:
    """Everything a reader can be asked: both comparisons, then every node, record and bundle. Returns
    what it read: the comparisons' verdicts and roots, and every record's events and bundle bytes."""
    mine, theirs = compare(ledger, source), compare(source, ledger)
    read: dict[str, tuple[list[str], bytes]] = {}
    stack = [""]
    while stack:
        prefix = stack.pop()
        if len(prefix) < 3:
            stack += [prefix + c for c in source.children(prefix)]
            continue
        for number in source.bucket(prefix):
            read[number] = (source.record_events(number), source.bundle_bytes(number))
    verdicts = [
        (r.consistent, r.a_root, r.b_root, [(d.pith_number, d.kind) for d in r.divergent]) for r in (mine, theirs)
    ]
    return verdicts, sorted(read.items())


def test_rewrite_helper_keeps_a_valid_tree(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    rewrite_bucket(pub, buckets(pub)[0], lambda records: None)
    assert compare(ledger, Published(str(pub))).consistent


def run_bounded(fn: Callable[[], Any], seconds: float = 10) -> BaseException | None:
    """Run ``fn`` on a thread; fail the test if it does not finish in time. Returns what it raised."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (blocked)"
    return outcome[0]


def test_fifo_in_place_of_a_node_file_does_not_block(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    os.mkfifo(path)
    try:
        exc = run_bounded(lambda: full_walk(Published(str(pub)), ledger))
        assert isinstance(exc, UnsafePath) and "a FIFO, not a regular file" in exc.message
    finally:
        try:  # should a reader still be blocked on the FIFO, release it
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_fifo_in_place_of_a_bundle_does_not_block(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    number = next(iter(ledger.subjects()))
    bundle = pub / record_dir(number) / "bundle.json"
    bundle.unlink()
    os.mkfifo(bundle)
    exc = run_bounded(lambda: Published(str(pub)).bundle_bytes(number))
    assert isinstance(exc, UnsafePath)


def test_symlink_to_etc_passwd_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    path.symlink_to("/etc/passwd")
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        full_walk(Published(str(pub)), ledger)
    (pub / DIGEST_FILE).unlink()
    (pub / DIGEST_FILE).symlink_to("/etc/passwd")
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        Published(str(pub))


def test_a_symlinked_directory_leading_out_is_refused(published: tuple[Ledger, Path], tmp_path: Path) -> None:
    ledger, pub = published
    outside = tmp_path / "outside"
    (pub / "pithledger" / "nodes").rename(outside)
    (pub / "pithledger" / "nodes").symlink_to(outside)
    with pytest.raises(UnsafePath, match="leads outside the mirror"):
        full_walk(Published(str(pub)), ledger)


def test_a_symlink_inside_the_tree_is_followed(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.rename(pub / "moved.json")
    path.symlink_to(Path("..", "..", "moved.json"))
    assert compare(ledger, Published(str(pub))).consistent


def test_a_directory_in_place_of_a_node_file_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    _, path, _ = chain(pub, buckets(pub)[0])[-1]
    path.unlink()
    path.mkdir()
    with pytest.raises(UnsafePath, match="a directory, not a regular file"):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize(
    "name",
    [
        "../../../../etc/passwd",
        "/etc/passwd",
        "pith:2026:../../../../../../etc/pa",
        "pith:2026:AAAAAAAAAAAAA\0AAAAAAAAAAAA",
        "pith:2026:AAAAAAAAAAAAA\\AAAAAAAAAAAA",
        "pith:\u0662\u0660\u0662\u0666:AAAAAAAAAAAAAAAAAAAAAAAAAA",
        "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA\n",
        "pith:2026:aaaaaaaaaaaaaaaaaaaaaaaaaa",
        "pith:AAAAAAAA",
    ],
    ids=[
        "dotdot",
        "absolute",
        "dotdot-in-suffix",
        "nul",
        "backslash",
        "non-ascii-digits",
        "trailing-newline",
        "lowercase",
        "short",
    ],
)
def test_dotdot_record_name_in_a_bucket_is_refused(published: tuple[Ledger, Path], name: str) -> None:
    ledger, pub = published
    prefix = buckets(pub)[0]

    def rename(records: dict[str, Any]) -> None:
        records[name] = records.pop(next(iter(records)))

    rewrite_bucket(pub, prefix, rename)
    with pytest.raises(UnsafePath, match="is not a long Pith Number"):
        full_walk(Published(str(pub)), ledger)


def test_a_record_filed_under_the_wrong_bucket_is_refused(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    first, second = buckets(pub)[:2]
    other = next(iter(chain(pub, second)[-1][2]["records"]))
    rewrite_bucket(pub, first, lambda records: records.__setitem__(other, records.pop(next(iter(records)))))
    with pytest.raises(MalformedSource, match="belongs in bucket"):
        full_walk(Published(str(pub)), ledger)


def test_names_are_checked_before_they_build_a_path(published: tuple[Ledger, Path]) -> None:
    _, pub = published
    source = Published(str(pub))
    for bad in (
        "../../etc/passwd",
        "pith:2026:../../../../../../../../etc/pa",
        "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA/x",
    ):
        with pytest.raises(UnsafePath):
            source.bundle_bytes(bad)
        with pytest.raises(UnsafePath):
            source.record_events(bad)
    for prefix in ("../", "a", "AAAA", "/"):
        with pytest.raises(SourceError):
            source.children(prefix)
        with pytest.raises(SourceError):
            source.bucket(prefix)


def test_an_absent_node_file_is_a_broken_source(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    chain(pub, buckets(pub)[0])[-1][1].unlink()
    with pytest.raises(SourceFileMissing, match="is listed by its parent, but its file"):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize(
    "event_ids",
    [
        "sha256:" + "ab" * 32,
        7,
        [7],
        [{"id": 1}],
        ["sha256:" + "zz" * 32],
        ["sha256:" + "ab" * 31],
        ["sha256:" + "AB" * 32],
        ["ab" * 32],
        ["sha256:" + "ab" * 32] * 2,
        None,
        {"a": 1},
        ["sha256: " + "ab" * 31 + "a"],
    ],
    ids=[
        "string",
        "int",
        "ints",
        "objects",
        "non-hex",
        "short",
        "uppercase",
        "no-prefix",
        "duplicates",
        "null",
        "object",
        "space",
    ],
)
def test_malformed_event_ids_are_named(published: tuple[Ledger, Path], event_ids: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, buckets(pub)[0])[-1]
    value["records"][next(iter(value["records"]))]["event_ids"] = event_ids
    path.write_text(json.dumps(value))
    with pytest.raises(MalformedSource, match="event_ids of"):
        full_walk(Published(str(pub)), ledger)


def test_a_duplicated_event_id_is_refused_even_when_the_digests_agree(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published

    def duplicate(records: dict[str, Any]) -> None:
        rec = records[next(iter(records))]
        rec["event_ids"] = rec["event_ids"] + rec["event_ids"][:1]  # the event root over a set is unchanged

    rewrite_bucket(pub, buckets(pub)[0], duplicate)
    with pytest.raises(MalformedSource, match="names an event twice"):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize(
    "records",
    [[], "x", 1, None, {"pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA": []}],
    ids=["list", "string", "int", "null", "record-not-object"],
)
def test_malformed_records_are_named(published: tuple[Ledger, Path], records: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, buckets(pub)[0])[-1]
    value["records"] = records
    path.write_text(json.dumps(value))
    with pytest.raises(SourceError):
        full_walk(Published(str(pub)), ledger)


@pytest.mark.parametrize(
    "child",
    [
        [],
        "x",
        1,
        None,
        {"events": 1, "states": 2},
        {"events": "ab" * 31, "states": "ab" * 32},
        {"events": "AB" * 32, "states": "ab" * 32},
        {"events": " " + "ab" * 31 + "a", "states": "ab" * 32},
    ],
    ids=["list", "string", "int", "null", "ints", "short", "uppercase", "space"],
)
def test_malformed_children_are_named(published: tuple[Ledger, Path], child: Any) -> None:
    ledger, pub = published
    _, path, value = chain(pub, "")[-1]
    value["children"][next(iter(value["children"]))] = child
    path.write_text(json.dumps(value))
    with pytest.raises(MalformedSource):
        full_walk(Published(str(pub)), ledger)


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


MUTATIONS: list[Any] = [None, True, 0, -1, 2**53, "", "x", "ab" * 32, "../../etc/passwd", [], [1], {}, {"a": "b"}]


@pytest.mark.slow  # every leaf of every file, ~8 s
def test_every_leaf_of_every_node_file_mutated_gives_only_named_errors(published: tuple[Ledger, Path]) -> None:
    """Each value (and each key) of digest.json and every node file, replaced by other JSON types: the
    reader refuses the source with a named SourceError, or it reads exactly what was published (the same
    verdicts against the ledger, consistent, and every record's events and bundle byte for byte): a
    damaged node never passes for another tree. Nothing else escapes."""
    ledger, pub = published
    files = [pub / DIGEST_FILE, *sorted((pub / "pithledger" / "nodes").glob("*.json"))]
    assert len(files) > 2
    baseline = full_walk(Published(str(pub)), ledger)
    assert all(consistent for consistent, *_ in baseline[0]) and baseline[1]
    tried = refused = 0
    for path in files:
        original = path.read_text()
        doc = json.loads(original)
        try:
            for where in leaves(doc):
                variants: list[Any] = [replaced(doc, where, m) for m in MUTATIONS]
                if where and isinstance(where[-1], str):  # a key renamed
                    parent = replaced(doc, (), doc)
                    target = parent
                    for step in where[:-1]:
                        target = target[step]
                    renamed = copy.deepcopy(parent)
                    t2 = renamed
                    for step in where[:-1]:
                        t2 = t2[step]
                    t2["../" + where[-1]] = t2.pop(where[-1])
                    variants.append(renamed)
                for variant in variants:
                    path.write_text(json.dumps(variant))
                    tried += 1
                    try:
                        got = full_walk(Published(str(pub)), ledger)
                    except SourceError:
                        refused += 1
                        continue
                    except Exception as exc:  # noqa: BLE001
                        pytest.fail(f"{type(exc).__name__}: {exc} escaped; {path.name} at {where} = {variant!r:.200}")
                    assert got == baseline, f"{path.name} at {where} = {variant!r:.200} was read as another tree"
        finally:
            path.write_text(original)
    # every leaf of every file had its variants; a node's hashed content cannot change unnoticed
    assert refused > tried // 2, (refused, tried)


def test_a_bucket_the_source_lacks_is_missing_records_not_an_error(tmp_path: Path) -> None:
    events = pool()
    extra = "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"  # its bucket (and top-level node "A") holds no other record
    with ledger_with(tmp_path / "a", [e for e in events if e["subject_pith_number"] != extra]) as a:
        assert extra not in set(a.subjects()) and not any(s.rsplit(":", 1)[-1].startswith("A") for s in a.subjects())
        publish(a, tmp_path / "pub")
    source = Published(str(tmp_path / "pub"))
    assert source.children("A") == {} and source.children("AA") == {} and source.bucket("AAA") == {}
    assert source.record_events(extra) == []
    with ledger_with(tmp_path / "b", events) as b:
        mine = compare(b, source)
        theirs = compare(source, b)
        lacked = sorted(b.record_events(extra))
    assert [(d.pith_number, d.kind, d.a_lacks, d.b_lacks) for d in mine.divergent if d.pith_number == extra] == [
        (extra, "missing-on-b", [], lacked)
    ]
    assert [(d.pith_number, d.kind, d.a_lacks, d.b_lacks) for d in theirs.divergent if d.pith_number == extra] == [
        (extra, "missing-on-a", lacked, [])
    ]


def test_node_cache_is_bounded_and_evicted_nodes_are_verified_again(published: tuple[Ledger, Path]) -> None:
    ledger, pub = published
    with Ledger(pub.parent / "empty", create=True) as empty:
        unbounded = Published(str(pub))
        expected = compare(empty, unbounded)
        tiny = Published(str(pub), cache_bytes=1)
        assert compare(empty, tiny) == expected
        assert len(tiny._cache) == 1
        assert len(unbounded._cache) > 1 and unbounded._cache.used <= 64 * 1024 * 1024
        full_walk(tiny, ledger)
