"""spec/vectors/ids/: every typed identifier and its answer, through the parser, `pithledger state`
and a running `pithledger serve` (spec/identifiers.md §5).

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/records/test_id_vectors.py."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers.common import ROOT
from helpers.id_vectors import ALL, ARXIV, NUMBER, VERSION

SUFFIX = NUMBER.rsplit(":", 1)[1]


def names_the_record(answer: dict[str, Any]) -> bool:
    """Whether an accepted answer names the held record (read off the answer, not off the parser)."""
    kind = answer["kind"]
    if kind == "pith_number":
        return bool(answer["value"] == NUMBER)
    if kind == "suffix":
        return SUFFIX.startswith(answer["suffix"])
    return answer["value"] == ARXIV and answer["version"] in (None, VERSION)


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"], env["XDG_CONFIG_HOME"] = str(tmp / "xdg-data"), str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("ids")
    env = _env(tmp)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pithledger.cli",
            "--ledger",
            str(tmp / "L"),
            "apply",
            str(ROOT / "bundles" / "demo-2605.00424-every-kind.json"),
        ],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    return tmp / "L", env


def test_pithledger_state_gives_every_vectors_answer(ledger: tuple[Path, dict[str, str]]) -> None:
    path, env = ledger
    typed = _typed_sample()

    def run(vector: dict[str, Any]) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
        args = [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "state"]
        args += ["--", vector["input"]] if vector["input"].startswith("-") else [vector["input"]]
        return vector, subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, typed))
    wrong = []
    for vector, proc in results:
        answer = vector["answer"]
        if "error" in answer:
            ok = proc.returncode == 1 and proc.stderr.startswith("error[malformed-id]:")
        elif names_the_record(answer):
            ok = proc.returncode == 0 and json.loads(proc.stdout)["pith_number"] == NUMBER
        else:
            ok = proc.returncode == 1 and proc.stderr.startswith("error[not-found]:")
        if not ok or "Traceback" in proc.stderr:
            wrong.append((vector["name"], proc.returncode, proc.stderr[:200]))
    assert not wrong


def _typed_sample() -> list[dict[str, Any]]:
    """Every vector whose input is not plain printable ASCII (white space, controls, other scripts,
    empty: what an argument list may change), and the first of each group of names (`pith-url-...`,
    `arxiv-version-...`, accepted and refused apart): a process per vector costs ~0.15 s, and the serve
    test below takes every vector. An argument list cannot carry U+0000: that one is left to the others."""
    seen: set[tuple[bool, str]] = set()
    out = []
    for v in ALL:
        group = ("error" in v["answer"], "-".join(v["name"].split("-")[:2]))
        if "\x00" not in v["input"] and (group not in seen or not re.fullmatch(r"[!-~]+", v["input"])):
            out.append(v)
        seen.add(group)
    return out


@pytest.fixture(scope="module")
def server(ledger: tuple[Path, dict[str, str]]) -> Iterator[int]:
    path, env = ledger
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(path), "serve", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"at http://127\.0\.0\.1:(\d+)/", line)
    try:
        assert m, line
        yield int(m[1])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()


def test_serve_resolve_gives_every_vectors_answer(server: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    wrong = []
    try:
        for vector in ALL:
            conn.request("GET", "/resolve?id=" + urllib.parse.quote(vector["input"], safe=""))
            resp = conn.getresponse()
            body = resp.read()
            answer = vector["answer"]
            if "error" in answer:
                # an empty id is a usage error before any identifier is read
                want = "usage" if vector["input"] == "" else "malformed-id"
                ok = resp.status == 400 and json.loads(body)["error"] == want
            elif names_the_record(answer):
                ok = resp.status == 302 and resp.getheader("location") == f"/pith/{SUFFIX}"
            else:
                ok = resp.status == 404 and json.loads(body)["error"] == "not-found"
            if not ok:
                wrong.append((vector["name"], resp.status, body[:200]))
    finally:
        conn.close()
    assert not wrong
