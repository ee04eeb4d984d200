"""Record pages, the site index and the record JSON: pure rendering from a state document, the record's
events as exported, and supplied display metadata. No IO, no clock: ``serve`` and ``publish`` call the
same functions, so a static host shows the same page as the server (spec/serve.md §5).

Every string that comes from a bundle is attacker-controlled: everything is HTML-escaped (quotes
included), only ``http``/``https`` URLs become links, and the page runs no script or style but the two
inline blocks below, whose hashes the Content-Security-Policy names.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

import msgspec

from pithledger.errors import BadEncoding, UnknownKey, VerificationFailed
from pithledger.merge import CHECKED
from pithledger.records import ids, keys
from pithledger.records.display import DisplayMetadata, FieldView, check
from pithledger.records.events import verify_event
from pithledger.render import badge

#: Rows of one list on a page; the rest is in state.json (a record flooded with events stays readable).
MAX_ROWS = 200

_SAFE_URL = re.compile(r"^https?://[!-~]+\Z", re.ASCII)

STYLE = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;--ok:#1a7f37;--warn:#9a6700;--bad:#cf222e;--acc:#0b5cad}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg)}
header.top{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1.5rem;border-bottom:1px solid var(--line);background:var(--soft)}
header.top a{color:var(--fg);text-decoration:none;font-weight:600}
header.top form{margin-left:auto;display:flex;gap:.4rem}
input[type=search]{width:22rem;max-width:50vw;padding:.3rem .5rem;border:1px solid var(--line);border-radius:6px;font:inherit}
main{max-width:980px;margin:0 auto;padding:1.2rem 1.5rem 3rem}
h1{font-size:1.5rem;margin:.3rem 0 .2rem}
h2{font-size:1.05rem;margin:1.6rem 0 .5rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
a{color:var(--acc)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.86em;overflow-wrap:anywhere}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:.7rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.numbers{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center}
.num{display:flex;flex-wrap:wrap;align-items:center;gap:.4rem;min-width:0;max-width:100%}
.num .label{color:var(--muted);font-size:.8rem;text-transform:uppercase;letter-spacing:.04em}
.num .value{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:1.05rem;font-weight:600;overflow-wrap:anywhere;min-width:0}
button.copy{font:inherit;font-size:.75rem;padding:.1rem .5rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);cursor:pointer}
button.copy[data-copied]{color:var(--ok);border-color:var(--ok)}
.badges{display:flex;flex-wrap:wrap;gap:.4rem;margin:.7rem 0}
.badge{display:inline-block;border:1px solid var(--line);border-radius:999px;padding:.05rem .6rem;font-size:.82rem;background:var(--soft)}
.badge b{font-weight:600;color:var(--muted)}
.badge.absent{color:var(--muted)}
.badge.claim{border-color:var(--warn);color:var(--warn);background:#fff8c5}
.badge.checked{border-color:var(--ok);color:var(--ok);background:#dafbe1}
.meta{color:var(--muted)}
.check{font-size:.75rem;border-radius:4px;padding:0 .35rem;margin-left:.4rem;border:1px solid}
.check.match{color:var(--ok);border-color:var(--ok)}
.check.mismatch{color:var(--bad);border-color:var(--bad)}
.check.unchecked,.check.excerpt{color:var(--muted);border-color:var(--line)}
.mismatched{text-decoration:line-through;color:var(--muted)}
ol.complete{list-style:none;padding:0;margin:0;counter-reset:c}
ol.complete li{counter-increment:c;display:flex;flex-wrap:wrap;gap:.3rem .6rem;padding:.35rem 0;border-bottom:1px dashed var(--line)}
ol.complete li::before{content:counter(c);display:inline-block;width:1.5rem;height:1.5rem;border-radius:50%;text-align:center;font-size:.8rem;line-height:1.5rem;background:var(--soft);border:1px solid var(--line)}
ol.complete li.done::before{background:#dafbe1;border-color:var(--ok);color:var(--ok)}
ol.complete li.claimed::before{background:#fff8c5;border-color:var(--warn);color:var(--warn)}
ol.complete li.pending::before{border-style:dashed;border-color:var(--warn);color:var(--warn)}
ol.complete .what{font-weight:600;flex:0 0 10rem;max-width:40%}
ol.complete .detail{min-width:0;flex:1 1 16rem}
ol.complete .level{display:block;font-size:.75rem;font-weight:400;color:var(--muted)}
ol.complete li.done .level{color:var(--ok)}ol.complete li.claimed .level,ol.complete li.pending .level{color:var(--warn)}
.howto{display:block;color:var(--muted);font-size:.85rem}
.howto code.cmd{display:block;margin:.15rem 0 .15rem 1rem;color:var(--fg)}
table{display:block;overflow-x:auto;max-width:100%;font-size:.9rem}
table>tbody{display:table;border-collapse:collapse;width:100%}
table.wide>tbody{min-width:40rem}
table.timeline>tbody{min-width:52rem}
th,td{text-align:left;vertical-align:top;padding:.3rem .5rem;border-bottom:1px solid var(--line);overflow-wrap:anywhere}
td.when,td.kind{white-space:nowrap;overflow-wrap:normal}
h3{font-size:.95rem;margin:1rem 0 .4rem}
.checked-here{display:block;font-size:.75rem;color:var(--muted)}
th{color:var(--muted);font-weight:600;white-space:nowrap}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}
dl.kv dt{color:var(--muted)}
dl.kv dd{margin:0;overflow-wrap:anywhere}
.ok{color:var(--ok);font-weight:600}.bad{color:var(--bad);font-weight:600}.warn{color:var(--warn);font-weight:600}
.trust{font-size:.75rem;color:var(--muted)}
footer{margin-top:2.5rem;color:var(--muted);font-size:.8rem;overflow-wrap:anywhere}
#badge-preview{overflow-x:auto}
"""

