"""`pull` from a `publish`ed tree on a static host (spec/pull.md §2.1, spec/serve.md §7.1): every ID form
resolves through the tree's static resolve index, read from the directory and from a plain static HTTP
server (the standard library's, not `pithledger serve`); an ID not pulled exits 1, a lying index is named."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.pull import same_as_truth
from pithledger.records import ids
from pithledger.store import Ledger


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
        pass


@pytest.fixture
def static_host() -> Iterator[Any]:
    """start(directory) -> the base URL of a plain static file server over it, on loopback."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(directory: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def records(truth: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """Each record's long Pith Number -> (arXiv id, version)."""
    out = {}
    for body in truth["bundles"].values():
        doc = json.loads(body)
        source = doc["canonical_record"]["source"]
        out[doc["pith_number"]] = (source["id"], source["version"])
    return out


FORMS = ("long", "pith:short8", "short8", "short12", "short16", "suffix26", "arxiv", "arxiv_version", "doi")


def id_of(form: str, number: str, arxiv: str, version: int) -> str:
    suffix = ids.suffix_of_pith_number(number)
    return {
        "long": number,
        "pith:short8": f"pith:{suffix[:8]}",
        "short8": suffix[:8],
        "short12": suffix[:12].lower(),
        "short16": suffix[:16],
        "suffix26": suffix,
        "arxiv": arxiv,
        "arxiv_version": f"arXiv:{arxiv}v{version}",
        "doi": f"10.48550/arXiv.{arxiv}",
    }[form]


def latest(records: dict[str, tuple[str, int]]) -> dict[str, str]:
    """Each record that an unversioned arXiv id (or its DOI) names: the highest version of its paper."""
    top: dict[str, tuple[int, str]] = {}
    for number, (arxiv, version) in records.items():
        top[arxiv] = max(top.get(arxiv, (0, "")), (version, number))
    return {number: arxiv for arxiv, (_, number) in top.items()}


def publish(cli: Any, truth: dict[str, Any], tree: Path) -> None:
    r = cli("--ledger", str(truth["path"]), "publish", str(tree), "--json")
    assert r.code == 0, r.err


def test_every_id_form_pulls_from_a_published_tree_as_a_directory_and_on_a_static_http_host(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
    records: dict[str, tuple[str, int]],
    static_host: Any,
) -> None:
    tree = tmp_path / "tree"
    publish(cli, truth, tree)
    sources = {"dir": str(tree), "http": static_host(tree)}
    by_arxiv = latest(records)
    for form in FORMS:
        # an unversioned arXiv id and a DOI name the latest version of a paper: those records, each once
        wanted = set(by_arxiv) if form in ("arxiv", "doi") else set(records)
        idfile = tmp_path / f"{form}.txt"
        idfile.write_text("".join(id_of(form, n, *records[n]) + "\n" for n in sorted(wanted)))
        for kind, source in sources.items():
            ledger = tmp_path / f"{form}-{kind}"
            r = cli("--ledger", str(ledger), "pull", source, "--ids", str(idfile), "--rate", "0", "--json")
            assert r.code == 0, (form, kind, r.out, r.err)
            report = r.json()
            assert report["unresolved"] == report["skipped"] == report["lying"] == report["not_published"] == []
            assert report["records_fetched"] == len(wanted), (form, kind)
            with Ledger(ledger, readonly=True) as held:
                same_as_truth(held, truth, wanted)  # each ID pulled exactly the record it names


