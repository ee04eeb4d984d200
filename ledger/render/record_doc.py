"""Pith's record document (``pith_number_record``) and the Agent API documents around it, built from
this mirror's own evidence. Pure: no IO, no clock, no arrival order (spec/serve.md §2).

Inputs: a record's state document (consensus), its events as held (for the receipts, which the state
names only by key id), the supplied display metadata (outside consensus, shown only where it matches
the record's hashes), this mirror's inbound-citation rows and where the documents are served.

Every top-level key of Pith's document is emitted with Pith's nesting and JSON types. Where Pith's value
is server-side analysis this mirror does not do (claims extraction, verdicts, integrity detectors,
reference resolution, formal canon), Pith's empty value is emitted, never an invented one. Pith's key
names keep Pith's meaning: a ``verification_status`` key is true only where this mirror holds evidence
of the strength the name promises; weaker evidence is reported beside it, in ``pithledger_claims``.
"""

from __future__ import annotations

import importlib.resources
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from pithledger.records import ids, keys
from pithledger.records.display import DisplayMetadata, FieldView, check
from pithledger.records.events import compute_event_id, is_pithledger_envelope, pith_record_event_id, verify_event

RECORD_TYPE = "pith_number_record"
SCHEMA_VERSION = "1.0"
#: Where the JSON Schema of the record document lives, on a server and in a published tree.
SCHEMA_PATH = "schemas/pith-number/v1.json"
#: Length of ``paper.abstract_excerpt`` (Pith's excerpts are the abstract's first 600 characters).
EXCERPT = 600
#: Inbound citations listed in ``inbound_citations.sample`` (``count`` counts them all).
SAMPLE = 50
#: Standing events listed in ``events`` (``event_summary`` counts them all; state.json holds them all).
MAX_EVENTS = 200
#: The action endpoints Pith names (POST; built by another issue): action name -> event kind.
ACTIONS = {
    "anchor_timestamp": "timestamp_anchor",
    "attest_storage": "storage_attestation",
    "attest_author": "author_attestation",
    "sign_citation": "citation_signature",
    "submit_replication": "replication_record",
}
#: Receipt fields Pith's signature does not cover: copies of one receipt may differ in them (they are one
#: event, spec/events.md §2.4), so the document carries Pith's empty string for each (spec/serve.md §2.3).
RECEIPT_UNAUTHENTICATED = (
    "builder_version",
    "first_computed_at",
    "last_reissued_at",
    "receipt_version",
    "signature_status",
    "signed_at",
)
_SLOTS = (
    "timestamp_anchors",
    "storage_attestations",
    "author_attestations",
    "replication_records",
    "integrity_findings",
    "challenges",
    "graph_snapshots",
    "citations",
)
_MAX_REF_INDEX = 1 << 31


class Urls(msgspec.Struct, frozen=True):
    """Where the documents of a site live. ``base``: the site's absolute URL (no trailing slash); ""
    makes every link relative to the document holding it (``up`` + path: ``../`` from the record document
    ``pith/<suffix>.json``), which works at any path of any static host. ``server``: a live server (content negotiation, the resolver);
    else a static tree, whose pages are ``<dir>/index.html``."""

    base: str = ""
    server: bool = True
    up: str = "../"  # without a base: the path from the document to the site root

    def at(self, rel: str) -> str:
        return f"{self.base.rstrip('/')}/{rel}" if self.base else f"{self.up}{rel}"

    def page(self, rel: str) -> str:
        """A page: ``rel`` itself on a server, ``rel/index.html`` on a static tree."""
        return self.at(rel if self.server else f"{rel}/index.html")


class CitingRow(msgspec.Struct, frozen=True):
    """One standing inbound citation as this mirror's citation index knows it."""

    citing_pith_number: str
    citing_arxiv_id: str  # "" while the citing record is pending here
    citing_title: str  # the citing record's supplied title when it matches its hash, else ""
    ref_index: int | None  # the citation payload's own ref_index (signed by the citer), else None
    relation: str
    event_id: str
    created_at: str
    trust: str


