"""`keys`, `event` and `verify FILE...` from the command line."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from helpers.clikit import _env, _pithledger
from helpers.common import FIXTURES, PITH_RECORDS, ROOT
from pithledger.records import ots as _ots

NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"

A, B = PITH_RECORDS[0], PITH_RECORDS[1]
PAYLOADS = {
    "record_created": {"canonical_record": A["canonical_record"]},
    "graph_snapshot": {"graph_snapshot": {"claims": {"count": 0, "items": []}}},
    "timestamp_anchor": {
        "ots_proof_b64": base64.b64encode(
            _ots.build(bytes.fromhex(A["canonical_sha256"]), ["https://a.example"])
        ).decode()
    },
    "storage_attestation": {
        "capture_url": "https://web.archive.org/web/20260520013000/https://arxiv.org/abs/2605.00424",
        "captured_at": "2026-05-20T01:30:00Z",
    },
    "author_attestation": {"author_name": "Josiah Carberry", "orcid": "0000-0002-1825-0097"},
    "citation_signature": {"cited_pith_number": B["pith_number"], "relation": "uses_method"},
    "replication_record": {
        "replication_type": "formal_bridge",
        "outcome": "succeeded",
        "artifact_url": "https://example.org/lean",
    },
    "integrity_finding": {"finding_type": "reference_unresolved", "severity": "warning", "description": "ref 3"},
    "challenge": {"challenged_event_id": "sha256:" + "ab" * 32, "reason": "it resolves"},
    "revocation": {"revoked_event_id": "sha256:" + "cd" * 32},
}


def test_every_kind_can_be_signed_from_the_command_line_and_verifies(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("keys", "new", "alice").code == 0
    for kind, payload in PAYLOADS.items():
        out = tmp_path / f"{kind}.json"
        args = ["event", kind, "--key", "alice", "--payload", json.dumps(payload), "-o", str(out)]
        if kind != "record_created":
            args += ["--subject", A["pith_number"]]
        r = cli(*args)
        assert r.code == 0, (kind, r.err)
        v = cli("verify", str(out))
        assert v.code == 0 and v.out.startswith("valid"), (kind, v.out)
        assert kind in v.out and "(self_signed)" in v.out


def test_flipping_a_byte_of_a_signed_field_makes_verify_exit_1_naming_event_and_reason(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    out = tmp_path / "c.json"
    cli(
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        A["pith_number"],
        "--payload",
        json.dumps(PAYLOADS["citation_signature"]),
        "-o",
        str(out),
    )
    event_id = json.loads(out.read_text())["events"][0]["event_id"]
    out.write_text(out.read_text().replace("uses_method", "uses_methoD"))
    r = cli("verify", str(out))
    assert r.code == 1
    assert r.out.startswith("invalid") and "[id-mismatch]" in r.out and event_id in r.out


def test_payload_from_file_and_created_at(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "bob")
    (tmp_path / "p.json").write_text(json.dumps(PAYLOADS["author_attestation"]))
    r = cli(
        "event",
        "author_attestation",
        "--key",
        "bob",
        "--subject",
        A["pith_number"],
        "--payload",
        "@p.json",
        "--created-at",
        "2026-01-02T03:04:05Z",
    )
    assert r.code == 0, r.err
    assert json.loads(r.out)["events"][0]["created_at"] == "2026-01-02T03:04:05Z"


def test_event_errors_are_named(cli) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    r = cli("event", "citation_signature", "--key", "alice", "--subject", "pith:FZ7AO632", "--payload", "{}")
    assert r.code == 1 and "error[malformed-id]" in r.err and "no ledger to look it up in" in r.err
    r = cli(
        "event",
        "citation_signature",
        "--key",
        "nobody",
        "--subject",
        A["pith_number"],
        "--payload",
        json.dumps(PAYLOADS["citation_signature"]),
    )
    assert r.code == 1 and "error[unknown-key]" in r.err
    r = cli(
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        A["pith_number"],
        "--payload",
        '{"relation": "likes", "cited_pith_number": "%s"}' % B["pith_number"],
    )
    assert r.code == 1 and "error[bad-relation]" in r.err
    r = cli(
        "event", "citation_signature", "--key", "alice", "--subject", A["pith_number"], "--payload", '{"relation": 1.5}'
    )
    assert r.code == 1 and "error[float-not-allowed]" in r.err
    assert cli("event", "no_such_kind", "--key", "alice", "--subject", A["pith_number"], "--payload", "{}").code == 2
    assert "Traceback" not in r.err


def test_keys_list_and_export_show_no_secret(cli) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    listed = cli("keys", "list")
    assert listed.code == 0 and listed.out.startswith("alice\t")
    exported = cli("keys", "export", "alice").json()
    assert set(exported) == {
        "algorithm",
        "fingerprint_sha256_b32_first128bits",
        "fingerprint_sha256_hex",
        "key_id",
        "public_key_b64",
        "public_key_hex",
    }


def test_verify_reports_each_fixture_and_exits_1_on_any_invalid(cli) -> None:  # type: ignore[no-untyped-def]
    bundles = FIXTURES / "bundles"
    good = cli("verify", str(bundles / "valid-citation.json"), str(bundles / "pith-graph-snapshot-unsigned.json"))
    assert good.code == 0 and "unverified" in good.out
    bad = cli(
        "verify",
        str(bundles / "valid-citation.json"),
        str(bundles / "malleated-signature-s-plus-l.json"),
        str(bundles / "event-for-another-subject.json"),
    )
    assert bad.code == 1
    assert bad.out.count("\n") == 2 and "[bad-signature]" in bad.out
    assert "error[subject-mismatch]" in bad.err


def test_subject_in_any_form_resolves_through_the_ledger(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(ROOT / "bundles"))
    cli("keys", "new", "alice")
    r = cli(
        "--ledger",
        "L",
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        "2605.00424",
        "--payload",
        json.dumps(PAYLOADS["citation_signature"]),
    )
    assert r.code == 0, r.err
    assert json.loads(r.out)["pith_number"] == A["pith_number"]


def test_validity_and_event_id_do_not_depend_on_local_keys(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = str(FIXTURES / "bundles" / "valid-citation.json")
    without = cli("verify", bundle)
    cli("keys", "new", "alice")  # a local key named like the signer's key, but another key
    cli("keys", "new", "bob")
    with_keys = cli("verify", bundle)
    assert without.code == with_keys.code == 0
    assert without.out == with_keys.out and without.out.startswith("valid")


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_key_dir_is_global(tmp_path: Path) -> None:
    made = _pithledger("--key-dir", "K", "keys", "new", "alice", cwd=tmp_path)
    assert made.returncode == 0 and "in K" in made.stdout, made.stderr
    for args in (
        ["--key-dir", "K", "keys", "list"],
        ["keys", "list", "--key-dir", "K"],
        ["keys", "--key-dir", "K", "list"],
    ):
        r = _pithledger(*args, cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith("alice\t"), (args, r.stdout, r.stderr)
    # given on the line, it wins over $PITHLEDGER_KEYS
    r = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--key-dir", "K", "keys", "list"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, PITHLEDGER_KEYS=str(tmp_path / "elsewhere")),
        timeout=60,
    )
    assert r.stdout.startswith("alice\t"), r.stdout + r.stderr
    # accepted after any command, and used by the commands that sign
    payload = json.dumps({"author_name": "A. Author"})
    ev = _pithledger(
        "event",
        "author_attestation",
        "--subject",
        NUMBER,
        "--key",
        "alice",
        "--payload",
        payload,
        "-o",
        "e.json",
        "--key-dir",
        "K",
        cwd=tmp_path,
    )
    assert ev.returncode == 0, ev.stderr
    assert _pithledger("--key-dir", "K", "--ledger", "nowhere", "digest", cwd=tmp_path).stderr.startswith(
        "error[no-ledger]"
    )