def test_an_id_not_in_the_index_and_a_lying_index_are_named_and_exit_1(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
    records: dict[str, tuple[str, int]],
    static_host: Any,
) -> None:
    tree = tmp_path / "tree"
    publish(cli, truth, tree)
    numbers = sorted(latest(records))
    liar, other = numbers[0], numbers[1]
    arxiv = records[liar][0]
    shard = tree / "pithledger" / "resolve" / "arxiv" / f"{arxiv[:-3].replace('/', '_')}.json"
    doc = json.loads(shard.read_text())
    doc["ids"][arxiv] = {k: other for k in doc["ids"][arxiv]}  # the index points the paper at another record
    shard.write_text(json.dumps(doc))
    for source in (str(tree), static_host(tree)):
        ledger = tmp_path / f"l{len(source)}"
        r = cli("--ledger", str(ledger), "pull", source, arxiv, "2101.99999", numbers[2], "--rate", "0")
        assert r.code == 1, r.out + r.err
        assert f"lying          {arxiv}: {arxiv} names another record: its record is arXiv" in r.out
        assert "unresolved     2101.99999: not in the mirror's resolve index" in r.out
        assert "1 unresolved" in r.out and "1 lying" in r.out and "Traceback" not in r.err
        with Ledger(ledger, readonly=True) as held:
            same_as_truth(held, truth, {numbers[2]})  # nothing of the lie was applied; the rest was pulled


def test_an_unusable_index_is_named_and_bounded(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
    records: dict[str, tuple[str, int]],
    static_host: Any,
) -> None:
    tree = tmp_path / "tree"
    publish(cli, truth, tree)
    a, b = sorted(latest(records))[:2]
    base = tree / "pithledger" / "resolve" / "arxiv"
    shard_a = base / f"{records[a][0][:-3].replace('/', '_')}.json"
    shard_b = base / f"{records[b][0][:-3].replace('/', '_')}.json"
    assert shard_a != shard_b
    shard_a.write_bytes(b'{"ids":{' + b'"x":{},' * 700_000 + b'"y":{}}}')  # over the 2 MiB a shard may hold
    doc = json.loads(shard_b.read_text())
    doc["shard"] = "arxiv/0000.00"  # another shard's answer
    shard_b.write_text(json.dumps(doc))
    for source in (str(tree), static_host(tree)):
        r = cli("--ledger", str(tmp_path / f"l{len(source)}"), "pull", source, records[a][0], records[b][0], "--json")
        assert r.code == 1, r.err
        report = r.json()
        assert [(d["id"], d["reason"]) for d in report["skipped"]] == [(records[a][0], "bad-source")]
        assert "limit" in report["skipped"][0]["message"]
        assert [d["id"] for d in report["unresolved"]] == [records[b][0]]
        assert "not 'arxiv/" in report["unresolved"][0]["message"]


def test_a_republish_rebuilds_the_shards_of_what_changed_from_the_ledger(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
    records: dict[str, tuple[str, int]],
) -> None:
    ledger = tmp_path / "l"
    shutil.copytree(truth["path"], ledger)
    tree = tmp_path / "tree"
    r = cli("--ledger", str(ledger), "publish", str(tree), "--json")
    assert r.code == 0, r.err
    first = r.json()
    assert first["resolve_shards_written"] > 0
    index = tree / "pithledger" / "resolve"
    number = sorted(records)[0]
    arxiv = records[number][0]
    shard = index / "arxiv" / f"{arxiv[:-3].replace('/', '_')}.json"
    stale = json.loads(shard.read_text())
    gone = arxiv[:-3] + ("998" if not arxiv.endswith("998") else "997")
    stale["ids"][gone] = {"": number}  # an entry the ledger does not hold (as a record gone would leave)
    shard.write_text(json.dumps(stale))
    # nothing changed: nothing is rebuilt, the index is whole
    again = cli("--ledger", str(ledger), "publish", str(tree), "--json").json()
    assert (again["records_written"], again["resolve_shards_written"]) == (0, 0)
    # a record of that shard changes: its shard is rebuilt from the ledger, the stale entry goes
    assert cli("keys", "new", "k").code == 0
    ev = tmp_path / "ev.json"
    payload = '{"capture_url":"https://web.archive.org/web/20260520013000/https://arxiv.org/abs/x","captured_at":"2026-05-20T01:30:00Z"}'
    made = cli("event", "storage_attestation", "--subject", number, "--key", "k", "--payload", payload, "-o", str(ev))
    assert made.code == 0, made.err
    assert cli("--ledger", str(ledger), "apply", str(ev)).code == 0
    third = cli("--ledger", str(ledger), "publish", str(tree), "--json").json()
    assert third["records_written"] >= 1 and third["resolve_shards_written"] >= 1
    rebuilt = json.loads(shard.read_text())
    assert gone not in rebuilt["ids"] and rebuilt["ids"][arxiv][""] in records
    # a tree without a whole index (an older version's) gets every shard on the next publish
    shutil.rmtree(index)
    fourth = cli("--ledger", str(ledger), "publish", str(tree), "--json").json()
    assert fourth["records_written"] == 0 and fourth["resolve_shards_written"] == first["resolve_shards_written"]