SCRIPT = """
function pithCopyFallback(t){var a=document.createElement('textarea');a.value=t;a.setAttribute('readonly','');a.style.position='fixed';a.style.opacity='0';document.body.appendChild(a);a.select();try{document.execCommand('copy');}catch(x){}document.body.removeChild(a);}
document.addEventListener('click',function(e){var b=e.target.closest('button[data-copy]');if(!b){return;}var t=b.getAttribute('data-copy');var done=function(){b.textContent='copied';b.setAttribute('data-copied','1');};if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then(done,function(){pithCopyFallback(t);done();});}else{pithCopyFallback(t);done();}});
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


#: The policy every page is served with (and carries in a meta element, for static hosts).
CSP = (
    f"default-src 'none'; script-src {_csp_hash(SCRIPT)}; style-src {_csp_hash(STYLE)}; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'"
)
CSP_HEADER = CSP + "; frame-ancestors 'none'"


# --- helpers ------------------------------------------------------------------------------------------


#: Bidi embeddings, overrides, isolates and marks: HTML escaping leaves them, and one in a signer's string
#: would reorder the text around it on the page (spec/serve.md §5). Shown as ``\\uNNNN``.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def e(value: Any) -> str:
    """HTML-escape anything (quotes too, so it is safe inside attribute values); bidi controls shown escaped."""
    return escape(_BIDI.sub(lambda m: f"\\u{ord(m[0]):04x}", str(value)), quote=True)


#: Characters of an event's free text (a description, a reason, a name) shown in a row: a record's rows
#: are capped at MAX_ROWS, and each event may be up to 1 MiB, so uncut rows made pages of tens of MiB.
MAX_TEXT = 300


def clip(value: Any) -> str:
    """:func:`e` of an event's free text, cut to :data:`MAX_TEXT` characters (the whole is in state.json)."""
    text = str(value)
    return e(text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…")


def safe_url(url: Any) -> str | None:
    """The URL if it is an absolute http(s) URL of printable ASCII without spaces; else None."""
    if isinstance(url, str) and len(url) <= 2048 and _SAFE_URL.match(url):
        return url
    return None


def link(url: Any, text: Any | None = None) -> str:
    """A link for a safe http(s) URL; anything else is shown as escaped text, not linked."""
    ok = safe_url(url)
    label = e(text if text is not None else url)
    if ok is None:
        return f'<span class="mono">{label}</span>'
    return f'<a href="{e(ok)}" rel="nofollow noopener noreferrer">{label}</a>'


def _oneline(text: str) -> str:
    return " ".join(text.split())


def _copy(text: str, label: str = "copy") -> str:
    return f'<button type="button" class="copy" data-copy="{e(text)}" aria-label="copy {e(text)}">{e(label)}</button>'


_SUFFIX_RE = re.compile(r"^[A-Z2-7]{26}\Z")


class Links(msgspec.Struct, frozen=True):
    """How a page links to its site. ``root``: relative path from the page to the site root (the server's
    page at /pith/<suffix> uses "../", a static pith/<suffix>/index.html "../../"); ``page``: what follows
    pith/<suffix> to name a record page ("" on the server, "/index.html" on a static host);
    ``base_url``: the absolute URL shown in copy-paste commands."""

    root: str = "../"
    page: str = ""
    base_url: str = "http://127.0.0.1:8080"
    server: bool = True  # content negotiation and /resolve exist

    def record(self, pith_number: str) -> str:
        suffix = ids.suffix_of_pith_number(pith_number)
        if not _SUFFIX_RE.match(suffix):
            return "#"
        return f"{self.root}pith/{suffix}{self.page}"

    def file(self, rel: str) -> str:
        return f"{self.root}{rel}"


# --- what the page needs from the record's events ----------------------------------------------------


class ReceiptView(msgspec.Struct, frozen=True):
    key_id: str
    algorithm: str
    signed_at: str
    signature_b64: str
    digest: str  # the canonical_sha256 the receipt signs
    result: str  # "verified" | "fails" | "unknown-key"
    fingerprint: str = ""
    public_key_b64: str = ""
    extra: dict[str, str] = {}  # other string fields of the receipt (builder, schema, ...), as given


class RecordSigner(msgspec.Struct, frozen=True):
    event_id: str
    created_at: str
    signer_id: str
    key_id: str
    fingerprint: str
    trust: str


class RecordFacts(msgspec.Struct, frozen=True):
    receipts: list[ReceiptView]
    signers: list[RecordSigner]


def receipt_view(digest_hex: str, receipt: dict[str, Any]) -> ReceiptView:
    """A receipt with this mirror's own check of its signature (Ed25519 over the raw 32-byte digest)."""
    key_id = str(receipt.get("key_id", ""))
    sig = str(receipt.get("signature_b64", ""))
    reg = keys.PITH_REGISTRY_KEYS.get(key_id)
    result = "unknown-key"
    if reg is not None:
        try:
            keys.verify_receipt_signature(
                bytes.fromhex(digest_hex), keys.b64decode_strict(sig, length=keys.SIGNATURE_LEN), key_id
            )
            result = "verified"
        except (ValueError, VerificationFailed, BadEncoding, UnknownKey):
            result = "fails"
    known = {"key_id", "algorithm", "signed_at", "signature_b64", "kind"}
    return ReceiptView(
        key_id=key_id,
        algorithm=str(receipt.get("algorithm", "")),
        signed_at=str(receipt.get("signed_at", "")),
        signature_b64=sig,
        digest=digest_hex,
        result=result,
        fingerprint=reg.fingerprint if reg else "",
        public_key_b64=keys.b64encode(reg.public_key) if reg else "",
        extra={k: v for k, v in sorted(receipt.items()) if k not in known and isinstance(v, str)},
    )


def record_facts(state: dict[str, Any], events: Iterable[dict[str, Any]]) -> RecordFacts:
    """Receipts and signers of the record's standing ``record_created`` events, from its exported
    events (the state lists only their keys). Each is verified again here (pure)."""
    cur = state.get("current", {})
    digest = cur.get("canonical_sha256", "")
    receipts: list[ReceiptView] = []
    signers: list[RecordSigner] = []
    seen: set[str] = set()
    for event in events:
        if not isinstance(event, dict) or event.get("event_type") != "record_created":
            continue
        verdict = verify_event(event)
        if verdict.status != "valid" or verdict.event_id in seen or verdict.facts.get("canonical_sha256") != digest:
            continue
        seen.add(verdict.event_id)
        raw_signer = event.get("signer")
        signer: dict[str, Any] = raw_signer if isinstance(raw_signer, dict) else {}
        signers.append(
            RecordSigner(
                event_id=verdict.event_id,
                created_at=str(event.get("created_at", "")),
                signer_id=str(signer.get("signer_id", "")),
                key_id=str(signer.get("key_id", "")),
                fingerprint=str(signer.get("public_key_fingerprint", "")),
                trust=verdict.trust,
            )
        )
        payload = event.get("payload")
        receipt = payload.get("receipt") if isinstance(payload, dict) else None
        if isinstance(receipt, dict) and verdict.facts.get("receipt_key"):
            receipts.append(receipt_view(digest, receipt))
    signers.sort(key=lambda s: (s.created_at, s.event_id))
    return RecordFacts(receipts=receipts, signers=signers)


# --- the record page -------------------------------------------------------------------------------------

_SLOT_KINDS = (
    "timestamp_anchors",
    "storage_attestations",
    "author_attestations",
    "replication_records",
    "integrity_findings",
    "challenges",
    "graph_snapshots",
    "citations",
)


def _citation_table(title: str, views: list[dict[str, Any]], records: list[str], links: Links) -> list[str]:
    """One direction of a record's citations: each view with the other record it names."""
    if not views:
        return []
    out = [
        f'<h3>{title} ({len(views)})</h3><table class="wide"><tr><th>relation</th><th>record</th><th>signer</th><th>at</th></tr>'
    ]
    for v, record in zip(views[:MAX_ROWS], records):
        out.append(
            f"<tr><td>{e(v.get('payload', {}).get('relation', ''))}</td><td>{_record_link(record, links)}</td>"
            f'<td>{_trust(v)}</td><td class="when">{e(v.get("created_at", ""))}</td></tr>'
        )
    out.append("</table>")
    return out


def _signer_name(signer: Any) -> str:
    if not isinstance(signer, dict):
        return "?"
    return str(signer.get("signer_id") or signer.get("key_id") or "?")


def _badge_class(key: str, text: str) -> str:
    """The class of a state's badge word: the badge SVG's (one table, badge.VOCABULARY), so a trust level
    has one colour on the page and in the badge; a word outside it is "absent", never "checked"."""
    known = badge.VOCABULARY.get(key, {}).get(text)
    return known[0] if known is not None else "absent"


#: What each completeness level means, shown as the level's tooltip (spec/serve.md §5 item 5).
_LEVEL_NOTES = {
    "done": "checked by this mirror or signed by a Pith registry key",
    "claimed": "a signature was checked; what it claims was not checked by this mirror",
    "pending": "an OpenTimestamps proof with calendar promises only, no Bitcoin attestation yet",
    "open": "no evidence yet",
}


def _level(views: Sequence[dict[str, Any]]) -> str:
    """done when a registry-signed view stands (Pith's own word), claimed when only self-signed ones do."""
    if not views:
        return "open"
    return "done" if any(v.get("trust") == "registry" for v in views) else "claimed"


def _anchor_level(anchors: Sequence[dict[str, Any]]) -> str:
    """Done only when a Bitcoin attestation checked against the headers its event carries (anchor_state
    "bitcoin", spec/events.md §3.1.3), whoever signed it; a height nothing checked is a claim."""
    if any(a.get("anchor_state") == "bitcoin" for a in anchors):
        return "done"
    if any(a.get("anchor_state") == "claimed" for a in anchors):
        return "claimed"
    return "pending" if anchors else "open"


def _log2(work: Any) -> str:
    """A run's work (a decimal string) as a power of two, one decimal: what a reader can compare."""
    try:
        n = int(str(work))
    except ValueError:
        return "?"
    if n <= 0:
        return "?"
    return f"{math.log2(n):.1f}"


def _cmd(text: str) -> str:
    return f'<code class="cmd">{e(text)}</code>'


#: The step after signing, for every how-to.
_SEND = "then <code>pithledger apply</code> the bundle it writes to your ledger, or <code>pithledger submit</code> it to a mirror."


def _howto(number: str, kind: str, file: str, fields: str) -> str:
    """How to complete an open row: the commands that sign the event (text only: nothing links off the mirror)."""
    return (
        f'<span class="howto">To add one: {_cmd(f"pithledger event {kind} --example > {file}")}'
        f"fill in {e(fields)}, sign it: "
        f"{_cmd(f'pithledger event {kind} --subject {number} --key NAME --payload @{file} -o {kind}.json')}{_SEND}</span>"
    )


def _howto_anchor(number: str, level: str) -> str:
    """How to stamp the record with OpenTimestamps, finish a pending proof, or show a claimed block's work
    (README, "Timestamping a record")."""
    sign = _cmd(
        f"pithledger event timestamp_anchor --subject {number} --key NAME --ots record.canon.ots -o anchor.json"
    )
    if level == "claimed":
        return (
            '<span class="howto">To have it checked: put the attested block\'s header and the headers after it, one per '
            f"line, in headers.txt ({_cmd('bitcoin-cli getblockheader HASH false')}for each), then sign the proof with "
            f"them: {_cmd(f'pithledger event timestamp_anchor --subject {number} --key NAME --ots record.canon.ots --headers headers.txt -o anchor.json')}"
            f"{_SEND}</span>"
        )
    if level == "pending":
        return (
            '<span class="howto">To finish it once Bitcoin confirms (a few hours after stamping): '
            f"{_cmd('ots upgrade record.canon.ots')}then sign the upgraded proof: {sign}{_SEND}</span>"
        )
    return (
        '<span class="howto">Anyone can stamp the canonical hash: with bundle.json (below) and the OpenTimestamps client, '
        f"{_cmd('pithledger ids --canonical bundle.json > record.canon')}{_cmd('ots stamp record.canon')}"
        f"a few hours later {_cmd('ots upgrade record.canon.ots')}then sign the proof: {sign}{_SEND}</span>"
    )


BADGE_LABELS = (("author", "author"), ("timestamp", "timestamp"), ("storage", "storage"), ("references", "references"))


def _badges(badges: dict[str, str]) -> str:
    out = []
    for key, label in BADGE_LABELS:
        text = str(badges.get(key, ""))
        cls = _badge_class(key, text)
        note = (
            ' title="a claim: its signature was checked, what it claims was not checked by this mirror"'
            if cls == "claim"
            else ""
        )
        out.append(f'<span class="badge {cls}" data-badge="{e(key)}"{note}><b>{e(label)}</b> {e(text)}</span>')
    return '<div class="badges">' + "".join(out) + "</div>"


def _detail(view: dict[str, Any], links: Links) -> str:
    p = view.get("payload", {})
    kind = view.get("event_type")
    if not isinstance(p, dict):
        return ""
    if kind == "timestamp_anchor":
        block = view.get("bitcoin_block")
        if isinstance(block, dict):
            return (
                f"Bitcoin attestation checked against block {e(str(block.get('block_hash')))}: its header carries "
                f"2^{_log2(block.get('work'))} hashes of work ({e(str(block.get('headers')))} header(s), "
                f"2^{_log2(block.get('run_work'))} in all); height {e(str(block.get('height')))} and time "
                f"{e(str(block.get('time')))} as the attestation and the header say"
            )
        heights = ", ".join(str(h) for h in view.get("bitcoin_heights", []))
        return (
            f"Bitcoin block {e(heights)} claimed (no headers carried that show its work)"
            if heights
            else "pending at " + ", ".join(link(c) for c in view.get("pending_calendars", [])[:10])
        )
    if kind == "storage_attestation":
        return f"capture {link(p.get('capture_url'))} at {clip(p.get('captured_at', ''))}"
    if kind == "author_attestation":
        orcid = p.get("orcid")
        who = clip(p.get("author_name", ""))
        if isinstance(orcid, str) and re.fullmatch(r"[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]", orcid):
            who += " (ORCID " + link(f"https://orcid.org/{orcid}", orcid) + ")"
        return f"{who}, {clip(view.get('strength', ''))}"
    if kind == "replication_record":
        return f"{clip(p.get('replication_type', ''))} {clip(p.get('outcome', ''))}: {link(p.get('artifact_url'))}"
    if kind == "integrity_finding":
        return f"{clip(p.get('severity', ''))} {clip(p.get('finding_type', ''))}: {clip(p.get('description', ''))}"
    if kind == "challenge":
        return f'challenges <span class="mono">{e(str(p.get("challenged_event_id", ""))[:23])}…</span>: {clip(p.get("reason", ""))}'
    if kind == "citation_signature":
        cited = str(p.get("cited_pith_number", ""))
        return f"{clip(p.get('relation', ''))} {_record_link(cited, links)}"
    if kind == "graph_snapshot":
        return "graph snapshot (see state.json)"
    if kind == "record_created":
        return "the canonical record"
    return ""


def _record_link(number: str, links: Links) -> str:
    if ids.PITH_NUMBER_RE.match(number):
        return f'<a class="mono" href="{e(links.record(number))}">{e(number)}</a>'
    return f'<span class="mono">{e(number)}</span>'


def _trust(view: dict[str, Any]) -> str:
    signer = view.get("signer", {})
    fp = signer.get("public_key_fingerprint", "") if isinstance(signer, dict) else ""
    return (
        f'{clip(_signer_name(signer))}<br><span class="trust">{e(view.get("trust", ""))} · fp {e(str(fp)[:16])}</span>'
    )


def _fields(fields: Sequence[FieldView]) -> str:
    rows = []
    for f in fields:
        label = {
            "match": "matches the record's hash",
            "mismatch": "does NOT match the record's hash",
            "excerpt": "not checked: an excerpt (Pith cuts the abstract), so its hash cannot match the record's",
            "unchecked": "not checked: the record holds no hash of it" if f.name == "authors" else "not supplied",
        }[f.check]
        shown = "unchecked: excerpt" if f.check == "excerpt" else f.check
        tag = f'<span class="check {f.check}" data-check="{e(f.name)}" title="{e(label)}">{e(shown)}</span>'
        if f.value is None:
            value = '<span class="meta">not supplied to this mirror</span>'
        else:
            cls = ' class="mismatched"' if f.check == "mismatch" else ""
            text = f.value if f.name != "abstract" else f.value.strip()
            value = f"<span{cls}>{e(' '.join(text.split()))}</span>"
        rows.append(f"<tr><th>{e(f.name)}</th><td>{value}{tag}</td></tr>")
    return '<table class="display">' + "".join(rows) + "</table>"


def _page(title: str, body: str, links: Links, *, search: bool = True) -> str:
    form = ""
    if search and links.server:
        form = (
            f'<form method="get" action="{e(links.file("resolve"))}" role="search">'
            '<input type="search" name="id" placeholder="arXiv id, DOI, pith number or suffix" maxlength="200" aria-label="identifier">'
            '<button type="submit" class="copy">go</button></form>'
        )
    index = links.file("index.html") if not links.server else (links.root or "./")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{e(title)}</title><style>{STYLE}</style></head><body>"
        f'<header class="top"><a href="{e(index)}">pithledger mirror</a>{form}</header>'
        f"<main>{body}</main><script>{SCRIPT}</script></body></html>\n"
    )


