"""Rough edges of the command line (issue #41 items 2, 5 and 10), each through the real CLI in a subprocess:
`-o` onto a device node, a FIFO, a symlink or a directory; `event --post` to a kind that has no action URL;
`--json metadata`; `latex -o DIR`; `--ledger` at a published tree; a bundle without `bundle_type`."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.common import PITH_RECORDS
from helpers.site import BUNDLES

DEMO = BUNDLES / "demo-1709.09021.json"
SUBJECT = PITH_RECORDS[0]["pith_number"]


def _ledger(cli, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    ledger = tmp_path / "L"
    r = cli("--ledger", str(ledger), "apply", "-q", str(DEMO))
    assert r.code == 0, r.err
    return ledger


def _null_device(path: Path) -> os.stat_result:
    """A null device of our own (never the machine's /dev/null): writes to it are discarded."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return os.stat(path)


# --- item 2: -o writes through to what is not a regular file --------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["export", "--all"], ["export", "arXiv:1709.09021"]],
    ids=["export-all", "export-one"],
)
def test_o_onto_a_device_node_writes_through_and_the_node_survives(cli, tmp_path: Path, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Before: write-then-rename replaced the node with a regular file (as root, `export --all -o /dev/null`
    deleted the machine's /dev/null)."""
    ledger = _ledger(cli, tmp_path)
    node = tmp_path / "null"
    before = _null_device(node)
    r = cli("--ledger", str(ledger), *args, "-o", str(node))
    assert r.code == 0, r.err
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode), oct(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".null.")] == []  # no temporary left