def test_a_record_no_longer_present_leaves_the_index_on_the_next_publish(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
) -> None:
    ledger, tree = tmp_path / "l", tmp_path / "tree"
    shutil.copytree(truth["path"], ledger)
    assert cli("keys", "new", "k").code == 0
    record = json.loads(next(iter(truth["bundles"].values())))["canonical_record"]
    record["source"] = {"id": "2605.99424", "kind": "arxiv", "version": 1}  # a paper nobody else holds, self-signed
    made = cli(
        "event", "record_created", "--key", "k", "--payload", json.dumps({"canonical_record": record}), "-o", "rc.json"
    )
    assert made.code == 0, made.err
    created = json.loads((tmp_path / "rc.json").read_text())
    number, event_id = created["pith_number"], created["events"][0]["event_id"]
    assert cli("--ledger", str(ledger), "apply", str(tmp_path / "rc.json")).code == 0
    assert cli("--ledger", str(ledger), "publish", str(tree)).code == 0
    shards = [tree / "pithledger" / "resolve" / "arxiv" / "2605.99.json"]
    shards.append(tree / "pithledger" / "resolve" / "pith" / f"{ids.suffix_of_pith_number(number)[:2]}.json")
    assert all(number in s.read_text() for s in shards)
    r = cli("--ledger", str(tmp_path / "a"), "pull", str(tree), "2605.99424v1", "--json")
    assert r.code == 0 and r.json()["records_fetched"] == 1, r.out + r.err
    # its signer revokes the record_created: the record is pending, no longer found by any alias
    payload = json.dumps({"revoked_event_id": event_id, "reason": "withdrawn"})
    revoked = cli("event", "revocation", "--subject", number, "--key", "k", "--payload", payload, "-o", "rv.json")
    assert revoked.code == 0, revoked.err
    assert cli("--ledger", str(ledger), "apply", str(tmp_path / "rv.json")).code == 0
    again = cli("--ledger", str(ledger), "publish", str(tree), "--json")
    assert again.code == 0 and again.json()["records_written"] == 1
    assert all(not s.exists() or number not in s.read_text() for s in shards)
    r = cli("--ledger", str(tmp_path / "b"), "pull", str(tree), "2605.99424", "--json")
    assert r.code == 1 and [d["id"] for d in r.json()["unresolved"]] == ["2605.99424"], r.out + r.err


def test_a_static_host_that_never_answers_for_the_index_is_cut_off_and_named(
    cli: Any,
    tmp_path: Path,
    truth: dict[str, Any],
    records: dict[str, tuple[str, int]],
) -> None:
    tree = tmp_path / "tree"
    publish(cli, truth, tree)
    release = threading.Event()

    class Silent(_Quiet):
        def do_GET(self) -> None:
            if self.path.startswith("/pithledger/resolve/"):
                release.wait(30)  # answers nothing while pull waits: its --timeout must end the request
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Silent, directory=str(tree)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        number = sorted(records)[0]
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        r = cli("--ledger", str(tmp_path / "l"), "pull", url, records[number][0], number, "--timeout", "1", "--json")
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert r.code == 1, r.err
    report = r.json()
    assert [(d["id"], d["reason"]) for d in report["skipped"]] == [(records[number][0], "bad-source")]
    assert "within 1 s" in report["skipped"][0]["message"] and report["records_fetched"] == 1
