"""`pithledger event timestamp_anchor --ots P --headers FILE` in this process, on regtest's rules put in place of
mainnet's (no test can mine mainnet work): headers of enough work sign a checked anchor; headers that check but
whose attested block is too cheap sign a claimed one, and the signer is told so (spec/events.md §3.1.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import bitcoinkit as bk
from helpers.eventpool import IDS, P
from pithledger.records import bitcoin, ots

DIGEST = bytes.fromhex(IDS[0].canonical_sha256)


@pytest.mark.parametrize("bits, state", [(bk.CHECKED_BITS, "checked"), (bk.REGTEST_BITS, "claimed")])
def test_the_signer_is_told_when_the_headers_make_no_checked_anchor(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int, state: str
) -> None:
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
    (tmp_path / "p.ots").write_bytes(ots.build(DIGEST, [], [900_000]))
    run = bk.run(bk.message_of(DIGEST, 0), 3, bits=bits)
    (tmp_path / "h.txt").write_text("".join(run[i : i + 80].hex() + "\n" for i in range(0, len(run), 80)))
    assert cli("keys", "new", "alice").code == 0
    r = cli("event", "timestamp_anchor", "--subject", P[0], "--key", "alice", "--ots", "p.ots", "--headers", "h.txt")
    assert r.code == 0, r.err
    payload = json.loads(r.out)["events"][0]["payload"]
    assert "bitcoin_headers_b64" in payload
    assert ("will show as claimed" in r.err) == (state == "claimed"), r.err
