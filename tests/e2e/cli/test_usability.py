"""The command line as people use it (issue #13): global options anywhere, usage errors in the
project's format, progress and Ctrl-C, --keep-going, --json everywhere, event help and examples,
and the defects people hit. Everything runs through the real entry point."""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import clikit
from helpers.clikit import KINDS, _junk, _lines, _pithledger, usage_error
from helpers.common import FIXTURES, PITH_RECORDS, ROOT
from helpers.eventpool import ALICE
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event

BUNDLES = ROOT / "bundles"
NUMBER = "pith:2026:FZ7AO632HBV3FATAUUZ6Y44Y3P"


# --- 1. global options before or after the command ---------------------------------------------------


def test_global_options_before_or_after_the_command(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("apply", str(BUNDLES), "--ledger", "L")
    assert r.code == 0, r.err
    assert (tmp_path / "L" / "data.mdb").exists()
    before = cli("--ledger", "L", "state", "2605.00424")
    after = cli("state", "--ledger", "L", "2605.00424")
    between = cli("state", "2605.00424", "--ledger=L")
    assert before.code == after.code == between.code == 0
    assert before.out == after.out == between.out
    assert cli("--json", "--ledger", "L", "digest").out == cli("digest", "--ledger", "L", "--json").out
    assert cli("--ledger", "L", "--json", "fsck").json()["ok"] is True
    assert (
        cli("fsck", "-q", "--json", "--ledger", "L").json()["events"] == 65
    )  # 64 demo events + Pith's record document
    assert cli("keys", "list", "--json").json()["keys"] == []
    assert cli("--json", "keys", "list").json()["keys"] == []
    # a value of the command's own option is never taken for a global option
    r = cli("--ledger", "L", "export", "2605.00424", "-o", "--json")
    assert r.code == 0 and (tmp_path / "--json").exists()


def test_empty_ledger_path_is_refused_and_writes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("--ledger", "", "apply", str(BUNDLES))
    usage_error(r)
    assert "--ledger is empty" in r.err
    usage_error(cli("apply", str(BUNDLES), "--ledger", ""))
    assert not (tmp_path / "data.mdb").exists()


# --- 2. usage errors and help ----------------------------------------------------------------------------


# --- 4. progress on a terminal, Ctrl-C --------------------------------------------------------------


def _many_events(path: Path, bundles: int, per_bundle: int) -> int:
    """A .jsonl file of really signed events (one key, author attestations on one record)."""
    import hashlib

    from pithledger.records.bundle import write_bundle
    from pithledger.records.canonical import canonical_bytes
    from pithledger.records.events import make_event
    from pithledger.records.keys import LocalKey

    key = LocalKey(name="load", seed=hashlib.sha256(b"usability load key").digest())
    with path.open("wb") as fh:
        for b in range(bundles):  # one subject per bundle (records that never arrive: their events wait)
            subject = "pith:2026:" + base64.b32encode(hashlib.sha256(b"subject %d" % b).digest()).decode()[:26]
            events = [
                make_event(
                    "author_attestation",
                    subject,
                    {"author_name": f"Author {b}-{i}"},
                    key,
                    created_at="2026-06-01T00:00:00Z",
                )
                for i in range(per_bundle)
            ]
            fh.write(canonical_bytes(write_bundle(subject, events)) + b"\n")
    return bundles * per_bundle


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        XDG_DATA_HOME=str(tmp_path / "xdg-data"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
        TERM="xterm",
        COLUMNS="160",
    )
    env.pop("PITHLEDGER_LEDGER", None)
    env.pop("PITHLEDGER_KEYS", None)
    return env


def _run_on_a_terminal(args: list[str], tmp_path: Path, interrupt_when: bytes | None = None) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal; send SIGINT once ``interrupt_when`` appears on it."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=_env(tmp_path),
        cwd=tmp_path,
        # as a terminal's shell starts a command: a test suite started in the background of a script
        # (`cmd &`, nohup) passes SIGINT on ignored, which the command line rightly keeps ignored (cli/_signals.py)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(slave)
    screen = b""
    sent = False
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
                if interrupt_when is not None and not sent and interrupt_when in screen:
                    proc.send_signal(signal.SIGINT)
                    sent = True
            elif proc.poll() is not None:
                break
        out = proc.communicate(timeout=60)[0]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out.decode(), screen.decode(errors="replace")


def test_progress_on_a_terminal_only(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "load.jsonl"
    total = _many_events(data, 30, 20)
    code, out, screen = _run_on_a_terminal(["--ledger", "T", "apply", "--batch-size", "50", str(data)], tmp_path)
    assert code == 0, screen
    assert f"applied {total} events" in out
    assert (
        "applying" in screen and "events" in screen and "records" in screen and "events/s" in screen and "eta" in screen
    )
    assert "batch 10/10" in screen and "30 records" in screen
    assert "deriving" in screen and "states" in screen  # the third phase: each touched state derived once
    # not a terminal (the cli fixture pipes stderr), or --quiet: no progress at all
    r = cli("--ledger", "P", "apply", "--batch-size", "50", str(data))
    assert r.code == 0 and r.err == ""
    code, out, screen = _run_on_a_terminal(["--ledger", "Q", "apply", "-q", "--batch-size", "50", str(data)], tmp_path)
    assert code == 0 and "applying" not in screen


def test_ctrl_c_during_apply_says_what_was_committed_and_a_rerun_finishes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "load.jsonl"
    total = _many_events(data, 1000, 10)  # 10,000 events in 1,000 batches of 10 (a few seconds)
    code, out, screen = _run_on_a_terminal(
        ["--ledger", "I", "apply", "--batch-size", "10", str(data)], tmp_path, interrupt_when=b"events/s"
    )
    assert code == 130, screen[-2000:]
    line = next(x for x in screen.splitlines() if "interrupted:" in x)
    assert (
        "of 1,000 batches committed" in line
        and "the ledger is consistent" in line
        and "run the same command again" in line
    )
    assert "Traceback" not in screen
    committed = int(line.split("interrupted: ")[1].split(" of ")[0].replace(",", ""))
    assert 1 <= committed < 1000
    assert f"({committed * 10:,} events)" in line
    assert cli("--ledger", "I", "fsck").code == 0
    again = cli("--ledger", "I", "--json", "apply", "--batch-size", "10", str(data))
    assert again.code == 0, again.err
    assert again.json()["duplicate"] == committed * 10 and again.json()["new"] == total - committed * 10


# --- 5. --keep-going ---------------------------------------------------------------------------------------


def test_keep_going_skips_bad_inputs_applies_the_rest_and_exits_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = str(BUNDLES / "demo-1905.08204.json")
    broken = str(FIXTURES / "bundles" / "truncated-json.json")
    foreign = str(FIXTURES / "bundles" / "event-for-another-subject.json")
    lines = tmp_path / "mixed.jsonl"
    lines.write_text((BUNDLES / "demo-1709.09021.json").read_text().replace("\n", "") + '\n{"half": \n')
    # without --keep-going: the first structural fault stops everything, nothing is written
    r = cli("--ledger", "K", "apply", good, broken)
    assert r.code == 1 and not (tmp_path / "K").exists()
    r = cli("--ledger", "K", "apply", "--keep-going", good, broken, "missing.json", foreign, str(lines))
    assert r.code == 1
    assert "applied 3 events from 2 bundles: 3 new" in r.out
    assert "skipped 4 inputs (--keep-going):" in r.err
    for name in ["truncated-json.json", "missing.json", "event-for-another-subject.json", "mixed.jsonl:2"]:
        assert f"  {name}" in r.err or f"/{name}: [" in r.err, name
    assert "Traceback" not in r.err
    doc = cli("--ledger", "K", "--json", "apply", "--keep-going", good, broken).json()
    assert doc["duplicate"] == 2 and [s["code"] for s in doc["skipped"]] == ["malformed-json"]


# --- 6. --json on every command that reports ------------------------------------------------------------


def test_json_on_every_reporting_command(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    new = cli("keys", "new", "alice", "--json")
    assert new.code == 0 and new.json()["key_id"] == "alice" and "seed" not in new.out
    listed = cli("--json", "keys", "list").json()
    assert listed["keys"] == [{"name": "alice", "fingerprint_sha256_hex": new.json()["fingerprint_sha256_hex"]}]
    applied = cli("--json", "--ledger", "L", "apply", str(BUNDLES)).json()
    assert applied["new"] == 65 and applied["batches"] == 1 and "skipped" not in applied
    lines = [json.loads(x) for x in cli("verify", "--json", str(BUNDLES / "demo-1905.08204.json")).out.splitlines()]
    assert [x["status"] for x in lines] == ["valid", "valid"] and lines[0]["where"].endswith("demo-1905.08204.json")
    bad = cli("verify", "--json", str(FIXTURES / "bundles" / "malleated-signature-s-plus-l.json"))
    assert bad.code == 1 and bad.json()["reason"] == "bad-signature"
    assert cli("--ledger", "L", "fsck", "--json").json() == {
        "ok": True,
        "problems": [],
        "events": 65,
        "records": 51,
        "ledger": "L",
    }
    published = cli("--ledger", "L", "publish", "pub", "--json").json()
    assert published["records_written"] == 51 and published["directory"] == "pub"
    synced = cli("--ledger", "M", "sync", "pub", "--json").json()
    assert synced["new"] == 65
    assert cli("audit", "L", "M", "--json").json()["consistent"] is True
    assert cli("--json", "audit", "L", "M").json()["consistent"] is True
    assert json.loads(cli("--ledger", "L", "--json", "log").out.splitlines()[0])["seq"] == 0
    assert cli("--ledger", "L", "digest", "--json").json()["events"] == 65
    assert cli("verify", "--json", "--digest", PITH_RECORDS[2]["canonical_sha256"], "--signature", "AA==").code == 1


def test_json_event_names_what_it_wrote_and_json_metadata_names_why_it_failed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue #31 item 7: `--json event -o` printed nothing, `--json metadata nope.json` only a count."""
    cli("keys", "new", "alice")
    subject = PITH_RECORDS[0]["pith_number"]
    payload = json.dumps({"author_name": "Josiah Carberry"})
    r = cli(
        "--json",
        "event",
        "author_attestation",
        "--key",
        "alice",
        "--subject",
        subject,
        "--payload",
        payload,
        "-o",
        "e.json",
    )
    assert r.code == 0, r.err
    written = r.json()
    bundle = json.loads((tmp_path / "e.json").read_text())
    assert written == {
        "written": "e.json",
        "event_id": bundle["events"][0]["event_id"],
        "kind": "author_attestation",
        "subject": subject,
    }
    cli("--ledger", "L", "apply", "e.json")
    plain = cli("--ledger", "L", "metadata", "nope.json")
    r = cli("--ledger", "L", "--json", "metadata", "nope.json")
    assert r.code == plain.code == 1
    assert len(r.out.splitlines()) == 1  # one JSON document (issue #41: an error line, then the summary)
    assert r.json() == {
        "kept": 0,
        "failed": 1,
        "records_with_metadata": 0,
        "errors": [
            {
                "error": "cannot-read",
                "message": "no such file: nope.json",
                "where": "nope.json",
                "hint": "check the path and its permissions",
            }
        ],
    }
    assert "error[cannot-read]: no such file: nope.json" in plain.err  # the same reason as without --json


# --- 7. event: help, examples, hints for the signer, --ots ---------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_example_payload_signs(cli, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    ex = cli("event", kind, "--example")
    assert ex.code == 0, ex.err
    (tmp_path / "p.json").write_text(ex.out)
    cli("keys", "new", "alice")
    args = ["event", kind, "--key", "alice", "--payload", "@p.json", "-o", "e.json"]
    if kind != "record_created":
        args += ["--subject", NUMBER]
    r = cli(*args)
    assert r.code == 0, r.err
    v = cli("verify", "e.json")
    assert v.code == 0 and v.out.startswith("valid") and kind in v.out


def test_event_errors_speak_to_the_signer(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    r = cli("event", "citation_signature", "--key", "alice", "--subject", NUMBER, "--payload", '{"relation": "cites"}')
    assert r.code == 1 and "error[bad-payload]" in r.err
    assert "pithledger event citation_signature --example" in r.err and "ask its signer" not in r.err
    r = cli("event", "record_created", "--key", "alice", "--payload", '{"canonical_record": 5}')
    assert r.code == 1 and "--subject is required" not in r.err and "canonical_record" in r.err
    assert "record_created --example" in r.err
    r = cli("event", "record_created", "--key", "alice", "--payload", '{"canonical_record": {"source": {}}}')
    assert r.code == 1 and "--subject is required" not in r.err and "Traceback" not in r.err
    r = cli("event", "author_attestation", "--key", "alice", "--payload", '{"author_name": "A"}')
    assert r.code == 2 and "--subject is required for author_attestation" in r.err
    r = cli("event", "author_attestation", "--subject", NUMBER, "--payload", '{"author_name": "A"}')
    assert r.code == 2 and "--key is required" in r.err


def test_cited_record_in_any_id_form(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    payload = json.dumps({"cited_pith_number": "1905.08204", "relation": "extends"})
    r = cli("event", "citation_signature", "--key", "alice", "--subject", NUMBER, "--payload", payload)
    assert r.code == 1 and "error[malformed-id]" in r.err and "cited_pith_number '1905.08204'" in r.err
    assert "no ledger to look it up in" in r.err
    cli("--ledger", "L", "apply", str(BUNDLES))
    r = cli(
        "--ledger",
        "L",
        "event",
        "citation_signature",
        "--key",
        "alice",
        "--subject",
        "pith:FZ7AO632",
        "--payload",
        payload,
    )
    assert r.code == 0, r.err
    assert r.json()["events"][0]["payload"]["cited_pith_number"] == "pith:2019:GHGOR674YFXPXVI65Z7PPAT6KY"


def test_timestamp_anchor_from_a_detached_ots_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pithledger.records import ots as _ots

    cli("--ledger", "L", "apply", str(BUNDLES))
    # The bytes `ots stamp` must stamp: the record's canonical bytes, whose SHA-256 is canonical_sha256.
    canon = cli("--ledger", "L", "state", NUMBER)
    (tmp_path / "state.json").write_text(canon.out)
    r = cli("ids", "--canonical", "state.json")
    assert r.code == 0 and not r.out.endswith("\n")
    import hashlib

    digest = hashlib.sha256(r.out.encode()).digest()
    assert digest.hex() == cli("ids", "state.json").json()["canonical_sha256"]
    (tmp_path / "record.canon.ots").write_bytes(_ots.build(digest, ["https://alice.btc.calendar.opentimestamps.org"]))
    cli("keys", "new", "alice")
    r = cli(
        "--ledger",
        "L",
        "event",
        "timestamp_anchor",
        "--subject",
        "2605.00424",
        "--key",
        "alice",
        "--ots",
        "record.canon.ots",
    )
    assert r.code == 0, r.err
    proof = r.json()["events"][0]["payload"]["ots_proof_b64"]
    assert base64.b64decode(proof) == (tmp_path / "record.canon.ots").read_bytes()
    (tmp_path / "other.ots").write_bytes(_ots.build(b"\x01" * 32, ["https://a.example"]))
    r = cli("event", "timestamp_anchor", "--subject", NUMBER, "--key", "alice", "--ots", "other.ots")
    assert r.code == 1 and "error[proof-digest-mismatch]" in r.err and "ids --canonical" in r.err
    (tmp_path / "junk.ots").write_bytes(b"not a proof")
    r = cli("event", "timestamp_anchor", "--subject", NUMBER, "--key", "alice", "--ots", "junk.ots")
    assert r.code == 1 and "is not an OpenTimestamps proof" in r.err
    r = cli("event", "author_attestation", "--subject", NUMBER, "--key", "alice", "--ots", "junk.ots")
    assert r.code == 2 and "--ots is for timestamp_anchor" in r.err


# --- 8. defects ----------------------------------------------------------------------------------------------


def test_publish_onto_a_file_is_a_named_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"))
    (tmp_path / "afile").write_text("x")
    r = cli("--ledger", "L", "publish", "afile")
    assert (
        r.code == 1
        and r.err.startswith("error[cannot-write]: afile exists and is not a directory")
        and "hint:" in r.err
    )
    r = cli("--ledger", "L", "publish", "afile/sub")
    assert r.code == 1 and r.err.startswith("error[cannot-write]: cannot create the directory afile/sub")


def test_log_since_beyond_any_sequence_number(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"))
    usage_error(cli("--ledger", "L", "log", "--since", str(2**64)), "log")
    r = cli("--ledger", "L", "log", "--since", str(2**64 - 1))
    assert r.code == 0 and r.out == ""


def test_key_dir_that_is_a_file_and_a_damaged_key(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "afile").write_text("x")
    r = cli("keys", "new", "k", "--key-dir", "afile")
    assert r.code == 1 and "error[key-error]: the key directory afile exists and is not a directory" in r.err
    assert "Traceback" not in r.err
    cli("keys", "new", "k", "--key-dir", "kd")
    (tmp_path / "kd" / "k.key.json").write_text("garbage")
    r = cli(
        "event",
        "author_attestation",
        "--key",
        "k",
        "--key-dir",
        "kd",
        "--subject",
        NUMBER,
        "--payload",
        '{"author_name": "A"}',
    )
    assert r.code == 1 and "is damaged" in r.err
    hint = r.err.split("hint: ")[1]
    assert "restore" in hint and "keys new k" in hint and "keys list" not in hint
    cli("keys", "new", "good", "--key-dir", "kd")
    listed = cli("keys", "list", "--key-dir", "kd")  # the damaged key is named, the good one still listed
    assert (
        listed.code == 1
        and "k\tDAMAGED [" in listed.out
        and any(line.startswith("good\t") for line in listed.out.splitlines())
    )


def test_verify_of_a_malformed_signed_report(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"))
    cli("keys", "new", "auditor")
    report = cli("audit", "L", "L", "--sign", "auditor").json()
    for name, change in [
        ("divergent", {"divergent": 5}),
        ("intkey", {"signer": report["signer"] | {"public_key_b64": 5}}),
        ("intsig", {"signature_b64": 7}),
    ]:
        (tmp_path / f"{name}.json").write_text(json.dumps(report | change))
        r = cli("verify", f"{name}.json")
        assert r.code == 1 and r.err.startswith("error[") and "Traceback" not in r.err, (name, r.err)
    # divergent: 5, re-signed: the signature holds, the document is still refused by name
    from pithledger.audit import sign_report
    from pithledger.records.keys import KeyStore

    key = KeyStore(tmp_path / "xdg-config" / "pithledger" / "keys").load("auditor")
    body = {k: v for k, v in report.items() if k not in ("signer", "signature_b64", "created_at")} | {"divergent": 5}
    (tmp_path / "resigned.json").write_text(json.dumps(sign_report(body, key, "2026-06-01T00:00:00Z")))
    r = cli("verify", "resigned.json")
    assert r.code == 1 and r.err.startswith("error[schema-error]") and "divergent" in r.err
    ok = cli("verify", "intkey.json")
    assert "must be base64 strings" in ok.err


def test_mint_far_date_is_bad_metadata(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    meta = {
        "id": "0704.0001",
        "title": "t",
        "abstract": "a",
        "categories": "hep-ph",
        "license": None,
        "versions": [{"version": "v1", "created": "Fri, 31 Dec 9999 23:59:59 -2359"}],
    }
    (tmp_path / "m.json").write_text(json.dumps(meta))
    r = cli("mint", "m.json")
    assert r.code == 1 and r.err.startswith("error[bad-metadata]: m.json: version date") and "out of range" in r.err


def test_verify_accepts_directories_like_apply(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("verify", str(BUNDLES))
    assert r.code == 0, r.err
    assert (
        sum(": valid " in line for line in r.out.splitlines()) == 65
    )  # each line names its file; Pith's record document reads as its record event
    (tmp_path / "empty").mkdir()
    r = cli("verify", "empty")
    assert r.code == 1 and "holds no .json or .jsonl files" in r.err
    assert ".json" in r.err.split("hint: ")[1] and "permissions" not in r.err.split("hint: ")[1]


def test_errors_name_the_path_once(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "broken.json").write_text('{"a":')
    for args in [["verify", "broken.json"], ["--ledger", "L", "apply", "broken.json"], ["ids", "broken.json"]]:
        r = cli(*args)
        assert r.code == 1 and r.err.count("broken.json") == 1, (args, r.err)


def test_closed_pipe_is_not_invalid_input(tmp_path: Path) -> None:
    """`pithledger verify DIR | head -1` ends with 141 (128 + SIGPIPE, as a shell reports a tool cut off
    by a closed pipe), quietly: not 1, which would say the input was invalid."""
    env = _env(tmp_path)
    cmd = f'{sys.executable} -m pithledger.cli verify {BUNDLES} | head -1; echo "status=${{PIPESTATUS[0]}}"'
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert ": valid " in done.stdout.splitlines()[0]
    assert done.stdout.splitlines()[-1] == "status=141", done.stdout + done.stderr
    assert done.stderr == ""


def test_named_pipes_and_dev_stdin_are_read_once(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = _env(tmp_path)
    bundle = BUNDLES / "demo-1905.08204.json"

    def run(cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)

    py = f"{sys.executable} -m pithledger.cli"
    done = run(f"{py} --ledger L apply <(cat {bundle})")
    assert done.returncode == 0 and "2 new" in done.stdout, done.stderr
    done = run(f"cat {bundle} | {py} --ledger L apply /dev/stdin")
    assert done.returncode == 0 and "2 duplicate" in done.stdout, done.stderr
    done = run(f"{py} --ledger L apply /dev/stdin < {ROOT / 'tests' / 'fixtures' / 'bundles' / 'truncated-json.json'}")
    assert done.returncode == 1 and "/dev/stdin" in done.stderr and "pithledger-spool" not in done.stderr


def test_counts_have_correct_plurals(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    one = FIXTURES / "bundles" / "valid-citation.json"
    r = cli("--ledger", "L", "apply", str(one))
    assert "1 record touched (1 batch)" in r.out and "from 1 bundle:" in r.out
    r = cli("--ledger", "L", "apply", str(BUNDLES))
    assert "records touched (1 batch)" in r.out and "from 54 bundles" in r.out


def test_suffix_of_a_wrong_length_says_so(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("--ledger", "L", "apply", str(BUNDLES / "demo-1905.08204.json"))
    r = cli("--ledger", "L", "state", "GHGOR67")
    assert r.code == 1 and "error[malformed-id]" in r.err and "8, 12, 16 or 26" in r.err and "has 7 characters" in r.err


# --- 10. the README's command line examples work as written ---------------------------------------------


def _readme_block(title: str) -> list[str]:
    import re

    readme = (ROOT / "README.md").read_text()
    block = re.search(re.escape(title) + r".*?```sh\n(.*?)```", readme, re.S)
    assert block, title
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_signing_example_works(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(BUNDLES, tmp_path / "bundles")
    env = _env(tmp_path)
    py = f"{sys.executable} -m pithledger.cli"
    out = ""
    for line in _readme_block("**Signing and applying an event**"):
        done = subprocess.run(
            ["bash", "-c", line.replace("pithledger ", py + " ")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, (line, done.stderr)
        out = done.stdout
    state = json.loads(out)
    assert any(a["signer"]["key_id"] == "alice" for a in state["current"]["author_attestations"])


def test_readme_timestamp_example_works_with_a_stand_in_for_ots(tmp_path: Path) -> None:
    """Every line but `ots stamp` runs as written; `ots stamp F` is stood in for by a proof of sha256(F)."""
    import hashlib
    import shutil

    from pithledger.records import ots as _ots

    shutil.copytree(BUNDLES, tmp_path / "bundles")
    env = _env(tmp_path)
    py = f"{sys.executable} -m pithledger.cli"
    subprocess.run(
        ["bash", "-c", f"{py} --ledger L apply bundles/ && {py} keys new alice"],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    for line in _readme_block("**Timestamping a record with OpenTimestamps.**"):
        if line.startswith("ots stamp "):
            target = tmp_path / line.split()[-1]
            (tmp_path / (target.name + ".ots")).write_bytes(
                _ots.build(
                    hashlib.sha256(target.read_bytes()).digest(), ["https://alice.btc.calendar.opentimestamps.org"]
                )
            )
            continue
        done = subprocess.run(
            ["bash", "-c", line.replace("pithledger ", py + " ")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, (line, done.stderr)
        if line.startswith("sha256sum"):
            assert done.stdout.split()[0] == cli_ids(tmp_path, env)
    assert cli_verify(tmp_path, env, "anchor.json").startswith("valid")


def cli_ids(cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "ids", "record.canon"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=True,
    )
    return str(json.loads(done.stdout)["canonical_sha256"])


def cli_verify(cwd: Path, env: dict[str, str], name: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "verify", name],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=True,
    )
    return done.stdout


def test_mint_refuses_a_year_it_would_read_as_another(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    meta = {
        "id": "2605.00424",
        "title": "t",
        "abstract": "a",
        "categories": "cs.CR",
        "license": None,
        "versions": [{"version": "v1", "created": "Mon, 1 Jan 0001 00:00:00 +2359"}],
    }
    (tmp_path / "m.json").write_text(json.dumps(meta))
    r = cli("mint", "m.json")
    assert r.code == 1 and "error[bad-metadata]" in r.err and "four-digit year" in r.err


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_a_flipped_signature_byte_says_the_event_was_altered(tmp_path: Path) -> None:
    event = make_event(
        "author_attestation", NUMBER, {"author_name": "A. Author"}, ALICE, created_at="2026-06-01T00:00:00Z"
    )
    sig = event["signature_b64"]
    event["signature_b64"] = ("B" if sig[0] != "B" else "C") + sig[1:]
    (tmp_path / "flipped.json").write_bytes(canonical_bytes(write_bundle(NUMBER, [event])))
    r = _pithledger("verify", "flipped.json", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("invalid") and "[id-mismatch]" in r.stdout
    assert "altered after it was signed" in r.stdout and "the signature too" in r.stdout


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_verify_lines_name_their_file(tmp_path: Path) -> None:
    r = _pithledger("verify", str(FIXTURES / "bundles"), cwd=tmp_path)
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    assert lines and all(line.startswith(str(FIXTURES / "bundles") + "/") for line in lines)
    assert any(line.startswith(f"{FIXTURES / 'bundles' / 'altered-created-at.json'}: invalid ") for line in lines)
    one = _pithledger(
        "verify", str(BUNDLES / "demo-1905.08204.json"), cwd=tmp_path
    )  # one file, one document: as before
    assert one.stdout.startswith("valid ")


def _on_a_terminal(args: list[str], cwd: Path, columns: int) -> tuple[int, str]:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pithledger.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=clikit._env(cwd, TERM="xterm", COLUMNS=str(columns)),
        cwd=cwd,
    )
    os.close(slave)
    screen = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        proc.wait(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, screen.decode(errors="replace")


# Issue #20 §4/§6 (hardening), as a user meets it: real processes, real LMDB ledgers, the real entry point.
def test_the_progress_line_fits_80_columns(tmp_path: Path) -> None:
    _junk(tmp_path / "junk.jsonl", 40, 5)
    code, screen = _on_a_terminal(["--ledger", "L", "apply", "--batch-size", "20", "junk.jsonl"], tmp_path, 80)
    assert code == 0
    lines = _lines(screen)
    drawn = [x for x in lines if x.startswith(("checking", "applying", "deriving"))]
    assert any(x.startswith("applying") and "/200 events" in x for x in drawn), lines
    assert max(len(x) for x in drawn) < 80, max(drawn, key=len)
