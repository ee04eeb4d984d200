"""`pull` from Pith-shaped mirrors (spec/pull.md): a real loopback server exposing only Pith's paths,
real LMDB ledgers, the real records and demo events of bundles/.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/mirror/test_pull.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers.common import VECTORS
from helpers.pull import BUNDLES, same_as_truth
from pithledger.errors import BadManifest, MalformedId
from pithledger.mirror import resolveindex
from pithledger.mirror.publish import publish
from pithledger.mirror.pull import RateLimit, parse_manifest, pull, target_of_line, targets_of_args
from pithledger.records import ids
from pithledger.records.mint import mint
from pithledger.records.model import record_ids
from pithledger.store import Ledger


def test_a_published_directory_is_a_file_manifest_whose_patterns_stay_inside_it(
    tmp_path: Path, truth: dict[str, Any]
) -> None:
    with Ledger(truth["path"], readonly=True) as source:
        publish(source, tmp_path / "pub")  # no --base-url: patterns are /pith/{suffix}/bundle.json
    numbers = sorted(truth["arxiv"])
    with Ledger(tmp_path / "l", create=True) as ledger:
        report = pull(ledger, str(tmp_path / "pub"), targets_of_args(numbers), rate=0)
        assert report["records_fetched"] == len(numbers)
        same_as_truth(ledger, truth)
        assert pull(ledger, str(tmp_path / "pub" / "pith-mirrors.json"), None, rate=0)["unchanged"] == len(numbers)
    escape = {
        "manifest_type": "pith_mirror_manifest",
        "manifest_version": "1.0",
        "mirrors": [{"bundle_pattern": "../../{suffix}/bundle.json"}],
    }
    with pytest.raises(BadManifest, match="outside|plain relative"):
        parse_manifest(json.dumps(escape).encode(), "m.json", local_root=str(tmp_path))


def test_pith_s_own_manifest_is_read_and_its_key_is_not_used() -> None:
    m = parse_manifest((VECTORS / "pith-mirrors.json").read_bytes(), "https://www.pith.science/pith-mirrors.json")
    assert [(x.name, [p.template for p in x.patterns], x.resolver) for x in m.mirrors] == [
        (
            "Pith Resolver",
            [
                "https://pith.science/pith/{suffix}/bundle.json",
                "https://pith.science/.well-known/pith/{suffix}/bundle.json",
            ],
            "https://pith.science/api/pith-number/resolve",
        )
    ]
    assert "public_key" not in repr(m)


def _manifest(**over: Any) -> bytes:
    doc: dict[str, Any] = {
        "manifest_type": "pith_mirror_manifest",
        "manifest_version": "1.0",
        "mirrors": [{"bundle_pattern": "https://m.example/pith/{suffix}/bundle.json"}],
    }
    doc.update(over)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[]", "not a JSON object"),
        (b'{"manifest_type": "pith_mirror_manifest", "manifest_type": "x"}', "duplicate"),
        (b"\xff", "UTF-8"),
        (b" " * (1024 * 1024 + 1), "limit"),
        (_manifest(manifest_type="pith_open_graph_bundle"), "manifest_type"),
        (_manifest(manifest_version="2.0"), "manifest_version"),
        (_manifest(mirrors=[]), "non-empty list"),
        (_manifest(mirrors=[{"bundle_pattern": "https://m.example/x.json"}] * 17), "at most 16"),
        (_manifest(mirrors=["https://m.example/"]), "not an object"),
        (_manifest(mirrors=[{"bundle_pattern": "https://m.example/pith/bundle.json"}]), "exactly once"),
        (_manifest(mirrors=[{"bundle_pattern": "https://m.example/{suffix}/{suffix}"}]), "exactly once"),
        (_manifest(mirrors=[{"bundle_pattern": "https://m.example/{suffix}/{x}"}]), "no other braces"),
        (_manifest(mirrors=[{"bundle_pattern": 7}]), "not a string"),
        (_manifest(mirrors=[{"bundle_pattern": "https://u:p@m.example/{suffix}"}]), "credentials"),
        (_manifest(mirrors=[{"bundle_pattern": "ipfs://{suffix}"}]), "no mirror this version can read"),
        (
            _manifest(mirrors=[{"bundle_pattern": "https://m.example/{suffix}", "base_url": "https://m.example/?q=1"}]),
            "query",
        ),
    ],
)
def test_a_bad_manifest_is_a_named_error(data: bytes, message: str) -> None:
    with pytest.raises(BadManifest, match=message) as info:
        parse_manifest(data, "https://m.example/pith-mirrors.json")
    assert info.value.code == "bad-manifest"


def test_unusable_mirrors_are_listed_and_relative_patterns_follow_the_manifest_url() -> None:
    m = parse_manifest(
        _manifest(mirrors=[{"bundle_pattern": "ipfs://x/{suffix}"}, {"bundle_pattern": "/p/{suffix}.json"}]),
        "https://m.example/dir/pith-mirrors.json",
    )
    assert [p.template for p in m.mirrors[0].patterns] == ["https://m.example/p/{suffix}.json"]
    assert m.mirrors[0].resolver is None and "ipfs" in m.ignored[0]


def test_id_lines_skip_blanks_and_comments_and_mint_snapshot_entries(truth: dict[str, Any]) -> None:
    assert target_of_line(b"   \n", "f:1") is None and target_of_line(b"# 2605.00424\n", "f:2") is None
    t = target_of_line(b"arXiv:2605.00424v2\n", "f:3")
    assert t is not None and t.query == ids.ParsedId(kind="arxiv", value="2605.00424", version=2) and t.suffix is None
    snapshot = (BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl").read_bytes().splitlines()[0]
    t = target_of_line(snapshot, "f:4")
    meta = json.loads(snapshot)
    # minted offline into its Pith Number: no resolver is asked
    assert (
        t is not None and t.text == "1709.09021" and t.query is None and t.number == record_ids(mint(meta)).pith_number
    )
    assert t.suffix == ids.suffix_of_pith_number(t.number)
    with pytest.raises(MalformedId, match="f:5"):
        target_of_line(b"2605.004\n", "f:5")
    with pytest.raises(Exception, match="f:6"):
        target_of_line(b'{"id": "2605.00424"}\n', "f:6")


def test_the_rate_limit_spaces_requests_across_threads_on_a_fake_clock() -> None:
    waits: list[float] = []
    limit = RateLimit(10, clock=lambda: 100.0, sleep=waits.append)  # time stands still: every wait is visible
    threads = [threading.Thread(target=lambda: [limit.acquire() for _ in range(25)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert limit.granted == 100
    # request n starts (n-1)/rate after the first: the waits are exactly 0.1, 0.2, ... 9.9 s
    assert sorted(round(w, 6) for w in waits) == [round(i / 10, 6) for i in range(1, 100)]
    free = RateLimit(0, clock=lambda: 0.0, sleep=waits.append)
    before = len(waits)
    for _ in range(1000):
        free.acquire()
    assert len(waits) == before and free.granted == 1000


# --- a published tree's static resolve index (spec/pull.md §2.1, spec/serve.md §7.1) ------------------


def test_the_resolve_pattern_is_read_like_the_bundle_patterns_and_may_not_leave_the_tree(tmp_path: Path) -> None:
    m = parse_manifest(
        _manifest(mirrors=[{"bundle_pattern": "/p/{suffix}.json", "resolve_pattern": "/r/{shard}.json"}]),
        "https://m.example/dir/pith-mirrors.json",
    )
    assert m.mirrors[0].resolve_index is not None
    assert m.mirrors[0].resolve_index.where("arxiv/2605.00") == "https://m.example/r/arxiv/2605.00.json"
    for bad, message in (("../{shard}.json", "plain relative"), ("/r/{suffix}.json", "exactly once")):
        with pytest.raises(BadManifest, match=message):
            parse_manifest(
                _manifest(mirrors=[{"bundle_pattern": "/p/{suffix}.json", "resolve_pattern": bad}]),
                "m.json",
                local_root=str(tmp_path),
            )


def test_shard_names_are_path_safe_for_every_id_form() -> None:
    assert resolveindex.shard_of(ids.parse_id("2605.00424v2")) == "arxiv/2605.00"
    assert resolveindex.shard_of(ids.parse_id("10.48550/arXiv.math/0611599")) == "arxiv/math_0611"
    assert resolveindex.shard_of(ids.parse_id("arXiv:math.GT/0309136")) == "arxiv/math_0309"
    assert resolveindex.shard_of(ids.parse_id("pith:fz7ao632")) == "pith/FZ"
    assert resolveindex.shard_of(ids.parse_id("pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P")) is None  # fetched directly
    assert resolveindex.arxiv_shard("../../etc/passwd") is None  # a claimed id no ID form names is never written


def _shard(shard: str, **body: Any) -> dict[str, Any]:
    return {"index_type": "pith_resolve_index", "index_version": "1", "shard": shard} | body


def test_a_shard_answers_as_the_resolver_chooses_and_a_malformed_one_is_refused() -> None:
    a, b, c = "pith:2026:FZ7AO632" + "A" * 18, "pith:2026:FZ7AO632B" + "A" * 17, "pith:2025:FZQQQQQQ" + "A" * 18
    pith = resolveindex.read_shard(_shard("pith/FZ", records=[[a, False], [b, True], [c, False]]), "pith/FZ")
    assert resolveindex.lookup(ids.parse_id("pith:FZ7AO632"), pith)[0] == b  # the one with a Pith receipt wins
    assert resolveindex.lookup(ids.parse_id("FZQQQQQQ"), pith)[0] == c
    assert resolveindex.lookup(ids.parse_id("FZ7AO632AAAA"), pith)[0] == a
    assert resolveindex.lookup(ids.parse_id("FZZZZZZZ"), pith) == (None, "not in the mirror's resolve index")
    two = resolveindex.read_shard(_shard("pith/FZ", records=[[a, False], [b, False]]), "pith/FZ")
    assert "ambiguous" in resolveindex.lookup(ids.parse_id("FZ7AO632"), two)[1]
    arxiv = resolveindex.read_shard(
        _shard("arxiv/2605.00", ids={"2605.00424": {"": b, "1": a, "2": None}}), "arxiv/2605.00"
    )
    assert resolveindex.lookup(ids.parse_id("2605.00424"), arxiv)[0] == b
    assert resolveindex.lookup(ids.parse_id("10.48550/arXiv.2605.00424"), arxiv)[0] == b
    assert resolveindex.lookup(ids.parse_id("2605.00424v1"), arxiv)[0] == a
    assert "ambiguous" in resolveindex.lookup(ids.parse_id("2605.00424v2"), arxiv)[1]
    assert resolveindex.lookup(ids.parse_id("2605.00424v3"), arxiv)[0] is None
    for doc, shard, message in (
        (_shard("pith/FZ", records=[[a, False]]), "pith/AB", "not 'pith/AB'"),
        (_shard("pith/FZ", records=[["pith:FZ7AO632", True]]), "pith/FZ", "long Pith Number"),
        (_shard("arxiv/2605.00", ids={"2605.00424": {"": "x"}}), "arxiv/2605.00", "long Pith Numbers"),
        (_shard("arxiv/2605.00", ids=[]), "arxiv/2605.00", "not an object"),
        ({"index_type": "other"}, "pith/FZ", "not a pith_resolve_index"),
    ):
        with pytest.raises(resolveindex.BadShard, match=message):
            resolveindex.read_shard(doc, shard)
