"""The import contract (DESIGN.md principle 12; README "How it fits together"): every module of ledger/
and cli/ read with ``ast`` — imports at any depth, inside functions and under ``if TYPE_CHECKING:`` too —
has no import cycle with another, and imports nothing from a layer above its own.

What counts as an edge: ``import a.b`` and ``from a.b import c`` name the module ``a.b`` (its package's
``__init__`` if ``a.b`` is a package), or ``a.b.c`` where ``c`` is a submodule. The parent packages
Python initialises on the way (``a``) are not edges: Python runs a parent before its child, and a
package's ``__init__`` re-exporting its submodules imports down, which is no cycle at run time. A part
importing its own package's ``__init__`` (``from pithledger.store import X`` inside store/) is an edge,
and is a cycle whenever that ``__init__`` imports the part.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.common import ROOT

#: Where each top-level package's source lives (pyproject's package-dir).
SOURCES = {"pithledger": ROOT / "ledger", "pithledger.cli": ROOT / "cli"}

#: The layers, bottom first: a module may import from its own layer (no cycle) and the layers below.
#: ``pithledger`` is the public API (ledger/__init__.py, and ledger/api.py beside it). Keep README's "How it fits together" the same.
LAYERS: list[set[str]] = [
    {"errors", "layout", "files", "fanout"},
    {"records"},
    {"tlog"},
    {"merge", "audit"},
    {"store"},
    {"ingest"},
    {"render"},
    {"mirror"},
    {"web"},
    {"pithledger", "api"},
    {"cli"},
]


def _modules() -> dict[str, Path]:
    """Every module's dotted name and file (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for top, base in SOURCES.items():
        for file in sorted(base.rglob("*.py")):
            parts = list(file.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([top, *parts])
            if name.startswith("pithledger.cli") and top == "pithledger":  # cli/ is not under ledger/
                continue
            out[name] = file
    return out


def _imports(name: str, file: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """The project modules ``name`` imports, each with the line that imports it."""
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def module_of(dotted: str) -> str | None:  # the longest prefix that is a module of the project
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := module_of(alias.name)) is not None:
                    found.append((target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                target = sub if sub in modules else module_of(source)
                if target is not None:
                    found.append((target, node.lineno))
    return [(t, line) for t, line in found if t != name]


def _graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, file in modules.items():
        edges: dict[str, int] = {}
        for target, line in _imports(name, file, modules):
            edges.setdefault(target, line)
        graph[name] = edges
    return modules, graph


def _layer(name: str) -> int:
    parts = name.split(".")
    key = "pithledger" if parts == ["pithledger"] else parts[1]
    for n, layer in enumerate(LAYERS):
        if key in layer:
            return n
    raise AssertionError(f"{name} is in no layer: add it to LAYERS (tests/unit/test_layers.py) and README")


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _where(modules: dict[str, Path], name: str, line: int) -> str:
    return f"{modules[name].relative_to(ROOT)}:{line}"


def test_no_import_cycle() -> None:
    modules, graph = _graph()
    faults = []
    for component in _cycles(graph):
        inside = set(component)
        edges = [
            f"    {_where(modules, a, graph[a][b])} {a} -> {b}"
            for a in component
            for b in sorted(graph[a])
            if b in inside
        ]
        faults.append(f"import cycle among {', '.join(component)}:\n" + "\n".join(edges))
    assert not faults, "\n".join(faults)


def test_imports_run_down_the_layers() -> None:
    modules, graph = _graph()
    faults = [
        f"{_where(modules, a, line)} {a} imports {b}: layer {_layer(b)} is above its layer {_layer(a)}"
        for a in sorted(graph)
        for b, line in sorted(graph[a].items())
        if _layer(b) > _layer(a)
    ]
    assert not faults, "\n".join(faults)


def test_the_contract_sees_a_violation(tmp_path: Path) -> None:
    """The checks find a cycle and an upward import where there is one (a check that cannot fail proves nothing)."""
    graph = {
        "pithledger.records.a": {"pithledger.records.b": 3},
        "pithledger.records.b": {"pithledger.records.a": 5},
        "pithledger.store.c": {},
    }
    assert _cycles(graph) == [["pithledger.records.a", "pithledger.records.b"]]
    assert _layer("pithledger.store.c") > _layer("pithledger.records.a")
    # an import inside a function under TYPE_CHECKING, and a relative one, are both seen
    file = tmp_path / "x.py"
    file.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..store import ledger\n"
        "def f():\n    import pithledger.mirror.publish\n"
    )
    modules = {
        "pithledger.records.x": file,
        "pithledger.store": file,
        "pithledger.store.ledger": file,
        "pithledger.mirror.publish": file,
    }
    assert sorted(_imports("pithledger.records.x", file, modules)) == [
        ("pithledger.mirror.publish", 5),
        ("pithledger.store.ledger", 3),
    ]
