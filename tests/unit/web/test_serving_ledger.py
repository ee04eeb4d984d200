"""The server's one writing handle (web/actions.py ``ServingLedger``) grows its map under its ``gate``: every
read of the server holds the gate, and LMDB resizes a map only while no transaction of the process is open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.translog import NUMBER, attestations, record_created
from pithledger.records.bundle import Bundle
from pithledger.web.actions import ServingLedger


class _Watched:
    """A ledger's LMDB environment, noting whether the handle's gate is held each time the map is resized."""

    def __init__(self, env: Any, gate: Any) -> None:
        self._env, self._gate = env, gate
        self.held: list[bool] = []

    def set_mapsize(self, size: int) -> None:
        self.held.append(self._gate._is_owned())
        self._env.set_mapsize(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


def test_the_server_handle_grows_its_map_holding_its_gate(tmp_path: Path) -> None:
    with ServingLedger(tmp_path / "l", create=True, map_size=256 * 1024) as ledger:
        watched = _Watched(ledger._core.env, ledger.gate)
        ledger._core.env = watched  # the core's: what growing the map resizes
        try:  # more than 256 KiB: the map grows during the batch
            ledger.apply_batch([Bundle(pith_number=NUMBER, events=[record_created()] + attestations(400))])
        finally:
            ledger._core.env = watched._env
        assert ledger.counts()["events"] == 401
    assert watched.held and all(watched.held), watched.held
