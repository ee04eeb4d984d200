"""sync against sources that are merely different or lying: every record either arrives or is named.

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/mirror/test_sync.py."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.eventpool import P
from helpers.sync import bundle_path, publish_with_a_garbled_citation


def test_cli_sync_names_skipped_and_lying_records_on_every_run_with_exit_1(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    citation = publish_with_a_garbled_citation(tmp_path)
    bundle_path(tmp_path / "pub", P[0]).write_bytes(b"[]")
    for _ in range(2):
        r = cli("--ledger", "C", "sync", str(tmp_path / "pub"))
        assert r.code == 1, r.err
        assert f"skipped    {P[0]} [bad-bundle]" in r.out
        assert f"lying      {P[2]}" in r.out and citation["event_id"] in r.out
    doc = cli("--ledger", "C", "sync", str(tmp_path / "pub"), "--json").json()
    assert [s["pith_number"] for s in doc["skipped"]] == [P[0]] and [x["pith_number"] for x in doc["lying"]] == [P[2]]
    audit = cli("audit", "C", str(tmp_path / "pub"))
    assert audit.code == 1 and f"DIVERGENT {P[2]} events-differ; A lacks {citation['event_id']}" in audit.out


def test_cli_apply_closes_batches_on_bundles_without_events(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "empty.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {"bundle_type": "pith_open_graph_bundle", "bundle_version": "1.0", "pith_number": p, "events": []}
            )
            for p in P
        )
        + "\n"
    )
    r = cli("--ledger", "L", "apply", "--batch-size", "1", str(path), "--json")
    assert r.code == 0 and r.json()["batches"] == len(P)


def test_cli_sync_timeout_cuts_off_a_trickling_server(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(10)
    stop = threading.Event()

    def trickle() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"{")
                except OSError:
                    return
                time.sleep(0.2)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        r = cli("--ledger", "C", "sync", f"http://127.0.0.1:{server.getsockname()[1]}", "--timeout", "1")
        assert time.monotonic() - started < 30
        assert r.code == 1 and "error[bad-source]" in r.err and "1 s" in r.err and "Traceback" not in r.err
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)
