"""What an action body may cost (issue #31 item 2, spec/serve.md §8): a body's values are bounded before it is
decoded, so one client cannot hold the event loop (and every reader) for a third of a second per request
with a megabyte of empty arrays. A real server on 127.0.0.1, real signed events."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import servekit
from helpers.common import TESTS
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import MAX_EVENT_BYTES, make_event
from pithledger.records.keys import LocalKey
from pithledger.web.actions import MAX_BODY, MAX_BODY_VALUES

VECTORS = TESTS / "vectors"
RECORD_DOC = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
NUMBER = "pith:2025:" + SUFFIX
ACTION = f"/pith/{SUFFIX}/action/author_attestation"
KEY = LocalKey(name="mallory", seed=hashlib.sha256(b"action cost test").digest())


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servekit.Server]:
    tmp = tmp_path_factory.mktemp("action-cost")
    subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp / "L"), "apply", str(RECORD_DOC)],
        env=_env(tmp),
        capture_output=True,
        check=True,
        timeout=120,
    )
    srv = servekit.Server(
        tmp / "L",
        _env(tmp),
        "--accept-events",
        "--post-rate",
        "1000",
        "--post-burst",
        "1000",
        "--post-total-rate",
        "1000",
        timeout=60.0,
    )
    yield srv
    srv.stop()


def _body(payload: dict[str, Any], created_at: str = "2026-06-01T00:00:00Z") -> bytes:
    """A bundle of one event, signed over ``payload`` (valid, whatever extra fields it carries)."""
    return canonical_bytes(
        write_bundle(NUMBER, [make_event("author_attestation", NUMBER, payload, KEY, created_at=created_at)])
    )


def _structural(body: bytes) -> int:
    return body.count(b",") + body.count(b"[") + body.count(b"{")  # none in these events' strings


def _post(server: servekit.Server, body: bytes) -> tuple[int, dict[str, Any]]:
    status, headers, raw = server.request(ACTION, "POST", body=body)
    assert headers["content-type"].startswith("application/json")
    return status, json.loads(raw)


def test_a_megabyte_of_empty_arrays_is_413_before_it_is_decoded(server: servekit.Server) -> None:
    # The attack of issue #31: a signed event whose payload gained "junk": [[],[],...] up to the event limit (its id no
    # longer matches). Before the cap it was decoded, walked, queued and checked by the writer: 422 after ~0.35 s.
    signed = json.loads(_body({"author_name": "Mallory"}))
    empty = len(canonical_bytes(signed["events"][0] | {"payload": {"author_name": "Mallory", "junk": []}}))
    signed["events"][0]["payload"]["junk"] = [[]] * ((MAX_EVENT_BYTES - empty) // 3)
    attack = canonical_bytes(signed)
    assert len(attack) <= MAX_BODY
    before = server.json("/digest.json")
    status, answer = _post(server, attack)
    assert (status, answer["error"]) == (413, "too-many-values"), (status, answer)
    assert f"{MAX_BODY_VALUES:,}" in answer["message"]
    # refused before any decoding: the same body with trailing bytes (400 trailing-data once decoded) is refused alike
    status, answer = _post(server, attack[:-100] + b"x" * 100)
    assert (status, answer["error"]) == (413, "too-many-values")
    assert server.json("/digest.json") == before
    status, _ = _post(server, _body({"author_name": "Mallory"}))  # the connection's owner may still submit
    assert status == 201


def test_the_cap_admits_exactly_its_count_and_refuses_one_more(server: servekit.Server) -> None:
    # valid signed events (unknown payload fields are admitted by apply): at the cap accepted, one past it refused
    def body(arrays: int, pad: bool) -> bytes:
        payload: dict[str, Any] = {"author_name": "Cap", "junk": [[]] * arrays} | ({"pad": 0} if pad else {})
        return _body(payload, created_at="2026-06-02T00:00:00Z")

    base = _structural(body(1, False))
    arrays = 1 + (MAX_BODY_VALUES - base) // 2  # each further array adds one '[' and one ','
    pad = _structural(body(arrays, False)) < MAX_BODY_VALUES  # the odd one out: one more ','
    at_cap = body(arrays, pad)
    assert _structural(at_cap) == MAX_BODY_VALUES
    status, answer = _post(server, at_cap)
    assert status == 201 and answer["events"][0]["status"] == "new", answer
    over = body(arrays + 1, pad)
    assert _structural(over) == MAX_BODY_VALUES + 2
    status, answer = _post(server, over)
    assert (status, answer["error"]) == (413, "too-many-values")


def test_commas_and_brackets_inside_strings_are_not_counted(server: servekit.Server) -> None:
    # a legitimate event is never refused for its text: 60,000 structural-looking bytes inside one string
    body = _body({"author_name": "Text", "note": "{[," * 20_000}, created_at="2026-06-03T00:00:00Z")
    assert _structural(body) > MAX_BODY_VALUES
    status, answer = _post(server, body)
    assert status == 201 and answer["events"][0]["status"] == "new", answer
