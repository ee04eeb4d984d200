"""Pith's Agent API on a pithledger mirror (spec/serve.md §1, §2, §7): the record document has every key
path of Pith's own document with the same JSON type, the JSON Schema validates Pith's document and ours,
Pith's verification keys keep Pith's meaning, and an agent written for pith.science works by changing
only the host — on a served ledger (a real `pithledger serve`) and on a published tree served by
`python -m http.server`. Real data: Pith's record document for arXiv 2502.21231 (tests/vectors/), whose
receipt verifies under Pith's registry key, and the example bundles."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from helpers.agent_api import PITH_DOC, shape_problems
from helpers.eventpool import ALICE, BOB
from helpers.site import BUNDLES, FZ7, Server, _env, pl
from pithledger.records import keys
from pithledger.records.bundle import write_bundle
from pithledger.records.display import DisplayMetadata
from pithledger.records.events import make_event
from pithledger.render import record_doc
from pithledger.store import Ledger
from pithledger.store.sidecars import MetadataStore

FHI = "FHIBFT2FCAH6TNYKWKJEBOYM4L"  # arXiv 2502.21231, with Pith's receipt
FHI_NUMBER = PITH_DOC["pith_number"]
FZ7_NUMBER = f"pith:2026:{FZ7}"  # arXiv 2605.00424: a demo-key record with events of every kind, no receipt


def pith_bundle(
    doc: dict[str, Any], created_at: str = "2026-07-05T12:01:21Z", signed_at: str | None = None
) -> dict[str, Any]:
    """Pith's record document as a Pith bundle: its canonical record and receipt in a Pith-envelope
    record_created event (spec/events.md §2.4)."""
    receipt = dict(doc["receipt"]) if signed_at is None else {**doc["receipt"], "signed_at": signed_at}
    reg = keys.PITH_REGISTRY_KEYS[receipt["key_id"]]
    event = {
        "event_type": "record_created",
        "subject_pith_number": doc["pith_number"],
        "target": "record",
        "created_at": created_at,
        "signer": {
            "key_id": reg.key_id,
            "public_key_fingerprint": reg.fingerprint,
            "signer_id": "pith.science",
            "signer_type": "pith_registry",
        },
        "payload": {
            "canonical_record": doc["canonical_record"],
            "canonical_sha256": doc["canonical_sha256"],
            "receipt": receipt,
        },
    }
    return write_bundle(doc["pith_number"], [event], canonical_record=doc["canonical_record"])


def citation(ref_index: int | None) -> dict[str, Any]:
    """A demo-key citation by arXiv 2605.00424 of 2502.21231 (ref_index carried in the signed payload)."""
    payload: dict[str, Any] = {"cited_pith_number": FHI_NUMBER, "relation": "uses_method"}
    if ref_index is not None:
        payload["ref_index"] = ref_index
    key = ALICE if ref_index is not None else BOB
    return make_event("citation_signature", FZ7_NUMBER, payload, key, created_at="2026-07-06T10:00:00Z")


def build_ledger(tmp: Path, name: str = "ledger", *, pith_first: bool = False) -> Path:
    ledger = tmp / name
    extra = tmp / f"{name}-extra"
    extra.mkdir()
    (extra / "pith.json").write_text(json.dumps(pith_bundle(PITH_DOC)))
    (extra / "cites.json").write_text(json.dumps(write_bundle(FZ7_NUMBER, [citation(6), citation(None)])))
    if pith_first:  # a copy differing only in fields Pith's receipt does not sign arrives first
        (extra / "pith-copy.json").write_text(
            json.dumps(pith_bundle(PITH_DOC, "2026-08-01T00:00:00Z", "2027-01-01T00:00:00Z"))
        )
        pl(tmp, "--ledger", str(ledger), "apply", str(extra / "pith-copy.json"))
    order = [str(extra), str(BUNDLES)] if pith_first else [str(BUNDLES), str(extra)]
    for path in order:
        pl(tmp, "--ledger", str(ledger), "apply", path)
    pl(tmp, "--ledger", str(ledger), "metadata", str(BUNDLES / "source-data" / "arxiv-metadata-sample.jsonl"))
    store = MetadataStore(ledger, readonly=False)
    paper = PITH_DOC["paper"]  # the abstract is an excerpt: it cannot match the record's abstract hash
    store.put_many(
        [
            (
                "2502.21231v1",
                DisplayMetadata(
                    title=paper["title"],
                    authors=paper["authors_text"],
                    abstract=paper["abstract_excerpt"],
                    source="pith-record-json",
                ),
            )
        ]
    )
    store.close()
    return ledger


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    tmp = tmp_path_factory.mktemp("agent")
    ledger = build_ledger(tmp)
    server = Server(ledger, tmp)
    yield server, ledger, tmp
    server.stop()


def get(url: str, accept: str | None = None) -> tuple[int, str, bytes, str]:
    """(status, content type, body, final URL) of a GET that follows redirects, as an agent's client does."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers.get("content-type", ""), resp.read(), resp.geturl()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read(), url


