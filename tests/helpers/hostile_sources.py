"""What tests/unit/mirror/test_hostile_sources.py and tests/e2e/mirror/test_hostile_sources.py share: A published
mirror of the event pool (`published`), and the paths of its node and bucket files to corrupt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.eventpool import pool
from helpers.ledgers import ledger_with
from pithledger.audit import Pair
from pithledger.mirror.publish import (
    DIGEST_FILE,
    _node_file,
    publish,
)
from pithledger.mirror.transport import http_get
from pithledger.store import Ledger


def get(url: str, **kw: Any) -> bytes:
    kw.setdefault("timeout", 5)
    kw.setdefault("max_bytes", 1 << 20)
    return http_get(url, **kw)


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Ledger, Path]]:
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        yield a, tmp_path / "pub"


def pair_of(value: dict[str, str]) -> Pair:
    return Pair(bytes.fromhex(value["events"]), bytes.fromhex(value["states"]))


def chain(pub: Path, prefix: str) -> list[tuple[str, Path, dict[str, Any]]]:
    """The node files from the root down to ``prefix``: (prefix, path, value)."""
    pair = pair_of(json.loads((pub / DIGEST_FILE).read_text())["root"])
    out = []
    for i in range(len(prefix) + 1):
        p = prefix[:i]
        path = pub / _node_file(p, pair)
        value = json.loads(path.read_text())
        out.append((p, path, value))
        if i < len(prefix):
            pair = pair_of(value["children"][prefix[i]])
    return out


def buckets(pub: Path) -> list[str]:
    return sorted(
        p.name.split("-")[0] for p in (pub / "pithledger" / "nodes").glob("*.json") if len(p.name.split("-")[0]) == 3
    )