def checked_title(meta: DisplayMetadata | None, record: Mapping[str, Any]) -> str:
    """The supplied title, on one line, when it matches the record's title hash; else ""."""
    field = check(meta, dict(record))[0]
    return " ".join(field.value.split()) if field.value is not None and field.check == "match" else ""


def citing_row(
    view: Mapping[str, Any], citing_state: Mapping[str, Any] | None, citing_meta: DisplayMetadata | None
) -> CitingRow:
    """A row of ``inbound_citations.sample`` from a state's inbound view and the citing record's state."""
    payload = view.get("payload") if isinstance(view.get("payload"), dict) else {}
    assert isinstance(payload, dict)
    ref = payload.get("ref_index")
    arxiv, title = "", ""
    if citing_state is not None and citing_state.get("record_status") == "present":
        record = citing_state["current"]["canonical_record"]
        arxiv = str(record["source"]["id"])
        title = checked_title(citing_meta, record)
    return CitingRow(
        citing_pith_number=str(view.get("citing_pith_number", "")),
        citing_arxiv_id=arxiv,
        citing_title=title,
        ref_index=ref if type(ref) is int and 0 <= ref < _MAX_REF_INDEX else None,
        relation=str(payload.get("relation", "")),
        event_id=str(view.get("event_id", "")),
        created_at=str(view.get("created_at", "")),
        trust=str(view.get("trust", "")),
    )


def inbound_rows(
    state: Mapping[str, Any],
    state_of: Callable[[str], Mapping[str, Any] | None],
    meta_of: Callable[[dict[str, Any]], DisplayMetadata | None],
) -> list[CitingRow]:
    """The first :data:`SAMPLE` inbound citations of a record (state order: created_at, event_id), each
    with what this mirror knows of the citing record. ``state_of``/``meta_of`` do the reading."""
    rows = []
    for view in state["current"].get("inbound_citations", [])[:SAMPLE]:
        citing = state_of(str(view.get("citing_pith_number", "")))
        meta = (
            meta_of(citing["current"]["canonical_record"])
            if citing and citing.get("record_status") == "present"
            else None
        )
        rows.append(citing_row(view, citing, meta))
    return rows


# --- receipts and the record's own events -------------------------------------------------------------


def _standing_records(state: Mapping[str, Any], events: Iterable[Any]) -> list[tuple[dict[str, Any], str, str]]:
    """(event, event_id, receipt key) of each valid, standing record_created event for this record, in
    event_id order. Verified again here (pure), as the page does: the state names receipts by key only."""
    cur = state["current"]
    revoked = set(state.get("revoked_event_ids", []))
    out: dict[str, tuple[dict[str, Any], str, str]] = {}
    for event in events:
        if not isinstance(event, dict) or event.get("event_type") != "record_created":
            continue
        verdict = verify_event(event)
        if (
            verdict.status != "valid"
            or verdict.event_id in revoked
            or verdict.subject != state["pith_number"]
            or verdict.facts.get("canonical_sha256") != cur["canonical_sha256"]
        ):
            continue
        out.setdefault(verdict.event_id, (event, verdict.event_id, str(verdict.facts.get("receipt_key", ""))))
    return [out[k] for k in sorted(out)]


def _receipt(digest: str, receipt: Mapping[str, Any], key_id: str) -> dict[str, Any]:
    """A verified receipt in Pith's shape, from what its signature authenticates and what the check fixes."""
    reg = keys.PITH_REGISTRY_KEYS[key_id]
    doc: dict[str, Any] = {name: "" for name in RECEIPT_UNAUTHENTICATED}
    doc.update(
        {
            "kind": "pith_receipt",
            "key_id": key_id,
            "algorithm": "ed25519",
            "signature_b64": str(receipt["signature_b64"]),
            "signed_message": "canonical_sha256_bytes",
            "canonical_sha256": digest,
            "public_key_fingerprint": reg.fingerprint,
        }
    )
    return doc


