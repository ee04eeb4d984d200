"""Help, usage and version text, as a user reads it: in this process (this folder's `cli` fixture runs the
entry point in-process), the text being what they check; one real process prints --help in
tests/e2e/cli/test_identifiers.py::test_version_and_help."""

from __future__ import annotations

import re

from helpers.clikit import KINDS, usage_error


def test_usage_errors_print_the_project_format_and_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("apply", "--bogus", "x.json")
    usage_error(r, "apply")
    assert "no such option: --bogus" in r.err
    r = cli("state")
    usage_error(r, "state")
    assert "missing argument" in r.err.lower() and "ID" in r.err
    r = cli("apply", "--batch-size", "zero", "x.json")
    usage_error(r, "apply")
    assert "--batch-size" in r.err
    usage_error(cli("apply", "--batch-size", "0", "x.json"), "apply")
    r = cli("verify", "x.json", "--digest", "00" * 32, "--signature", "AA==")
    usage_error(r, "verify")
    assert "not both" in r.err
    r = cli("no-such-command")
    usage_error(r, "")
    r = cli("keys", "new")
    usage_error(r, "keys new")
    r = cli("event", "no_such_kind", "--key", "k", "--payload", "{}")
    assert r.code == 2 and r.err.startswith("error[usage]: unknown kind 'no_such_kind'")


def test_help_shows_defaults_and_no_bool_placeholder(cli) -> None:  # type: ignore[no-untyped-def]
    top = cli("--help")
    assert top.code == 0
    assert "[default: $XDG_DATA_HOME/pithledger" in top.out and "PITHLEDGER_LEDGER" in top.out
    assert "-V, --version" in top.out and "-q, --quiet" in top.out and "--json" in top.out
    for command in [["apply"], ["event"], ["keys", "new"], ["log"], ["state"]]:
        r = cli(*command, "--help")
        assert r.code == 0 and r.out.startswith("Usage: pithledger")
        assert "<bool>" not in r.out and "╭" not in r.out
        assert "Global options (before or after the command)" in r.out
    assert "[default: 10000" in cli("apply", "--help").out
    assert "[default: $XDG_CONFIG_HOME/pithledger/keys" in cli("keys", "new", "--help").out


def test_version_short_and_long(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-V").out == cli("--version").out
    assert cli("-V").out.startswith("pithledger ") and cli("-V").code == 0


def test_event_help_lists_each_kinds_payload_fields(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("event", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    for kind in KINDS:
        assert kind in r.out
    assert "citation_signature cited_pith_number, relation" in text
    assert "author_attestation author_name, orcid (optional)" in text
    assert "--example" in r.out and "--ots FILE" in r.out


def _commands() -> list[list[str]]:
    import typer

    from pithledger.cli.app import app

    root = typer.main.get_command(app)
    out = []
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        out += [[name, sub] for sub in subs] if subs else [[name]]
    return out


# Issue #20 §4/§6 (hardening), as a user meets it.
def test_help_names_values_not_python_types(cli) -> None:  # type: ignore[no-untyped-def]
    commands = _commands()
    assert ["apply"] in commands and ["keys", "new"] in commands
    for command in [[], *commands]:
        r = cli(*command, "--help")
        assert r.code == 0, command
        assert not re.search(r"<(list\[|str>|int|float|path|bool)", r.out), (command, r.out)
    assert "INPUT  Bundle files" in cli("apply", "--help").out
    assert "--batch-size EVENTS" in cli("apply", "--help").out
