"""The record badge, ``/pith/<suffix>/badge.svg`` (spec/badge-and-latex.md §1): a small flat SVG naming
the short Pith Number and the state's four badge words. Pure: bytes from a Pith Number and the state's
``current.badges``, so equal states give equal bytes (and ETags) on every mirror.

The badge is made to be embedded anywhere, so nothing from an event reaches it: each badge word is looked
up in a fixed vocabulary (the words spec/merge.md §5 defines) and drawn with fixed text; any other value
draws as "unknown". The number is drawn only when it matches the Pith Number pattern. No script, no
foreign object, no link, no external font (a monospace stack: widths are known without measuring).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from pithledger.errors import MalformedId
from pithledger.records import ids

#: The state's words (spec/merge.md §5), per badge, with how each is drawn: its class and its visible text.
#: "checked": what it says was checked; "claim": a signature was checked, what it claims was not;
#: "absent": nothing of the kind stands. The author words are prefixed because "claimed" alone names nothing.
VOCABULARY: dict[str, dict[str, tuple[str, str]]] = {
    "author": {
        "attested (strong)": ("checked", "author attested (strong)"),
        "claimed": ("claim", "author claimed"),
        "not attested": ("absent", "not attested"),
    },
    "timestamp": {
        "anchored in bitcoin": ("checked", "anchored in bitcoin"),
        "bitcoin anchor claimed": ("claim", "bitcoin anchor claimed"),
        "anchor pending": ("absent", "anchor pending"),
        "not anchored": ("absent", "not anchored"),
    },
    "storage": {"capture claimed": ("claim", "capture claimed"), "not stored": ("absent", "not stored")},
    # "refs signed" is any standing citation's signature, a throwaway key's too: the same self-signed trust
    # as an author claim, so the same colour ("claim"), never the green of what was checked (issue #31).
    "references": {"refs signed": ("claim", "refs signed"), "refs pending": ("absent", "refs pending")},
}
ORDER = ("author", "timestamp", "storage", "references")

#: Fill of each class (white text on each passes WCAG AA contrast), and of the number's segment.
COLORS = {"number": "#24292f", "checked": "#1a7f37", "claim": "#9a6700", "absent": "#6e7781", "unknown": "#57606a"}
FONT = "DejaVu Sans Mono,Menlo,Consolas,Liberation Mono,monospace"
FONT_SIZE = 11
#: A monospace advance is 0.6 em in these fonts; ``textLength`` holds each text to its box whatever font draws it.
CHAR_WIDTH = 6.6
PAD = 6
HEIGHT = 20


def words(badges: Mapping[str, object]) -> list[tuple[str, str, str, str]]:
    """``(badge, word, class, visible text)`` for the four badges, in order; a value outside the
    vocabulary (or a missing one) is the word ``unknown``: the value itself is never drawn."""
    out = []
    for key in ORDER:
        value = badges.get(key)
        known = VOCABULARY[key].get(value) if isinstance(value, str) else None
        if known is None:
            out.append((key, "unknown", "unknown", f"{key} unknown"))
        else:
            out.append((key, str(value), *known))
    return out


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def badge_svg(pith_number: str, badges: Mapping[str, object]) -> bytes:
    """The badge of a record: its long Pith Number and its state's ``current.badges``."""
    if not ids.PITH_NUMBER_RE.match(pith_number):
        raise MalformedId(f"not a long Pith Number: {pith_number[:80]!r}")
    suffix = ids.suffix_of_pith_number(pith_number)
    short = f"pith:{suffix[:8]}"
    drawn = words(badges)
    segments = [("number", short), *((cls, text) for _, _, cls, text in drawn)]
    label = short + " · " + "; ".join(f"{key}: {word}" for key, word, _, _ in drawn)
    rects, texts = [], []
    x = 0.0
    for cls, text in segments:
        inner = len(text) * CHAR_WIDTH
        width = inner + 2 * PAD
        rects.append(f'<rect x="{_num(x)}" width="{_num(width)}" height="{HEIGHT}" fill="{COLORS[cls]}"/>')
        if x:  # a hairline between segments, so two of one colour still read as two
            rects.append(f'<rect x="{_num(x)}" width="1" height="{HEIGHT}" fill="#fff" fill-opacity=".35"/>')
        texts.append(
            f'<text x="{_num(x + PAD)}" y="14" textLength="{_num(inner)}" lengthAdjust="spacingAndGlyphs">{escape(text)}</text>'
        )
        x += width
    total = _num(x)
    clip = f"pith-badge-{suffix}"  # unique per record, so two badges inlined in one page do not share it
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{HEIGHT}" viewBox="0 0 {total} {HEIGHT}" '
        f'role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>"
        f'<clipPath id="{clip}"><rect width="{total}" height="{HEIGHT}" rx="3"/></clipPath>'
        f'<g clip-path="url(#{clip})">{"".join(rects)}</g>'
        f'<g fill="#fff" font-family="{FONT}" font-size="{FONT_SIZE}">{"".join(texts)}</g>'
        "</svg>\n"
    )
    return svg.encode("utf-8")


#: Served with the badge: an image needs nothing, so nothing is allowed (and ``sandbox`` for a badge
#: opened as a document), as GitHub's image proxy serves SVG.
CSP = "default-src 'none'; sandbox"
MEDIA_TYPE = "image/svg+xml"
