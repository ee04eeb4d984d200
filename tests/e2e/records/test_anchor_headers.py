"""`pithledger event timestamp_anchor --ots P --headers FILE` (spec/events.md §3.1.3), through the CLI: headers
that fail mainnet's rules are refused with the reason and a hint, and nothing is written; a malformed file is
named; --headers needs --ots. (Checked anchors are exercised on regtest in tests/unit/store/test_checked_anchors.py:
no test can mine 2^78 hashes of mainnet work.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

from helpers import bitcoinkit as bk
from helpers.site import BUNDLES
from pithledger.records import ots as _ots

NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"
HEADER_358391 = (Path(__file__).parents[2] / "fixtures" / "ots" / "block-358391.header.hex").read_text().split()[0]


def test_headers_are_checked_before_anything_is_signed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("--ledger", "L", "apply", str(BUNDLES)).code == 0
    (tmp_path / "state.json").write_text(cli("--ledger", "L", "state", NUMBER).out)
    digest = hashlib.sha256(cli("ids", "--canonical", "state.json").out.encode()).digest()
    (tmp_path / "p.ots").write_bytes(_ots.build(digest, [], [900_000]))
    assert cli("keys", "new", "alice").code == 0
    anchor = ("--ledger", "L", "event", "timestamp_anchor", "--subject", NUMBER, "--key", "alice", "--ots", "p.ots")

    # regtest-difficulty headers carrying the proof's Merkle root: anyone mines them; mainnet refuses them
    (tmp_path / "regtest.txt").write_text(
        "\n".join(r.hex() for r in _split(bk.run(bk.message_of(digest, 0), 8))) + "\n"
    )
    r = cli(*anchor, "--headers", "regtest.txt", "-o", "a.json")
    assert r.code == 1 and "error[bad-headers]" in r.err and "proof-of-work limit" in r.err, r.err
    assert "getblockheader" in r.err and not (tmp_path / "a.json").exists()

    # a real mainnet header, of another block: its Merkle root is no attestation's result in this proof
    (tmp_path / "real.txt").write_text(HEADER_358391 + "\n")
    r = cli(*anchor, "--headers", "real.txt")
    assert r.code == 1 and "error[bad-headers]" in r.err and "no Bitcoin attestation" in r.err, r.err

    (tmp_path / "junk.txt").write_text("00" * 79 + "\n")
    r = cli(*anchor, "--headers", "junk.txt")
    assert r.code == 1 and "junk.txt, line 1" in r.err and "160 hex digits" in r.err, r.err
    r = cli(
        "event", "timestamp_anchor", "--subject", NUMBER, "--key", "alice", "--payload", "{}", "--headers", "real.txt"
    )
    assert r.code == 2 and "--headers goes with --ots" in r.err, r.err

    # without headers the same proof signs: a claimed anchor
    r = cli(*anchor, "-o", "a.json")
    assert r.code == 0, r.err
    assert cli("--ledger", "L", "apply", "a.json").code == 0
    state = cli("--ledger", "L", "state", NUMBER).json()
    anchors = state["current"]["timestamp_anchors"]
    assert "claimed" in {a["anchor_state"] for a in anchors} and all(a["bitcoin_block"] is None for a in anchors)
    assert state["current"]["badges"]["timestamp"] == "bitcoin anchor claimed"
    assert state["current"]["verification_status"]["externally_anchored"] is False


def _split(run: bytes) -> list[bytes]:
    return [run[i : i + 80] for i in range(0, len(run), 80)]
