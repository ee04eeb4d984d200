"""The `pith` LaTeX package (latex/pith.sty, spec/badge-and-latex.md §2) compiled by real TeX engines:
pdfLaTeX and LuaLaTeX (Debian's TeX Live), the PDFs read back with poppler (pdfinfo, pdfinfo -url,
pdftotext): the link annotation's URI, the Info keywords and subject, the badge text and where it is.

Skipped where an engine or poppler is absent (`apt-get install -y --no-install-recommends
texlive-latex-base texlive-luatex poppler-utils`); never under CI=true (.ci/run installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.common import ROOT

LATEX = ROOT / "latex"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
URL = f"https://pith.science/pith/{SUFFIX}"
ENGINES = ("pdflatex", "lualatex")
TOOLS = (*ENGINES, "pdfinfo", "pdftotext")

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) and os.environ.get("CI") != "true",
    reason=f"needs {', '.join(TOOLS)} (apt-get install -y --no-install-recommends texlive-latex-base texlive-luatex "
    "poppler-utils); CI installs them and never skips",
)


class Built:
    def __init__(self, rc: int, log: str, pdf: Path) -> None:
        self.rc, self.log, self.pdf = rc, log, pdf

    def info(self) -> dict[str, str]:
        out = subprocess.run(["pdfinfo", str(self.pdf)], capture_output=True, text=True, check=True, timeout=60).stdout
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}

    def urls(self) -> list[tuple[int, str, str]]:
        """(page, kind, URL) of every URL in the PDF's objects (the link annotations)."""
        out = subprocess.run(
            ["pdfinfo", "-url", str(self.pdf)], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
        return [(int(r[0]), r[1], r[2]) for r in rows]

    def text(self) -> str:
        return subprocess.run(
            ["pdftotext", str(self.pdf), "-"], capture_output=True, text=True, check=True, timeout=60
        ).stdout


def build(tmp: Path, engine: str, source: str, *, name: str = "doc", sty_dir: Path = LATEX, halt: bool = True) -> Built:
    """Compile ``source`` with ``engine`` in ``tmp``, finding pith.sty in ``sty_dir`` (TEXINPUTS)."""
    assert shutil.which(engine), f"{engine} is missing: install Debian's TeX Live packages (.ci/run does)"
    (tmp / f"{name}.tex").write_text(source)
    env = {**os.environ, "TEXINPUTS": f"{sty_dir}//:", "max_print_line": "10000"}  # unwrapped log lines
    args = [
        engine,
        "-interaction=nonstopmode",
        "-no-shell-escape",
        *(["-halt-on-error"] if halt else []),
        f"{name}.tex",
    ]
    proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    log = (tmp / f"{name}.log").read_text(errors="replace") if (tmp / f"{name}.log").exists() else proc.stdout
    return Built(proc.returncode, log, tmp / f"{name}.pdf")


def document(
    *,
    preamble: str = "",
    pith: str = "\\usepackage{pith}",
    number: str = f"\\pithnumber{{{SUFFIX}}}",
    where: str = "preamble",
    hyperref: str = "none",
    body: str = "Some text.",
) -> str:
    """A small article: ``where`` the \\pithnumber goes (preamble, or in the body after \\maketitle);
    ``hyperref``: none (the package loads it), before or after \\usepackage{pith}, with the author's options."""
    author_hyperref = "\\usepackage[colorlinks,urlcolor=blue]{hyperref}\n"
    lines = ["\\documentclass{article}", preamble]
    lines += [author_hyperref] if hyperref == "before" else []
    lines += [pith]
    lines += [author_hyperref] if hyperref == "after" else []
    lines += [number] if where == "preamble" else []
    lines += ["\\title{A Title Line}", "\\author{An Author}", "\\date{}", "\\begin{document}", "\\maketitle"]
    lines += [number] if where == "after-maketitle" else []
    lines += [body, "\\end{document}"]
    return "\n".join(lines) + "\n"


def assert_badge(built: Built, url: str = URL, number: str = SUFFIX) -> None:
    assert built.rc == 0, built.log[-3000:]
    assert built.urls() == [(1, "Annotation", url)]
    info = built.info()
    keywords = [k.strip() for k in info["Keywords"].split(",")]
    assert f"pith:{number[:8]}" in keywords and f"pith:{number}" in keywords and url in keywords, info
    assert url in info["Subject"], info
    text = built.text()
    assert f"Pith Number pith:{number[:8]}" in text
    assert text.index("A Title Line") < text.index(f"pith:{number[:8]}") < text.index("Some text."), text


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("hyperref", ["none", "before", "after"])
@pytest.mark.parametrize("where", ["preamble", "after-maketitle"])
def test_badge_link_and_metadata_on_both_engines(tmp_path: Path, engine: str, hyperref: str, where: str) -> None:
    assert_badge(build(tmp_path, engine, document(hyperref=hyperref, where=where)))


@pytest.mark.parametrize("engine", ENGINES)
def test_the_example_document(tmp_path: Path, engine: str) -> None:
    built = build(tmp_path, engine, (LATEX / "example.tex").read_text(), name="example")
    assert built.rc == 0, built.log[-3000:]
    assert built.urls() == [(1, "Annotation", URL)]
    info = built.info()
    assert f"pith:{SUFFIX}" in info["Keywords"] and URL in info["Keywords"] and info["Pages"] == "1"
    assert "Pith Number pith:FHIBFT2F" in built.text()


@pytest.mark.parametrize("engine", ENGINES)
def test_authors_keywords_and_subject_are_kept(tmp_path: Path, engine: str) -> None:
    setup = "\\hypersetup{pdfkeywords={ledgers, (parens) \\& more}, pdfsubject={My (own) subject}}"
    for n, hyperref in enumerate(("before", "after")):
        here = tmp_path / str(n)
        here.mkdir()
        built = build(here, engine, document(hyperref=hyperref, number=f"{setup}\n\\pithnumber{{{SUFFIX}}}"))
        assert built.rc == 0, built.log[-3000:]
        info = built.info()
        assert info["Keywords"] == f"ledgers, (parens) & more, pith:FHIBFT2F, pith:{SUFFIX}, {URL}", info
        assert info["Subject"] == "My (own) subject"
        assert built.urls() == [(1, "Annotation", URL)]


@pytest.mark.parametrize("engine", ENGINES)
def test_resolver_option_and_long_form(tmp_path: Path, engine: str) -> None:
    built = build(
        tmp_path,
        engine,
        document(
            pith="\\usepackage[resolver=https://mirror.example:8443/base/]{pith}",
            number=f"\\pithnumber{{pith:2025:{SUFFIX}}}",
        ),
    )
    url = f"https://mirror.example:8443/base/pith/{SUFFIX}"
    assert_badge(built, url)
    assert f"pith:2025:{SUFFIX}" in [k.strip() for k in built.info()["Keywords"].split(",")]


def test_nobadge_keeps_the_metadata(tmp_path: Path) -> None:
    built = build(tmp_path, "pdflatex", document(pith="\\usepackage[nobadge]{pith}", body="Some text. \\pithbadge"))
    assert built.rc == 0, built.log[-3000:]
    assert f"pith:{SUFFIX}" in built.info()["Keywords"]
    text = built.text()
    assert text.index("Some text.") < text.index("pith:FHIBFT2F")  # only where \pithbadge put it
    assert built.urls() == [(1, "Annotation", URL)]


MALFORMED = [
    SUFFIX[:25],
    SUFFIX + "A",
    SUFFIX.lower(),
    SUFFIX[:25] + "1",
    SUFFIX[:25] + "8",
    "",
    "\\relax " + SUFFIX,
    SUFFIX[:13] + " " + SUFFIX[13:],
    "pith:25:" + SUFFIX,
    "pith:2025:" + SUFFIX[:25],
]


@pytest.mark.parametrize("bad", MALFORMED)
def test_a_malformed_suffix_is_a_package_error(tmp_path: Path, bad: str) -> None:
    built = build(tmp_path, "pdflatex", document(number=f"\\pithnumber{{{bad}}}"))
    assert built.rc != 0
    assert "Package pith Error: \\pithnumber{" in built.log and "not a Pith" in built.log, built.log[-2000:]
    assert not built.pdf.exists()  # -halt-on-error: no PDF with a broken link


@pytest.mark.parametrize("engine", ENGINES)
def test_past_the_error_no_link_and_no_metadata(tmp_path: Path, engine: str) -> None:
    """An author who runs on past the error (nonstopmode without -halt-on-error) gets a PDF without a
    badge, link or Pith keyword: never a link to a wrong record."""
    built = build(tmp_path, engine, document(number="\\pithnumber{FHIBFT2FCAH6TNYKWKJEBOYM}"), halt=False)
    assert "Package pith Error" in built.log
    assert built.pdf.exists()
    assert built.urls() == []
    assert "pith:" not in built.info().get("Keywords", "") and "pith:" not in built.text()


def test_a_bad_resolver_is_a_package_error(tmp_path: Path) -> None:
    built = build(tmp_path, "pdflatex", document(pith="\\usepackage[resolver=javascript:alert(1)]{pith}"))
    assert built.rc != 0 and "Package pith Error: resolver=" in built.log, built.log[-2000:]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_shipped_package_is_latex_pith_sty(tmp_path: Path) -> None:
    """`pithledger latex` writes the installed package data, byte for byte the repository's file."""
    proc = _cli("latex", "-o", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pith.sty").read_bytes() == (LATEX / "pith.sty").read_bytes()


def test_pithledger_latex_resolver_is_the_default_it_writes(tmp_path: Path) -> None:
    sty = tmp_path / "sty"
    sty.mkdir()
    proc = _cli("latex", "--resolver", "https://mirror.example/", "-o", str(sty), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    built = build(tmp_path, "pdflatex", document(), sty_dir=sty)
    assert_badge(built, f"https://mirror.example/pith/{SUFFIX}")


@pytest.mark.parametrize(
    "args",
    [
        ["--resolver", "javascript:alert(1)"],
        ["--resolver", "https://x.example/a b"],
        ["--resolver", "https://x.example/%41"],
        ["-o", "/nonexistent/dir"],
    ],
)
def test_pithledger_latex_refuses_bad_input_and_writes_nothing(tmp_path: Path, args: list[str]) -> None:
    proc = _cli("latex", *args, cwd=tmp_path)
    assert proc.returncode != 0 and proc.stderr.startswith("error[") and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())