def _completeness(number: str, cur: dict[str, Any], cites: list[Any], inbound: list[Any]) -> list[str]:
    """The record page's completeness list: a row is done only on evidence checked here or signed by a Pith
    registry key; evidence whose only backing is a self-signed signature is a claim (spec/serve.md §5 item 5)."""
    b: list[str] = []
    anchors, stores, authors = cur["timestamp_anchors"], cur["storage_attestations"], cur["author_attestations"]
    repl = cur["replication_records"]
    proofs = f"{len(anchors)} proof{'s' if len(anchors) != 1 else ''}"
    items = [
        (
            "Bitcoin timestamp",
            _anchor_level(anchors),
            f"{e(cur['badges'].get('timestamp', ''))} ({proofs})"
            + (
                ": checked against the Bitcoin headers its event carries"
                if _anchor_level(anchors) == "done"
                else ": no Bitcoin attestation here carries the headers that show its work"
            )
            if anchors
            else "",
            _howto_anchor(number, _anchor_level(anchors)),
        ),
        (
            "Internet Archive",
            "claimed" if stores else "open",
            ", ".join(link(s["payload"].get("capture_url"), "capture claimed") for s in stores[:5])
            + ": the capture is not fetched here"
            if stores
            else "",
            _howto(number, "storage_attestation", "capture.json", "capture_url, captured_at"),
        ),
        (
            "Author claim",
            _level(authors),
            ", ".join(
                f"{clip(a['payload'].get('author_name', ''))} ({clip(a.get('strength', ''))}, {e(a.get('trust', ''))})"
                for a in authors[:10]
            ),
            _howto(number, "author_attestation", "author.json", "author_name, orcid"),
        ),
        (
            "Citations",
            _level([*cites, *inbound]),
            f"{len(cites)} signed outbound, {len(inbound)} inbound" if cites or inbound else "",
            _howto(number, "citation_signature", "citation.json", "cited_pith_number, relation"),
        ),
        (
            "Replications",
            _level(repl),
            ", ".join(
                f"{clip(r['payload'].get('replication_type', ''))} {clip(r['payload'].get('outcome', ''))}"
                for r in repl[:10]
            ),
            _howto(number, "replication_record", "replication.json", "replication_type, outcome, artifact_url"),
        ),
    ]
    b.append('<h2>Record completeness</h2><ol class="complete">')
    for what, level, text, howto in items:
        # open and pending rows say how to complete them, and so does a claimed timestamp: how to carry the
        # headers that make it checked (spec/serve.md §5 item 5)
        instruct = level in ("open", "pending") or (level == "claimed" and what == "Bitcoin timestamp")
        detail = (text + " " if text else "") + howto if instruct else text
        b.append(
            f'<li class="{level}" data-item="{e(what)}"><span class="what">{e(what)} <span class="level" title="{_LEVEL_NOTES[level]}">'
            f'{level}</span></span><span class="detail">{detail}</span></li>'
        )
    b.append("</ol>")
    return b


