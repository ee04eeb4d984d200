"""Write the identifier vectors (spec/identifiers.md §5): every input and its answer, both by hand.

    python spec/vectors/ids/make_vectors.py

Nothing here calls the parser: each answer is read off the grammar in spec/identifiers.md §5, so the
vectors check the code instead of echoing it (tests/unit/records/test_id_vectors.py runs them through the parser,
`pithledger state` and `pithledger serve`). The file is the product; this script only keeps its many
escapes readable and its bytes stable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
S = "FZ7AO632HBV3FATAUUZ6Y44Y3P"  # pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P, arXiv 2605.00424v2 (a real Pith record)
LONG = f"pith:2026:{S}"
BAD = {"error": "malformed-id"}


def pn(value: str = LONG) -> dict[str, Any]:
    return {"kind": "pith_number", "value": value, "suffix": value.rsplit(":", 1)[1], "version": None}


def sx(suffix: str) -> dict[str, Any]:
    return {"kind": "suffix", "value": suffix, "suffix": suffix, "version": None}


def ax(arxiv_id: str, version: int | None = None) -> dict[str, Any]:
    return {"kind": "arxiv", "value": arxiv_id, "suffix": "", "version": version}


def doi(arxiv_id: str) -> dict[str, Any]:
    return {"kind": "doi", "value": arxiv_id, "suffix": "", "version": None}


TAIL_200 = f"https://pith.science/pith/{S}/" + "x" * (200 - len(f"https://pith.science/pith/{S}/"))

ACCEPTED: list[tuple[str, str, dict[str, Any]]] = [
    # Pith Numbers
    ("long-pith-number", LONG, pn()),
    ("long-pith-number-lower-case", LONG.lower(), pn()),
    ("long-pith-number-upper-case-prefix", f"PITH:2026:{S}", pn()),
    ("long-pith-number-mixed-case-suffix", f"pith:2026:{S[:13].lower()}{S[13:]}", pn()),
    ("long-pith-number-any-four-digit-year", f"pith:0000:{S}", pn(f"pith:0000:{S}")),
    ("short-pith-number-8", f"pith:{S[:8]}", sx(S[:8])),
    ("short-pith-number-12", f"pith:{S[:12]}", sx(S[:12])),
    ("short-pith-number-16", f"pith:{S[:16]}", sx(S[:16])),
    ("short-pith-number-26", f"pith:{S}", sx(S)),
    ("short-pith-number-lower-case", f"pith:{S[:8].lower()}", sx(S[:8])),
    ("short-pith-number-upper-case-prefix", f"Pith:{S[:8]}", sx(S[:8])),
    ("bare-suffix-8", S[:8], sx(S[:8])),
    ("bare-suffix-12-lower-case", S[:12].lower(), sx(S[:12])),
    ("bare-suffix-16", S[:16], sx(S[:16])),
    ("bare-suffix-26", S, sx(S)),
    ("bare-suffix-mixed-case", "fZ7aO632", sx(S[:8])),
    ("bare-suffix-that-starts-with-pith", f"pith{S[:8]}", sx(f"PITH{S[:8]}")),  # 12 base32 characters, no colon
    # Pith's URLs
    ("pith-url", f"https://pith.science/pith/{S}", sx(S)),
    ("pith-url-http", f"http://pith.science/pith/{S}", sx(S)),
    ("pith-url-www", f"https://www.pith.science/pith/{S}", sx(S)),
    ("pith-url-upper-case-scheme-host-and-path", f"HTTPS://WWW.PITH.SCIENCE/PITH/{S}", sx(S)),
    ("pith-url-lower-case-suffix", f"https://pith.science/pith/{S.lower()}", sx(S)),
    ("pith-url-dot-json", f"https://pith.science/pith/{S}.json", sx(S)),
    ("pith-url-bundle-json", f"https://pith.science/pith/{S}/bundle.json", sx(S)),
    ("pith-url-state-json", f"https://pith.science/pith/{S}/state.json", sx(S)),
    ("pith-url-trailing-slash", f"https://pith.science/pith/{S}/", sx(S)),
    ("pith-url-query", f"https://pith.science/pith/{S}?tab=events", sx(S)),
    ("pith-url-fragment", f"https://pith.science/pith/{S}#timeline", sx(S)),
    ("pith-url-tail-is-not-read", f"https://pith.science/pith/{S}/https://arxiv.org/abs/1905.08204", sx(S)),
    ("pith-url-of-exactly-200-characters", TAIL_200, sx(S)),
    ("paper-url-8", f"https://pith.science/paper/{S[:8]}", sx(S[:8])),
    ("paper-url-26-http-www", f"http://www.pith.science/paper/{S}", sx(S)),
    ("paper-url-lower-case-with-query", f"https://pith.science/paper/{S[:12].lower()}?x=1", sx(S[:12])),
    # arXiv ids
    ("arxiv-new-style-5-digits", "2605.00424", ax("2605.00424")),
    ("arxiv-new-style-4-digits", "0704.0001", ax("0704.0001")),
    ("arxiv-new-style-month-not-checked", "2613.00001", ax("2613.00001")),
    ("arxiv-version-1", "2605.00424v1", ax("2605.00424", 1)),
    ("arxiv-version-2", "2605.00424v2", ax("2605.00424", 2)),
    ("arxiv-version-9999", "2605.00424v9999", ax("2605.00424", 9999)),
    ("arxiv-prefix", "arXiv:2605.00424", ax("2605.00424")),
    ("arxiv-prefix-upper-case-with-version", "ARXIV:2605.00424v2", ax("2605.00424", 2)),
    ("arxiv-prefix-lower-case", "arxiv:0704.0001", ax("0704.0001")),
    ("arxiv-old-style", "math/0611599", ax("math/0611599")),
    ("arxiv-old-style-hyphenated-archive-with-version", "hep-lat/0407033v2", ax("hep-lat/0407033", 2)),
    ("arxiv-old-style-subject-class-dropped", "math.GT/0309136", ax("math/0309136")),
    ("arxiv-old-style-any-lower-case-archive", "qqq/0000001", ax("qqq/0000001")),
    ("arxiv-old-style-prefixed", "arXiv:hep-th/9901001v1", ax("hep-th/9901001", 1)),
    ("arxiv-abs-url", "https://arxiv.org/abs/2605.00424", ax("2605.00424")),
    ("arxiv-abs-url-http-with-version", "http://arxiv.org/abs/2605.00424v2", ax("2605.00424", 2)),
    ("arxiv-abs-url-www", "https://www.arxiv.org/abs/0704.0001", ax("0704.0001")),
    ("arxiv-abs-url-upper-case-host", "https://ARXIV.ORG/ABS/2605.00424", ax("2605.00424")),
    ("arxiv-abs-url-old-style-subject-class", "https://arxiv.org/abs/math.GT/0309136v3", ax("math/0309136", 3)),
    ("arxiv-pdf-url", "https://arxiv.org/pdf/2605.00424v2", ax("2605.00424", 2)),
    ("arxiv-pdf-url-http", "http://arxiv.org/pdf/2605.00424", ax("2605.00424")),
    ("arxiv-pdf-url-dot-pdf", "https://arxiv.org/pdf/2605.00424v2.pdf", ax("2605.00424", 2)),
    ("arxiv-pdf-url-upper-case-dot-pdf", "http://arxiv.org/pdf/math/0611599.PDF", ax("math/0611599")),
    # the arXiv DOI
    ("doi", "10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("doi-lower-case", "10.48550/arxiv.2605.00424", doi("2605.00424")),
    ("doi-upper-case-arxiv", "10.48550/ARXIV.2605.00424", doi("2605.00424")),
    ("doi-prefix", "doi:10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("doi-prefix-upper-case", "DOI:10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("doi-org-url", "https://doi.org/10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("doi-org-url-http", "http://doi.org/10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("dx-doi-org-url", "https://dx.doi.org/10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("dx-doi-org-url-http", "http://dx.doi.org/10.48550/arXiv.2605.00424", doi("2605.00424")),
    ("doi-old-style", "10.48550/arxiv.math/0611599", doi("math/0611599")),
    ("doi-old-style-subject-class-dropped", "10.48550/arXiv.math.GT/0309136", doi("math/0309136")),
    # surrounding ASCII white space (tab, LF, VT, FF, CR, space) is trimmed
    ("surrounding-spaces", "  2605.00424  ", ax("2605.00424")),
    ("surrounding-tabs", "\t" + LONG + "\t", pn()),
    ("trailing-newline", "2605.00424v2\n", ax("2605.00424", 2)),
    ("trailing-crlf", f"pith:{S[:8]}\r\n", sx(S[:8])),
    ("leading-vertical-tab-and-form-feed", "\v\f" + S[:8], sx(S[:8])),
]

REFUSED: list[tuple[str, str]] = [
    ("empty", ""),
    ("only-spaces", "   "),
    ("only-ascii-white-space", " \t\n\v\f\r"),
    ("longer-than-200-characters", TAIL_200 + "x"),
    ("long-arxiv-padding-over-200", " " * 200 + "2605.00424"),
    # anything outside ASCII, wherever it is, before any trimming
    ("no-break-space-before", "\u00a02605.00424"),
    ("em-space-after", "2605.00424\u2003"),
    ("next-line-after", "2605.00424\u0085"),
    ("ideographic-space-after", f"pith:{S[:8]}\u3000"),
    ("zero-width-space-inside", "FZ7A\u200bO632"),
    ("right-to-left-override", f"\u202epith:{S[:8]}"),
    ("fullwidth-digits", "\uff12\uff16\uff10\uff15.00424"),
    ("arabic-indic-digits", "\u0662\u0666\u0660\u0665.00424"),
    ("ligature-ff-would-upper-case-to-a-suffix", "\ufb007AO632"),
    ("cyrillic-a-in-a-suffix", "FZ7\u0410O632"),
    ("dotless-i-in-prefix", "p\u0131th:FZ7AO632"),
    # ASCII control characters are not white space here
    ("file-separator-before", "\x1c2605.00424"),
    ("unit-separator-after", "2605.00424\x1f"),
    ("nul-after", "2605.00424\x00"),
    ("delete-after", "2605.00424\x7f"),
    ("space-inside-pith-number", f"pith: {S[:8]}"),
    ("space-inside-arxiv-id", "2605. 00424"),
    # Pith Numbers
    ("pith-year-of-2-digits", f"pith:26:{S}"),
    ("pith-year-of-5-digits", f"pith:20266:{S}"),
    ("pith-year-with-a-letter", f"pith:2O26:{S}"),
    ("pith-long-suffix-25", f"pith:2026:{S[:25]}"),
    ("pith-long-suffix-27", f"pith:2026:{S}A"),
    ("pith-long-with-a-short-suffix", f"pith:2026:{S[:8]}"),
    ("pith-long-trailing-colon", f"{LONG}:"),
    ("pith-suffix-with-digit-1", "pith:FZ7AO631"),
    ("pith-suffix-with-digit-0", "pith:FZ7AO630"),
    ("pith-suffix-with-digit-8", "pith:FZ7AO638"),
    ("pith-short-9", f"pith:{S[:9]}"),
    ("pith-short-27", f"pith:{S}A"),
    ("pith-prefix-without-colon", f"pith{S[:9]}"),
    ("pith-prefix-doubled", f"pith:pith:{S[:8]}"),
    ("pith-prefix-before-arxiv-id", "pith:2605.00424"),
    ("pith-with-base32-padding", f"pith:{S[:8]}="),
    # bare suffixes
    ("bare-suffix-7", S[:7]),
    ("bare-suffix-9", S[:9]),
    ("bare-suffix-13", S[:13]),
    ("bare-suffix-25", S[:25]),
    ("bare-suffix-27", S + "A"),
    ("bare-suffix-with-digit-9", "FZ7AO639"),
    ("bare-suffix-with-hyphen", "FZ7A-O632"),
    # Pith URLs
    ("pith-url-short-suffix", f"https://pith.science/pith/{S[:8]}"),
    ("pith-url-16-char-suffix", f"https://pith.science/pith/{S[:16]}"),
    ("pith-url-27-chars", f"https://pith.science/pith/{S}A"),
    ("pith-url-arxiv-id", "https://pith.science/pith/2605.00424"),
    ("pith-url-nested-url", f"https://pith.science/pith/https://pith.science/pith/{S}"),
    ("pith-url-long-pith-number", f"https://pith.science/pith/{LONG}"),
    ("pith-url-dot-pdf", f"https://pith.science/pith/{S}.pdf"),
    ("pith-url-space-in-tail", f"https://pith.science/pith/{S}/a b"),
    ("pith-url-other-host", f"https://pith.example/pith/{S}"),
    ("pith-url-sub-domain", f"https://evil.pith.science/pith/{S}"),
    ("pith-url-host-as-user-info", f"https://pith.science@evil.example/pith/{S}"),
    ("pith-url-with-port", f"https://pith.science:443/pith/{S}"),
    ("pith-url-without-scheme", f"pith.science/pith/{S}"),
    ("pith-url-ftp-scheme", f"ftp://pith.science/pith/{S}"),
    ("pith-url-scheme-relative", f"//pith.science/pith/{S}"),
    ("pith-url-double-slash-path", f"https://pith.science//pith/{S}"),
    ("pith-url-other-path", f"https://pith.science/api/pith-number/{S}/events.json"),
    ("paper-url-9-chars", f"https://pith.science/paper/{S[:9]}"),
    ("paper-url-arxiv-id", "https://pith.science/paper/2605.00424"),
    # arXiv ids
    ("arxiv-3-digit-number", "2605.004"),
    ("arxiv-6-digit-number", "2605.004245"),
    ("arxiv-3-digit-yymm", "605.00424"),
    ("arxiv-version-zero", "2605.00424v0"),
    ("arxiv-version-leading-zero", "2605.00424v01"),
    ("arxiv-version-10000", "2605.00424v10000"),
    ("arxiv-version-upper-case-v", "2605.00424V2"),
    ("arxiv-version-without-number", "2605.00424v"),
    ("arxiv-dot-pdf-outside-a-pdf-url", "2605.00424.pdf"),
    ("arxiv-abs-url-dot-pdf", "https://arxiv.org/abs/2605.00424.pdf"),
    ("arxiv-old-style-6-digits", "math/061159"),
    ("arxiv-old-style-8-digits", "math/06115990"),
    ("arxiv-old-style-upper-case-archive", "Math/0611599"),
    ("arxiv-old-style-lower-case-subject-class", "math.gt/0309136"),
    ("arxiv-old-style-3-letter-subject-class", "math.GTX/0309136"),
    ("arxiv-old-style-archive-starting-with-a-digit", "1math/0611599"),
    ("arxiv-old-style-archive-with-a-digit", "hep2/0611599"),
    ("arxiv-old-style-two-slashes", "math/0611599/1"),
    ("arxiv-prefix-twice", "arXiv:arXiv:2605.00424"),
    ("arxiv-prefix-with-space", "arXiv: 2605.00424"),
    ("arxiv-prefix-before-a-url", "arXiv:https://arxiv.org/abs/2605.00424"),
    ("arxiv-abs-url-trailing-slash", "https://arxiv.org/abs/2605.00424/"),
    ("arxiv-abs-url-query", "https://arxiv.org/abs/2605.00424?context=cs"),
    ("arxiv-abs-url-export-host", "https://export.arxiv.org/abs/2605.00424"),
    ("arxiv-abs-url-without-scheme", "arxiv.org/abs/2605.00424"),
    ("arxiv-html-url", "https://arxiv.org/html/2605.00424v2"),
    ("arxiv-url-other-host", "https://arxiv.example/abs/2605.00424"),
    # DOIs
    ("doi-other-registrant", "10.1000/xyz123"),
    ("doi-other-arxiv-like-registrant", "10.48551/arxiv.2605.00424"),
    ("doi-with-version", "10.48550/arxiv.2605.00424v2"),
    ("doi-url-with-version", "https://doi.org/10.48550/arXiv.2605.00424v2"),
    ("doi-of-a-malformed-arxiv-id", "10.48550/arxiv.2605.004"),
    ("doi-old-style-upper-case-archive", "10.48550/arxiv.MATH/0611599"),
    ("doi-trailing-slash", "10.48550/arxiv.2605.00424/"),
    ("doi-prefix-with-space", "doi: 10.48550/arXiv.2605.00424"),
    ("doi-prefix-twice", "doi:doi:10.48550/arXiv.2605.00424"),
    ("doi-url-www-host", "https://www.doi.org/10.48550/arXiv.2605.00424"),
    ("doi-url-with-doi-prefix", "https://doi.org/doi:10.48550/arXiv.2605.00424"),
    ("doi-without-the-arxiv-word", "10.48550/2605.00424"),
    # other text
    ("words", "hello world"),
    ("json-null", "null"),
    ("a-number", "42"),
]


def main() -> None:
    for name, vectors in (
        ("accepted", [{"name": n, "input": i, "answer": a} for n, i, a in ACCEPTED]),
        ("refused", [{"name": n, "input": i, "answer": BAD} for n, i in REFUSED]),
    ):
        names = [v["name"] for v in vectors]
        assert len(names) == len(set(names)), name
        doc = {"vectors_type": "pithledger_id_vectors", "spec": "spec/identifiers.md §5", "vectors": vectors}
        (HERE / f"{name}.json").write_bytes(json.dumps(doc, indent=1, ensure_ascii=True).encode() + b"\n")
    print(f"wrote {len(ACCEPTED)} accepted and {len(REFUSED)} refused identifier vectors to {HERE}")


if __name__ == "__main__":
    main()
