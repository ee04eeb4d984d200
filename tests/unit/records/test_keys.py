"""Local key files: owner-only, never silently damaged, never exported with the secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pithledger.errors import KeyError_, UnknownKey
from pithledger.records.keys import KeyStore, fingerprint_hex


def test_new_key_is_owner_only_and_loads_back(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    key = store.new("alice")
    path = tmp_path / "keys" / "alice.key.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert store.load("alice").public_key == key.public_key
    assert store.names() == ["alice"]


def test_existing_key_is_never_overwritten(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    first = store.new("alice")
    with pytest.raises(KeyError_, match="already exists"):
        store.new("alice")
    assert store.load("alice").public_key == first.public_key


def test_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    store.new("alice")
    os.chmod(tmp_path / "alice.key.json", 0o644)
    with pytest.raises(KeyError_) as info:
        store.load("alice")
    assert "chmod 600" in info.value.hint


def test_damaged_key_file_is_named(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    store.new("alice")
    path = tmp_path / "alice.key.json"
    path.write_text(path.read_text().replace('"public_key_b64":"', '"public_key_b64":"AAAA', 1))
    with pytest.raises(KeyError_, match="damaged"):
        store.load("alice")


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x" * 65])
def test_key_names_cannot_escape_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(KeyError_):
        KeyStore(tmp_path).new(name)


def test_missing_key_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(UnknownKey):
        KeyStore(tmp_path).load("nobody")


def test_fingerprint_is_sha256_prefix() -> None:
    assert fingerprint_hex(bytes(32)) == "66687aadf862bd776c8fc18b8e9f8e20"