def _receipt(cur: dict[str, Any], facts: RecordFacts, links: Links) -> list[str]:
    """The record page's receipt and verification: the recomputed hash, each receipt and who signed the record."""
    b: list[str] = []
    b.append("<h2>Receipt and verification</h2>")
    b.append(
        f'<dl class="kv"><dt>Canonical hash</dt><dd><span class="mono" id="canonical-hash">{e(cur["canonical_sha256"])}</span> '
        f'{_copy(cur["canonical_sha256"])} <span class="ok">recomputed by this mirror</span></dd></dl>'
    )
    if facts.receipts:
        for r in facts.receipts:
            verdict = {
                "verified": '<span class="ok" data-receipt="verified">signature verified by this mirror</span>',
                "fails": '<span class="bad" data-receipt="fails">signature does NOT verify</span>',
                "unknown-key": '<span class="warn" data-receipt="unknown-key">unknown key: not checked</span>',
            }[r.result]
            b.append('<dl class="kv receipt">')
            b.append(
                f"<dt>Signature</dt><dd>Pith {e(r.algorithm)} ({e(r.key_id)}) · "
                f'<a href="{e(links.file("pith-signing-key.json"))}">public key</a></dd>'
            )
            b.append(f'<dt>Key fingerprint</dt><dd class="mono">{e(r.fingerprint)}</dd>')
            b.append(f'<dt>Public key</dt><dd class="mono">{e(r.public_key_b64)}</dd>')
            b.append(f'<dt>Signed digest</dt><dd class="mono">{e(r.digest)} (the raw 32 bytes, not the hex text)</dd>')
            b.append(f'<dt>Signature (base64)</dt><dd class="mono">{e(r.signature_b64)}</dd>')
            b.append(
                "<dt>Signed at</dt><dd>"
                + (
                    e(r.signed_at)
                    if r.signed_at
                    else '<span class="meta">not covered by Pith\'s signature: not shown (copies of the receipt differ in it)</span>'
                )
                + "</dd>"
            )
            for name, text in r.extra.items():
                b.append(f"<dt>{e(name)}</dt><dd>{e(text)}</dd>")
            b.append(f"<dt>Verification</dt><dd>{verdict}</dd></dl>")
    else:
        b.append(
            '<p><span class="warn" data-receipt="none">No Pith receipt.</span> The record is vouched for only by its '
            "signer(s); its hash and number are recomputed here, so the number names exactly this record, but who "
            "vouches for it is a claim.</p>"
        )
    if facts.signers:
        b.append(
            '<table class="wide"><tr><th>record signed by</th><th>trust</th><th>key fingerprint</th><th>at</th></tr>'
        )
        for s in facts.signers[:MAX_ROWS]:
            b.append(
                f'<tr><td>{clip(s.signer_id or s.key_id)}</td><td>{e(s.trust)}</td><td class="mono">{e(s.fingerprint)}</td><td class="when">{e(s.created_at)}</td></tr>'
            )
        b.append("</table>")
    return b


