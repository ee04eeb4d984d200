"""The operator page (docs/operating.md, issue #33 item 7) and its files in docs/deploy/, tested as used:
the systemd units checked by `systemd-analyze verify` and their ExecStart lines run for real; both nginx sites
loaded by a real nginx in front of the serve unit's own command line; the page's `<!-- test -->` blocks run
as written. Only what must be local is replaced (LOCAL below: the install and data paths, the port)."""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from helpers import servekit
from helpers.nginxkit import NGINX, reserved_port
from helpers.nginxkit import free_port as _free_port
from helpers.site import BUNDLES, FZ7, _env

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operating.md"
DEPLOY = ROOT / "docs" / "deploy"
UNITS = sorted(DEPLOY.glob("pithledger-*.service")) + sorted(DEPLOY.glob("pithledger-*.timer"))
BIN = Path(sys.executable).parent  # the venv's console script sits beside its python
CAP = 1_179_648  # spec/serve.md §8: an action POST's body


def local(text: str, tmp: Path, port: int = 8080) -> str:
    """The deployed paths and port made local: the only edits a test makes to the files it runs."""
    for deployed, here in (
        ("/opt/pithledger/bin", str(BIN)),
        ("/var/lib/pithledger", str(tmp / "lib")),
        ("/var/backups/pithledger", str(tmp / "backups")),
        ("127.0.0.1:8080", f"127.0.0.1:{port}"),
        ("--port 8080", f"--port {port}"),
    ):
        text = text.replace(deployed, here)
    return text


def unit_lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


def unit_env(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in unit_lines(text, "Environment"))


def unit_argv(line: str, env: dict[str, str]) -> list[str]:
    """systemd's reading of an Exec line: %% is %, ${VAR} is one word from the unit's Environment=."""
    line = re.sub(r"\$\{(\w+)\}", lambda m: shlex.quote(env[m[1]]), line.replace("%%", "%"))
    return shlex.split(line)


def process_env(tmp: Path, unit_text: str = "") -> dict[str, str]:
    env = _env(tmp)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(unit_env(unit_text))
    return env


def wait_for(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:  # a poll until it answers, not a sleep that decides the outcome
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"{what} did not start: {proc.communicate()[1]!r}") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()
        proc.wait()
        raise


