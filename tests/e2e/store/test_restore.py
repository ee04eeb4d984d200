"""A restore never makes the mirror sign a fork of its own log (issue #41 item 1; spec/transparency.md §4.1,
docs/operating.md §6). Real CLI subprocesses, a real `serve --key` on loopback as the deployed unit runs it,
a real follower (`sync`) and a real witness (`witness SOURCE`), real keys and LMDB in temp dirs.

The scenario of the issue: apply 20 events, back up, apply 15 more, the mirror's checkpoint (size 35) is
seen by a follower and cosigned by a witness; then the backup is swapped in and 15 other events applied.
Restored as docs/operating.md §6 says (its tested block run as written), the next checkpoint (size 50)
extends the published one: the follower and the witness accept it. Restored naively (the swap alone), the
log key refuses to sign (`log-would-fork`) where it used to sign a second tree of size 35."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import servekit
from helpers.tlogkit import SUBJECT, attestations
from pithledger.records.bundle import write_bundle
from pithledger.store import Ledger

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "operating.md"
BIN = Path(sys.executable).parent


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        XDG_DATA_HOME=str(tmp / "xdg-data"),
        XDG_CONFIG_HOME=str(tmp / "xdg-config"),
        PITHLEDGER_LEDGER=str(tmp / "lib" / "ledger"),  # the deployed layout, made local
        PITHLEDGER_KEYS=str(tmp / "lib" / "keys"),
    )
    env.pop("PITHLEDGER_LOG_KEY", None)
    return env


def pl(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, env=_env(tmp), timeout=300
    )
    if check:
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)
    return proc


def _apply(tmp: Path, n: int, start: int) -> None:
    path = tmp / f"events-{start}.json"
    path.write_text(json.dumps(write_bundle(SUBJECT, attestations(n, start))))
    pl(tmp, "apply", str(path))


def _serve(tmp: Path) -> servekit.Server:
    """The serve unit's log: the ledger served with the log key `mirror` (its default origin)."""
    return servekit.Server(tmp / "lib" / "ledger", _env(tmp), "--key", "mirror", "--access-log", "/dev/null")


def _witness_config(tmp: Path, vkey: str) -> None:
    """A witness (its own key directory and state) that follows the mirror's log."""
    pl(tmp, "--key-dir", str(tmp / "witness-keys"), "keys", "new", "w1")
    (tmp / "witness.json").write_text(
        json.dumps(
            {
                "config_type": "pithledger_witness_config",
                "config_version": "1",
                "name": "witness.example/w1",
                "key": "w1",
                "logs": [{"origin": vkey.split("+")[0], "vkey": vkey}],
            }
        )
    )


def _witness(tmp: Path, source: str) -> subprocess.CompletedProcess[str]:
    args = ("--key-dir", str(tmp / "witness-keys"), "witness", source, "--config", str(tmp / "witness.json"))
    return pl(tmp, *args, check=False)


