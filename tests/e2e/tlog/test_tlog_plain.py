"""Plain C2SP logs and the keys a reader gives (issue #31, items 5 and 6; spec/transparency.md §6.5, §2.1).

A plain C2SP tlog-tiles log — ``checkpoint`` and ``tile/...`` at its base, no pithledger manifest or
digest — written by other code than pithledger's (Go's golang.org/x/mod/sumdb/tlog and note, through
tests/interop/c2sp_log.go), read by ``consistency --source`` and ``witness`` from a directory and from a
static HTTP server on loopback. Keys given on the command line are checked before anything is fetched:
a malformed one is ``bad-verifier-key``, one of a type pithledger cannot check (ML-DSA-44, 0x06) is
``unsupported-key-type``, never a checkpoint that "does not verify" (which reads as tampering).
Real CLI subprocesses throughout.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.common import TESTS
from helpers.tlog_plain import mldsa_vkey
from helpers.tlogkit import pl

ORIGIN = "example.com/gotlog"
GOPATH = Path("/usr/share/gocode")
GO_SOURCE = TESTS / "interop" / "c2sp_log.go"


# --- a log written by Go's x/mod ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def go_writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go program built once, offline (GOPATH mode over Debian's golang-golang-x-mod-dev)."""
    go = shutil.which("go")
    if (go is None or not (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir()) and os.environ.get("CI") != "true":
        # .ci/run installs both: under CI=true a missing Go fails here instead of skipping the interop tests
        pytest.skip("needs Go and golang.org/x/mod (Debian: apt-get install golang-go golang-golang-x-mod-dev)")
    out = tmp_path_factory.mktemp("go") / "c2sp_log"
    env = dict(os.environ, GO111MODULE="off", GOPATH=str(GOPATH), GOFLAGS="", GOCACHE=str(out.parent / "cache"))
    subprocess.run([go, "build", "-o", str(out), str(GO_SOURCE)], check=True, env=env, timeout=300, capture_output=True)
    return out


def go_log(writer: Path, directory: Path, old: int, new: int) -> str:
    """Grow the Go-written log in ``directory`` from ``old`` to ``new`` entries; its verifier key."""
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(writer), str(directory), ORIGIN, str(old), str(new)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout.strip()


class Static:
    """A plain static web server on loopback (no pithledger code) serving ``root``; counts requests."""

    def __init__(self, root: Path) -> None:
        owner = self
        self.paths: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                owner.paths.append(self.path)
                super().do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def static(tmp_path: Path) -> Iterator[Static]:
    (tmp_path / "www").mkdir()
    server = Static(tmp_path / "www")
    yield server
    server.stop()


def witness_config(tmp: Path, vkey: str) -> Path:
    path = tmp / "witness.json"
    path.write_text(
        json.dumps(
            {
                "config_type": "pithledger_witness_config",
                "config_version": "1",
                "name": "witness.example/w1",
                "key": "w1",
                "logs": [{"origin": ORIGIN, "vkey": vkey}],
            }
        )
    )
    return path


@pytest.mark.parametrize("over", ["directory", "http"])
def test_consistency_and_witness_read_a_plain_c2sp_log_written_by_go(
    tmp_path: Path, go_writer: Path, static: Static, over: str
) -> None:
    # Before: consistency --source demanded pithledger/digest.json, witness said "publishes no checkpoint".
    log = tmp_path / "www" / "log"
    vkey = go_log(go_writer, log, 0, 300)
    source = str(log) if over == "directory" else f"{static.base}/log"
    old = tmp_path / "old.checkpoint"
    shutil.copy(log / "checkpoint", old)
    pl(tmp_path, "keys", "new", "w1")
    config = witness_config(tmp_path, vkey)
    first = pl(tmp_path, "witness", source, "--config", str(config), "--json", check=False)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["size"] == 300
    go_log(go_writer, log, 300, 700)
    new = tmp_path / "new.checkpoint"
    shutil.copy(log / "checkpoint", new)

    got = pl(tmp_path, "consistency", str(old), str(new), "--log-key", vkey, "--source", source, "--json", check=False)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert doc["consistent"] and doc["old"]["size"] == 300 and doc["new"]["size"] == 700 and doc["proof"]

    second = pl(tmp_path, "witness", source, "--config", str(config), "--json", check=False)  # proof from the tiles
    assert second.returncode == 0, second.stderr
    cosigned = json.loads(second.stdout)
    assert cosigned["size"] == 700 and cosigned["cosignature"].startswith("\u2014 witness.example/w1 ")
    if over == "http":
        assert not any("digest" in p for p in static.paths)  # only the checkpoint, tiles (and the manifest looked for)


def test_a_plain_log_with_a_changed_tile_is_refused(tmp_path: Path, go_writer: Path) -> None:
    log = tmp_path / "log"
    vkey = go_log(go_writer, log, 0, 300)
    old = tmp_path / "old.checkpoint"
    shutil.copy(log / "checkpoint", old)
    go_log(go_writer, log, 300, 700)
    tile = log / "tile" / "0" / "001"  # a full tile the proof from 300 to 700 reads
    data = bytearray(tile.read_bytes())
    data[40] ^= 1
    tile.write_bytes(bytes(data))
    got = pl(
        tmp_path, "consistency", str(old), str(log / "checkpoint"), "--log-key", vkey, "--source", str(log), check=False
    )
    assert got.returncode == 1 and got.stderr.startswith("error[tile-mismatch]: tile/0/001 "), got.stderr
    assert "consistent:" not in got.stdout


def test_a_manifest_still_decides_where_the_log_is(tmp_path: Path, go_writer: Path) -> None:
    # pith-mirrors.json naming no checkpoint: unlogged, even with a checkpoint file at the base (§6.5's order)
    log = tmp_path / "log"
    vkey = go_log(go_writer, log, 0, 5)
    (log / "pith-mirrors.json").write_text(
        json.dumps({"mirrors": [{"checkpoint": None, "log_key": None, "origin": None}]})
    )
    pl(tmp_path, "keys", "new", "w1")
    got = pl(tmp_path, "witness", str(log), "--config", str(witness_config(tmp_path, vkey)), check=False)
    assert got.returncode == 1 and "error[bad-checkpoint]" in got.stderr and "publishes no checkpoint" in got.stderr


# --- keys given on the command line ---------------------------------------------------------------------


@pytest.fixture
def logged_source(tmp_path: Path, go_writer: Path, static: Static) -> str:
    """A source at a URL whose manifest names a checkpoint: what sync and pull would fetch first."""
    log = tmp_path / "www"
    vkey = go_log(go_writer, log, 0, 3)
    (log / "pith-mirrors.json").write_text(
        json.dumps({"mirrors": [{"checkpoint": "checkpoint", "log_key": vkey, "origin": ORIGIN}]})
    )
    return static.base


@pytest.mark.parametrize(
    ("option", "key", "code"),
    [
        ("--log-key", "garbage", "bad-verifier-key"),
        ("--witness-key", "garbage", "bad-verifier-key"),
        ("--log-key", "n+0000000+AAAA", "bad-verifier-key"),
        ("--witness-key", mldsa_vkey(), "unsupported-key-type"),
        ("--log-key", mldsa_vkey(ORIGIN), "unsupported-key-type"),
    ],
)
@pytest.mark.parametrize("verb", ["sync", "pull"])
def test_a_key_mistake_is_named_before_anything_is_fetched(
    tmp_path: Path, logged_source: str, static: Static, verb: str, option: str, key: str, code: str
) -> None:
    # Before: fetched, then "the checkpoint does not verify under the log key ...: do not trust this copy of the log".
    args = [verb, logged_source, option, key] + (["2605.00424"] if verb == "pull" else [])
    got = pl(tmp_path, "--ledger", str(tmp_path / "ledger"), *args, check=False)
    assert got.returncode == 1, got.stdout + got.stderr
    assert got.stderr.startswith(f"error[{code}]:"), got.stderr
    assert "do not trust" not in got.stderr and "Traceback" not in got.stderr
    if code == "unsupported-key-type":
        assert "0x06 (ML-DSA-44)" in got.stderr
    assert static.paths == []  # nothing fetched


def test_audit_names_a_bad_witness_key_before_reading(tmp_path: Path, logged_source: str, static: Static) -> None:
    got = pl(tmp_path, "audit", logged_source, logged_source, "--witness-key", mldsa_vkey(), check=False)
    assert got.returncode == 1 and got.stderr.startswith("error[unsupported-key-type]:"), got.stderr
    assert static.paths == []


def test_offline_verbs_name_an_unsupported_key_type(tmp_path: Path) -> None:
    # Before: verify-proof / consistency / verify-log said bad-verifier-key for a well-formed ML-DSA-44 key.
    (tmp_path / "p.json").write_text("{}")
    for args in (
        ["verify-proof", str(tmp_path / "p.json")],
        ["consistency", str(tmp_path / "p.json"), str(tmp_path / "p.json")],
        ["verify-log", str(tmp_path / "absent")],
    ):
        got = pl(tmp_path, *args, "--log-key", mldsa_vkey(ORIGIN), check=False)
        assert got.returncode == 1 and got.stderr.startswith("error[unsupported-key-type]:"), (args, got.stderr)
        assert "0x06 (ML-DSA-44)" in got.stderr


def test_witness_config_with_an_ml_dsa_log_key_is_named_unsupported(tmp_path: Path) -> None:
    pl(tmp_path, "keys", "new", "w1")
    got = pl(
        tmp_path, "witness", str(tmp_path), "--config", str(witness_config(tmp_path, mldsa_vkey(ORIGIN))), check=False
    )
    assert got.returncode == 1 and got.stderr.startswith("error[unsupported-key-type]:"), got.stderr


def test_check_evidence_names_a_bad_log_key(tmp_path: Path) -> None:
    # Before: "old_checkpoint does not verify under the log key garbage" (bad-evidence): the file was blamed.
    from pithledger.tlog.witness import evidence_doc

    doc = evidence_doc(
        origin=ORIGIN,
        log_key="x",
        old="a\n",
        new="b\n",
        proof=[],
        prefix=None,
        observer="t",
        observed_at="2026-01-01T00:00:00Z",
        kind="rollback",
    )
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(doc))
    for key, code in (("garbage", "bad-verifier-key"), (mldsa_vkey(ORIGIN), "unsupported-key-type")):
        got = pl(tmp_path, "check-evidence", str(path), "--log-key", key, check=False)
        assert got.returncode == 1 and got.stderr.startswith(f"error[{code}]:"), got.stderr


