"""Mutation run over the consensus modules (issue #42): does the in-process lane notice a wrong rule?

Each mutant is one small change to one consensus module — a comparison flipped or loosened (``<`` -> ``<=``,
``==`` -> ``!=``, ``in`` -> ``not in``), an integer off by one, ``and`` <-> ``or``, a ``not`` dropped, a
``[0]`` <-> ``[-1]``, a ``return True/False`` flipped, or a check that raises removed (``if ...: raise`` ->
``pass``). The mutated copy of the package is put first on ``PYTHONPATH`` (a scratch copy of ledger/, cli/
and latex/ laid out as ``pithledger``), and the lane's consensus tests run against it with ``-x``: a failing
run kills the mutant, a passing one is a survivor. A mutant on a line the lane never runs (coverage, measured
once first) survives without a run and is listed as ``not run``.

Not in CI's time: a full run is hours. Typical use (the figures in bench/README.md "Mutation run"):

    .venv/bin/python bench/mutation.py --sample 300 --seed 1 --jobs 2 --out bench/results-mutation.json
    .venv/bin/python bench/mutation.py --only ledger/records/events.py --list     # what would be tried

Survivors are printed (file:line, the change) and written to ``--out``; each either deserves a test or is
equivalent (a change no input can observe), which the README's table says.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = [
    "ledger/records/events.py",
    "ledger/records/canonical.py",
    "ledger/records/bitcoin.py",
    "ledger/records/ots.py",
    "ledger/records/keys.py",
    "ledger/records/ids.py",
    "ledger/records/bundle.py",
    "ledger/merge.py",
    "ledger/audit.py",
]
# The in-process lane's consensus tests: what a wrong rule must fail.
TESTS = ["tests/unit/records", "tests/unit/merge", "tests/unit/audit", "tests/unit/oracle"]

_CMP_SWAPS: dict[type[ast.cmpop], list[type[ast.cmpop]]] = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repo
    line: int
    col: int
    end_line: int
    end_col: int
    replacement: str
    change: str
    stmt_line: int = 0  # the first line of the innermost statement holding it: what coverage records as run

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """Nodes inside annotations and ``if TYPE_CHECKING`` blocks: no behaviour to mutate."""
    ids: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            ids.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mark(node.returns)
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                mark(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            mark(node)
    return ids


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body)


def mutants_of(rel: str) -> Iterator[Mutant]:
    source = (ROOT / rel).read_text()
    tree = ast.parse(source)
    skip = _docstring_nodes(tree) | _annotation_nodes(tree)
    statement_of: dict[int, int] = {}
    for stmt in ast.walk(tree):  # breadth first: an inner statement comes later and wins
        if isinstance(stmt, ast.stmt):
            for child in ast.walk(stmt):
                statement_of[id(child)] = stmt.lineno

    def at(node: ast.AST, replacement: str, change: str) -> Mutant:
        return Mutant(
            rel,
            node.lineno,  # type: ignore[attr-defined]
            node.col_offset,  # type: ignore[attr-defined]
            node.end_lineno,  # type: ignore[attr-defined]
            node.end_col_offset,  # type: ignore[attr-defined]
            replacement,
            change,
            statement_of.get(id(node), node.lineno),  # type: ignore[attr-defined]
        )

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for alt in _CMP_SWAPS.get(type(op), []):
                    new = copy.deepcopy(node)
                    new.ops[i] = alt()
                    yield at(node, ast.unparse(new), f"{type(op).__name__} -> {alt.__name__}")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            value = node.value
            for delta in (1, -1):
                yield at(node, repr(value + delta), f"{value} -> {value + delta}")
        elif isinstance(node, ast.BoolOp):
            alt_op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            new = copy.deepcopy(node)
            new.op = alt_op
            yield at(node, ast.unparse(new), f"{type(node.op).__name__} -> {type(alt_op).__name__}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield at(node, f"({ast.unparse(node.operand)})", "not dropped")
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and type(node.value.value) is bool:
            yield at(node, f"return {not node.value.value}", f"return {node.value.value} -> {not node.value.value}")
        elif isinstance(node, ast.If) and not node.orelse and _raises(node.body):
            yield at(node, "pass", "check removed (if ...: raise -> pass)")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant | ast.UnaryOp):
            text = ast.unparse(node.slice)
            if text in ("0", "-1"):
                new = copy.deepcopy(node)
                new.slice = ast.parse("-1" if text == "0" else "0", mode="eval").body
                yield at(node, ast.unparse(new), f"[{text}] -> [{'-1' if text == '0' else '0'}]")


def apply(source: str, m: Mutant) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = source.encode()
    begin = starts[m.line - 1] + m.col
    end = starts[m.end_line - 1] + m.end_col
    return (data[:begin] + m.replacement.encode() + data[end:]).decode()


def _copy_package(dest: Path) -> Path:
    pkg = dest / "pithledger"
    shutil.copytree(ROOT / "ledger", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "cli", pkg / "cli", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "latex", pkg / "latex", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def covered_lines(python: str) -> dict[str, set[int]]:
    """Lines of each target the lane runs (one coverage run of the unmutated package)."""
    with tempfile.TemporaryDirectory() as tmp:
        shim = Path(tmp)
        _copy_package(shim)
        data = shim / ".coverage"
        env = dict(os.environ, PYTHONPATH=str(shim), COVERAGE_FILE=str(data))
        subprocess.run(
            [python, "-m", "coverage", "run", "--source", str(shim / "pithledger"), "-m", "pytest", "-q", "-x",
             "-p", "no:cacheprovider", *TESTS],
            cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        out = subprocess.run(
            [python, "-m", "coverage", "json", "-o", "-", "--data-file", str(data)],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        report = json.loads(out.stdout)
    lines: dict[str, set[int]] = {}
    for name, info in report["files"].items():
        rel = Path(name).resolve().relative_to((shim / "pithledger").resolve())
        lines["ledger/" + rel.as_posix()] = set(info["executed_lines"])
    return lines


def run_one(m: Mutant, python: str, timeout: float, workers: int = 0) -> tuple[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        pkg = _copy_package(Path(tmp))
        target = pkg / Path(m.path).relative_to("ledger")
        target.write_text(apply((ROOT / m.path).read_text(), m))
        env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1")
        began = time.monotonic()
        try:
            proc = subprocess.run(
                [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *(["-n", str(workers)] if workers else []),
                 *TESTS],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return "killed (timeout)", time.monotonic() - began
        took = time.monotonic() - began
    return ("survived" if proc.returncode == 0 else "killed"), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", help="a target file (repeatable); default: all consensus modules")
    ap.add_argument("--sample", type=int, default=0, help="try N mutants drawn at random (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--workers", type=int, default=0, help="pytest-xdist workers for each mutant's run (-n N)")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--no-coverage", action="store_true", help="run every mutant, even on lines the lane never runs")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    python = sys.executable

    targets = args.only or TARGETS
    everything = [m for rel in targets for m in mutants_of(rel)]
    for m in everything:  # every mutant must still be Python, or it proves nothing
        ast.parse(apply((ROOT / m.path).read_text(), m))
    chosen = list(everything)
    if args.sample and args.sample < len(chosen):
        chosen = random.Random(args.seed).sample(chosen, args.sample)
    chosen.sort(key=lambda m: (m.path, m.line, m.col, m.change))
    if args.list:
        for m in chosen:
            print(f"{m.where}\t{m.change}\t{m.replacement[:80]!r}")
        print(f"{len(chosen)} of {len(everything)} mutants", file=sys.stderr)
        return

    lines = {} if args.no_coverage else covered_lines(python)
    results: list[dict[str, object]] = []
    to_run = []
    for m in chosen:
        if lines and m.stmt_line not in lines.get(m.path, set()):
            results.append({**asdict(m), "outcome": "not run", "seconds": 0.0})
            print(f"{'not run':18} {0.0:6.1f}s  {m.where}  {m.change}  -> {m.replacement[:60]!r}", flush=True)
        else:
            to_run.append(m)
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for m, (outcome, took) in zip(
            to_run, pool.map(lambda m: run_one(m, python, args.timeout, args.workers), to_run)
        ):
            results.append({**asdict(m), "outcome": outcome, "seconds": round(took, 1)})
            print(f"{outcome:18} {took:6.1f}s  {m.where}  {m.change}  -> {m.replacement[:60]!r}", flush=True)
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r["outcome"])] = counts.get(str(r["outcome"]), 0) + 1
    print(f"\n{len(results)} mutants of {len(everything)} ({', '.join(targets)}), {time.monotonic() - began:.0f} s:")
    for outcome, n in sorted(counts.items()):
        print(f"  {outcome}: {n}")
    survivors = [r for r in results if r["outcome"] in ("survived", "not run")]
    for r in sorted(survivors, key=lambda r: (str(r["path"]), int(str(r["line"])))):
        print(f"  {r['outcome']:9} {r['path']}:{r['line']}  {r['change']}  -> {str(r['replacement'])[:70]!r}")
    if args.out:
        args.out.write_text(json.dumps({"seed": args.seed, "sample": args.sample, "counts": counts,
                                        "results": results}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
