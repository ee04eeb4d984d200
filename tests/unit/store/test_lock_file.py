"""room_for_lmdb's new lock file (ledger/files.py, spec/storage.md §7.4): allocated whole before LMDB maps it,
and never unlinked once another opener may hold it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import lmdb
import pytest

from pithledger.errors import DiskFull
from pithledger.files import LMDB_LOCK_BYTES, room_for_lmdb


def test_a_lock_file_another_opener_may_hold_is_never_unlinked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocation fails (a nearly full disk) while a lock.mdb is visible: another process opening the ledger
    at that moment maps it, so unlinking it leaves that process on a lock table the next opener never sees (two
    writers at once). Before, lock.mdb was created in place, then unlinked on ENOSPC; now it is allocated under
    a name of its own and linked into place only whole."""
    visible: list[int] = []

    def no_room(fd: int, offset: int, length: int) -> None:
        lock = tmp_path / "lock.mdb"
        if lock.exists():  # another opener may open it now
            visible.append(os.stat(lock).st_ino)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    with pytest.raises(DiskFull):
        room_for_lmdb(tmp_path, "cannot open the ledger")
    for inode in visible:
        assert (tmp_path / "lock.mdb").exists() and os.stat(tmp_path / "lock.mdb").st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing of its own left behind


def test_a_new_lock_file_is_whole_and_an_existing_one_untouched(tmp_path: Path) -> None:
    room_for_lmdb(tmp_path, "cannot open the ledger")
    lock = tmp_path / "lock.mdb"
    assert [p.name for p in tmp_path.iterdir()] == ["lock.mdb"]
    assert lock.stat().st_size == LMDB_LOCK_BYTES and lock.stat().st_blocks * 512 >= LMDB_LOCK_BYTES
    env = lmdb.open(str(tmp_path), map_size=1 << 20)  # LMDB takes it as its own
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    before = (lock.stat().st_ino, lock.read_bytes())
    room_for_lmdb(tmp_path, "cannot open the ledger")  # opened by this process: never written
    assert (lock.stat().st_ino, lock.read_bytes()) == before
    env.close()