@pytest.mark.parametrize("suffix", [FHI, FZ7])
def test_every_key_path_of_pith_document_with_its_type(site: tuple[Server, Path, Path], suffix: str) -> None:
    server = site[0]
    status, ctype, body, _ = get(f"{server.base}/pith/{suffix}", "application/ld+json")
    assert status == 200 and ctype == "application/ld+json"
    doc = json.loads(body)
    assert set(PITH_DOC) <= set(doc)
    assert shape_problems(PITH_DOC, doc) == []
    assert len(doc["verification_status"]) == 12 and set(doc["verification_status"]) == set(
        PITH_DOC["verification_status"]
    )
    assert doc["record_type"] == "pith_number_record"
    if suffix == FHI:  # list items compared: inbound citations from this mirror's own index
        assert doc["receipt"] is not None and doc["inbound_citations"]["count"] == 2
        assert sorted((s["ref_index"] is None, s["ref_index"]) for s in doc["inbound_citations"]["sample"]) == [
            (False, 6),
            (True, None),
        ]
        assert {s["citing_arxiv_id"] for s in doc["inbound_citations"]["sample"]} == {"2605.00424"}
    else:
        assert doc["receipt"] is None and doc["events"]  # a record without a receipt, with events of every kind
        assert shape_problems(PITH_DOC["events"], doc["events"]) == []