def _times(state: Mapping[str, Any], records: list[tuple[dict[str, Any], str, str]]) -> tuple[str, str]:
    """(created_at, updated_at): the earliest and latest signed ``created_at`` of the record's standing
    events (our envelope signs it; Pith's does not, so a Pith-envelope record_created adds none), the
    latest also over its standing inbound citations; the record's ``submitted_at`` when none is signed."""
    cur = state["current"]
    own = [str(v["created_at"]) for slot in _SLOTS for v in cur.get(slot, [])]
    own += [str(e["created_at"]) for e, _, _ in records if is_pithledger_envelope(e)]
    later = own + [str(v["created_at"]) for v in cur.get("inbound_citations", [])]
    fallback = str(cur["canonical_record"]["metadata"]["submitted_at"])
    return (min(own) if own else fallback), (max(later) if later else fallback)


# --- the document -------------------------------------------------------------------------------------


#: What ``pithledger_claims["paper.<key>"]`` says of a display field served in ``paper`` (spec/serve.md §2.1):
#: the record's hash of it matches (``checked``), no hash here can check it and it is served as supplied
#: (``unchecked``: authors, always; an abstract supplied as Pith's excerpt), it differs from the record's hash
#: and is not served (``mismatch``), or nothing was supplied (``none``).
_FIELD_CLAIM = {"match": "checked", "excerpt": "unchecked", "mismatch": "mismatch"}


def _paper(record: Mapping[str, Any], meta: DisplayMetadata | None) -> tuple[dict[str, Any], dict[str, str]]:
    """Pith's ``paper`` block and, for its three display fields, what stands behind each (``pithledger_claims``).
    Display metadata is outside consensus: text no hash can check (authors, an excerpt) is served as Pith serves
    it, marked ``unchecked``, never as the record's; text that contradicts the record's hash is not served."""
    md = record["metadata"]
    fields = {f.name: f for f in check(meta, dict(record))}
    title, authors, abstract = fields["title"], fields["authors"], fields["abstract"]

    def claim(field: FieldView) -> str:
        return "none" if field.value is None else _FIELD_CLAIM.get(field.check, "unchecked")

    def served(field: FieldView) -> str:
        if field.value is None or field.check == "mismatch":
            return ""
        # Pith's excerpt exactly as Pith cut it; other text on one line (an arXiv abstract spans lines)
        return field.value if field.check == "excerpt" else " ".join(field.value.split())

    paper = {
        "title": checked_title(meta, record),
        "authors_text": served(authors),
        "abstract_excerpt": served(abstract)[:EXCERPT],  # Pith's excerpts: the abstract's first 600 characters
        "headline": "",
        "license": md["license"],
        "primary_cat": md["primary_cat"],
        "cross_cats": list(md["cross_cats_sorted"]),
        "submitted_at": md["submitted_at"],
    }
    claims = {
        "paper.title": {"match": "checked", "mismatch": "mismatch"}.get(title.check, "none"),
        "paper.authors_text": claim(authors),
        "paper.abstract_excerpt": claim(abstract),
    }
    return paper, claims


