"""`pithledger ots verify` against given Bitcoin block headers, with real data: opentimestamps-client's
hello-world.txt is attested in block 358391 (tests/fixtures/ots/README.md says where each byte came from).
spec/events.md §3.1.2."""

from __future__ import annotations

import hashlib

from helpers.common import FIXTURES

OTS = FIXTURES / "ots"
HELLO, PROOF = OTS / "hello-world.txt", OTS / "hello-world.txt.ots"
HEADER = (OTS / "block-358391.header.hex").read_text().strip()
BLOCK_HASH = "000000000000000003e892881a8cdcdc117c06d444057c98b6f04a9ee75a2319"


def _dsha(raw: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(raw).digest()).digest()


def test_the_fixture_header_is_block_358391_by_its_hash() -> None:
    raw = bytes.fromhex(HEADER)
    assert len(raw) == 80 and _dsha(raw)[::-1].hex() == BLOCK_HASH
    assert int.from_bytes(raw[68:72], "little") == 1432827678


def test_hello_world_verifies_against_block_358391(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--header", HEADER, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["verified"] is True and doc["digest"] == hashlib.sha256(HELLO.read_bytes()).hexdigest()
    [block] = doc["blocks"]
    assert (block["height"], block["hash"], block["time"], block["time_utc"]) == (
        358391,
        BLOCK_HASH,
        1432827678,
        "2015-05-28T15:41:18Z",
    )
    target = 0x1686F5 << 8 * (0x18 - 3)
    assert block["work"] == str(2**256 // (target + 1))
    human = cli("ots", "verify", str(PROOF), "--digest", doc["digest"], "--header", f"358391:{HEADER}")
    assert human.code == 0 and f"Bitcoin block 358391 hash {BLOCK_HASH} time 1432827678" in human.out


def _refused(cli, *args: str) -> str:  # type: ignore[no-untyped-def]
    r = cli("ots", "verify", *args, "--json")
    assert r.code == 1, (r.out, r.err)
    assert "Traceback" not in r.err
    code: str = r.json()["error"]
    return code


def test_a_header_with_a_changed_nonce_is_short_of_work(cli) -> None:  # type: ignore[no-untyped-def]
    raw = bytearray.fromhex(HEADER)
    raw[79] ^= 0x01
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", raw.hex()) == "ots-pow-short"


def test_a_header_with_the_right_merkle_root_at_regtest_difficulty_is_short_of_work(cli) -> None:  # type: ignore[no-untyped-def]
    raw = bytearray.fromhex(HEADER)
    raw[72:76] = (0x207FFFFF).to_bytes(4, "little")  # regtest's limit: half of all hashes meet it
    for nonce in range(1000):
        raw[76:80] = nonce.to_bytes(4, "little")
        if int.from_bytes(_dsha(bytes(raw)), "little") <= 0x7FFFFF << 8 * 29:
            break
    else:
        raise AssertionError("no regtest nonce in 1000 tries")
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", raw.hex()) == "ots-pow-short"


def test_another_digest_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    other = hashlib.sha256(b"Hello World!\n!").hexdigest()
    assert _refused(cli, str(PROOF), "--digest", other, "--header", HEADER) == "ots-digest-differs"
    assert _refused(cli, str(PROOF), "--file", str(OTS / "bitcoin.pdf.ots"), "--header", HEADER) == "ots-digest-differs"


def test_a_header_of_another_block_differs_in_merkle_root(cli) -> None:  # type: ignore[no-untyped-def]
    # a real mainnet header with real work, of another block: the genesis block
    genesis = (
        "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27ac72c3e67768f617fc81bc3"
        "888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c"
    )
    assert (
        _dsha(bytes.fromhex(genesis))[::-1].hex() == "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"
    )
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", genesis) == "ots-merkle-root-differs"


def test_no_header_for_the_height_and_pending_only(cli) -> None:  # type: ignore[no-untyped-def]
    assert _refused(cli, str(PROOF), "--file", str(HELLO)) == "ots-no-header"
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", f"358392:{HEADER}") == "ots-no-header"
    incomplete = OTS / "incomplete.txt.ots"
    from pithledger.records import ots

    digest = ots.parse(incomplete.read_bytes(), strict=True).digest.hex()
    assert _refused(cli, str(incomplete), "--digest", digest, "--header", HEADER) == "ots-pending-only"


def test_hostile_inputs_are_named_errors(cli) -> None:  # type: ignore[no-untyped-def]
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", HEADER[:-2]) == "ots-bad-header"
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", "zz" * 80) == "ots-bad-header"
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", "x:" + HEADER) == "ots-bad-header"
    zero_bits = bytearray.fromhex(HEADER)
    zero_bits[72:76] = bytes(4)
    assert _refused(cli, str(PROOF), "--file", str(HELLO), "--header", zero_bits.hex()) == "ots-bad-header"
    bad = OTS / "invalid" / "exceeds-max-msg-length.ots"
    assert _refused(cli, str(bad), "--digest", "00" * 32, "--header", HEADER) == "malformed-ots-proof"
    assert _refused(cli, str(HELLO), "--file", str(HELLO), "--header", HEADER) == "malformed-ots-proof"
    r = cli("ots", "verify", str(PROOF), "--header", HEADER)
    assert r.code == 2  # neither --digest nor --file: a usage error
    r = cli("ots", "verify", str(PROOF), "--digest", "00", "--file", str(HELLO))
    assert r.code == 2


def test_a_run_of_headers_is_checked_as_an_anchor_would_be(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--headers FILE: the real block 358391 as a run of one header checks, and its work (one 2015 block, ~2^67.5)
    is reported against the minimum (2^78) that makes an anchor checked: carried alone it would stay claimed."""
    run = tmp_path / "headers.txt"
    run.write_text("\r\n" + HEADER + "\r\n\n")  # CRLF and blank lines are white space
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(run), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["blocks"][0]["hash"] == BLOCK_HASH
    assert doc["run"] == {
        "headers": 1,
        "run_work": doc["blocks"][0]["work"],
        "minimum_work": str(2**78),
        "anchor_state": "claimed",
    }
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(run))
    assert r.code == 0 and "an anchor carrying it would be 'claimed'" in r.out, r.out
    # the header with a changed nonce, and a second header that does not link to it: refused, named
    bad = tmp_path / "bad.txt"
    bad.write_text(HEADER[:-8] + "00000000\n")
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(bad))
    assert r.code == 1 and "error[ots-pow-short]" in r.err and "above its target" in r.err, r.err
    bad.write_text(HEADER + "\n" + HEADER + "\n")
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(bad))
    assert r.code == 1 and "error[ots-bad-header]" in r.err and "does not link" in r.err, r.err
    bad.write_text("zz" * 80 + "\n")
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(bad))
    assert r.code == 1 and "error[ots-bad-header]" in r.err and "line 1" in r.err, r.err
    r = cli("ots", "verify", str(PROOF), "--file", str(HELLO), "--headers", str(run), "--header", HEADER)
    assert r.code == 2 and "not both" in r.err