def test_values_come_from_consensus_and_checked_metadata(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    doc = json.loads(get(f"{server.base}/pith/{FHI}.json")[2])
    state = json.loads(pl(tmp, "--ledger", str(ledger), "state", FHI).stdout)
    for k in (
        "pith_number",
        "short_pith_number",
        "canonical_sha256",
        "canonical_record",
        "source",
        "schema_version",
        "aliases",
    ):
        assert doc[k] == (PITH_DOC[k] if k != "aliases" else state["current"]["source_aliases"]), k
    paper = doc["paper"]
    assert paper["title"] == PITH_DOC["paper"]["title"]  # supplied, and matches the record's title hash
    # supplied as a whole abstract (not flagged an excerpt) whose hash differs: contradicts the record, not served
    assert paper["abstract_excerpt"] == ""
    assert paper["authors_text"] == PITH_DOC["paper"]["authors_text"]  # no hash covers authors: served, unchecked
    assert {f["name"]: f["check"] for f in doc["display_metadata"]} == {
        "title": "match",
        "authors": "unchecked",
        "abstract": "mismatch",
    }
    assert {k: v for k, v in doc["pithledger_claims"].items() if k.startswith("paper.")} == {
        "paper.title": "checked",
        "paper.authors_text": "unchecked",
        "paper.abstract_excerpt": "mismatch",
    }
    for k in ("license", "primary_cat", "submitted_at", "cross_cats"):
        assert paper[k] == PITH_DOC["paper"][k]
    # the receipt: Pith's, as its signature authenticates it; the fields it does not sign are Pith's empty string
    receipt = doc["receipt"]
    for k in (
        "kind",
        "key_id",
        "algorithm",
        "signature_b64",
        "signed_message",
        "canonical_sha256",
        "public_key_fingerprint",
    ):
        assert receipt[k] == PITH_DOC["receipt"][k], k
    assert all(receipt[k] == "" for k in record_doc.RECEIPT_UNAUTHENTICATED)
    reg = keys.PITH_REGISTRY_KEYS[receipt["key_id"]]
    keys.verify_receipt_signature(
        bytes.fromhex(doc["canonical_sha256"]), base64.b64decode(receipt["signature_b64"]), reg.key_id
    )
    # server-side analysis this mirror does not do: Pith's empty values
    assert doc["paper_claims"] == [] and doc["formal_canon"] == {"evidence_count": 0, "sample": [], "anchors": []}
    assert doc["graph_snapshot"]["claims"] == {"count": 0, "items": [], "snapshot_sha256": ""}
    assert doc["graph_snapshot"]["paper"] == paper and doc["graph_snapshot"]["source"] == doc["source"]
    # the times: the signed created_at of its standing events (Pith's envelope signs none) and of the citations of it
    assert doc["created_at"] == doc["canonical_record"]["metadata"]["submitted_at"]
    assert doc["updated_at"] == "2026-07-06T10:00:00Z"


def test_an_agent_reads_pith_paper_block_of_an_applied_record_document_marked_unchecked(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Pith's record document for 2502.21231 carries authors_text and abstract_excerpt; applied here, the served
    document's paper block is Pith's, key for key (an agent swapping the host reads the same words), and
    pithledger_claims says what this mirror could check: the title matches the record's hash, the authors (no
    hash) and the excerpt (a cut abstract cannot match the hash of the whole) are unchecked. Before: both ""."""
    tmp = tmp_path_factory.mktemp("agent-paper")
    ledger = tmp / "ledger"
    vector = Path(__file__).resolve().parents[2] / "vectors" / f"pith-record-{FHI}.json"
    assert json.loads(vector.read_text()) == PITH_DOC
    assert pl(tmp, "--ledger", str(ledger), "apply", str(vector)).returncode == 0
    server = Server(ledger, tmp)
    try:
        for url in (f"{server.base}/pith/{FHI}.json", f"{server.base}/api/pith-number/{FHI}/graph.json"):
            doc = json.loads(get(url)[2])
            assert doc["paper"] == PITH_DOC["paper"], url
        doc = json.loads(get(f"{server.base}/pith/{FHI}", "application/ld+json")[2])
        assert (
            doc["paper"]["authors_text"]
            == "Bin Cui, Fangcheng Fu, Haibin Lin, Hao Ge, Junda Feng, Lei Zuo, Qi Huang, Xiaonan Nie, Xin Liu"
        )
        assert len(doc["paper"]["abstract_excerpt"]) == record_doc.EXCERPT == len(PITH_DOC["paper"]["abstract_excerpt"])
        assert {k: v for k, v in doc["pithledger_claims"].items() if k.startswith("paper.")} == {
            "paper.title": "checked",
            "paper.authors_text": "unchecked",
            "paper.abstract_excerpt": "unchecked",
        }
        assert {f["name"]: f["check"] for f in doc["display_metadata"]} == {
            "title": "match",
            "authors": "unchecked",
            "abstract": "excerpt",
        }
        # the page shows the same words, marked the same way
        status, _, page, _ = get(f"{server.base}/pith/{FHI}", "text/html")
        assert status == 200 and b"Bin Cui, Fangcheng Fu" in page and b"unchecked: excerpt" in page
    finally:
        server.stop()


def test_canonical_record_hashes_to_canonical_sha256_as_pith_verify_pipeline(site: tuple[Server, Path, Path]) -> None:
    from helpers.site import PITH_SNIPPET

    doc = json.loads(get(f"{site[0].base}/pith/{FHI}", "application/ld+json")[2])
    compact = json.dumps(doc["canonical_record"], separators=(",", ":"), ensure_ascii=False)
    out = subprocess.run(
        [sys.executable, "-c", PITH_SNIPPET], input=compact, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == doc["canonical_sha256"] == PITH_DOC["canonical_sha256"]
    digest = bytes.fromhex(out)
    assert "pith:2025:" + base64.b32encode(digest).decode()[:26] == doc["pith_number"] == FHI_NUMBER


def test_pith_keys_are_false_for_demo_key_claims_and_ours_say_claimed(site: tuple[Server, Path, Path]) -> None:
    server, ledger, tmp = site
    doc = json.loads(get(f"{server.base}/pith/{FZ7}.json")[2])
    state = json.loads(pl(tmp, "--ledger", str(ledger), "state", FZ7).stdout)["current"]
    # the state (consensus, unchanged) holds a claim of every kind, each signed by a demo key only
    assert (
        state["author_attestations"]
        and state["timestamp_anchors"]
        and state["storage_attestations"]
        and state["citations"]
    )
    assert all(
        v["trust"] == "self_signed"
        for slot in ("author_attestations", "timestamp_anchors", "storage_attestations", "citations")
        for v in state[slot]
    )
    vs, claims = doc["verification_status"], doc["pithledger_claims"]
    for key in ("author_attested", "externally_anchored", "storage_verified", "references_resolved", "pith_receipt"):
        assert vs[key] is False, key
    assert claims["author_attested"] == claims["storage_verified"] == claims["references_resolved"] == "claimed"
    assert claims["externally_anchored"] in ("claimed", "pending")
    assert (
        claims["pith_receipt"] == "none"
        and vs["content_addressed"] is True
        and claims["content_addressed"] == "checked"
    )
    assert doc["badges"]["author"] == "claimed" and doc["badges"]["storage"] == "capture claimed"
    if state["graph_snapshots"]:
        assert vs["graph_snapshot"] is False and claims["graph_snapshot"] == "claimed"
    # counts stay counts of what stands (each signature was checked)
    assert vs["citation_signatures"] == len(state["citations"]) and vs["replication_records"] == len(
        state["replication_records"]
    )
    assert (
        vs["weak_author_claims"] + vs["strong_author_claims"] == len(state["author_attestations"])
        and vs["strong_author_claims"] == 0
    )
    fhi = json.loads(get(f"{server.base}/pith/{FHI}.json")[2])
    assert fhi["verification_status"]["pith_receipt"] is True and fhi["pithledger_claims"]["pith_receipt"] == "checked"


def test_the_schema_validates_pith_document_and_every_served_one(site: tuple[Server, Path, Path]) -> None:
    server = site[0]
    status, _, body, _ = get(f"{server.base}/schemas/pith-number/v1.json")
    assert status == 200 and body == record_doc.schema_bytes()
    schema = json.loads(body)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(PITH_DOC)
    subjects: set[str] = set()
    url: str | None = "/events.json?since=0"
    while url:
        page = json.loads(get(server.base + url)[2])
        subjects |= {e["subject"] for e in page["events"]}
        url = page["next"]
    served = 0
    for subject in sorted(subjects):
        status, _, body, _ = get(f"{server.base}/pith/{subject.rsplit(':', 1)[1]}.json")
        if status == 404:  # a pending subject has no record document
            continue
        validator.validate(json.loads(body))
        served += 1
    assert served >= 51
    # and the schema is not vacuous: Pith's document without a key, or with a key of another type, fails
    for broken in (
        {k: v for k, v in PITH_DOC.items() if k != "links"},
        {**PITH_DOC, "verification_status": {**PITH_DOC["verification_status"], "pith_receipt": "yes"}},
        {**PITH_DOC, "aliases": [{"alias_kind": "arxiv"}]},
    ):
        assert not validator.is_valid(broken)


def follow(start: str, accept: str | None) -> list[str]:
    """An agent written for pith.science: from one record URL, every GET URL in ``links`` and
    ``agent_actions``; each must answer 200 with its documented shape. Returns the URLs visited."""
    status, ctype, body, final = get(start, accept)
    assert status == 200 and "json" in ctype, (start, status)
    doc = json.loads(body)
    assert shape_problems(PITH_DOC, doc) == []
    origin = urllib.parse.urlsplit(final)[:2]
    suffix = doc["pith_number"].rsplit(":", 1)[1]
    urls = {f"links.{k}": v for k, v in doc["links"].items()}
    urls |= {f"agent_actions.{k}": v for k, v in doc["agent_actions"].items() if k != "actions"}
    urls["schema_url"] = doc["schema_url"]
    visited = []
    for name, link in sorted(urls.items()):
        url = urllib.parse.urljoin(final, link)
        assert urllib.parse.urlsplit(url)[:2] == origin, (name, url)  # on this mirror, not pith.science
        status, ctype, body, _ = get(url)
        assert status == 200, (name, url, status, body[:200])
        visited.append(url)
        if name in ("links.html", "agent_actions.view_html", "links.paper", "agent_actions.view_paper"):
            assert ctype.startswith("text/html") and doc["pith_number"].encode() in body, name
            continue
        value = json.loads(body)
        if name in ("links.json", "agent_actions.download_json"):
            assert value == doc
        elif name in ("links.graph_json", "agent_actions.fetch_graph"):
            assert (
                shape_problems(PITH_DOC["graph_snapshot"], value) == [] and value["pith_number"] == doc["pith_number"]
            )
        elif name in ("links.events_json", "agent_actions.fetch_events", "links.events"):
            assert value["pith_number"] == doc["pith_number"] and isinstance(value["events"], list)
            assert isinstance(value["inbound_citations"], list) and value["events"]
        elif name == "agent_actions.resolve_alias":
            assert value["pith_number"] == doc["pith_number"] and value["short_pith_number"] == doc["short_pith_number"]
            assert value["canonical_sha256"] == doc["canonical_sha256"]
            assert (
                get(urllib.parse.urljoin(url, value["json"]))[2]
                == get(urllib.parse.urljoin(final, doc["links"]["json"]))[2]
            )
        elif name == "schema_url":
            assert value["$schema"] == "https://json-schema.org/draft/2020-12/schema"
            jsonschema.Draft202012Validator(value).validate(doc)
        elif name in ("links.state",):
            assert value["pith_number"] == doc["pith_number"] and value["state_sha256"] == doc["state_sha256"]
        elif name in ("links.bundle", "links.well_known_bundle"):
            assert value["canonical_record"] == doc["canonical_record"]
        elif name == "links.mirrors":
            assert value["manifest_type"] == "pith_mirror_manifest"
        elif name == "links.signing_key":
            assert value["keys"][0]["key_id"] == "pith-v1-2026-05"
        else:  # pragma: no cover - a new link must be given its shape here
            raise AssertionError(f"no documented shape for {name}")
    for name, link in doc["agent_actions"][
        "actions"
    ].items():  # POST endpoints (another issue): well-formed, on this mirror
        url = urllib.parse.urlsplit(urllib.parse.urljoin(final, link))
        assert url[:2] == origin and re.search(rf"/pith/{suffix}/action/[a-z_]+\Z", url.path), (name, link)
    return visited


@pytest.mark.parametrize("suffix", [FHI, FZ7])
def test_an_agent_follows_every_link_on_a_served_ledger(site: tuple[Server, Path, Path], suffix: str) -> None:
    server = site[0]
    visited = follow(f"{server.base}/pith/{suffix}", "application/ld+json")
    assert (
        all(u.startswith(server.base + "/") for u in visited) and len(visited) == 18
    )  # 11 links, 6 agent actions, the schema


def test_an_agent_follows_every_link_on_a_published_tree(site: tuple[Server, Path, Path], tmp_path: Path) -> None:
    _, ledger, tmp = site
    root = tmp_path / "www"
    root.mkdir()
    static = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(tmp_path),
    )
    try:
        assert static.stdout is not None
        m = re.search(r"port (\d+)", static.stdout.readline())
        assert m
        host = f"http://127.0.0.1:{m[1]}"
        # one tree with --base-url (absolute links), one without (links relative to the record document)
        pl(tmp, "--ledger", str(ledger), "publish", str(root / "abs"), "--base-url", f"{host}/abs")
        pl(tmp, "--ledger", str(ledger), "publish", str(root / "rel"))
        for suffix in (FHI, FZ7):
            absolute = follow(f"{host}/abs/pith/{suffix}.json", None)
            assert all(u.startswith(f"{host}/abs/") for u in absolute)
            doc = json.loads(get(f"{host}/abs/pith/{suffix}.json")[2])
            assert doc["links"]["html"] == f"{host}/abs/pith/{suffix}/index.html"
            assert doc["agent_actions"]["resolve_alias"] == f"{host}/abs/api/pith-number/{suffix}/resolve.json"
            relative = follow(f"{host}/rel/pith/{suffix}.json", None)
            assert all(u.startswith(f"{host}/rel/") for u in relative)
            rel = json.loads(get(f"{host}/rel/pith/{suffix}.json")[2])
            assert rel["links"]["json"] == f"../pith/{suffix}.json"
        # no paper/<short8>/ on a static tree (a redirect a server computes): view_paper names the record page
        assert (
            rel["agent_actions"]["view_paper"] == f"../pith/{suffix}/index.html"
            and not (root / "rel" / "paper").exists()
        )
    finally:
        static.terminate()
        static.wait(timeout=10)


def test_served_and_published_documents_agree(site: tuple[Server, Path, Path], tmp_path: Path) -> None:
    """With the server's address as --base-url, the published record document differs from the served
    one only where a static host differs: its pages are index.html files and it has no resolver."""
    server, ledger, tmp = site
    out = tmp_path / "pub"
    pl(tmp, "--ledger", str(ledger), "publish", str(out), "--base-url", server.base)
    served = json.loads(get(f"{server.base}/pith/{FHI}.json")[2])
    published = json.loads((out / "pith" / f"{FHI}.json").read_text())
    differ = {k for k in served if served[k] != published.get(k)}
    assert differ == {"links", "agent_actions", "@id"}
    assert json.loads((out / "api" / "pith-number" / FHI / "graph.json").read_text()) == json.loads(
        get(f"{server.base}/api/pith-number/{FHI}/graph.json")[2]
    )
    assert (out / "api" / "pith-number" / FHI / "events.json").read_bytes() == get(
        f"{server.base}/api/pith-number/{FHI}/events.json"
    )[2]
    assert (out / "schemas" / "pith-number" / "v1.json").read_bytes() == record_doc.schema_bytes()


def test_document_bytes_do_not_depend_on_arrival_order_or_unsigned_fields(
    site: tuple[Server, Path, Path], tmp_path: Path
) -> None:
    """A second mirror receives the same valid events in another order, and first a copy of Pith's
    record event that differs only in what the receipt does not sign: the same document bytes."""
    server, ledger, tmp = site
    other = build_ledger(tmp_path, "other", pith_first=True)
    second = Server(other, tmp_path, "--base-url", server.base)
    try:
        for suffix in (FHI, FZ7):
            for path in (f"/pith/{suffix}.json", f"/api/pith-number/{suffix}/graph.json"):
                assert get(second.base + path)[2] == get(server.base + path)[2], path
    finally:
        second.stop()
    with Ledger(
        other, readonly=True
    ) as held:  # and the copy logged there is indeed the other one (export serves neither: spec/bundle.md §6)
        logged = [
            json.loads(e.event)
            for e in held.log()
            if e.verdict.subject == FHI_NUMBER and e.verdict.event_type == "record_created"
        ]
        assert [e["payload"]["receipt"]["signed_at"] for e in logged] == ["2027-01-01T00:00:00Z"]
        assert held.export(FHI_NUMBER)["events"][0]["payload"]["receipt"]["signed_at"] == ""


@pytest.mark.parametrize(
    "path",
    [
        f"/pith/{FHI}/graph.json",
        f"/pith/{FHI}/nothing",
        f"/pith/{FHI}/events.json/x",
        "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA.json",
        f"/pith/{FHI[:8]}.json",
        "/pith/2502.21231.json",
        f"/api/pith-number/{FHI}/nothing.json",
        "/api/pith-number/AAAAAAAAAAAAAAAAAAAAAAAAAA/graph.json",
        f"/api/pith-number/{FHI[:8]}/graph.json",
        "/api/pith-number/2502.21231/events.json",
        "/paper/0000.00000",
        "/paper/AAAAAAAA",
        "/api/pith-number/resolve?arxiv=0000.00000&json=true",
        "/api/pith-number/nothing",
        "/schemas/pith-number/v2.json",
    ],
)
def test_paths_that_are_not_records_answer_404_json(site: tuple[Server, Path, Path], path: str) -> None:
    status, headers, body = site[0].request(path)
    assert status == 404 and headers["content-type"] == "application/json" and "location" not in headers, (path, status)
    assert json.loads(body)["error"] == "not-found"


def test_the_resolver(site: tuple[Server, Path, Path]) -> None:
    server = site[0]
    for query in (
        "arxiv=2502.21231",
        "arxiv=2502.21231v1",
        "doi=10.48550/arxiv.2502.21231",
        f"pith={FHI_NUMBER}",
        f"pith=pith:{FHI[:8]}",
        f"id={FHI[:12]}",
        "id=2502.21231",
    ):
        status, headers, body = server.request(f"/api/pith-number/resolve?{query}&json=true")
        assert status == 200 and headers["content-type"] == "application/json", (query, body)
        answer = json.loads(body)
        assert answer == {
            "pith_number": FHI_NUMBER,
            "short_pith_number": f"pith:{FHI[:8]}",
            "canonical_sha256": PITH_DOC["canonical_sha256"],
            "arxiv_id": "2502.21231",
            "url": f"{server.base}/pith/{FHI}",
            "json": f"{server.base}/pith/{FHI}.json",
        }
        status, headers, _ = server.request(f"/api/pith-number/resolve?{query}")
        assert status == 302 and headers["location"] == f"/pith/{FHI}"
    for path, code in (
        ("/api/pith-number/resolve?arxiv=notanid!&json=true", "malformed-id"),
        ("/api/pith-number/resolve?json=true", "usage"),
        ("/api/pith-number/resolve?arxiv=2502.21231&doi=10.48550/arxiv.2502.21231", "usage"),
    ):
        status, headers, body = server.request(path)
        assert status == 400 and json.loads(body)["error"] == code and "location" not in headers
    for ident in (
        FHI[:8],
        f"pith:{FHI[:8]}",
        "2502.21231",
        "2502.21231v1",
    ):  # /paper/<short or arXiv id>: the record page
        status, headers, _ = server.request(f"/paper/{ident}")
        assert status == 302 and headers["location"] == f"/pith/{FHI}", ident


@pytest.mark.parametrize("suffix", [FHI, FZ7])
def test_a_served_document_applied_to_an_empty_ledger_gives_the_same_state(
    site: tuple[Server, Path, Path], tmp_path: Path, suffix: str
) -> None:
    """The record document is a bundle too (spec/bundle.md §5): its `events` are the standing events as
    signed, so a mirror filled from documents alone holds the record's own state (no inbound citations:
    those are other records' events)."""
    server, ledger, _ = site
    status, _, body, _ = get(f"{server.base}/pith/{suffix}.json")
    assert status == 200
    doc = json.loads(body)
    assert all("signature_b64" in e for e in doc["events"])  # every listed event carries its own proof
    (tmp_path / "doc.json").write_bytes(body)
    fresh = tmp_path / "fresh"
    out = pl(tmp_path, "--ledger", str(fresh), "--json", "apply", str(tmp_path / "doc.json"))
    assert json.loads(out.stdout)["invalid"] == 0
    mine = json.loads(pl(tmp_path, "--ledger", str(fresh), "state", suffix).stdout)
    theirs = json.loads(pl(tmp_path, "--ledger", str(ledger), "state", suffix).stdout)
    strip = lambda st: {k: v for k, v in st["current"].items() if k not in ("inbound_citations",)}  # noqa: E731
    assert strip(mine) == strip(theirs) and mine["valid_event_count"] == theirs["valid_event_count"]