def test_event_o_onto_a_device_node(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    node = tmp_path / "null"
    before = _null_device(node)
    payload = json.dumps({"author_name": "Josiah Carberry"})
    r = cli(
        "event", "author_attestation", "--key", "alice", "--subject", SUBJECT, "--payload", payload,
        "-o", str(node),
    )  # fmt: skip
    assert r.code == 0, r.err
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def _read_fifo(fifo: Path, got: list[bytes]) -> None:
    with open(fifo, "rb") as fh:  # waits for the writer, then reads to its end
        got.append(fh.read())


@pytest.mark.parametrize("args", [["export", "--all"], ["export", "arXiv:1709.09021"]], ids=["all", "one"])
def test_o_onto_a_fifo_gives_its_reader_the_whole_output(cli, tmp_path: Path, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Before: the FIFO was replaced by a regular file and its reader got nothing (it waited for ever)."""
    ledger = _ledger(cli, tmp_path)
    expected = cli("--ledger", str(ledger), *args)
    assert expected.code == 0 and expected.out.count("\n") >= 1, expected.err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    keep = tmp_path / "fifo-keep"  # a second name: if the FIFO were renamed over, the test can still end its reader
    os.link(fifo, keep)
    got: list[bytes] = []
    reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
    reader.start()
    r = cli("--ledger", str(ledger), *args, "-o", str(fifo))
    assert r.code == 0, r.err
    reader.join(30)
    if reader.is_alive():  # nothing was written into the FIFO: end the reader's wait
        os.close(os.open(keep, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got == [expected.out.encode()]


def test_o_follows_a_symlink_as_a_shell_does(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`>` writes the link's target; before, the link was replaced by a regular file and the target kept its old bytes."""
    ledger = _ledger(cli, tmp_path)
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    r = cli("--ledger", str(ledger), "export", "arXiv:1709.09021", "-o", str(link))
    assert r.code == 0, r.err
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text() == cli("--ledger", str(ledger), "export", "arXiv:1709.09021").out
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # a replaced file keeps its mode


def test_o_naming_a_directory_or_a_socket_is_a_named_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import socket

    ledger = _ledger(cli, tmp_path)
    d = tmp_path / "out"
    d.mkdir()
    r = cli("--ledger", str(ledger), "export", "--all", "-o", str(d))
    assert r.code == 1, (r.code, r.err)
    assert r.err.startswith(f"error[cannot-write]: cannot write {d}: it is a directory, not a file\nhint: "), r.err
    assert list(d.iterdir()) == []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        r = cli("--ledger", str(ledger), "export", "--all", "-o", "sock")
    assert r.code == 1 and r.err.startswith("error[cannot-write]: cannot write sock: it is a socket, not a file\n"), (
        r.err
    )
    r = cli("--ledger", str(ledger), "export", "--all", "-o", "nodir/all.jsonl")  # named as given, not resolved
    assert r.err.startswith("error[cannot-write]: cannot write nodir/all.jsonl: No such file or directory\n"), r.err


# --- item 5: event --post keeps what it signed when the mirror accepted nothing -----------------------------


def _created_payload() -> str:
    return json.dumps({"canonical_record": PITH_RECORDS[0]["canonical_record"]})


def test_event_post_of_a_kind_with_no_action_prints_the_bundle_and_exits_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: `skipped ... apply it instead` on stdout, exit 0, and the signed event was gone."""
    cli("keys", "new", "alice")
    r = cli(
        "event", "record_created", "--key", "alice", "--payload", _created_payload(), "--post", "http://127.0.0.1:9"
    )
    assert r.code == 1, (r.code, r.out, r.err)
    assert r.err.startswith("skipped    " + SUBJECT + " record_created "), r.err
    assert (
        "error[no-action]: the mirror accepted nothing; the signed bundle is printed on stdout\nhint: apply it" in r.err
    )
    bundle = json.loads(r.out)  # stdout is the signed bundle alone: `> FILE` keeps it
    assert bundle["events"][0]["event_type"] == "record_created"
    (tmp_path / "kept.json").write_text(r.out)
    applied = cli("--ledger", str(tmp_path / "L"), "--json", "apply", str(tmp_path / "kept.json"))
    assert applied.code == 0 and json.loads(applied.out)["new"] == 1, applied.out + applied.err


def test_event_post_with_o_keeps_the_file_and_still_exits_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("keys", "new", "alice")
    out = tmp_path / "e.json"
    r = cli(
        "event", "record_created", "--key", "alice", "--payload", _created_payload(),
        "--post", "http://127.0.0.1:9", "-o", str(out),
    )  # fmt: skip
    assert r.code == 1 and r.out == "", (r.code, r.out, r.err)
    assert f"the signed bundle is written to {out}" in r.err
    assert json.loads(out.read_text())["events"][0]["event_type"] == "record_created"


def test_event_post_to_a_mirror_that_does_not_answer_prints_the_bundle(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: the refusal line on stdout, exit 1, and the signed event was gone."""
    import socket

    cli("keys", "new", "alice")
    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        payload = json.dumps({"author_name": "Josiah Carberry"})
        r = cli(
            "--json", "event", "author_attestation", "--key", "alice", "--subject", SUBJECT, "--payload", payload,
            "--post", f"http://127.0.0.1:{port}",
        )  # fmt: skip
    assert r.code == 1, (r.code, r.out, r.err)
    doc = json.loads(r.out)
    assert doc["refused"] == 1 and doc["events"][0]["status"] == "refused"
    assert doc["bundle"]["events"][0]["event_id"] == doc["events"][0]["event_id"]
    assert "the signed bundle is printed on stdout" in r.err


# --- item 10: a Ctrl-C while the command starts --------------------------------------------------------------


def _console_script() -> list[str]:
    """The console script, as people run it: its wrapper imports the package ``pithledger`` before main()."""
    script = Path(sys.executable).parent / "pithledger"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pithledger.cli"]


def _as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a suite run with `&` would start it with SIGINT ignored


def _interrupt_once_the_package_is_imported(tmp_path: Path, offset: float) -> tuple[int | None, str]:
    """Start ``apply``; once the import of the package ``pithledger`` has finished (Python's own import
    profile, PYTHONPROFILEIMPORTTIME, says so on stderr) and ``offset`` seconds more, SIGINT its process
    group. The exit code (None: it had ended before) and its stderr without the import profile."""
    env = {k: v for k, v in os.environ.items() if k not in ("PITHLEDGER_LEDGER", "PITHLEDGER_KEYS")}
    env.update(PYTHONPROFILEIMPORTTIME="1", XDG_DATA_HOME=str(tmp_path / "xdg"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    proc = subprocess.Popen(
        [*_console_script(), "--ledger", str(tmp_path / "L"), "apply", "-q", str(DEMO)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        assert proc.stderr is not None
        seen = b""
        while seen.rpartition(b"|")[2].strip() != b"pithledger":  # written once the import has finished
            line = proc.stderr.readline()
            assert line, f"the package's import never finished: {seen.decode()[-2000:]}"
            seen = line
        end = time.monotonic() + offset
        while time.monotonic() < end:  # a busy wait: the window is milliseconds
            pass
        sent = proc.poll() is None
        if sent:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = "".join(x for x in err.decode(errors="replace").splitlines(True) if not x.startswith("import time:"))
    return (proc.returncode if sent else None), text


def test_ctrl_c_once_the_package_is_imported_never_prints_a_traceback(tmp_path: Path) -> None:
    """Before: the package's import finished with no Ctrl-C handler set (cli/_signals.py set it after `typing`
    and `signal` loaded, in pithledger.cli): a SIGINT in the next milliseconds printed a KeyboardInterrupt
    traceback. Now the package sets it first thing, before its own imports, so from the moment its import
    is over every Ctrl-C is `interrupted`, exit 130: checked at 60 offsets over the next 6 ms, each run."""
    bad = []
    sent = 0
    for i in range(60):
        code, err = _interrupt_once_the_package_is_imported(tmp_path, i * 0.0001)
        if code is None:
            continue
        sent += 1
        if code != 130 or "Traceback" in err or "KeyboardInterrupt" in err or not err.startswith("interrupted\n"):
            bad.append((i, code, err[-1500:]))
    assert sent >= 50
    assert bad == []


# --- item 10: latex -o DIR creates DIR ---------------------------------------------------------------------


def test_latex_o_creates_a_missing_directory_but_not_its_parents(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: `latex -o tex` with no tex/ yet was `error[usage]: -o tex: not a directory`."""
    r = cli("latex", "-o", "tex")
    assert r.code == 0, r.err
    assert (tmp_path / "tex" / "pith.sty").read_bytes().startswith(b"%")
    assert r.out.startswith("wrote tex/pith.sty (created tex)"), r.out
    assert stat.S_IMODE((tmp_path / "tex").stat().st_mode) == 0o777 & ~_umask()
    again = cli("latex", "-o", "tex")  # an existing directory: written into, as before
    assert again.code == 0 and "created" not in again.out, again.out + again.err
    r = cli("latex", "-o", "no/such")  # as `mkdir`, not `mkdir -p`: a mistyped path is named, not built
    assert r.code == 1 and r.err.startswith("error[cannot-write]: cannot create no/such: no does not exist\n"), r.err
    r = cli("latex", "-o", "mine.sty")
    assert r.code == 2 and "-o names the directory pith.sty is written into" in r.err, r.err
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("xdg")) == ["tex"]


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


# --- item 10: --ledger at a published tree -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["state", "1709.09021"], ["digest"], ["export", "--all"], ["fsck"], ["apply", str(DEMO)]],
    ids=["state", "digest", "export", "fsck", "apply"],
)
def test_ledger_at_a_published_tree_says_what_it_is_and_what_to_do(cli, tmp_path: Path, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Before: `error[no-ledger]: no ledger at pub` (and for apply: `... is not empty: it holds api, ...`)."""
    ledger = _ledger(cli, tmp_path)
    assert cli("--ledger", str(ledger), "publish", "pub").code == 0
    before = sorted(str(p.relative_to(tmp_path / "pub")) for p in (tmp_path / "pub").rglob("*"))
    r = cli("--ledger", "pub", *args)
    assert r.code == (3 if args == ["fsck"] else 1), (
        r.code,
        r.out,
        r.err,
    )  # fsck: could not check (spec/storage.md §6)
    assert r.err == (
        "error[not-a-ledger]: pub is a published mirror tree (it holds pith-mirrors.json), not a ledger\n"
        "hint: read it into a ledger with `pithledger --ledger LEDGER sync pub`, or compare it with another mirror "
        "with `pithledger audit pub OTHER`; --ledger names a ledger (a directory holding data.mdb)\n"
    )
    assert sorted(str(p.relative_to(tmp_path / "pub")) for p in (tmp_path / "pub").rglob("*")) == before


# --- item 10: a bundle without bundle_type -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"pith_number": SUBJECT, "events": []}, "the document has no bundle_type (expected 'pith_open_graph_bundle')"),
        ({"bundle_type": None}, "bundle_type is null, not 'pith_open_graph_bundle'"),
        ({"bundle_type": 1}, "bundle_type is a number (1), not the string 'pith_open_graph_bundle'"),
        ({"bundle_type": "pith_bundle"}, "bundle_type is 'pith_bundle', not 'pith_open_graph_bundle'"),
        ({"bundle_type": "pith_open_graph_bundle"}, "the bundle has no bundle_version (expected '1.0')"),
    ],
    ids=["missing", "null", "number", "other-string", "no-version"],
)
def test_a_bundle_without_its_bundle_type_says_which_is_wrong(
    cli, tmp_path: Path, document: dict, message: str
) -> None:  # type: ignore[no-untyped-def, type-arg]
    """Before: a missing bundle_type, and a null one, both said `bundle_type is None` (Python's word)."""
    (tmp_path / "b.json").write_text(json.dumps(document))
    r = cli("--ledger", str(tmp_path / "L"), "apply", "b.json")
    assert r.code == 1, (r.code, r.out, r.err)
    assert r.err.startswith(f"error[bad-bundle]: b.json: {message}\n"), r.err