def _aliases(cur: dict[str, Any]) -> list[str]:
    """The record page's aliases, each linked where it names a page."""
    b: list[str] = []
    b.append("<h2>Aliases</h2><table>")
    for a in cur["source_aliases"]:
        value, kind = str(a["alias_value"]), str(a["alias_kind"])
        if kind == "doi":
            shown = link(f"https://doi.org/{value}", value)
        elif kind in ("arxiv", "arxiv_version"):
            shown = link(f"https://arxiv.org/abs/{value}", value)
        else:
            shown = f'<span class="mono">{e(value)}</span>'
        b.append(f"<tr><th>{e(kind)}</th><td>{shown} {_copy(value)}</td></tr>")
    b.append("</table>")
    return b


def _timeline(state: dict[str, Any], facts: RecordFacts, links: Links, suffix: str) -> list[str]:
    """The record page's timeline of standing events, its revocations and equivocations."""
    cur = state["current"]
    b: list[str] = []
    views: list[dict[str, Any]] = [v for slot in _SLOT_KINDS for v in cur.get(slot, [])]
    views += [
        {
            "created_at": s.created_at,
            "event_id": s.event_id,
            "event_type": "record_created",
            "trust": s.trust,
            "payload": {},
            "signer": {"signer_id": s.signer_id, "key_id": s.key_id, "public_key_fingerprint": s.fingerprint},
        }
        for s in facts.signers
    ]
    views.sort(key=lambda v: (str(v.get("created_at", "")), str(v.get("event_id", ""))))
    b.append(f"<h2>Timeline ({len(views)} standing event{'s' if len(views) != 1 else ''})</h2>")
    b.append(
        '<table class="timeline"><tr><th>at</th><th>event</th><th>what · checked here</th><th>signer · trust</th></tr>'
    )
    for v in views[:MAX_ROWS]:
        kind = str(v.get("event_type", ""))
        b.append(
            f'<tr><td class="when">{e(str(v.get("created_at", "")).replace("T", " "))}</td><td class="kind">{e(kind)}<br><span class="trust mono">{e(str(v.get("event_id", ""))[:19])}…</span></td>'
            f'<td>{_detail(v, links)}<span class="checked-here">{e(CHECKED.get(kind, "signature checked"))}</span></td><td>{_trust(v)}</td></tr>'
        )
    b.append("</table>")
    if len(views) > MAX_ROWS:
        b.append(
            f'<p class="meta">{len(views) - MAX_ROWS} more in <a href="{e(links.file(f"pith/{suffix}/state.json"))}">state.json</a>.</p>'
        )
    for r in cur["revocations"][:MAX_ROWS]:
        b.append(
            f'<p class="meta">revoked <span class="mono">{e(r["revoked_event_id"])}</span> by <span class="mono">{e(r["event_id"])}</span></p>'
        )
    if state.get("equivocation_count"):
        b.append(
            f'<p class="bad">{e(state["equivocation_count"])} equivocation(s): one signer, two events for one slot (see state.json).</p>'
        )
    return b


