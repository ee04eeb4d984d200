"""Sync and audit that cannot be censored (issue #20 §1): records of several bundle parts, located by the
part index; junk ids; memory bounded part by part; a source's bundles read against its own digests.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/mirror/test_sync_parts.py."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from helpers.adversary import garble
from helpers.eventpool import P, pool
from helpers.ledgers import ledger_with
from pithledger.errors import SourceProtocolError
from pithledger.mirror import transport as _transport
from pithledger.mirror.publish import publish, record_dir
from pithledger.records.canonical import canonical_bytes


class ChunkedServer:
    """Serves every path as a chunked body of ``size``-byte chunks on 127.0.0.1."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            out = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
            for i in range(0, len(self.body), self.size):
                chunk = self.body[i : i + self.size]
                out.append(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            out.append(b"0\r\n\r\n")
            try:
                conn.sendall(b"".join(out))
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


def test_a_chunked_body_is_read_whole_and_one_of_too_many_chunks_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    body = bytes(range(256)) * 4
    server = ChunkedServer(body, 1)
    try:
        assert _transport.http_get(server.url + "/x", timeout=10, max_bytes=1 << 20) == body
    finally:
        server.close()
    monkeypatch.setattr(_transport, "MAX_CHUNKS", 500)
    server = ChunkedServer(body, 1)
    try:
        with pytest.raises(SourceProtocolError, match="more than 500 chunks"):
            _transport.http_get(server.url + "/x", timeout=10, max_bytes=1 << 20)
    finally:
        server.close()


def tamper(pub: Path, number: str) -> str:
    """Garble one valid citation in a published bundle (after publishing): returns its id."""
    path = pub / record_dir(number) / "bundle.json"
    bundle = json.loads(path.read_text())
    i = next(i for i, e in enumerate(bundle["events"]) if e["event_type"] == "citation_signature")
    victim = bundle["events"][i]["event_id"]
    bundle["events"][i] = garble(bundle["events"][i], "wrong-event-id")
    path.write_bytes(canonical_bytes(bundle) + b"\n")
    return str(victim)


def test_audit_bundles_names_a_record_whose_bundle_was_tampered_after_publishing(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
        n_records = len(list(a.subjects()))
    pub = str(tmp_path / "pub")
    clean = cli("audit", pub, "--bundles")
    assert clean.code == 0, clean.err
    victim = tamper(tmp_path / "pub", P[2])
    # the digest-only audit of a ledger holding the same events says consistent: only the bundles show it
    assert cli("audit", str(tmp_path / "a"), pub).code == 0
    r = cli("audit", pub, "--bundles")
    assert r.code == 1 and "Traceback" not in r.err
    assert P[2] in r.out and victim in r.out and P[0] not in r.out
    doc = cli("audit", pub, "--bundles", "--json").json()
    assert doc["records"] == doc["checked"] == n_records
    assert [(f["pith_number"], f["reason"], f["missing_event_ids"]) for f in doc["faults"]] == [
        (P[2], "missing-events", [victim])
    ]
    # a seeded sample: the same seed checks the same records, and the count is what was asked
    one = cli("audit", pub, "--bundles", "--sample", "1", "--seed", "5", "--json").json()
    assert (
        one["checked"] == 1 and one == cli("audit", pub, "--bundles", "--sample", "1", "--seed", "5", "--json").json()
    )
    assert cli("audit", pub, "--bundles", "--sample", "99", "--seed", "5", "--json").json()["checked"] == n_records


def test_audit_bundles_refuses_what_it_cannot_check(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    with ledger_with(tmp_path / "a", pool()) as a:
        publish(a, tmp_path / "pub")
    for args in (
        ("audit", str(tmp_path / "a"), "--bundles"),
        ("audit", str(tmp_path / "pub"), str(tmp_path / "a"), "--bundles"),
        ("audit", str(tmp_path / "pub"), "--sample", "2"),
        ("audit", str(tmp_path / "pub")),
    ):
        r = cli(*args)
        assert r.code == 2 and r.err.startswith("error[") and "Traceback" not in r.err, (args, r.err)
    (tmp_path / "pub" / record_dir(P[1]) / "bundle.json").write_bytes(b"{ not json")
    r = cli("audit", str(tmp_path / "pub"), "--bundles", "--json")
    assert r.code == 1 and [(f["pith_number"], f["reason"]) for f in r.json()["faults"]] == [(P[1], "malformed-json")]
