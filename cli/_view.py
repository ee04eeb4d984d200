"""A person's view of a state document: what is known, who says so, and what was checked.

Pure: a state value in, lines of text out. The JSON (``state ID``) stays the consensus bytes. Every
string of an event is the signer's, so every line is made printable (control and bidi characters
escaped, :func:`cli._output.printable`): a newline in a name cannot forge a line of the view.
"""

from __future__ import annotations

from typing import Any

from pithledger.cli._output import printable
from pithledger.merge import CHECKED


def _who(view: dict[str, Any]) -> str:
    signer = view["signer"]
    name = signer.get("signer_id") or signer.get("key_id")
    return f"{name} [{view['trust']}, fp {signer.get('public_key_fingerprint', '')[:16]}]"


def _detail(view: dict[str, Any]) -> str:
    p, kind = view["payload"], view["event_type"]
    if kind == "timestamp_anchor":
        block = view.get("bitcoin_block")
        if isinstance(block, dict):
            return (
                f"Bitcoin attestation checked against block {block['block_hash']} (work {block['work']}; "
                f"{block['headers']} header(s), {block['run_work']} in all); height {block['height']} and time "
                f"{block['time']} as claimed"
            )
        heights = ", ".join(map(str, view.get("bitcoin_heights", [])))
        return (
            f"Bitcoin height {heights} claimed"
            if heights
            else "pending at " + ", ".join(view.get("pending_calendars", []))
        )
    if kind == "storage_attestation":
        return f"{p['capture_url']}"
    if kind == "author_attestation":
        return f"{p['author_name']}" + (f" (ORCID {p['orcid']})" if p.get("orcid") else "") + f", {view['strength']}"
    if kind == "replication_record":
        return f"{p['replication_type']} {p['outcome']}: {p['artifact_url']}"
    if kind == "integrity_finding":
        return f"{p['severity']} {p['finding_type']}: {p['description']}"
    if kind == "challenge":
        return f"challenges {p['challenged_event_id']}: {p['reason']}"
    return "snapshot (see the JSON)"


def render(state: dict[str, Any]) -> list[str]:
    return [printable(line) for line in _lines(state)]


def _lines(state: dict[str, Any]) -> list[str]:
    number = state["pith_number"]
    cur = state["current"]
    out = [
        f"{number}   {state['record_status']}   {state['event_count']} valid events   merge {state['merge_version']}"
    ]
    if state["record_status"] != "present":
        out.append("  no record_created event stands yet: the events below wait for the record")
        out += [f"  pending {eid}" for eid in state["pending_event_ids"]]
        return out
    rec = cur["canonical_record"]
    suffix = number.rsplit(":", 1)[-1]
    out.append(
        f"  short  pith:{suffix[:8]}   arXiv {rec['source']['id']}v{rec['source']['version']}   "
        f"primary {rec['metadata']['primary_cat']}   submitted {rec['metadata']['submitted_at']}"
    )
    out.append(f"  canonical_sha256 {cur['canonical_sha256']} (recomputed)")
    out.append("  aliases  " + " · ".join(f"{a['alias_kind']} {a['alias_value']}" for a in cur["source_aliases"]))
    if cur["record_receipts"]:
        out.append(
            f"  record   Pith receipt by {', '.join(cur['record_receipts'])}: signature over the digest VERIFIED"
        )
    else:
        out.append(
            "  record   no Pith receipt: vouched for only by its signers, "
            + ", ".join(s[:28] + "…" for s in cur["record_signers"])
        )
    out.append("  badges   " + " · ".join(f"{k}: {v}" for k, v in sorted(cur["badges"].items())))
    claims = [
        v
        for slot in (
            "timestamp_anchors",
            "storage_attestations",
            "author_attestations",
            "replication_records",
            "integrity_findings",
            "challenges",
            "graph_snapshots",
        )
        for v in cur[slot]
    ]
    if claims:
        out.append("  claims")
        for v in sorted(claims, key=lambda v: (v["created_at"], v["event_id"])):
            out.append(f"    {v['created_at']}  {v['event_type']:<20} {_detail(v)}")
            out.append(f"      by {_who(v)}; {CHECKED.get(v['event_type'], 'signature checked')}")
    for title, key, other in (
        ("cites", "citations", "cited_pith_number"),
        ("cited by", "inbound_citations", "citing_pith_number"),
    ):
        for v in cur[key]:
            target = v.get(other) or v["payload"]["cited_pith_number"]
            out.append(f"  {title:<9}{v['payload']['relation']:<12} {target}   by {_who(v)}, {v['created_at']}")
    for r in cur["revocations"]:
        out.append(f"  revoked  {r['revoked_event_id']} by {r['event_id']}")
    for q in state["equivocations"]:
        out.append(
            f"  EQUIVOCATION {q['slot']} by {q['signer'][:28]}… at {q['created_at']}: {', '.join(q['event_ids'])}"
        )
    for u in state["unknown_kinds"]:
        out.append(f"  unknown kind {u['event_type']} {u['event_id']} (held, not folded)")
    out.append(f"  state_sha256 {state['state_sha256']}")
    return out