def record_page(
    state: dict[str, Any], facts: RecordFacts, meta: DisplayMetadata | None, links: Links, *, mirror: str = ""
) -> str:
    """The record page: numbers, badges, completeness, receipt, aliases, citations, timeline, verify-yourself."""
    number = state["pith_number"]
    suffix = ids.suffix_of_pith_number(number)
    short = f"pith:{suffix[:8]}"
    cur = state["current"]
    record = cur["canonical_record"]
    src, md = record["source"], record["metadata"]
    fields = check(meta, record)
    title_field = fields[0]
    heading = (
        e(_oneline(title_field.value))
        if title_field.value is not None and title_field.check == "match"
        else f"arXiv {e(src['id'])}v{e(src['version'])}"
    )
    b: list[str] = []
    b.append('<p class="meta">Pith Number</p><div class="numbers">')
    b.append(
        f'<div class="num"><span class="label">short</span><span class="value" id="short-number">{e(short)}</span>{_copy(short)}</div>'
    )
    b.append(
        f'<div class="num"><span class="label">long</span><span class="value" id="long-number">{e(number)}</span>{_copy(number)}</div>'
    )
    b.append("</div>")
    b.append(_badges(cur["badges"]))
    b.append(f'<h1 id="title">{heading}</h1>')
    arxiv = f"https://arxiv.org/abs/{src['id']}v{src['version']}"
    cats = " ".join([md["primary_cat"], *md["cross_cats_sorted"]])
    b.append(
        f'<p class="meta">{link(arxiv, "arXiv:" + str(src["id"]) + " v" + str(src["version"]))} · submitted {e(md["submitted_at"])} · {e(cats)}'
        f"{' · license ' + link(md['license']) if md['license'] else ''}</p>"
    )
    b.append(
        '<h2>Title, authors, abstract</h2><p class="meta">Supplied to this mirror beside the record, not part of it: '
        "each field is shown with its check against the hash the record holds.</p>"
    )
    b.append(_fields(fields))

    cites, inbound = cur["citations"], cur["inbound_citations"]
    b += _completeness(number, cur, cites, inbound)
    b += _receipt(cur, facts, links)
    b += _aliases(cur)
    # citations both ways
    b.append("<h2>Citations</h2>")
    if not cites and not inbound:
        b.append('<p class="meta">No signed citations in either direction yet.</p>')
    b += _citation_table("Cites", cites, [str(v.get("payload", {}).get("cited_pith_number", "")) for v in cites], links)
    b += _citation_table("Cited by", inbound, [str(v.get("citing_pith_number", "")) for v in inbound], links)

    b += _timeline(state, facts, links, suffix)

    # files and verify yourself
    b.append("<h2>Portable graph bundle</h2><p>")
    b.append(
        f'<a id="bundle-link" href="{e(links.file(f"pith/{suffix}/bundle.json"))}">download bundle</a> · '
        f'<a id="state-link" href="{e(links.file(f"pith/{suffix}/state.json"))}">merged state</a>'
    )
    if links.server:
        b.append(f' · <a href="{e(links.file(f"pith/{suffix}/events.json"))}">events</a>')
    b.append(f' · <a href="{e(links.file("pith-mirrors.json"))}">mirror manifest</a></p>')
    b.append(
        '<p class="meta">The bundle holds the canonical record and its signed events; any mirror can host it and '
        "recompute the same state with the deterministic merge.</p>"
    )
    b.append(embed_section(state, links))
    b.append("<h2>Verify this Pith Number yourself</h2>")
    b.append(verify_snippets(state, links))
    b.append("<h2>Canonical record JSON</h2>")
    b.append(f'<pre id="canonical-record">{e(json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False))}</pre>')
    b.append(
        f"<footer>state_sha256 {e(state['state_sha256'])} · {e(state['merge_version'])}"
        f"{' · served by ' + e(mirror) if mirror else ''} · this page is rendered from the merged state; the JSON is authoritative</footer>"
    )
    return _page(
        f"{short} — {_oneline(title_field.value) if title_field.check == 'match' and title_field.value else 'arXiv ' + str(src['id'])}",
        "".join(b),
        links,
    )


