"""The witness (C2SP tlog-witness add-checkpoint), its evidence files, and the mirror's checkpoint memory.

Real Ed25519 keys, real files in temp dirs, real threads; the fork test at the end runs real processes
(`serve --witness` on loopback, `publish --key --witness`, `sync`).

The tests of this feature that start processes or servers; the in-process ones are in tests/unit/tlog/test_witness.py."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket  # noqa: E402
import threading
import time
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from helpers.eventpool import pool  # noqa: E402
from helpers.ledgers import ledger_with  # noqa: E402
from helpers.site import BUNDLES, Server, pl  # noqa: E402
from helpers.witness import (
    LOG,
    Tree,
    _forked_sources,
    checkpoint,
    cosigned,
    entries,
    post,
    publish_log,
    rollback_doc,
)
from pithledger import errors
from pithledger.mirror import checkpoints as logcheck  # noqa: E402
from pithledger.mirror.publish import publish  # noqa: E402
from pithledger.store import Ledger  # noqa: E402
from pithledger.tlog import merkle
from pithledger.tlog import witness as w
from pithledger.tlog.note import Checkpoint, NoteSigner, verify_cosignature


def test_random_proofs_sent_by_anyone_leave_no_evidence_and_never_replace_a_proven_one(
    witness: w.Witness, log_signer: NoteSigner
) -> None:
    """The proof of a push is the sender's: a flood of proofs that reach no root writes nothing, and the
    evidence of a proven fork is never overwritten by a weaker copy of the same request."""
    honest = Tree(entries(11))
    cosigned(witness, honest, log_signer, 3)
    new = checkpoint(log_signer, 5, honest.root(5))
    for n in range(40):
        junk = [hashlib.sha256(f"{n}-{i}".encode()).digest() for i in range(3)]
        assert post(witness, 3, junk, new).status == 422
    assert list(witness.evidence_dir.glob("*.json")) == []
    forked = Tree(entries(11, tag="b"))
    fork = checkpoint(log_signer, 11, forked.root(11))
    with pytest.raises(errors.Inconsistent):
        witness.add_checkpoint(3, forked.proof(3, 11), fork, prefix=forked.root(3))
    [path] = witness.evidence_dir.glob("*.json")
    kept = path.read_bytes()
    for prefix in (forked.root(3), None):
        with pytest.raises(errors.Inconsistent):
            witness.add_checkpoint(3, forked.proof(3, 11), fork, prefix=prefix)
    assert path.read_bytes() == kept and w.check_evidence(kept, log_signer.vkey).proven


def _signer_file(tmp_path: Path) -> NoteSigner:
    return NoteSigner(LOG, nacl.signing.SigningKey(hashlib.sha256(b"witness test log key").digest()))


def test_sync_names_a_fork_and_syncs_nothing(tmp_path: Path, cli: Any) -> None:
    signer = _signer_file(tmp_path)
    events = pool()
    with ledger_with(tmp_path / "a", events[:6]) as a:
        publish(a, tmp_path / "pub1")
    with ledger_with(tmp_path / "b", events) as b:
        publish(b, tmp_path / "pub2")
    publish_log(tmp_path / "pub1", signer, entries(6))
    publish_log(tmp_path / "pub2", signer, entries(9, tag="b"))
    first = cli("--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub1"))
    assert first.code == 0, first.err
    assert f"checkpoint: {LOG} size 6, first seen" in first.out
    with Ledger(tmp_path / "c", readonly=True) as c:
        before = c.counts()
    forked = cli("--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub2"))
    assert forked.code == 1 and "error[log-fork]" in forked.err, forked.err
    path = Path(forked.err.split("evidence written to ")[1].split()[0])
    assert path.is_file() and path.parent == tmp_path / "c" / "checkpoints" / "evidence"
    with Ledger(tmp_path / "c", readonly=True) as c:
        assert c.counts() == before  # nothing synced in that run
    assert logcheck.remembered(tmp_path / "c", LOG).size == 6  # type: ignore[union-attr]
    checked = cli("check-evidence", str(path))
    assert checked.code == 0 and "fork proven" in checked.out, checked.err
    pulled = cli("--ledger", str(tmp_path / "c"), "pull", str(tmp_path / "pub2"))  # pull reads the same manifest's log
    assert pulled.code == 1 and "error[log-fork]" in pulled.err, pulled.err
    with Ledger(tmp_path / "c", readonly=True) as c:
        assert c.counts() == before
    again = cli("--json", "--ledger", str(tmp_path / "c"), "audit", str(tmp_path / "pub1"), str(tmp_path / "pub2"))
    assert again.code == 1 and "log-fork" in again.out + again.err


def test_audit_of_an_impostor_under_the_same_origin_is_a_key_change_not_a_fork(tmp_path: Path, cli: Any) -> None:
    """B signs another history under A's origin with another key: that is no fork of A's log (A never signed
    it), so audit names the two keys and writes no evidence that would blame A."""
    events = pool()
    with ledger_with(tmp_path / "a", events[:6]) as a:
        publish(a, tmp_path / "pub1")
    with ledger_with(tmp_path / "b", events) as b:
        publish(b, tmp_path / "pub2")
    publish_log(tmp_path / "pub1", _signer_file(tmp_path), entries(6))
    publish_log(tmp_path / "pub2", NoteSigner(LOG, nacl.signing.SigningKey(b"\x07" * 32)), entries(9, tag="b"))
    r = cli("--ledger", str(tmp_path / "c"), "audit", str(tmp_path / "pub1"), str(tmp_path / "pub2"))
    assert r.code == 1 and "error[log-key-changed]" in r.err and "log-fork" not in r.err, r.err
    assert not list(tmp_path.rglob("fork-*.json"))


def test_sync_from_an_unlogged_source_says_so(tmp_path: Path, cli: Any) -> None:
    with ledger_with(tmp_path / "a", pool()[:3]) as a:
        publish(a, tmp_path / "pub")
    r = cli("--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub"))
    assert r.code == 0 and "unlogged:" in r.out
    r = cli("--json", "--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub"))
    assert r.json()["checkpoint"]["status"] == "unlogged"


def test_check_evidence_exit_codes(tmp_path: Path, cli: Any, log_signer: NoteSigner) -> None:
    rollback = rollback_doc(log_signer)
    (tmp_path / "rollback.json").write_text(json.dumps(rollback))
    r = cli("check-evidence", str(tmp_path / "rollback.json"))
    assert r.code == 1 and "error[fork-not-proven]" in r.err
    r = cli("--json", "check-evidence", str(tmp_path / "rollback.json"))
    assert r.code == 1 and r.json()["proven"] is False and r.json()["kind"] == "rollback"
    (tmp_path / "junk.json").write_text("{}")
    r = cli("check-evidence", str(tmp_path / "junk.json"))
    assert r.code == 1 and "error[bad-evidence]" in r.err and "Traceback" not in r.err
    r = cli("check-evidence", str(tmp_path / "absent.json"))
    assert r.code == 1 and "error[bad-evidence]" in r.err


def test_witness_command_pulls_cosigns_and_refuses_a_fork(tmp_path: Path, cli: Any) -> None:
    signer = _signer_file(tmp_path)
    assert cli("keys", "new", "w1").code == 0
    config = tmp_path / "witness.json"
    config.write_text(
        json.dumps(
            {
                "config_type": w.CONFIG_TYPE,
                "config_version": "1",
                "name": "witness.example/w1",
                "key": "w1",
                "logs": [{"origin": LOG, "vkey": signer.vkey}],
            }
        )
    )
    src = tmp_path / "src"
    publish_log(src, signer, entries(7))
    r = cli("witness", str(src), "--config", str(config))
    assert r.code == 0, r.err
    assert r.out.startswith("\u2014 witness.example/w1 ") and r.out.count("\n") == 1
    verify_cosignature(Checkpoint(LOG, 7, Tree(entries(7)).root(7)).body(), r.out, _witness_verifier(tmp_path))
    publish_log(src, signer, entries(12, tag="b"))
    r = cli("witness", str(src), "--config", str(config))
    assert r.code == 1 and "error[inconsistent-checkpoint]" in r.err
    path = Path(r.err.split("evidence written to ")[1].split()[0])
    assert cli("check-evidence", str(path)).code == 0
    r = cli("witness", str(src), "--config", str(tmp_path / "absent.json"))
    assert r.code == 1 and "error[bad-witness-config]" in r.err


def _witness_verifier(tmp_path: Path) -> Any:
    from pithledger.records.keys import KeyStore

    key = KeyStore(tmp_path / "xdg-config" / "pithledger" / "keys").load("w1")
    return NoteSigner("witness.example/w1", key.signing_key).cosigner


@pytest.fixture(scope="module")
def witness_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("witness-serve")
    signer = NoteSigner(LOG, nacl.signing.SigningKey(hashlib.sha256(b"http witness log").digest()))
    pl(tmp, "--ledger", str(tmp / "ledger"), "apply", str(BUNDLES / "demo-1709.09021.json"))
    pl(tmp, "keys", "new", "w1")
    config = tmp / "witness.json"
    config.write_text(
        json.dumps(
            {
                "config_type": w.CONFIG_TYPE,
                "config_version": "1",
                "name": "witness.example/w1",
                "key": "w1",
                "logs": [{"origin": LOG, "vkey": signer.vkey}],
            }
        )
    )
    server = Server(tmp / "ledger", tmp, "--witness", str(config))
    assert server.proc.stderr is not None
    vkey = server.proc.stderr.readline().split("cosignature/v1): ")[1].strip()
    yield server, signer, vkey, tmp
    server.stop()


def _post(server: Any, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return server.request("/add-checkpoint", "POST", headers or {"content-type": "text/plain"}, body)  # type: ignore[no-any-return]


def test_http_add_checkpoint_cosigns_then_answers_409_with_the_size(witness_server: Any) -> None:
    from pithledger.tlog.note import NoteVerifier

    server, signer, vkey, tmp = witness_server
    tree = Tree(entries(10))
    status, headers, body = _post(server, w.request_body(0, [], checkpoint(signer, 6, tree.root(6))))
    assert status == 200 and headers["content-type"].startswith("text/plain"), body
    verify_cosignature(Checkpoint(LOG, 6, tree.root(6)).body(), body.decode(), NoteVerifier.from_vkey(vkey))
    status, headers, body = _post(server, w.request_body(0, [], checkpoint(signer, 10, tree.root(10))))
    assert (status, headers["content-type"], body) == (409, "text/x.tlog.size", b"6\n")
    status, _, body = _post(server, w.request_body(6, tree.proof(6, 10), checkpoint(signer, 10, tree.root(10))))
    assert status == 200
    forked = Tree(entries(12, tag="b"))
    status, _, body = _post(server, w.request_body(10, forked.proof(10, 12), checkpoint(signer, 12, forked.root(12))))
    assert status == 422 and b"evidence written to" in body
    assert list((tmp / "witness-state" / "evidence").glob("*.json"))


@pytest.mark.parametrize(
    ("mutation", "status"),
    [
        ("garbage", 400),
        ("empty", 400),
        ("unknown-origin", 404),
        ("no-signature-line", 400),
        ("signed-by-a-stranger", 403),
    ],
)
def test_http_hostile_bodies_are_refused(witness_server: Any, mutation: str, status: int) -> None:
    server, signer, _, _ = witness_server
    other = NoteSigner("other.example/log", nacl.signing.SigningKey.generate())
    body = {
        "garbage": b"\x00\xff" * 100,
        "empty": b"",
        "unknown-origin": w.request_body(
            0, [], checkpoint(other, 1, merkle.leaf_hash(b"x"), origin="other.example/log")
        ),
        "no-signature-line": b"old 0\n\n" + Checkpoint(LOG, 1, merkle.leaf_hash(b"x")).body().encode() + b"\n",
        "signed-by-a-stranger": w.request_body(
            0, [], checkpoint(NoteSigner(LOG, nacl.signing.SigningKey.generate()), 1, merkle.leaf_hash(b"x"))
        ),
    }[mutation]
    got, headers, answer = _post(server, body)
    assert got == status and headers["cache-control"] == "no-store", answer


def test_http_body_over_the_limit_is_413_declared_or_streamed(witness_server: Any) -> None:
    server = witness_server[0]
    status, _, _ = _post(server, b"old 0\n" + b"A" * (w.MAX_BODY + 1))
    assert status == 413
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)  # chunked: no length declared
    try:
        sock.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"A" * 8192
        try:
            for _ in range(12):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the server answered and closed while we were still sending
        answer = sock.recv(4096)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_http_add_checkpoint_is_405_on_a_server_that_is_no_witness(tmp_path: Path) -> None:
    pl(tmp_path, "--ledger", str(tmp_path / "ledger"), "apply", str(BUNDLES / "demo-1709.09021.json"))
    server = Server(tmp_path / "ledger", tmp_path)
    try:
        status, _, _ = _post(server, b"old 0\n\n")
        assert status == 405
    finally:
        server.stop()


def test_http_get_of_add_checkpoint_is_not_answered(witness_server: Any) -> None:
    status, _, _ = witness_server[0].request("/add-checkpoint")
    assert status in (404, 405)


def test_fork_through_real_processes(tmp_path: Path) -> None:
    """One mirror key, two ledgers given different histories of one origin, each published with
    `publish --key --witness`: the witness (`serve --witness`) cosigns the first checkpoint, refuses the
    second and writes the evidence; `sync` from the forked mirror into a ledger that synced the first
    names the fork (exit 1, evidence written) and changes nothing."""
    origin = "example.org/mirror"

    def run(*args: str) -> Any:
        return pl(tmp_path, *args, check=False)

    demo = [
        BUNDLES / "demo-1905.08204.json",
        BUNDLES / "demo-1709.09021.json",
        BUNDLES / "demo-2605.00424-every-kind.json",
    ]
    assert run("keys", "new", "mirror").returncode == 0 and run("keys", "new", "w1").returncode == 0
    for name, files in (
        ("a", [demo[0], demo[1]]),
        ("b", [demo[1], demo[0], demo[2]]),
    ):  # 3 entries; 14 in another order
        for f in files:
            assert run("--ledger", str(tmp_path / name), "apply", str(f)).returncode == 0
    log_vkey = NoteSigner(origin, _local_key(tmp_path, "mirror").signing_key).vkey
    config = tmp_path / "witness.json"
    config.write_text(
        json.dumps(
            {
                "config_type": w.CONFIG_TYPE,
                "config_version": "1",
                "name": "witness.example/w1",
                "key": "w1",
                "logs": [{"origin": origin, "vkey": log_vkey}],
            }
        )
    )
    server = Server(tmp_path / "a", tmp_path, "--witness", str(config))
    try:
        assert server.proc.stderr is not None
        witness_key = server.proc.stderr.readline().split("cosignature/v1): ")[1].strip()
        first = run(
            "--ledger",
            str(tmp_path / "a"),
            "publish",
            str(tmp_path / "pub-a"),
            "--key",
            "mirror",
            "--origin",
            origin,
            "--witness",
            server.base,
        )
        assert first.returncode == 0 and f"witness {server.base}: cosigned" in first.stdout, first.stdout + first.stderr
        # the key copied to another key directory: from its own, where its record of what it signed is, the
        # key refuses to sign the fork at all (log-would-fork, tests/e2e/store/test_restore.py)
        copied = tmp_path / "copied-keys"
        copied.mkdir(mode=0o700)
        shutil.copy2(tmp_path / "xdg-config" / "pithledger" / "keys" / "mirror.key.json", copied)
        second = run(
            "--ledger",
            str(tmp_path / "b"),
            "--key-dir",
            str(copied),
            "publish",
            str(tmp_path / "pub-b"),
            "--key",
            "mirror",
            "--origin",
            origin,
            "--witness",
            server.base,
        )
        assert second.returncode == 1 and f"witness {server.base} refused: HTTP 422" in second.stdout, (
            second.stdout + second.stderr
        )
        assert "published without its cosignature" in second.stdout
    finally:
        server.stop()
    assert b"witness.example/w1" in (tmp_path / "pub-a" / "checkpoint").read_bytes()
    assert b"witness.example/w1" not in (tmp_path / "pub-b" / "checkpoint").read_bytes()  # published, not cosigned
    refused = list((tmp_path / "witness-state" / "evidence").glob("*.json"))
    assert len(refused) == 1
    checked = run("check-evidence", str(refused[0]), "--log-key", log_vkey)
    assert checked.returncode == 0 and "fork proven" in checked.stdout, checked.stderr

    synced = run("--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub-a"), "--witness-key", witness_key)
    assert synced.returncode == 0, synced.stderr
    assert f"checkpoint: {origin} size 3, first seen from this origin; cosigned by witness.example/w1" in synced.stdout
    digest = run("--json", "--ledger", str(tmp_path / "c"), "digest").stdout
    forked = run("--ledger", str(tmp_path / "c"), "sync", str(tmp_path / "pub-b"))
    assert forked.returncode == 1 and "error[log-fork]" in forked.stderr and "Traceback" not in forked.stderr, (
        forked.stderr
    )
    evidence = Path(forked.stderr.split("evidence written to ")[1].split()[0])
    assert evidence.is_file() and run("check-evidence", str(evidence)).returncode == 0
    assert run("--json", "--ledger", str(tmp_path / "c"), "digest").stdout == digest  # nothing synced in that run
    assert logcheck.remembered(tmp_path / "c", origin).size == 3  # type: ignore[union-attr]
    # a reader that never saw the log, but requires the witness: the forked checkpoint carries no cosignature
    fresh = run("--ledger", str(tmp_path / "d"), "sync", str(tmp_path / "pub-b"), "--witness-key", witness_key)
    assert fresh.returncode == 1 and "error[not-witnessed]" in fresh.stderr, fresh.stderr


def test_a_sync_waits_for_the_run_that_checks_the_same_log_and_then_sees_the_fork(
    tmp_path: Path, log_signer: NoteSigner
) -> None:
    """`pithledger sync` of one view of a log while another run of this ledger holds its check of the
    other view: the sync says it waits, changes nothing meanwhile, and once that run has remembered its
    view, names the fork (exit 1, evidence) instead of accepting the second history as well."""
    import subprocess
    import sys

    from helpers.site import _env

    ledger, a, b = _forked_sources(tmp_path, log_signer)
    pl(tmp_path, "--ledger", str(ledger / "L"), "apply", str(BUNDLES / "demo-1905.08204.json"))
    # the memory sits in the ledger directory: move what _forked_sources remembered there
    (ledger / "L" / "checkpoints").mkdir()
    for f in (ledger / "checkpoints").glob("*.json"):
        f.rename(ledger / "L" / "checkpoints" / f.name)
    ledger = ledger / "L"
    holding = logcheck.check_source(ledger, str(a), hold=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(ledger), "sync", str(b)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    try:
        assert proc.stderr is not None
        note = proc.stderr.readline()  # the first thing it says, before it reads its memory of the log
        assert note.startswith("waiting: another pithledger run is checking the log " + LOG), note
        time.sleep(0.3)
        assert proc.poll() is None
        logcheck.commit(ledger, holding)
    finally:
        holding.release()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "error[log-fork]" in out + err, out + err
    assert logcheck.remembered(ledger, LOG).source == str(a)  # type: ignore[union-attr]
    assert len(list(logcheck.evidence_dir(ledger).glob("*.json"))) == 1


def test_a_sync_remembers_the_checkpoint_before_it_commits_anything_so_even_a_kill_keeps_it(tmp_path: Path) -> None:
    """A sync stalled mid-run by its source (some records committed, the next ones not arriving) already
    remembers the checkpoint it checked: SIGKILLed there, the events it committed came with a checkpoint
    the ledger remembers, and a later run of a forked view is checked against it. (A first version
    remembered only after the run, so a stopped run left the fork open.)"""
    import http.server
    import signal
    import socketserver
    import subprocess
    import sys

    from helpers.site import _env

    origin = "example.org/stalls"
    pl(tmp_path, "keys", "new", "mirror")
    pl(tmp_path, "--ledger", str(tmp_path / "src"), "apply", str(BUNDLES))
    pl(
        tmp_path,
        "--ledger",
        str(tmp_path / "src"),
        "publish",
        str(tmp_path / "pub"),
        "--key",
        "mirror",
        "--origin",
        origin,
    )
    stalled = threading.Event()
    release = threading.Event()

    class Stalling(http.server.SimpleHTTPRequestHandler):
        served = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path / "pub"), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.endswith("/bundle.json"):
                Stalling.served += 1
                if Stalling.served > 3:  # the first records arrive; the next ones do not
                    stalled.set()
                    release.wait(20)
            super().do_GET()

    ledger = tmp_path / "L"
    pl(tmp_path, "--ledger", str(ledger), "apply", str(BUNDLES / "demo-1905.08204.json"))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Stalling) as server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        # the real command line, its batches of one bundle each (of 10,000 events otherwise): the first ones commit
        code = (
            "import functools, sys; import pithledger.mirror.publish as m; m.sync = functools.partial(m.sync, batch_events=1); "
            "from pithledger.cli import main; sys.argv[0] = 'pithledger'; main()"
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "--ledger",
                str(ledger),
                "sync",
                f"http://127.0.0.1:{server.server_address[1]}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
        )
        try:
            assert stalled.wait(60), "the sync never reached the stalled record"
            remembered = logcheck.remembered(ledger, origin)
            assert remembered is not None and remembered.size == 65  # before the run has ended
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
            server.shutdown()
    remembered = logcheck.remembered(ledger, origin)
    assert remembered is not None and remembered.size == 65
    assert (
        json.loads(pl(tmp_path, "--ledger", str(ledger), "digest", "--json").stdout)["events"] > 2
    )  # the killed run committed some


def _local_key(tmp_path: Path, name: str) -> Any:
    from pithledger.records.keys import KeyStore

    return KeyStore(tmp_path / "xdg-config" / "pithledger" / "keys").load(name)