def _empty_graph(paper: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """Pith's graph snapshot with Pith's empty values: no analysis was run here."""
    return {
        "paper": paper,
        "source": source,
        "builder_version": "",
        "claims": {"count": 0, "items": [], "snapshot_sha256": ""},
        "verdict": {
            "id": None,
            "model_set": {},
            "created_at": None,
            "strongest_claim": "",
            "one_line_summary": "",
            "pipeline_version": None,
            "weakest_assumption": "",
            "pith_extraction_headline": "",
        },
        "integrity": {
            "clean": False,
            "summary": {"advisory": 0, "critical": 0, "by_detector": {}, "informational": 0},
            "endpoint": "",
            "findings": [],
            "available": False,
            "detectors_run": [],
            "snapshot_sha256": "",
        },
        "references": {"count": 0, "sample": [], "resolved_work": 0, "snapshot_sha256": "", "internal_anchors": 0},
        "formal_canon": {"evidence_count": 0, "snapshot_sha256": ""},
        "author_claims": {"count": 0, "strong_count": 0, "snapshot_sha256": ""},
    }


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "other"


def _overlay(shape: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``shape`` with each value ``given`` holds at the same key path with the same JSON type (objects
    recursively); keys ``shape`` lacks are added as given. So the result always has Pith's shape."""
    out = dict(shape)
    for k, v in given.items():
        if k not in shape:
            out[k] = v
        elif isinstance(shape[k], dict) and isinstance(v, dict):
            out[k] = _overlay(shape[k], v)
        elif shape[k] is None or _json_type(shape[k]) == _json_type(v):
            out[k] = v
    return out


def _registry_snapshot(cur: Mapping[str, Any]) -> dict[str, Any] | None:
    """The latest graph snapshot signed by a Pith registry key, if one stands."""
    views = [v for v in cur.get("graph_snapshots", []) if v.get("trust") == "registry"]
    if not views:
        return None
    latest = max(str(v["created_at"]) for v in views)
    view = min((v for v in views if str(v["created_at"]) == latest), key=lambda v: str(v["event_id"]))
    snap = view["payload"].get("graph_snapshot")
    return snap if isinstance(snap, dict) else None


def _status(cur: Mapping[str, Any], receipt_verified: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """Pith's 12 ``verification_status`` keys with Pith's meaning, and what stands behind each boolean
    (``pithledger_claims``: "checked", "registry-signed", "pending", "claimed" or "none")."""
    authors, anchors = cur["author_attestations"], cur["timestamp_anchors"]
    registry_authors = [a for a in authors if a.get("trust") == "registry"]
    strong = sum(a.get("strength") == "strong" for a in authors)
    snapshots = cur["graph_snapshots"]
    registry_snapshot = any(v.get("trust") == "registry" for v in snapshots)
    bridges = [
        r
        for r in cur["replication_records"]
        if r["payload"].get("replication_type") == "formal_bridge" and r["payload"].get("outcome") == "succeeded"
    ]
    registry_bridge = any(r.get("trust") == "registry" for r in bridges)
    status = {
        "content_addressed": True,
        "pith_receipt": receipt_verified,
        "author_attested": bool(registry_authors),
        "weak_author_claims": len(authors) - strong,
        "strong_author_claims": strong,
        "externally_anchored": any(a.get("anchor_state") == "bitcoin" for a in anchors),  # headers checked
        "storage_verified": False,  # needs the capture fetched and compared: not done here
        "citation_signatures": len(cur["citations"]),
        "replication_records": len(cur["replication_records"]),
        "graph_snapshot": registry_snapshot,
        "references_resolved": False,  # Pith's reference resolution is server-side analysis this mirror does not do
        "formal_links_present": registry_bridge,
    }

    def level(registry: bool, claimed: bool) -> str:
        return "registry-signed" if registry else "claimed" if claimed else "none"

    claims = {
        "content_addressed": "checked",
        "pith_receipt": "checked" if receipt_verified else "none",
        "author_attested": level(bool(registry_authors), bool(authors)),
        "externally_anchored": (
            "checked"
            if any(a.get("anchor_state") == "bitcoin" for a in anchors)
            else "claimed"
            if any(a.get("anchor_state") == "claimed" for a in anchors)
            else "pending"
            if anchors
            else "none"
        ),
        "storage_verified": "claimed" if cur["storage_attestations"] else "none",
        "graph_snapshot": level(registry_snapshot, bool(snapshots)),
        "references_resolved": "claimed" if cur["citations"] else "none",
        "formal_links_present": level(registry_bridge, bool(bridges)),
    }
    return status, claims


def record_document(
    state: Mapping[str, Any],
    events: Iterable[Any],
    valid_ids: Iterable[str],
    meta: DisplayMetadata | None,
    inbound: list[CitingRow],
    urls: Urls,
) -> dict[str, Any]:
    """Pith's ``pith_number_record`` for a present record (spec/serve.md §2), plus this mirror's own keys.
    ``events``: the record's copies as held; ``valid_ids``: the ledger ids of its valid events."""
    cur = state["current"]
    number = str(state["pith_number"])
    suffix = ids.suffix_of_pith_number(number)
    short = f"pith:{suffix[:8]}"
    record = cur["canonical_record"]
    digest = str(cur["canonical_sha256"])
    src = record["source"]
    arxiv = str(src["id"])
    source = {"kind": src["kind"], "id": src["id"], "version": src["version"]}
    events = list(events)
    records = _standing_records(state, events)
    receipts = []
    for event, _, key_id in records:
        if key_id and key_id in keys.PITH_REGISTRY_KEYS:
            receipts.append(_receipt(digest, event["payload"]["receipt"], key_id))
    status, claims = _status(cur, bool(receipts))
    paper, paper_claims = _paper(record, meta)
    claims = {**claims, **paper_claims}
    graph = _empty_graph(paper, source)
    registry_snapshot = _registry_snapshot(cur)
    if registry_snapshot is not None:
        given = {k: v for k, v in registry_snapshot.items() if k not in ("paper", "source")}
        graph = _overlay(graph, given)
    standing = sorted(
        (v for slot in _SLOTS for v in cur.get(slot, [])), key=lambda v: (str(v["created_at"]), str(v["event_id"]))
    )
    # The valid events themselves, as signed, so a reader can check each and apply the document: ours only
    # (Pith's envelope signs nothing but the receipt, which the document carries as `receipt`).
    signed = [e for e in _valid_held(events, valid_ids) if is_pithledger_envelope(e)]
    summary: dict[str, int] = {}
    for v in standing:
        summary[str(v["event_type"])] = summary.get(str(v["event_type"]), 0) + 1
    created_at, updated_at = _times(state, records)
    html, json_url = urls.page(f"pith/{suffix}"), urls.at(f"pith/{suffix}.json")
    graph_url, events_url = (
        urls.at(f"api/pith-number/{suffix}/graph.json"),
        urls.at(f"api/pith-number/{suffix}/events.json"),
    )
    # paper/<short8> is a redirect only a server computes; a static tree names the page it leads to (spec/serve.md §7)
    paper_url = urls.page(f"paper/{suffix[:8]}") if urls.server else html
    resolve_url = (
        urls.at(f"api/pith-number/resolve?arxiv={urllib.parse.quote(arxiv, safe='')}&json=true")
        if urls.server
        else urls.at(f"api/pith-number/{suffix}/resolve.json")
    )
    doc: dict[str, Any] = {
        # --- Pith's keys ---
        "record_type": RECORD_TYPE,
        "schema_url": urls.at(SCHEMA_PATH),
        "pith_number": number,
        "short_pith_number": short,
        "schema_version": record.get("schema_version", SCHEMA_VERSION),
        "canonical_sha256": digest,
        "source": source,
        "attestation_state": "computed",
        "paper": paper,
        "verification_status": status,
        "canonical_record": record,
        "receipt": receipts[0] if receipts else None,
        "graph_snapshot": graph,
        "aliases": cur["source_aliases"],
        "events": signed[:MAX_EVENTS],
        "event_summary": summary,
        "paper_claims": [],
        "inbound_citations": {
            "count": len(cur.get("inbound_citations", [])),
            "internal_anchor_count": 0,
            "sample": [
                {
                    "citing_arxiv_id": r.citing_arxiv_id,
                    "citing_title": r.citing_title,
                    "ref_index": r.ref_index,
                    "is_internal_anchor": False,
                    "citing_pith_number": r.citing_pith_number,
                    "relation": r.relation,
                    "event_id": r.event_id,
                    "created_at": r.created_at,
                    "trust": r.trust,
                }
                for r in inbound[:SAMPLE]
            ],
        },
        "formal_canon": {"evidence_count": 0, "sample": [], "anchors": []},
        "links": {
            "html": html,
            "json": json_url,
            "graph_json": graph_url,
            "events_json": events_url,
            "paper": paper_url,
            # this mirror's own files
            "bundle": urls.at(f"pith/{suffix}/bundle.json"),
            "state": urls.at(f"pith/{suffix}/state.json"),
            "events": urls.at(f"pith/{suffix}/events.json"),
            "well_known_bundle": urls.at(f".well-known/pith/{suffix}/bundle.json"),
            "signing_key": urls.at("pith-signing-key.json"),
            "mirrors": urls.at("pith-mirrors.json"),
        },
        "agent_actions": {
            "view_html": html,
            "download_json": json_url,
            "view_paper": paper_url,
            "resolve_alias": resolve_url,
            "fetch_graph": graph_url,
            "fetch_events": events_url,
            "actions": {name: urls.at(f"pith/{suffix}/action/{kind}") for name, kind in ACTIONS.items()},
        },
        "created_at": created_at,
        "updated_at": updated_at,
        # --- this mirror's own keys ---
        "@context": "https://schema.org",
        "@type": "ScholarlyArticle",
        "@id": html,
        "identifier": [number, short, f"arXiv:{arxiv}", ids.arxiv_doi(arxiv)],
        "sameAs": [f"https://arxiv.org/abs/{arxiv}v{src['version']}", f"https://doi.org/{ids.arxiv_doi(arxiv)}"],
        "source_aliases": cur["source_aliases"],
        "pithledger_claims": claims,
        "pithledger_receipts": receipts,
        "pithledger_event_count": len(standing),
        "record_signers": cur["record_signers"],
        "badges": cur["badges"],
        "merge_version": state["merge_version"],
        "state_sha256": state["state_sha256"],
        "display_metadata": [msgspec.to_builtins(f) for f in check(meta, dict(record))],
    }
    return doc


def graph_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``/api/pith-number/<suffix>/graph.json``: the record document's ``graph_snapshot``, naming its record."""
    return {**doc["graph_snapshot"], "pith_number": doc["pith_number"], "canonical_sha256": doc["canonical_sha256"]}


def resolution(state: Mapping[str, Any], urls: Urls) -> dict[str, Any]:
    """What the resolver answers with ``json=true`` for a present record."""
    number = str(state["pith_number"])
    suffix = ids.suffix_of_pith_number(number)
    return {
        "pith_number": number,
        "short_pith_number": f"pith:{suffix[:8]}",
        "canonical_sha256": state["current"]["canonical_sha256"],
        "arxiv_id": state["current"]["canonical_record"]["source"]["id"],
        "url": urls.page(f"pith/{suffix}"),
        "json": urls.at(f"pith/{suffix}.json"),
    }


def events_document(
    number: str, held: Iterable[Any], valid_ids: Iterable[str], inbound_bundles: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """``/api/pith-number/<suffix>/events.json``: the record's valid events as held (event_id order; the
    unverified copies a bundle also carries are left out) and the standing citations of it by others."""
    return {
        "pith_number": number,
        "events": _valid_held(held, valid_ids),
        "inbound_citations": [e for b in inbound_bundles for e in b.get("events", [])],
    }


def _valid_held(held: Iterable[Any], valid_ids: Iterable[str]) -> list[dict[str, Any]]:
    """One held copy of each valid event, in event_id order (never arrival order)."""
    wanted = set(valid_ids)
    found: dict[str, dict[str, Any]] = {}
    for event in held:
        if isinstance(event, dict) and (eid := _held_id(event)) in wanted:
            found.setdefault(eid, event)
    return [found[k] for k in sorted(found)]


def _held_id(event: dict[str, Any]) -> str:
    """The ledger identity of a held copy, computed without a signature check (the ledger checked it)."""
    if is_pithledger_envelope(event):
        return compute_event_id(event)
    payload = event.get("payload")
    receipt = payload.get("receipt") if isinstance(payload, dict) else None
    if (
        isinstance(payload, dict)
        and isinstance(receipt, dict)
        and all(
            isinstance(x, str)
            for x in (payload.get("canonical_sha256"), receipt.get("key_id"), receipt.get("signature_b64"))
        )
    ):
        return pith_record_event_id(payload["canonical_sha256"], receipt["key_id"], receipt["signature_b64"])
    return ""


def schema_bytes() -> bytes:
    """The JSON Schema (2020-12) of the record document, shipped as package data."""
    return importlib.resources.files("pithledger").joinpath("schemas", "pith-number-v1.json").read_bytes()
