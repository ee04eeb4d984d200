"""The ``pith`` LaTeX package as shipped (spec/badge-and-latex.md §2): ``latex/pith.sty`` in the
repository, installed as the package data ``pithledger/latex/pith.sty``; ``pithledger latex`` writes it out,
optionally with another default resolver."""

from __future__ import annotations

import re
from importlib import resources

from pithledger.errors import BadResolver, PithledgerError

DEFAULT_RESOLVER = "https://pith.science"
#: The base URLs the package accepts (its own check is the same expression): nothing that needs escaping
#: in a URI, a PDF string or TeX, so a link is never built from a mangled URL.
RESOLVER_RE = re.compile(r"^https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9.\-/]*)?\Z", re.ASCII)
_DEFAULT_LINE = r"\DeclareStringOption[https://pith.science]{resolver}"


def sty_bytes(resolver: str = DEFAULT_RESOLVER) -> bytes:
    """``pith.sty`` with ``resolver`` as its default resolver (one trailing slash dropped)."""
    if not RESOLVER_RE.match(resolver):
        raise BadResolver(f"not a plain http(s) base URL: {resolver[:200]!r}")
    resolver = resolver.removesuffix("/")
    text = resources.files("pithledger.latex").joinpath("pith.sty").read_text(encoding="utf-8")
    if _DEFAULT_LINE not in text:  # pragma: no cover - the shipped file and this module change together
        raise PithledgerError("the shipped pith.sty has no default resolver line")
    return text.replace(_DEFAULT_LINE, _DEFAULT_LINE.replace(DEFAULT_RESOLVER, resolver), 1).encode("utf-8")