def embed_section(state: dict[str, Any], links: Links) -> str:
    """ "Embed verified badge": the badge (inline SVG: no image request, so it shows under file:// too, and the
    page stays free of <img>, which hostile strings must never produce) and copy-ready HTML
    and Markdown linking ``pith/<suffix>/badge.svg`` to this page, on ``links.base_url`` (spec/badge-and-latex.md §1)."""
    number = state["pith_number"]
    suffix = ids.suffix_of_pith_number(number)
    if not _SUFFIX_RE.match(suffix):
        return ""
    short = f"pith:{suffix[:8]}"
    base = links.base_url.rstrip("/")
    page, image = f"{base}/pith/{suffix}{links.page}", f"{base}/pith/{suffix}/badge.svg"
    svg = badge.badge_svg(number, state["current"]["badges"])
    html = f'<a href="{page}"><img src="{image}" alt="{short}: Pith record" height="20"></a>'
    markdown = f"[![{short}: Pith record]({image})]({page})"
    out = [
        '<h2 id="embed">Embed verified badge</h2>',
        f'<p id="badge-preview">{svg.decode().strip()}</p>',
        '<p class="meta">The badge shows the short number and the four badges above in the same words; it links to this page.'
        + (" Replace <code>$MIRROR</code> with the address this tree is served at." if base.startswith("$") else "")
        + "</p>",
    ]
    for name, code in (("HTML", html), ("Markdown", markdown)):
        out.append(f'<h3>{name} {_copy(code)}</h3><pre class="snippet" data-embed="{e(name.lower())}">{e(code)}</pre>')
    return "".join(out)


