"""The command line for identifiers, minting and receipt checks, run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.common import PITH_RECEIPTS, PITH_RECORDS, ROOT


def test_version_and_help(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("--version").out.startswith("pithledger ")
    for command in ["ids", "mint", "verify"]:
        r = cli(command, "--help")
        assert r.code == 0 and "Usage" in r.out


def test_ids_of_every_real_record(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(v["canonical_record"]) + "\n" for v in PITH_RECORDS))
    r = cli("ids", str(path))
    assert r.code == 0, r.err
    lines = [json.loads(line) for line in r.out.splitlines()]
    assert [line["pith_number"] for line in lines] == [v["pith_number"] for v in PITH_RECORDS]
    first = lines[0]
    assert set(first) == {"canonical_sha256", "pith_number", "short_pith_number", "aliases"}
    assert first["aliases"] == PITH_RECORDS[0]["aliases"]


def test_ids_reads_a_pretty_printed_record_from_stdin(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("ids", "-", input=json.dumps(PITH_RECORDS[0]["canonical_record"], indent=2).encode())
    assert r.code == 0 and r.json()["canonical_sha256"] == PITH_RECORDS[0]["canonical_sha256"]


def test_ids_of_a_bad_record_is_a_named_error_without_traceback(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text('{"source": {"id": "1", "id": "2"}}')
    r = cli("ids", str(path))
    assert r.code == 1
    assert r.err.startswith("error[duplicate-key]:") and "hint:" in r.err
    assert "Traceback" not in r.err


def test_missing_file_is_named(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("ids", "no-such-file.json")
    assert r.code == 1 and "error[cannot-read]: no such file: no-such-file.json" in r.err


def test_mint_many_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [
        {
            "id": "0704.0001",
            "title": "Calculation of prompt diphoton production cross sections at Tevatron and\n  LHC energies",
            "abstract": "  A fully differential calculation.\n",
            "categories": "hep-ph",
            "license": None,
            "versions": [
                {"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"},
                {"version": "v2", "created": "Tue, 24 Jul 2007 20:10:27 GMT"},
            ],
        },
        {
            "id": "math/0611599",
            "title": "A title",
            "abstract": "An abstract.",
            "categories": "math.GT math.AG",
            "license": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
            "versions": [{"version": "v1", "created": "Mon, 20 Nov 2006 10:00:00 GMT"}],
        },
    ]
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    r = cli("mint", str(path))
    assert r.code == 0, r.err
    out = r.out.splitlines()
    assert len(out) == 2
    first = json.loads(out[0])
    assert first["source"] == {"id": "0704.0001", "kind": "arxiv", "version": 2}
    assert first["metadata"]["submitted_at"] == "2007-04-02T19:18:42Z"
    assert first["metadata"]["license"] == ""
    # The output is canonical bytes: feeding it back to `ids` gives the Pith Number of that record.
    ids = cli("ids", "-", input=out[1].encode())
    assert ids.json()["aliases"]["doi"] == "10.48550/arxiv.math/0611599"


def test_mint_reports_the_bad_line_and_exits_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "meta.jsonl"
    path.write_text('{"id": "0704.0001"}\n{"id": "0704.0002"}\n')
    r = cli("mint", str(path))
    assert r.code == 1
    assert f"{path}:1: field 'title' is missing" in r.err and f"{path}:2:" in r.err


def test_verify_real_receipt(cli) -> None:  # type: ignore[no-untyped-def]
    v = PITH_RECEIPTS[2]
    r = cli(
        "verify", "--digest", v["canonical_sha256"], "--signature", v["signature_b64"], "--key-id", "pith-v1-2026-05"
    )
    assert r.code == 0 and "valid: signed by pith-v1-2026-05" in r.out


def test_verify_flipped_digest_bit_exits_1_with_reason(cli) -> None:  # type: ignore[no-untyped-def]
    v = PITH_RECEIPTS[2]
    digest = v["canonical_sha256"][:-1] + ("0" if v["canonical_sha256"][-1] != "0" else "1")
    r = cli("verify", "--digest", digest, "--signature", v["signature_b64"])
    assert r.code == 1 and "error[bad-signature]" in r.err


def test_verify_usage_errors_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("verify", "--digest", "00" * 32).code == 2
    assert cli("verify").code == 2
    assert cli("no-such-command").code == 2


def test_ids_of_a_bundle_and_of_a_state_document(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = ROOT / "bundles"
    from_bundle = cli("ids", str(root / "demo-1905.08204.json"))
    cli("--ledger", "L", "apply", str(root / "demo-1905.08204.json"))
    (tmp_path / "state.json").write_text(cli("--ledger", "L", "state", "1905.08204").out)
    from_state = cli("ids", "state.json")
    assert from_bundle.code == from_state.code == 0
    assert (
        from_bundle.json()["pith_number"] == from_state.json()["pith_number"] == "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"
    )
