"""The mirror's log on the web (spec/transparency.md §4): `publish --key` writes the signed checkpoint and
the C2SP tiles, incrementally and never over a differing tile; `serve --key` answers the same paths;
`verify-log`, a client that knows only the published tree, recomputes the signed root from the entry
tiles and checks every named event, and names every tampering. Real CLI subprocesses, real keys, real
LMDB, a real server on loopback (and a tampering proxy in front of it)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.eventpool import BOB
from helpers.tlogkit import SUBJECT, Server, TamperingProxy, attestations, base_ledger, grow, pl, vkey_of
from pithledger.store import Ledger
from pithledger.tlog import merkle
from pithledger.tlog import tiles as tlog
from pithledger.tlog.note import NoteVerifier, open_checkpoint
from pithledger.tlog.tiles import tiles_for

KEY = "mirror"


def _files(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``root``: relative path -> (inode, mtime_ns, sha256)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_ino, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).digest())
    return out


def _tile_files(root: Path) -> dict[str, tuple[int, int, bytes]]:
    return {k: v for k, v in _files(root).items() if k.startswith("tile/")}


@dataclass
class Stage:
    size: int
    output: dict[str, object]
    files: dict[str, tuple[int, int, bytes]]
    checkpoint: bytes


@dataclass
class Published:
    tmp: Path
    ledger: Path
    site: Path
    vkey: str
    stages: list[Stage]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    """One ledger published into one directory after each of three batches (65, 266, 566 entries)."""
    tmp = tmp_path_factory.mktemp("tlog-publish")
    pl(tmp, "keys", "new", KEY)
    ledger = base_ledger(tmp)
    site = tmp / "site"
    stages = []
    for grow_by, start in ((0, 0), (200, 0), (300, 200)):
        if grow_by:
            grow(tmp, ledger, grow_by, start)
        out = json.loads(pl(tmp, "--ledger", str(ledger), "publish", str(site), "--key", KEY, "--json").stdout)
        stages.append(Stage(int(out["log_size"]), out, _files(site), (site / "checkpoint").read_bytes()))
    return Published(tmp, ledger, site, vkey_of(tmp, ledger, KEY), stages)


def test_each_publish_signs_the_ledgers_log_and_adds_exactly_the_new_tiles(published: Published) -> None:
    verifier = NoteVerifier.from_vkey(published.vkey)
    assert [s.size for s in published.stages] == [65, 266, 566]
    with Ledger(published.ledger, readonly=True) as ledger:
        old_size, before = 0, set[str]()
        for stage in published.stages:
            checkpoint, _ = open_checkpoint(stage.checkpoint, [verifier], origin=verifier.name)
            assert checkpoint.size == stage.size
            expected = dict(tiles_for(ledger, ledger.tlog_entries, stage.size, old_size=old_size))
            tiles = {k for k in stage.files if k.startswith("tile/")}
            assert tiles - before == set(expected), "a publish adds the tiles new since the last one, and only those"
            assert stage.output["tiles_written"] == len(expected)
            for rel, data in expected.items():
                assert (published.site / rel).read_bytes() == data
            old_size, before = stage.size, tiles


def test_full_tiles_are_written_once_and_never_rewritten(published: Published) -> None:
    second, third = published.stages[1].files, published.stages[2].files
    full = [k for k in second if k.startswith("tile/") and ".p/" not in k]
    assert full == ["tile/0/000", "tile/entries/000"]
    for rel in full:
        assert third[rel] == second[rel], f"{rel} was rewritten by a later publish"
    again = json.loads(
        pl(
            published.tmp, "--ledger", str(published.ledger), "publish", str(published.site), "--key", KEY, "--json"
        ).stdout
    )
    assert again["tiles_written"] == 0 and again["log_size"] == 566
    assert _files(published.site)["checkpoint"] == third["checkpoint"], (
        "an unchanged log leaves its checkpoint as it was"
    )


def test_the_manifest_names_the_checkpoint_the_log_key_and_the_origin(published: Published) -> None:
    mirror = json.loads((published.site / "pith-mirrors.json").read_text())["mirrors"][0]
    verifier = NoteVerifier.from_vkey(published.vkey)
    assert (mirror["checkpoint"], mirror["log_key"], mirror["origin"]) == ("checkpoint", published.vkey, verifier.name)


def test_publish_without_a_key_signs_nothing_and_says_so(published: Published, tmp_path: Path) -> None:
    out = pl(published.tmp, "--ledger", str(published.ledger), "publish", str(tmp_path / "plain"))
    assert "no checkpoint signed" in out.stdout
    assert not (tmp_path / "plain" / "checkpoint").exists() and not (tmp_path / "plain" / "tile").exists()
    mirror = json.loads((tmp_path / "plain" / "pith-mirrors.json").read_text())["mirrors"][0]
    assert mirror["checkpoint"] is None and mirror["log_key"] is None


def test_a_base_url_names_the_checkpoint_and_the_origin(published: Published, tmp_path: Path) -> None:
    pl(
        published.tmp,
        "--ledger",
        str(published.ledger),
        "publish",
        str(tmp_path / "s"),
        "--key",
        KEY,
        "--base-url",
        "https://Mirror.Example.org/pith/",
    )
    mirror = json.loads((tmp_path / "s" / "pith-mirrors.json").read_text())["mirrors"][0]
    assert mirror["checkpoint"] == "https://Mirror.Example.org/pith/checkpoint"
    assert mirror["origin"] == "mirror.example.org/pith"
    assert (tmp_path / "s" / "checkpoint").read_text().startswith("mirror.example.org/pith\n566\n")
    assert mirror["log_key"].startswith("mirror.example.org/pith+")


# --- the client that knows only the published tree ---------------------------------------------------------


def _verify_log(published: Published, source: str | Path, *, check: bool = True) -> tuple[int, dict[str, object], str]:
    proc = pl(published.tmp, "verify-log", str(source), "--log-key", published.vkey, "--json", check=check)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def test_verify_log_recomputes_the_root_and_checks_every_event(published: Published) -> None:
    code, report, _ = _verify_log(published, published.site)
    assert code == 0 and report["consistent"] is True and report["size"] == 566
    # every entry's event was fetched and checked, the one Pith-envelope record_created of bundles/ too:
    # its entry hashes its served form (spec/bundle.md §6), which is what is published
    assert report["events_matched"] == 566
    assert report["log_key_from_manifest"] is False


def _copy(published: Published, tmp: Path) -> Path:
    out = tmp / "copy"
    shutil.copytree(published.site, out, symlinks=True)
    return out


def _flip(path: Path, at: int = 40) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "rel", ["tile/entries/000", "tile/0/000", "tile/entries/002.p/54", "tile/0/002.p/54", "tile/1/000.p/2"]
)
def test_a_tampered_tile_is_named(published: Published, tmp_path: Path, rel: str) -> None:
    site = _copy(published, tmp_path)
    _flip(site / rel)
    code, _, err = _verify_log(published, site, check=False)
    assert code == 1 and "error[tile-mismatch]" in err, err


def test_a_tampered_checkpoint_is_named(published: Published, tmp_path: Path) -> None:
    site = _copy(published, tmp_path)
    note = (site / "checkpoint").read_text()
    (site / "checkpoint").write_text(note.replace("\n566\n", "\n565\n", 1))
    code, _, err = _verify_log(published, site, check=False)
    assert code == 1 and "error[bad-note-signature]" in err, err


def test_a_checkpoint_signed_by_another_key_is_named(published: Published, tmp_path: Path) -> None:
    site = _copy(published, tmp_path)
    origin = NoteVerifier.from_vkey(published.vkey).name
    pl(published.tmp, "keys", "new", "impostor")
    forged = pl(
        published.tmp, "--ledger", str(published.ledger), "checkpoint", "--key", "impostor", "--origin", origin
    ).stdout
    (site / "checkpoint").write_text(forged)
    code, _, err = _verify_log(published, site, check=False)
    assert code == 1 and "error[unverified-note]" in err, err


def _record_bundle(site: Path) -> Path:
    _, year, suffix = SUBJECT.split(":")
    return site / "pithledger" / "records" / year / suffix / "bundle.json"


def test_a_tampered_event_is_named(published: Published, tmp_path: Path) -> None:
    site = _copy(published, tmp_path)
    path = _record_bundle(site)
    path.write_text(path.read_text().replace('"Author 7"', '"Author 7 (edited)"'))
    code, report, _ = _verify_log(published, site, check=False)
    assert code == 1
    assert [f["reason"] for f in report["faults"]] == ["invalid-event"]  # type: ignore[union-attr]


def test_an_event_the_mirror_dropped_is_named(published: Published, tmp_path: Path) -> None:
    site = _copy(published, tmp_path)
    path = _record_bundle(site)
    bundle = json.loads(path.read_text())
    dropped = bundle["events"].pop(3)
    path.write_text(json.dumps(bundle))
    code, report, _ = _verify_log(published, site, check=False)
    assert code == 1
    faults = report["faults"]
    assert [(f["reason"], f["event_id"]) for f in faults] == [("event-missing", dropped["event_id"])]  # type: ignore[union-attr]


def _synthetic_log(published: Published, out: Path, n: int, per_record: int, record: str | None = None) -> str:
    """``published``'s tree with its log replaced by ``n`` well-formed entries, ``per_record`` to a record
    (or all of them to ``record``), naming events no bundle carries, under a fresh key: every record's
    check fails (``bad-source``, or ``event-missing`` for each entry of a record the tree holds). Returns
    the log's vkey."""
    import nacl.signing

    from pithledger.tlog.note import Checkpoint, NoteSigner

    shutil.copytree(published.site, out, symlinks=True)
    shutil.rmtree(out / "tile")
    signer = NoteSigner("example.org/synthetic", nacl.signing.SigningKey(bytes(range(32))))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    items = []
    for i in range(n):
        digest = hashlib.sha256(b"event %d" % i).hexdigest()
        named = record or "pith:2026:" + "".join(
            alphabet[b % 32] for b in hashlib.sha256(b"record %d" % (i // per_record)).digest()[:26]
        )
        items.append(
            json.dumps(
                {"event_id": digest, "record": named, "sha256": digest}, separators=(",", ":"), sort_keys=True
            ).encode()
        )
    leaves = [merkle.leaf_hash(e) for e in items]

    class Reader:
        def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
            return [merkle.root(leaves[i << level : (i + 1) << level]) for i in range(start, end)]

    for rel, data in tlog.tiles_for(Reader(), lambda a, b: items[a:b], n):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    (out / "checkpoint").write_bytes(signer.sign(Checkpoint(signer.name, n, merkle.root(leaves)).body()))
    return str(signer.vkey)


def test_verify_log_memory_does_not_grow_with_the_log(
    published: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the entries name is kept on disk while the tiles stream past: ten times the entries, the same
    peak of Python memory (a dict of them held ~0.6 KB an entry: 650 MB for a log of 10^6)."""
    import tracemalloc

    from pithledger.mirror import logsite

    monkeypatch.setattr(
        logsite, "MAX_FAULTS", 20
    )  # every record fails here: keep the list of faults out of the measure
    peaks = {}
    for n in (4_096, 40_960):
        vkey = _synthetic_log(published, tmp_path / f"log-{n}", n, per_record=64)
        tracemalloc.start()
        try:
            report = logsite.check_published_log(str(tmp_path / f"log-{n}"), vkey)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (report.size, report.records, report.events_matched) == (n, n // 64, 0)
        assert len(report.faults) == 20 and report.faults_omitted == n // 64 - 20
    assert peaks[40_960] - peaks[4_096] < 2_000_000, peaks  # a dict of 36,864 more entries: ~22 MB


def test_verify_log_reads_a_record_in_chunks_of_its_ids_with_the_same_verdicts(
    published: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's wanted ids come back from disk a chunk at a time (a hostile log may put every entry on one
    record) and its parts are read for each chunk: every event is still matched once, and a dropped one is
    named once, whatever the chunk and transaction sizes."""
    from pithledger.mirror import logsite

    whole = logsite.check_published_log(str(published.site), published.vkey)
    site = _copy(published, tmp_path)
    path = _record_bundle(site)
    bundle = json.loads(path.read_text())
    dropped = bundle["events"].pop(5)
    path.write_text(json.dumps(bundle))
    monkeypatch.setattr(logsite, "_CHUNK", 7)
    monkeypatch.setattr(logsite, "_COMMIT_EVERY", 5)
    chunked = logsite.check_published_log(str(published.site), published.vkey)
    assert (chunked.records, chunked.events_matched, chunked.faults) == (whole.records, 566, [])
    missing = logsite.check_published_log(str(site), published.vkey)
    assert missing.events_matched == 565
    assert [(f["reason"], f["event_id"]) for f in missing.faults] == [("event-missing", dropped["event_id"])]
    path.unlink()  # a record that cannot be read is one fault, not one a chunk of its ids
    unreadable = logsite.check_published_log(str(site), published.vkey)
    assert [(f["reason"], f["record"]) for f in unreadable.faults] == [("bad-source", SUBJECT)]
    assert unreadable.records == whole.records


def test_verify_log_lists_the_first_faults_and_counts_the_rest(published: Published, tmp_path: Path) -> None:
    from pithledger.mirror import logsite

    vkey = _synthetic_log(published, tmp_path / "log", logsite.MAX_FAULTS + 300, per_record=0, record=SUBJECT)
    proc = pl(published.tmp, "verify-log", str(tmp_path / "log"), "--log-key", vkey, "--json", check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["consistent"] is False
    assert (len(report["faults"]), report["faults_omitted"]) == (logsite.MAX_FAULTS, 300)
    text = pl(published.tmp, "verify-log", str(tmp_path / "log"), "--log-key", vkey, check=False).stdout
    assert f"and 300 more fault(s), not listed (the first {logsite.MAX_FAULTS:,} are)" in text
    assert f"{logsite.MAX_FAULTS + 300:,} fault(s)" in text


# --- forks of one's own log -------------------------------------------------------------------------------------


def test_a_tile_already_there_that_differs_is_a_fork_and_nothing_is_written(
    published: Published, tmp_path: Path
) -> None:
    site = _copy(published, tmp_path)
    os.unlink(site / "checkpoint")  # without this log's checkpoint, every tile is checked
    _flip(site / "tile/entries/000")
    before = _files(site)
    proc = pl(published.tmp, "--ledger", str(published.ledger), "publish", str(site), "--key", KEY, check=False)
    assert (
        proc.returncode == 1 and "error[published-log-differs]" in proc.stderr and "tile/entries/000" in proc.stderr
    ), proc.stderr
    assert _files(site) == before, "a refused publish writes nothing"


def test_a_tile_deleted_from_the_directory_is_written_again_before_the_next_checkpoint(
    published: Published, tmp_path: Path
) -> None:
    """A tile the new checkpoint needs from before is absent (deleted, a partial copy of the tree): publish
    writes every tile again rather than sign a tree a reader cannot read, and the result verifies."""
    site = _copy(published, tmp_path)
    os.unlink(site / "tile/0/000")
    os.unlink(site / "tile/entries/000")
    pl(published.tmp, "--ledger", str(published.ledger), "publish", str(site), "--key", KEY)
    assert (site / "tile/0/000").is_file() and (site / "tile/entries/000").is_file()
    code, report, err = _verify_log(published, site, check=False)
    assert code == 0 and report["consistent"] is True, err


def test_another_history_under_the_same_key_is_a_fork(published: Published, tmp_path: Path) -> None:
    """A second ledger with other events (of the same count and more) published by the same key into the
    first one's directory: its tree at the published checkpoint's size has another root."""
    other = base_ledger(published.tmp, name="other")
    path = tmp_path / "other.json"
    from pithledger.records.bundle import write_bundle

    path.write_text(json.dumps(write_bundle(SUBJECT, attestations(600, 0, signer=BOB))))
    pl(published.tmp, "--ledger", str(other), "apply", str(path))
    site = _copy(published, tmp_path)
    before = _files(site)
    proc = pl(published.tmp, "--ledger", str(other), "publish", str(site), "--key", KEY, check=False)
    assert proc.returncode == 1 and "error[published-log-differs]" in proc.stderr, proc.stderr
    assert _files(site) == before


# --- serve: the same paths, from the ledger ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(published: Published) -> Iterator[Server]:
    s = Server(published.ledger, published.tmp, "--key", KEY)
    yield s
    s.stop()


def test_serve_signs_the_same_checkpoint_as_the_command(published: Published, server: Server) -> None:
    status, headers, body = server.request("/checkpoint")
    assert status == 200 and headers["content-type"] == "text/plain; charset=utf-8"
    assert "max-age=31536000" not in headers["cache-control"]
    assert body == (published.site / "checkpoint").read_bytes()
    assert body.decode() == pl(published.tmp, "--ledger", str(published.ledger), "checkpoint", "--key", KEY).stdout


def test_serve_answers_every_published_tile_with_its_bytes(published: Published, server: Server) -> None:
    tiles = sorted(_tile_files(published.site))
    assert len(tiles) > 8  # partial tiles of every stage, full ones, two levels
    for rel in tiles:
        status, headers, body = server.request("/" + rel)
        assert status == 200, rel
        assert body == (published.site / rel).read_bytes(), rel
        assert headers["content-type"] == "application/octet-stream"
        if ".p/" in rel:
            assert headers["cache-control"] == "public, max-age=60", rel
        else:
            assert headers["cache-control"] == "public, max-age=31536000, immutable", rel
    status, headers, body = server.request("/tile/entries/000", method="HEAD")
    assert (
        status == 200
        and body == b""
        and headers["content-length"] == str((published.site / "tile/entries/000").stat().st_size)
    )


@pytest.mark.parametrize(
    "path",
    [
        "/tile/entries/002.p/55",
        "/tile/entries/002",
        "/tile/0/003.p/1",
        "/tile/1/000.p/3",
        "/tile/1/000",
        "/tile/2/000.p/1",
    ],
)
def test_tiles_beyond_the_tree_are_404(server: Server, path: str) -> None:
    status, _, body = server.request(path)
    assert status == 404 and json.loads(body)["error"] == "not-found"


@pytest.mark.parametrize(
    "path",
    [
        "/tile/entries/2",
        "/tile/entries/002.p/054",
        "/tile/entries/000.p/256",
        "/tile/entries/000.p/0",
        "/tile/0/x000/000",
        "/tile/0/%30%30%30",
        "/tile/0/../0/000",
        "/tile/./0/000",
        "/tile//0/000",
        "/tile/0/000/",
        "/tile/64/000.p/1",
        "/tile/-1/000",
        "/tile/00/000",
        "/tile/0/000.p/",
        "/tile/entries/000.p/1/",
        "/tile/0/000%2ep/5",
        "/tile/../checkpoint",
        "/tile/0/000.p/5%00",
        "/tile/0/000\\",
        "/tile/",
        "/tile",
    ],
)
def test_hostile_tile_paths_are_404(server: Server, path: str) -> None:
    status, headers, body = server.request(path)
    assert status == 404, path
    assert json.loads(body)["error"] == "not-found" and headers["cache-control"] == "no-store"


def test_an_overlong_tile_path_is_refused(server: Server) -> None:
    status, _, body = server.request("/tile/0/" + "x000/" * 300 + "000")
    assert status == 400 and json.loads(body)["error"] == "request-too-long"


def test_verify_log_over_a_live_server(published: Published, server: Server) -> None:
    code, report, _ = _verify_log(published, server.base)
    assert code == 0 and report["size"] == 566 and report["events_matched"] == 566
    status, _, body = server.request("/pith-mirrors.json")
    mirror = json.loads(body)["mirrors"][0]
    assert mirror["checkpoint"] == server.base + "/checkpoint" and mirror["log_key"] == published.vkey
    # without --log-key the key comes from the mirror's own manifest, and the report says so
    proc = pl(published.tmp, "verify-log", server.base, "--json")
    assert (
        json.loads(proc.stdout)["log_key_from_manifest"] is True and "not that it is the log you trust" in proc.stderr
    )


def test_serve_without_a_key_has_no_checkpoint(published: Published) -> None:
    s = Server(published.ledger, published.tmp)
    try:
        status, _, body = s.request("/checkpoint")
        assert status == 404 and json.loads(body)["error"] == "not-found"
        status, _, body = s.request("/tile/entries/000")
        assert status == 200 and body == (published.site / "tile/entries/000").read_bytes()
    finally:
        s.stop()


def _through(published: Published, server: Server, mutate: "object") -> tuple[int, dict[str, object], str]:
    proxy = TamperingProxy(server.port, mutate)  # type: ignore[arg-type]
    try:
        return _verify_log(published, proxy.base, check=False)
    finally:
        proxy.stop()


def test_a_server_that_tampers_with_a_tile_is_named(published: Published, server: Server) -> None:
    def mutate(path: str, body: bytes) -> bytes:
        return body[:100] + bytes([body[100] ^ 1]) + body[101:] if path == "/tile/entries/001" else body

    code, _, err = _through(published, server, mutate)
    assert code == 1 and "error[tile-mismatch]" in err, err


def test_a_server_that_tampers_with_the_checkpoint_is_named(published: Published, server: Server) -> None:
    def mutate(path: str, body: bytes) -> bytes:
        return body.replace(b"\n566\n", b"\n567\n", 1) if path == "/checkpoint" else body

    code, _, err = _through(published, server, mutate)
    assert code == 1 and "error[bad-note-signature]" in err, err


def test_a_server_that_tampers_with_an_event_is_named(published: Published, server: Server) -> None:
    suffix = SUBJECT.rsplit(":", 1)[-1]

    def mutate(path: str, body: bytes) -> bytes:
        return body.replace(b'"Author 7"', b'"Author 7 (edited)"') if suffix in path and "bundle" in path else body

    code, report, _ = _through(published, server, mutate)
    assert code == 1
    assert [f["reason"] for f in report["faults"]] == ["invalid-event"]  # type: ignore[union-attr]


def test_serve_origin_comes_from_the_base_url_given(published: Published) -> None:
    s = Server(published.ledger, published.tmp, "--key", KEY, "--base-url", "http://mirror.example.test:8080/")
    try:
        _, _, body = s.request("/checkpoint")
        assert body.startswith(b"mirror.example.test:8080\n566\n")
    finally:
        s.stop()