def _follow(tmp: Path, source: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return pl(tmp, "--ledger", str(tmp / "follower"), "sync", source, "--json", check=check)


class Mirror:
    """The deployed mirror after 20 events, a backup, 15 more events; its checkpoint (size 35) seen by a
    follower and cosigned by a witness."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        (tmp / "backups").mkdir()
        pl(tmp, "keys", "new", "mirror")
        _apply(tmp, 19, 0)  # record_created + 19 attestations
        pl(tmp, "backup", str(tmp / "backups" / "20260101T031700Z"))
        _apply(tmp, 15, 19)
        self.server = _serve(tmp)
        status, _, manifest = self.server.request("/pith-mirrors.json")
        assert status == 200
        self.vkey = json.loads(manifest)["mirrors"][0]["log_key"]
        self.origin = self.vkey.split("+")[0]
        _witness_config(tmp, self.vkey)
        first = json.loads(self.follow().stdout)["checkpoint"]
        assert (first["status"], first["size"]) == ("first", 35)
        assert self.witness().returncode == 0
        with Ledger(tmp / "lib" / "ledger", readonly=True) as ledger:
            self.root35 = ledger.tlog_root()

    def follow(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _follow(self.tmp, self.server.base + "/", check)

    def witness(self) -> subprocess.CompletedProcess[str]:
        return _witness(self.tmp, self.server.base + "/")

    def restart(self) -> None:
        self.server.stop()
        self.server = _serve(self.tmp)


def _local(block: str, tmp: Path, port: int) -> str:
    """The page's deployed paths and port made local (as tests/e2e/test_operating.py does)."""
    for deployed, here in (
        ("/opt/pithledger/bin", str(BIN)),
        ("/var/lib/pithledger", str(tmp / "lib")),
        ("/var/backups/pithledger", str(tmp / "backups")),
        ("127.0.0.1:8080", f"127.0.0.1:{port}"),
    ):
        block = block.replace(deployed, here)
    return block


def _restore_block() -> str:
    """The tested block of docs/operating.md §6 that swaps the backup in: the drill, word for word."""
    section = DOC.read_text().split("## 6. Backups and restore", 1)[1].split("\n## 7.", 1)[0]
    (block,) = [b for b in re.findall(r"^<!-- test -->\n```sh\n(.*?)^```$", section, flags=re.M | re.S) if "mv " in b]
    return block


def test_the_restore_drill_of_the_guide_ends_with_a_follower_and_a_witness_accepting_the_next_checkpoint(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    try:
        # the writer is stopped (systemctl stop pithledger-sync: none runs here); serve goes on publishing
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", _local(_restore_block(), tmp_path, mirror.server.port)],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "15 event(s) appended in log order" in proc.stdout, proc.stdout
        with Ledger(tmp_path / "lib" / "ledger", readonly=True) as ledger:
            assert (ledger.tlog_size(), ledger.tlog_root()) == (35, mirror.root35)  # the published tree, exactly
        mirror.restart()  # systemctl restart pithledger-serve
        _apply(tmp_path, 15, 100)  # 15 other events
        status, _, note = mirror.server.request("/checkpoint")
        assert status == 200 and note.split(b"\n")[1] == b"50"
        follower = json.loads(mirror.follow().stdout)["checkpoint"]
        assert (follower["status"], follower["previous_size"], follower["size"]) == ("extends", 35, 50)
        witnessed = mirror.witness()
        assert witnessed.returncode == 0 and "witness.example/w1" in witnessed.stdout, (
            witnessed.stdout + witnessed.stderr
        )
        assert list((tmp_path / "follower" / "checkpoints" / "evidence").glob("*")) == []
        # and the command that signs checkpoints agrees: the key's record moved to 50
        out = json.loads(pl(tmp_path, "checkpoint", "--key", "mirror", "--json").stdout)
        assert out["size"] == 50
    finally:
        mirror.server.stop()


def test_a_naive_restore_is_refused_by_name_and_nothing_is_signed(tmp_path: Path) -> None:
    """The guide as it was: stop, swap the backup in, start, and the sync appends other events. Before the
    fix the key signed a second tree of size 35 and the follower's next sync exited 1 with log-fork."""
    mirror = Mirror(tmp_path)
    try:
        lib = tmp_path / "lib"
        (lib / "ledger").rename(lib / "ledger.broken")
        subprocess.run(["cp", "-a", str(tmp_path / "backups" / "20260101T031700Z"), str(lib / "ledger")], check=True)
        mirror.restart()
        _apply(tmp_path, 15, 100)
        records = sorted((lib / "keys" / "signed").glob("*.json"))
        held = [p.read_bytes() for p in records]
        proc = pl(tmp_path, "checkpoint", "--key", "mirror", check=False)
        assert proc.returncode == 1 and proc.stdout == ""
        assert "error[log-would-fork]" in proc.stderr and "restore-log" in proc.stderr, proc.stderr
        status, _, body = mirror.server.request("/checkpoint")
        assert status == 503 and b"log-would-fork" in body
        assert [p.read_bytes() for p in records] == held  # the record did not move
        # the follower sees no second tree: the source publishes no checkpoint it could fork on
        follow = mirror.follow(check=False)
        assert "log-fork" not in follow.stdout + follow.stderr
        assert list((tmp_path / "follower" / "checkpoints" / "evidence").glob("*")) == []
        # restore-log refuses the diverged ledger by name, and writes nothing
        proc = pl(tmp_path, "restore-log", str(mirror.server.base) + "/", check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr  # serve answers no checkpoint now
        broken = servekit.Server(lib / "ledger.broken", _env(tmp_path), "--key", "mirror", "--access-log", "/dev/null")
        try:
            proc = pl(tmp_path, "restore-log", broken.base + "/", "--log-key", mirror.vkey, check=False)
        finally:
            broken.stop()
        assert proc.returncode == 1 and "error[log-diverged]" in proc.stderr, proc.stderr
        with Ledger(lib / "ledger", readonly=True) as ledger:
            assert ledger.tlog_size() == 35 and ledger.tlog_root() != mirror.root35
    finally:
        mirror.server.stop()


def test_a_mirror_that_publishes_a_directory_is_restored_from_it(tmp_path: Path) -> None:
    """The same with `publish DIR --key` as the published log: restore-log reads the directory; a publish of
    the swapped-in backup into a new directory (where no published checkpoint stops it) is refused by the key."""
    (tmp_path / "backups").mkdir()
    lib, site = tmp_path / "lib", str(tmp_path / "site")
    pl(tmp_path, "keys", "new", "mirror")
    _apply(tmp_path, 19, 0)
    pl(tmp_path, "backup", str(tmp_path / "backups" / "b1"))
    _apply(tmp_path, 15, 19)
    vkey = json.loads(pl(tmp_path, "publish", site, "--key", "mirror", "--json").stdout)["log_key"]
    _witness_config(tmp_path, vkey)
    assert json.loads(_follow(tmp_path, site).stdout)["checkpoint"]["size"] == 35
    assert _witness(tmp_path, site).returncode == 0
    (lib / "ledger").rename(lib / "ledger.broken")
    subprocess.run(["cp", "-a", str(tmp_path / "backups" / "b1"), str(lib / "ledger")], check=True)
    naive = pl(tmp_path, "publish", str(tmp_path / "elsewhere"), "--key", "mirror", check=False)
    assert naive.returncode == 1 and "error[log-would-fork]" in naive.stderr, naive.stderr
    assert not (tmp_path / "elsewhere" / "checkpoint").exists()
    out = json.loads(pl(tmp_path, "restore-log", site, "--log-key", vkey, "--json").stdout)
    assert (out["status"], out["before"], out["appended"], out["size"]) == ("restored", 20, 15, 35)
    again = json.loads(pl(tmp_path, "restore-log", site, "--log-key", vkey, "--json").stdout)
    assert (again["status"], again["appended"]) == ("same", 0)
    _apply(tmp_path, 15, 100)
    assert json.loads(pl(tmp_path, "publish", site, "--key", "mirror", "--json").stdout)["log_size"] == 50
    follower = json.loads(_follow(tmp_path, site).stdout)["checkpoint"]
    assert (follower["status"], follower["previous_size"], follower["size"]) == ("extends", 35, 50)
    assert _witness(tmp_path, site).returncode == 0
    pl(tmp_path, "fsck")


def test_export_all_keeps_the_digest_not_the_log_order_and_the_key_refuses_to_sign_it(tmp_path: Path) -> None:
    """README's "portable form": the events and digest survive `export --all` into an empty ledger, the
    log's order does not (bundles/ spans 51 records), so the key that signed the first log refuses the second."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    pl(tmp_path, "keys", "new", "mirror")
    pl(tmp_path, "--ledger", a, "apply", str(ROOT / "bundles"))
    assert pl(tmp_path, "--ledger", a, "checkpoint", "--key", "mirror").stdout.split("\n")[1] == "65"
    pl(tmp_path, "--ledger", a, "export", "--all", "-o", str(tmp_path / "all.jsonl"))
    pl(tmp_path, "--ledger", b, "apply", str(tmp_path / "all.jsonl"))
    digests = [json.loads(pl(tmp_path, "--ledger", x, "digest", "--json").stdout) for x in (a, b)]
    assert digests[0] == digests[1]
    with Ledger(Path(a), readonly=True) as la, Ledger(Path(b), readonly=True) as lb:
        assert la.tlog_size() == lb.tlog_size() == 65 and la.tlog_root() != lb.tlog_root()
    proc = pl(tmp_path, "--ledger", b, "checkpoint", "--key", "mirror", check=False)
    assert proc.returncode == 1 and "error[log-would-fork]" in proc.stderr, proc.stdout + proc.stderr


def _swap_backup_in(tmp: Path, backup: str) -> None:
    lib = tmp / "lib"
    (lib / "ledger").rename(lib / "ledger.broken")
    subprocess.run(["cp", "-a", str(tmp / "backups" / backup), str(lib / "ledger")], check=True)


def test_restore_log_from_an_older_copy_than_the_key_signed_is_refused_and_the_hinted_copy_restores(
    tmp_path: Path,
) -> None:
    """The publish directory holds size 20, the key went on to sign 35 (`checkpoint`, serve): restored from
    that directory the ledger could never be signed again. Before: restore-log said "already holds exactly the
    published log", exit 0, and the next checkpoint was log-would-fork (with a hint naming restore-log)."""
    (tmp_path / "backups").mkdir()
    site = str(tmp_path / "site")
    pl(tmp_path, "keys", "new", "mirror")
    _apply(tmp_path, 19, 0)
    vkey = json.loads(pl(tmp_path, "publish", site, "--key", "mirror", "--json").stdout)["log_key"]
    pl(tmp_path, "backup", str(tmp_path / "backups" / "b1"))
    _apply(tmp_path, 15, 19)
    assert pl(tmp_path, "checkpoint", "--key", "mirror").stdout.split("\n")[1] == "35"
    _swap_backup_in(tmp_path, "b1")
    for args in ((site,), (site, "--log-key", vkey)):
        proc = pl(tmp_path, "restore-log", *args, check=False)
        assert proc.returncode == 1 and "error[not-the-signed-log]" in proc.stderr, proc.stdout + proc.stderr
        assert "size 35" in proc.stderr and "publish DIR --key NAME" in proc.stderr
    # the hint's newest copy: the replaced ledger published (its tree extends what the key signed)
    newest = str(tmp_path / "newest")
    pl(tmp_path, "--ledger", str(tmp_path / "lib" / "ledger.broken"), "publish", newest, "--key", "mirror")
    out = json.loads(pl(tmp_path, "restore-log", newest, "--json").stdout)
    assert (out["status"], out["before"], out["appended"], out["size"]) == ("restored", 20, 15, 35)
    assert pl(tmp_path, "checkpoint", "--key", "mirror").stdout.split("\n")[1] == "35"


def test_restore_log_from_another_mirrors_log_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """A source that is not ours (a follower's URL typed by mistake, a hostile one) that holds our first 20
    entries, then 15 of its own, under its own key: with no --log-key its manifest's key is its word only.
    Before: restore-log appended its 15 events (exit 0), leaving a ledger our key refuses to sign — or, for a
    key with no record yet, one it would sign: a fork of our own log."""
    (tmp_path / "backups").mkdir()
    pl(tmp_path, "keys", "new", "mirror")
    _apply(tmp_path, 19, 0)
    pl(tmp_path, "backup", str(tmp_path / "backups" / "b1"))
    other = tmp_path / "other"
    subprocess.run(["cp", "-a", str(tmp_path / "backups" / "b1"), str(other)], check=True)
    path = tmp_path / "theirs.json"
    path.write_text(json.dumps(write_bundle(SUBJECT, attestations(15, 100))))
    pl(tmp_path, "--ledger", str(other), "apply", str(path))
    theirs = str(tmp_path / "theirs")
    pl(tmp_path, "--key-dir", str(tmp_path / "other-keys"), "keys", "new", "them")
    pl(tmp_path, "--key-dir", str(tmp_path / "other-keys"), "--ledger", str(other), "publish", theirs, "--key", "them")
    _apply(tmp_path, 15, 19)
    assert pl(tmp_path, "checkpoint", "--key", "mirror").stdout.split("\n")[1] == "35"
    _swap_backup_in(tmp_path, "b1")
    proc = pl(tmp_path, "restore-log", theirs, check=False)
    assert proc.returncode == 1 and "error[not-the-signed-log]" in proc.stderr, proc.stdout + proc.stderr
    assert "no record" in proc.stderr
    with Ledger(tmp_path / "lib" / "ledger", readonly=True) as ledger:
        assert ledger.tlog_size() == 20