@pytest.mark.parametrize(
    ("manifest_key", "expected"),
    [
        ("ml-dsa", "error[unsupported-key-type]:"),
        ("garbage", "error[bad-checkpoint]: "),
    ],
)
def test_a_key_the_source_names_is_the_sources_and_its_type_is_named(
    tmp_path: Path, go_writer: Path, static: Static, manifest_key: str, expected: str
) -> None:
    # The manifest's own log_key: an ML-DSA-44 one is unsupported (before: "does not verify under the log key",
    # bad-checkpoint); a malformed one is the source's fault, said as such.
    log = tmp_path / "www"
    go_log(go_writer, log, 0, 3)
    key = mldsa_vkey(ORIGIN) if manifest_key == "ml-dsa" else "garbage"
    (log / "pith-mirrors.json").write_text(
        json.dumps({"mirrors": [{"checkpoint": "checkpoint", "log_key": key, "origin": ORIGIN}]})
    )
    got = pl(tmp_path, "--ledger", str(tmp_path / "ledger"), "sync", static.base, check=False)
    assert got.returncode == 1 and got.stderr.startswith(expected), got.stderr
    assert "does not verify" not in got.stderr
    if manifest_key == "garbage":
        assert "the manifest's log_key 'garbage' is no verifier key" in got.stderr