def verify_snippets(state: dict[str, Any], links: Links) -> str:
    cur = state["current"]
    suffix = ids.suffix_of_pith_number(state["pith_number"])
    base = links.base_url.rstrip("/")
    digest = cur["canonical_sha256"]
    py_hash = (
        'python3 -c "import sys,json,hashlib; b=json.dumps(json.loads(sys.stdin.read()), sort_keys=True, '
        "separators=(',',':'), ensure_ascii=False).encode(); print(hashlib.sha256(b).hexdigest())\""
    )
    out = []
    if links.server:
        out.append(
            f"curl -sH 'Accept: application/ld+json' {base}/pith/{suffix} \\\n  | jq -c '.canonical_record' \\\n  | {py_hash}\n# expect: {digest}"
        )
    else:
        out.append(
            f"curl -s {base}/pith/{suffix}/bundle.json \\\n  | jq -c '.canonical_record' \\\n  | {py_hash}\n# expect: {digest}"
        )
    plain = (
        f"python3 - <<'EOF'\nimport base64, hashlib, json, urllib.request\n"
        f"doc = json.load(urllib.request.urlopen('{base}/pith/{suffix}/bundle.json'))\n"
        "rec = doc['canonical_record']\n"
        "d = hashlib.sha256(json.dumps(rec, sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode()).digest()\n"
        "print(d.hex())\n"
        "print('pith:' + rec['metadata']['submitted_at'][:4] + ':' + base64.b32encode(d).decode()[:26])\n"
        f"EOF\n# expect: {digest}\n#         {state['pith_number']}"
    )
    # The record's export, not its bundle: the state counts the citations by other records, which only the
    # export carries; applied to an empty ledger it gives exactly the state_sha256 promised here.
    ledger = (
        f"curl -s {base}/pith/{suffix}/export.jsonl -o export.jsonl   # what `pithledger export` prints\n"
        "pithledger verify export.jsonl          # every hash and signature, offline\n"
        "pithledger --ledger L apply export.jsonl\n"
        f"pithledger --ledger L state {suffix}   # the same state_sha256: {state['state_sha256']}"
    )
    blocks = [
        ("with curl, jq and Python (as on pith.science)", out[0]),
        ("plain Python", plain),
        ("with pithledger", ledger),
    ]
    return "".join(f'<h3>{e(t)}</h3><pre class="snippet">{e(c)}</pre>' for t, c in blocks)


# --- the site index ------------------------------------------------------------------------------------


class IndexRow(msgspec.Struct, frozen=True):
    pith_number: str
    arxiv: str
    submitted_at: str
    primary_cat: str
    badges: dict[str, str]
    title: str | None = None  # shown only when it matches the record's hash


def index_row(state: dict[str, Any], meta: DisplayMetadata | None) -> IndexRow | None:
    if state.get("record_status") != "present":
        return None
    cur = state["current"]
    rec = cur["canonical_record"]
    title = check(meta, rec)[0]
    return IndexRow(
        pith_number=state["pith_number"],
        arxiv=f"{rec['source']['id']}v{rec['source']['version']}",
        submitted_at=rec["metadata"]["submitted_at"],
        primary_cat=rec["metadata"]["primary_cat"],
        badges=cur["badges"],
        title=_oneline(title.value) if title.check == "match" and title.value else None,
    )


def index_page(
    rows: Sequence[IndexRow], roots: dict[str, Any], links: Links, *, mirror: str = "", error: str = ""
) -> str:
    b: list[str] = ["<h1>Pith records on this mirror</h1>"]
    if links.server:
        b.append(
            f'<form method="get" action="{e(links.file("resolve"))}" role="search"><p>'
            '<input type="search" id="q" name="id" placeholder="2605.00424, 10.48550/arxiv.2605.00424, pith:FZ7AO632, FZ7AO632…" maxlength="200" aria-label="identifier"> '
            '<button type="submit" class="copy">find</button></p></form>'
            '<p class="meta">Any identifier form: long or short Pith Number, 8/12/16/26-character suffix, arXiv id (with or without vN), arXiv DOI.</p>'
        )
    if error:
        b.append(f'<p class="bad" id="error">{e(error)}</p>')
    b.append('<h2>This mirror\'s digest roots</h2><dl class="kv" id="roots">')
    for k in ("events_root", "states_root", "records", "events", "digest_version", "merge_version"):
        if k in roots:
            b.append(f'<dt>{e(k)}</dt><dd class="mono">{e(roots[k])}</dd>')
    b.append(
        '</dl><p class="meta">Two mirrors holding the same valid events show the same roots '
        "(<code>pithledger digest</code>; <code>pithledger audit A B</code> names any record that differs). "
        f'<a href="{e(links.file("pith-mirrors.json"))}">mirror manifest</a> · '
        f'<a href="{e(links.file("pith-signing-key.json"))}">signing key</a>'
        + (f' · <a href="{e(links.file("digest.json"))}">digest.json</a>' if links.server else "")
        + "</p>"
    )
    b.append(f"<h2>Recent records ({len(rows)})</h2>")
    if rows:
        b.append(
            '<table class="records"><tr><th>Pith Number</th><th>arXiv</th><th>title</th><th>submitted</th><th>author · timestamp · storage · references</th></tr>'
        )
        for r in rows:
            title = e(r.title) if r.title else '<span class="meta">(not supplied)</span>'
            badge_text = " · ".join(e(r.badges.get(k, "")) for k, _ in BADGE_LABELS)
            short = "pith:" + ids.suffix_of_pith_number(r.pith_number)[:8]
            b.append(
                f'<tr><td class="when"><a class="mono" href="{e(links.record(r.pith_number))}" title="{e(r.pith_number)}">{e(short)}</a></td>'
                f'<td class="when">{e(r.arxiv)}</td><td>{title}</td>'
                f'<td class="when">{e(r.submitted_at[:10])}</td><td class="trust">{badge_text}</td></tr>'
            )
        b.append("</table>")
    else:
        b.append('<p class="meta">No records yet.</p>')
    if mirror:
        b.append(f"<footer>{e(mirror)}</footer>")
    return _page("pithledger mirror", "".join(b), links, search=False)
