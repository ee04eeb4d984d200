"""The mirror's log on the web (spec/transparency.md §4): `publish --key` writes the signed checkpoint and
the C2SP tiles, incrementally and never over a differing tile; `serve --key` answers the same paths;
`verify-log`, a client that knows only the published tree, recomputes the signed root from the entry
tiles and checks every named event, and names every tampering. Real CLI subprocesses, real keys, real
LMDB, a real server on loopback (and a tampering proxy in front of it).

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/mirror/test_tlog_publish.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.tlogkit import SUBJECT


def test_verify_log_leaves_no_scratch_directory_even_when_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scratch LMDB environment's directory is gone once it is open (the open file lives on), so a
    SIGTERM or SIGKILL mid-run leaves nothing behind; what it holds is still there to read."""
    import tempfile

    from pithledger.mirror import logsite

    made: list[str] = []
    mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(mkdtemp(**kw)) or made[-1])
    wanted = logsite._Wanted(10)
    try:
        assert len(made) == 1 and not Path(made[0]).exists()
        assert wanted.add(b"\x01" * 32, SUBJECT, "sha256:" + "ab" * 32, 0, "cd" * 32)
        assert not wanted.add(b"\x01" * 32, SUBJECT, "sha256:" + "ef" * 32, 1, "cd" * 32)  # the same event id again
        assert list(wanted.chunks()) == [
            (SUBJECT, {"sha256:" + "ab" * 32: (0, "cd" * 32), "sha256:" + "ef" * 32: (1, "cd" * 32)})
        ]
    finally:
        wanted.close()


def test_tile_paths_name_exactly_the_tiles_of_a_tree() -> None:
    from pithledger.mirror.logsite import tile_paths
    from pithledger.tlog import merkle
    from pithledger.tlog import tiles as tlog

    leaves = [merkle.leaf_hash(str(i).encode()) for i in range(600)]

    class Reader:
        def read_hashes(self, level: int, start: int, end: int) -> list[bytes]:
            return [merkle.root(leaves[i << level : (i + 1) << level]) for i in range(start, end)]

    for n in (0, 1, 255, 256, 257, 511, 512, 513, 600):
        want = {rel for rel, _ in tlog.tiles_for(Reader(), lambda a, b: [b"x"] * (b - a), n)}
        assert set(tile_paths(n)) == want, n
