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