def serve_unit(tmp: Path, port: int, base_url: str) -> tuple[subprocess.Popen[bytes], Path]:
    """pithledger-serve.service's ExecStart, local paths and port, its --base-url the one the test reaches;
    stderr (the journal: the access log) to a file."""
    text = local((DEPLOY / "pithledger-serve.service").read_text(), tmp, port)
    env = process_env(tmp, text)
    (argv,) = [unit_argv(line, env) for line in unit_lines(text, "ExecStart")]
    argv[argv.index("--base-url") + 1] = base_url
    log = tmp / f"serve-{port}.log"
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    wait_for(f"http://127.0.0.1:{port}/healthz", proc, "serve")
    return proc, log


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A deployed layout (tmp/lib/ledger, tmp/lib/keys with the log key 'mirror') holding bundles/, and a
    source: another ledger of bundles/ served with its own log key (a real `serve` on loopback)."""
    tmp = tmp_path_factory.mktemp("operating")
    env = process_env(tmp, local((DEPLOY / "pithledger-serve.service").read_text(), tmp))
    for args in (
        ["keys", "new", "mirror"],
        ["apply", str(BUNDLES)],
        ["--ledger", str(tmp / "src"), "--key-dir", str(tmp / "src-keys"), "keys", "new", "src"],
        ["--ledger", str(tmp / "src"), "apply", str(BUNDLES)],
    ):
        subprocess.run([str(BIN / "pithledger"), *args], env=env, check=True, capture_output=True, timeout=120)
    source = servekit.Server(
        tmp / "src", _env(tmp), "--key", "src", "--key-dir", str(tmp / "src-keys"), "--access-log", "/dev/null"
    )
    yield tmp, source.base + "/"
    source.stop()


# --- systemd -----------------------------------------------------------------------------------------------


def test_units_verify_with_systemd_analyze(tmp_path: Path) -> None:
    """`systemd-analyze verify` works offline (no systemd as PID 1 needed); any warning fails, not only errors."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    assert {u.name for u in UNITS} == {
        "pithledger-serve.service",
        "pithledger-sync.service",
        "pithledger-backup.service",
        "pithledger-backup.timer",
    }
    for unit in UNITS:  # the ExecStart binary must exist: the installed one stands for /opt/pithledger/bin
        (tmp_path / unit.name).write_text(local(unit.read_text(), tmp_path))
    proc = subprocess.run(
        [analyze, "verify", *(str(tmp_path / u.name) for u in UNITS)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", (proc.returncode, proc.stdout, proc.stderr)
    # The check can fail: an unknown key is reported.
    (tmp_path / "pithledger-backup.timer").write_text(local(UNITS[-1].read_text(), tmp_path) + "Bogus=1\n")
    proc = subprocess.run(
        [analyze, "verify", str(tmp_path / "pithledger-backup.timer")], capture_output=True, text=True, timeout=120
    )
    assert "Unknown key 'Bogus'" in proc.stderr


def _pithledger_argvs() -> list[tuple[str, list[str]]]:
    """Every pithledger command line of the units, as systemd and then sh (for sh -c) would split it."""
    found = []
    for unit in UNITS:
        text = unit.read_text()
        env = unit_env(text)
        for key in ("ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload"):
            for line in unit_lines(text, key):
                argv = unit_argv(line, env)
                if argv[:2] == ["/bin/sh", "-c"]:
                    argv = shlex.split(argv[2])
                    argv = argv[1:] if argv[0] == "exec" else argv
                if argv[0].endswith("/pithledger"):
                    assert argv[0] == "/opt/pithledger/bin/pithledger", (unit.name, argv[0])
                    found.append((unit.name, argv[1:]))
    return found


def test_every_exec_line_is_a_real_pithledger_command() -> None:
    """Parsed in-process by the CLI's own click command (option names, types, ranges) and run with --help
    appended: the units cannot drift from the CLI."""
    from pithledger.cli.app import app

    group = typer.main.get_command(app)  # typer's click (it may carry its own copy)
    parent = group.context_class(group, info_name="pithledger")
    found = _pithledger_argvs()
    assert {(unit, args[0]) for unit, args in found} == {
        ("pithledger-serve.service", "serve"),
        ("pithledger-sync.service", "sync"),
        ("pithledger-backup.service", "backup"),
    }
    for unit, args in found:
        command = group.get_command(parent, args[0])  # type: ignore[attr-defined]
        assert command is not None, (unit, args)
        with command.make_context(args[0], list(args[1:]), parent=parent) as ctx:
            assert ctx.params, (unit, args)
        proc = subprocess.run([str(BIN / "pithledger"), *args, "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith(f"Usage: pithledger {args[0]} "), (
            unit,
            proc.stdout,
            proc.stderr,
        )
    # The check can fail: a misspelt option is refused.
    serve = group.get_command(parent, "serve")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="No such option: --forwarded-allow-ip"):
        serve.make_context("serve", ["--forwarded-allow-ip", "127.0.0.1"], parent=parent)


def test_backup_unit_runs_and_keeps_the_newest_14(mirror: tuple[Path, str]) -> None:
    tmp, _ = mirror
    text = local((DEPLOY / "pithledger-backup.service").read_text(), tmp)
    env = process_env(tmp, text)
    backups = Path(env["PITHLEDGER_BACKUPS"])
    old = [f"2025010{d}T031700Z" for d in range(1, 10)] + [f"202501{d}T031700Z" for d in range(10, 17)]
    for name in old:  # 16 older backups, and one made by hand, which is never pruned
        (backups / name).mkdir(parents=True)
    (backups / "manual-keep").mkdir()
    for key in ("ExecStart", "ExecStartPost"):
        (line,) = unit_lines(text, key)
        proc = subprocess.run(unit_argv(line, env), env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (key, proc.stdout, proc.stderr)
    made = sorted(p.name for p in backups.iterdir() if p.name not in old and p.name != "manual-keep")
    assert len(made) == 1 and re.fullmatch(r"\d{8}T\d{6}Z", made[0]), made
    kept = sorted(p.name for p in backups.iterdir())
    assert kept == sorted(old[-13:] + made + ["manual-keep"]), kept
    digest = [
        subprocess.run(
            [str(BIN / "pithledger"), "--ledger", str(path), "digest"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for path in (backups / made[0], Path(env["PITHLEDGER_LEDGER"]))
    ]
    assert digest[0] == digest[1] and "51 records" in digest[0]


def test_sync_unit_follows_and_stops_cleanly_on_sigterm(mirror: tuple[Path, str], tmp_path: Path) -> None:
    """The sync unit's command, its source a real serve: the first run happens at once, systemd's stop
    (SIGTERM) is exit 0, and the ledger then holds what the source holds (audit)."""
    tmp, source = mirror
    text = local((DEPLOY / "pithledger-sync.service").read_text(), tmp)
    env = process_env(tmp, text)
    env["PITHLEDGER_SOURCE"] = source
    env["PITHLEDGER_LEDGER"] = str(tmp_path / "follower")
    (line,) = unit_lines(text, "ExecStart")
    out = tmp_path / "journal"
    proc = subprocess.Popen(unit_argv(line, env), env=env, stdout=out.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while "run 1 at" not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.05)
    assert stop(proc) == 0, out.read_text()
    journal = out.read_text()
    assert "65 new events" in journal and "(SIGTERM)" in journal, journal
    audit = subprocess.run(
        [str(BIN / "pithledger"), "audit", source, env["PITHLEDGER_LEDGER"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


# --- nginx in front of serve ---------------------------------------------------------------------------------


class Site:
    def __init__(self, base: str, upstream: int, log: Path) -> None:
        self.base, self.upstream, self.log = base, upstream, log


@pytest.fixture(scope="module", params=["nginx-pithledger.conf", "nginx-pithledger-prefix.conf"])
def site(
    request: pytest.FixtureRequest, mirror: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    if NGINX is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is missing: CI installs it (apt-get install -y nginx)")
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    tmp, _ = mirror
    name: str = request.param
    prefix = "/mirror/" if "prefix" in name else "/"
    held = reserved_port()  # nginx's port, held until nginx listens beside it (reuseport): no parallel test takes it
    port, upstream = int(held.getsockname()[1]), _free_port()
    base = f"http://127.0.0.1:{port}{prefix}"
    server, log = serve_unit(tmp, upstream, base)
    conf_dir = tmp_path_factory.mktemp("nginx")
    (conf_dir / "logs").mkdir()
    text = (DEPLOY / name).read_text()
    assert text.count("listen 80;") == 1 and text.count("server 127.0.0.1:8080;") == 1
    (conf_dir / "site.conf").write_text(
        text.replace("listen 80;", f"listen 127.0.0.1:{port} reuseport;").replace(
            "server 127.0.0.1:8080;", f"server 127.0.0.1:{upstream};"
        )
    )
    # Run as root, nginx's workers would be 'nobody', who cannot enter pytest's 0700 temp directory to buffer a
    # request body to disk (a body over client_body_buffer_size; Debian's /var/lib/nginx/body is www-data's).
    user = "user root;" if os.geteuid() == 0 else ""
    (conf_dir / "nginx.conf").write_text(f"""
{user}
daemon off;
worker_processes 1;
pid {conf_dir}/nginx.pid;
error_log {conf_dir}/logs/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {conf_dir}/body; proxy_temp_path {conf_dir}/proxy; fastcgi_temp_path {conf_dir}/fastcgi;
    uwsgi_temp_path {conf_dir}/uwsgi; scgi_temp_path {conf_dir}/scgi;
    include {conf_dir}/site.conf;
}}
""")
    proc = subprocess.Popen(
        [NGINX, "-p", str(conf_dir), "-c", str(conf_dir / "nginx.conf"), "-e", f"{conf_dir}/logs/error.log"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for(base + "healthz", proc, "nginx")
    yield Site(base, upstream, log)
    stop(proc)
    stop(server)
    held.close()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as resp:
            return resp.status, resp.url, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, url, exc.read()


def test_nginx_serves_pages_state_and_redirects_under_its_path(site: Site, mirror: tuple[Path, str]) -> None:
    tmp, _ = mirror
    status, _, body = _get(f"{site.base}pith/{FZ7}", {"Accept": "text/html"})
    assert status == 200 and f"pith:2026:{FZ7}".encode() in body
    status, _, body = _get(f"{site.base}pith/{FZ7}/state.json")
    env = process_env(tmp, local((DEPLOY / "pithledger-serve.service").read_text(), tmp))
    state = subprocess.run([str(BIN / "pithledger"), "state", FZ7], env=env, capture_output=True, check=True).stdout
    assert status == 200 and json.loads(body) == json.loads(state)
    status, url, _ = _get(f"{site.base}resolve?id=2605.00424")  # a 302 the client follows: the path is kept
    assert status == 200 and url == f"{site.base}pith/{FZ7}", url
    status, _, body = _get(site.base + "healthz")
    assert status == 200 and json.loads(body)["status"] == "ok" and json.loads(body)["events"] == 65
    # /metrics is for the host's Prometheus only: refused through nginx, answered on the upstream port.
    assert _get(site.base + "metrics")[0] == 403
    status, _, body = _get(f"http://127.0.0.1:{site.upstream}/metrics")
    assert status == 200 and b"pithledger_ledger_events 65" in body


def test_nginx_body_cap_is_the_servers(site: Site) -> None:
    """One byte over the action cap: nginx's own 413 (an HTML page), to urllib. At the cap: passed on, and
    the answer is the server's (JSON; 405, as this unit does not --accept-events)."""
    url = f"{site.base}pith/{FZ7}/action/citation"
    status, _, body = _get_post(url, b"x" * (CAP + 1))
    assert status == 413 and b"nginx" in body, (status, body[:200])
    status, _, body = _get_post(url, b"x" * CAP)
    assert status != 413 and "error" in json.loads(body), (status, body[:200])


def _get_post(url: str, data: bytes) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.url, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, url, exc.read()


def test_access_log_names_the_client_nginx_saw(site: Site) -> None:
    """A client at 127.0.0.2 (its own loopback address) through nginx at 127.0.0.1: the journal's line
    names 127.0.0.2 as the client and nginx as the peer; the X-Forwarded-For it forged is not believed."""
    path = site.base.split(":", 2)[2].split("/", 1)[1]
    port = int(site.base.split(":")[2].split("/")[0])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=("127.0.0.2", 0))
    try:
        conn.request("GET", f"/{path}healthz?probe=xff", headers={"X-Forwarded-For": "203.0.113.9"})
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    deadline = time.monotonic() + 60
    while not (lines := [ln for ln in site.log.read_text().splitlines() if "probe=xff" in ln]):
        assert time.monotonic() < deadline, site.log.read_text()[-2000:]
        time.sleep(0.05)
    (line,) = lines
    assert " client=127.0.0.2 peer=127.0.0.1 " in line and "203.0.113.9" not in line, line


# --- the page, run as written ----------------------------------------------------------------------------------


def test_the_page_runs_as_written(mirror: tuple[Path, str], tmp_path: Path) -> None:
    """Every ```sh block after a `<!-- test -->` line, in order, in bash -euo pipefail, as the pithledger user's
    shell of §2 (its exports, which must be the units' Environment=), $SOURCE a real serve; the serve unit's
    command runs on the port the page's curl lines name."""
    tmp, source = mirror
    page = DOC.read_text()
    blocks = re.findall(r"^<!-- test -->\n```sh\n(.*?)^```$", page, flags=re.M | re.S)
    assert len(blocks) == page.count("\n<!-- test -->\n") == 6, len(blocks)  # no marker before anything else
    (exports,) = re.findall(r"^export PATH=/opt/pithledger/bin:\$PATH (.*)$", page, flags=re.M)
    for unit in ("pithledger-serve.service", "pithledger-sync.service"):
        expect = {k: v for k, v in unit_env((DEPLOY / unit).read_text()).items() if k != "PITHLEDGER_SOURCE"}
        assert dict(item.split("=", 1) for item in exports.split()) == expect, (unit, exports)
    root = tmp_path / "deployed"
    (root / "backups").mkdir(parents=True)
    env = process_env(root)
    env.update(dict(item.split("=", 1) for item in local(exports, root).split()))
    env["SOURCE"] = source
    port = _free_port()
    server = None
    try:
        for block in blocks:
            if "127.0.0.1:8080" in block and server is None:
                server = serve_unit(root, port, f"http://127.0.0.1:{port}/")[0]
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", local(block, root, port)],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, (block, proc.stdout, proc.stderr)
            if "timeout --preserve-status" in block:
                assert proc.stdout.strip().endswith("exit 0") and "(SIGTERM)" in proc.stdout + proc.stderr, (
                    proc.stdout + proc.stderr
                )
            if "/healthz" in block:
                assert (
                    '"status":"ok"' in proc.stdout.replace(" ", "")
                    and "pithledger_source_last_success_timestamp_seconds{" in proc.stdout
                )
    finally:
        if server is not None:
            stop(server)
    assert sorted(p.name.split("-")[0] for p in (root / "backups").iterdir()) == ["all", "manual"]
