"""Adversarial review of issue #34, second round: what `pithledger ots verify` prints of a header it checked.

Finding 3 of the first round moved bitcoin_block.time off ``datetime.fromtimestamp`` (a 32-bit time_t refuses a time
past 2038-01-19; a header's time is a uint32, to 2106). ``ots verify`` still printed each checked header's
``time_utc`` through it: on such a platform a header timed after 2038 (80 bytes at mainnet's minimum difficulty, 2^32
hashes, or a run's attested header) made the command crash with a traceback instead of reporting its verdict."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from pithledger.records import bitcoin

WHEN = 2**31 + 1  # 2038-01-19T03:14:09Z


class _Datetime32(datetime.datetime):
    """datetime as on a platform whose time_t is 32 bits (Debian armhf/i386): fromtimestamp refuses past 2038."""

    @classmethod
    def fromtimestamp(cls, t: float, tz: datetime.tzinfo | None = None) -> Any:  # type: ignore[override]
        if t > 2**31 - 1:
            raise OverflowError("timestamp out of range for platform time_t")
        return super().fromtimestamp(t, tz)


def _checked(*_: Any, **__: Any) -> bitcoin.TimestampCheck:
    """What verify_timestamp returns for a header timed after 2038 that checks (its work is not the point here)."""
    raw = bytes(68) + WHEN.to_bytes(4, "little") + (0x1D00FFFF).to_bytes(4, "little") + bytes(4)
    header = bitcoin.Header(
        raw=raw, hash="00" * 32, merkle_root=bytes(32), time=WHEN, bits=0x1D00FFFF, target=1, work=2**32
    )
    return bitcoin.TimestampCheck(
        hash_op="sha256", digest=bytes(32), verified=[bitcoin.Verified(height=900_000, header=header)]
    )


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_ots_verify_prints_a_header_time_past_2038_without_the_platform_time_t(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    import pithledger
    from pithledger.cli import _ots as ots_cli

    monkeypatch.setattr(pithledger, "verify_timestamp", _checked)
    monkeypatch.setattr(ots_cli, "datetime", _Datetime32, raising=False)
    (tmp_path / "p.ots").write_bytes(b"not read: verify_timestamp is replaced")
    args = ["ots", "verify", "p.ots", "--digest", "00" * 32, "--header", "00" * 80]
    r = cli(*args, *(["--json"] if as_json else []))
    assert r.code == 0, r.err
    if as_json:
        assert r.json()["blocks"][0]["time_utc"] == "2038-01-19T03:14:09Z"
    else:
        assert "(2038-01-19T03:14:09Z)" in r.out, r.out


# --- `ots verify --headers` says which anchor_state an anchor carrying the proof "would be" ----------------------


def test_ots_verify_headers_does_not_promise_bitcoin_for_a_proof_no_anchor_can_carry(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64
    import hashlib

    from helpers import bitcoinkit as bk
    from helpers.eventpool import ALICE, P
    from pithledger.errors import EventInvalid
    from pithledger.records import ots
    from pithledger.records.events import make_event

    monkeypatch.setattr(bitcoin, "MAINNET", bitcoin.REGTEST)  # regtest work stands in for mainnet's (as elsewhere)
    monkeypatch.setattr(bitcoin, "CONSENSUS_CHAIN", bitcoin.REGTEST)
    digest = hashlib.sha1(b"stamped").digest()
    height = bytes([0xA0, 0xF7, 0x36])  # 900_000 as a varuint
    proof = ots.MAGIC + b"\x01\x02" + digest + b"\x08\x00" + bytes.fromhex("0588960d73d71901") + b"\x03" + height
    run = bk.run(hashlib.sha256(digest).digest(), 2, bits=bk.CHECKED_BITS)
    (tmp_path / "p.ots").write_bytes(proof)
    (tmp_path / "h.txt").write_text("".join(run[i : i + 80].hex() + "\n" for i in range(0, len(run), 80)))
    with pytest.raises(EventInvalid, match="sha256"):  # what an anchor carrying it is
        make_event(
            "timestamp_anchor",
            P[0],
            {"ots_proof_b64": base64.b64encode(proof).decode(), "bitcoin_headers_b64": base64.b64encode(run).decode()},
            ALICE,
            created_at="2026-06-02T00:00:00Z",
        )
    r = cli("ots", "verify", "p.ots", "--digest", digest.hex(), "--headers", "h.txt", "--json")
    assert r.code == 0, r.err
    assert r.json()["run"]["anchor_state"] is None and "sha1" in r.json()["run"]["why"], r.json()["run"]
    r = cli("ots", "verify", "p.ots", "--digest", digest.hex(), "--headers", "h.txt")
    assert r.code == 0 and "no timestamp_anchor can carry a sha1 proof" in r.out, r.out
