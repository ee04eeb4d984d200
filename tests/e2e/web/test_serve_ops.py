"""`serve`'s operations (spec/serve.md §9), through real servers on 127.0.0.1: /healthz, /metrics (parsed with
prometheus-client's own parser), the access log (stderr and --access-log), the event lines of POSTed events,
and the client address behind a trusted proxy (--forwarded-allow-ips) for the rate limit and the log."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import servekit
from pithledger.records.bundle import write_bundle
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.records.keys import LocalKey
from pithledger.web.ops import Proxies, escaped

VECTORS = Path(__file__).resolve().parents[2] / "vectors"
RECORD_DOC = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
SUFFIX = "FHIBFT2FCAH6TNYKWKJEBOYM4L"
NUMBER = "pith:2025:" + SUFFIX
ACTION = f"/pith/{SUFFIX}/action/author_attestation"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_DATA_HOME"] = str(tmp / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg-config")
    env.pop("PITHLEDGER_LEDGER", None)
    return env


def pl(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pithledger.cli", *args], capture_output=True, text=True, env=_env(tmp), timeout=120
    )


class Server(servekit.Server):
    """servekit's server, with its stderr (the access log by default) read on by a thread."""

    def __init__(self, ledger: Path, tmp: Path, *extra: str) -> None:
        super().__init__(ledger, _env(tmp), *extra, timeout=60.0)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def metrics(self) -> dict[str, list[Any]]:
        status, headers, body = self.request("/metrics")
        assert (
            status == 200
            and headers["content-type"].startswith("text/plain")
            and headers["cache-control"] == "no-store"
        )
        out: dict[str, list[Any]] = {}
        for family in text_string_to_metric_families(body.decode()):
            out.setdefault(family.name, []).extend(family.samples)
        return out


def wait_for(lines: Any, needle: str) -> str:
    """The first line holding ``needle``: the log is written by its own thread, so it may come a moment after
    the answer (no timing is asserted: 30 s is only how long to wait before failing)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in lines():
            if needle in line:
                return str(line)
        time.sleep(0.05)
    raise AssertionError(f"no log line holds {needle!r}: {list(lines())[-10:]}")


def value(metrics: dict[str, list[Any]], name: str, **labels: str) -> float:
    """The sample ``name`` with exactly these labels (0 when the series does not exist yet)."""
    found = [s.value for fam in metrics.values() for s in fam if s.name == name and s.labels == labels]
    assert len(found) <= 1, found
    return float(found[0]) if found else 0.0


def _raw(port: int, request: bytes) -> int:
    """Send ``request`` as given (bytes http.client refuses to send) and read the answer's status."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def _key(name: str) -> LocalKey:
    return LocalKey(name=name, seed=hashlib.sha256(f"ops test {name}".encode()).digest())


def _attestation(n: int) -> dict[str, Any]:
    return make_event(
        "author_attestation",
        NUMBER,
        {"author_name": f"Author {n}"},
        _key("carol"),
        created_at=f"2026-07-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z",
    )


def _post(srv: Server, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, _, answer = srv.request(
        ACTION, "POST", body=body, headers={"content-type": "application/json", **(headers or {})}
    )
    return status, json.loads(answer)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(tmp, ledger): a ledger holding Pith's record FHIBFT2FCAH6TNYKWKJEBOYM4L."""
    tmp = tmp_path_factory.mktemp("ops")
    out = pl(tmp, "--ledger", str(tmp / "L"), "apply", str(RECORD_DOC))
    assert out.returncode == 0, out.stderr
    yield tmp, tmp / "L"


def _copy(tmp: Path, ledger: Path, name: str) -> Path:
    target = tmp / name
    shutil.copytree(ledger, target)
    return target


# --- /healthz ------------------------------------------------------------------------------------------------


def test_healthz_is_200_with_the_event_count_then_503_once_the_ledger_is_replaced(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    copy = _copy(tmp, base, "health")
    srv = Server(copy, tmp)
    try:
        status, headers, body = srv.request("/healthz")
        doc = json.loads(body)
        digest = srv.json("/digest.json")
        assert status == 200 and headers["cache-control"] == "no-store"
        assert doc["status"] == "ok" and doc["events"] == digest["events"] > 0
        assert doc["last_commit"].endswith("Z") and doc["last_commit"][:4].isdigit()
        # the data file swapped under the server (a restore, another ledger copied in): it serves a file nobody has
        os.replace(copy / "data.mdb", tmp / "health-old.mdb")
        shutil.copyfile(tmp / "health-old.mdb", copy / "data.mdb")
        status, headers, body = srv.request("/healthz")
        assert status == 503 and headers["cache-control"] == "no-store" and "retry-after" in headers
        assert json.loads(body)["status"] == "unavailable" and json.loads(body)["reason"] == "ledger-replaced"
        os.unlink(copy / "data.mdb")  # gone altogether: still 503, never a traceback
        status, _, body = srv.request("/healthz")
        assert status == 503 and json.loads(body)["reason"] == "ledger-replaced"
        assert value(srv.metrics(), "pithledger_http_requests_total", route="/healthz", method="GET", status="503") == 2
    finally:
        srv.stop()
    assert not any("Traceback" in line for line in srv.lines)


def test_a_replaced_ledger_is_never_read_metrics_say_unreadable_and_record_paths_answer_503(
    ledger: tuple[Path, Path],
) -> None:
    """A restore under a running server (docs/operating.md §6): /metrics stops reporting the old file (readable 0,
    no event count) and every path that reads the ledger answers 503 ledger-replaced, as /healthz does, until the
    server is restarted; paths that read no ledger still answer. Before: readable 1, the old count, 200s."""
    tmp, base = ledger
    copy = _copy(tmp, base, "restored")
    empty = tmp / "restored-empty"
    assert pl(tmp, "--ledger", str(empty), "apply", str(RECORD_DOC)).returncode == 0
    srv = Server(copy, tmp, "--accept-events")
    paths = (
        f"/pith/{SUFFIX}/state.json",
        f"/pith/{SUFFIX}",
        f"/pith/{SUFFIX}.json",
        f"/pith/{SUFFIX}/bundle.json",
        f"/resolve?id={NUMBER}",
        "/digest.json",
        "/events.json",
        "/",
    )
    try:
        before = srv.metrics()
        assert value(before, "pithledger_ledger_readable") == 1 and value(before, "pithledger_ledger_events") > 0
        assert all(srv.request(p)[0] in (200, 302) for p in paths)
        # the operator's restore: the directory's data file is another one now (a copy of a backup)
        os.replace(copy / "data.mdb", tmp / "restored-old.mdb")
        shutil.copyfile(empty / "data.mdb", copy / "data.mdb")
        after = srv.metrics()
        assert value(after, "pithledger_ledger_readable") == 0
        assert "pithledger_ledger_events" not in after and "pithledger_last_commit_timestamp_seconds" not in after
        for path in paths:
            status, headers, body = srv.request(path)
            assert status == 503 and headers["retry-after"] == "30" and headers["cache-control"] == "no-store", path
            assert (
                json.loads(body)["error"] == "ledger-replaced" and "restart the server" in json.loads(body)["message"]
            )
        assert srv.request("/healthz")[0] == 503 and srv.request("/pith-mirrors.json")[0] == 200
        # nor is it written: an event POSTed now would go to a file nobody sees
        status, answer = _post(srv, canonical_bytes(write_bundle(NUMBER, [_attestation(7)])))
        assert status == 503 and answer["error"] == "ledger-replaced"
        assert value(srv.metrics(), "pithledger_events_refused_total", reason="ledger-replaced") == 1
        assert (
            value(
                srv.metrics(),
                "pithledger_http_requests_total",
                route="/pith/{suffix}/state.json",
                method="GET",
                status="503",
            )
            == 1
        )
    finally:
        srv.stop()
    assert not any("Traceback" in line for line in srv.lines)
    restarted = Server(copy, tmp)  # what the guide says to do: the restored file is served
    try:
        assert restarted.request(f"/pith/{SUFFIX}/state.json")[0] == 200
        assert value(restarted.metrics(), "pithledger_ledger_readable") == 1
    finally:
        restarted.stop()


# --- /metrics and the access log -----------------------------------------------------------------------------


def test_metrics_are_text_format_0_0_4_whatever_prometheus_client_calls_latest(ledger: tuple[Path, Path]) -> None:
    """spec/serve.md §9.3 names 0.0.4; prometheus-client 0.26's CONTENT_TYPE_LATEST is version=1.0.0."""
    tmp, base = ledger
    srv = Server(base, tmp)
    try:
        status, headers, body = srv.request("/metrics")
        assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert list(text_string_to_metric_families(body.decode()))
    finally:
        srv.stop()


def _series(metrics: dict[str, list[Any]], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for fam in metrics.values() for s in fam if s.name == name}


def test_every_known_label_exists_at_0_so_increase_sees_the_first_refusal(ledger: tuple[Path, Path]) -> None:
    """A labelled series born at its first increment is invisible to increase(): docs/operating.md §4's
    `increase(pithledger_events_refused_total[1h]) > 0` missed a single refused POST. Every refusal reason, every
    guard code, and each route's 500/503 (the 5xx alert's) exist at 0 from the start."""
    tmp, base = ledger
    srv = Server(_copy(tmp, base, "zeros"), tmp, "--accept-events")
    try:
        start = srv.metrics()
        refused = _series(start, "pithledger_events_refused_total")
        for reason in ("malformed-json", "bad-signature", "rate-limited", "body-too-large", "ledger-busy"):
            assert refused[(("reason", reason),)] == 0.0, reason
        guard = _series(start, "pithledger_connections_refused_total")
        for code in ("too-many-connections", "request-timeout", "request-too-long", "body-too-large"):
            assert guard[(("reason", code),)] == 0.0, code
        from pithledger.web.ops import GUARD_CODES, REFUSAL_REASONS  # the lists spec/serve.md §9.3 points at

        assert {dict(k)["reason"] for k in refused} == set(REFUSAL_REASONS) and set(refused.values()) == {0.0}
        assert {dict(k)["reason"] for k in guard} == set(GUARD_CODES) and set(guard.values()) == {0.0}
        requests = _series(start, "pithledger_http_requests_total")
        for route, method in (("/pith/{suffix}/state.json", "GET"), ("/pith/{suffix}/action/{kind}", "POST")):
            for status in ("500", "503"):
                assert requests[(("method", method), ("route", route), ("status", status))] == 0.0
        assert _post(srv, b"{not json")[0] == 400  # one refusal: the series goes from 0 to 1, which increase() sees
        after = _series(srv.metrics(), "pithledger_events_refused_total")
        assert after[(("reason", "malformed-json"),)] == 1.0
        assert sum(after.values()) == 1.0
    finally:
        srv.stop()


class ParserServer(Server):
    """``serve`` with uvicorn's other HTTP/1.1 parser: ``run(http="h11")`` (the CLI always runs httptools)."""

    def __init__(self, ledger: Path, tmp: Path, http: str) -> None:
        code = (
            "import sys; from pathlib import Path; from pithledger.web.serve import run; "
            "run(Path(sys.argv[1]), port=0, http=sys.argv[2])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(ledger), http],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=_env(tmp),
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        self.port = int(line.split("at http://127.0.0.1:", 1)[1].split("/", 1)[0])
        self.base, self.timeout = f"http://127.0.0.1:{self.port}", 60.0
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_request_the_parser_refuses_is_answered_json_counted_and_logged(
    ledger: tuple[Path, Path], parser: str
) -> None:
    """uvicorn answers what its parser refuses with a text 400 and neither counts nor logs it (one in six of 3,000
    odd requests went unseen): now a JSON 400 malformed-request, a guard series, a log line, with either parser."""
    tmp, base = ledger
    srv = Server(base, tmp) if parser == "httptools" else ParserServer(base, tmp, parser)
    try:
        for n, request in enumerate(
            (
                b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",  # a header line without a name
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # TLS spoken to plain HTTP
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n",
            ),
            1,
        ):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
                sock.sendall(request)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower(), answer
            assert json.loads(body)["error"] == "malformed-request"
            assert value(srv.metrics(), "pithledger_connections_refused_total", reason="malformed-request") == n
        line = wait_for(lambda: srv.lines, "guard=malformed-request")
        assert line.startswith("ts=") and "client=127.0.0.1 guard=malformed-request status=400" in line
    finally:
        srv.stop()
    assert not any("Traceback" in line for line in srv.lines)
    # uvicorn's own warning, written to stderr on the event loop as often as a client likes (a stderr pipe nobody
    # reads stalled the server), is not written: the access log line, from its own thread, says it
    assert not any("Invalid HTTP request" in line for line in srv.lines)
    assert sum("guard=malformed-request" in line for line in srv.lines) == 3


def test_metrics_parse_and_move_by_route_template_and_log_lines_are_escaped(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    srv = Server(base, tmp)  # the access log on stderr, the default
    try:
        before = srv.metrics()
        assert value(before, "pithledger_ledger_readable") == 1
        digest = srv.json("/digest.json")
        assert value(before, "pithledger_ledger_events") == digest["events"]
        assert value(before, "pithledger_ledger_records") == digest["records"]
        assert (
            value(before, "pithledger_ledger_bytes") > 0
            and value(before, "pithledger_last_commit_timestamp_seconds") > 1.7e9
        )
        for _ in range(3):
            assert srv.request(f"/pith/{SUFFIX}/state.json")[0] == 200
        for n in range(20):  # distinct hostile paths: one series, never one per path
            assert srv.request(f"/pith/{SUFFIX}/x{n}")[0] == 404
            assert srv.request(f"/nothing-{n}")[0] == 404
        after = srv.metrics()
        route = "/pith/{suffix}/state.json"
        assert (
            value(after, "pithledger_http_requests_total", route=route, method="GET", status="200")
            - value(before, "pithledger_http_requests_total", route=route, method="GET", status="200")
            == 3
        )
        assert value(after, "pithledger_http_request_duration_seconds_count", route=route) >= 3
        assert value(after, "pithledger_http_requests_total", route="unmatched", method="GET", status="404") >= 20
        assert (
            value(after, "pithledger_http_requests_total", route="/pith/{ident:path}", method="GET", status="404") == 20
        )
        routes = {s.labels.get("route") for s in after["pithledger_http_requests"]}
        assert not any(r and ("x1" in r or "nothing" in r) for r in routes), routes
        # a path that would end the quoted value and forge a field: '"' and '\\' escaped (httptools itself refuses
        # control characters and bytes past ASCII in a request line: 400 outside the application; escaped() covers them)
        status = _raw(
            srv.port, b'GET /pith/"status=200\\?q="client=6.6.6.6 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
        )
        line = wait_for(lambda: srv.lines, "/pith/\\x22status")
        assert 'path="/pith/\\x22status=200\\x5c?q=\\x22client=6.6.6.6" ' in line and line.count('"') == 2
        assert (
            f"status={status} " in line and "method=GET" in line and "client=127.0.0.1 " in line and "peer=" not in line
        )
        line = wait_for(lambda: srv.lines, f'path="/pith/{SUFFIX}/state.json"')
        assert "status=200 " in line and " bytes=" in line and " seconds=" in line
    finally:
        srv.stop()


def test_access_log_file_and_the_events_posted_are_logged_and_counted(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    copy = _copy(tmp, base, "posted")
    log = tmp / "access.log"
    log.write_text("kept\n")  # appended to, never truncated
    srv = Server(copy, tmp, "--accept-events", "--access-log", str(log))
    lines = lambda: log.read_text().splitlines()  # noqa: E731
    try:
        before = srv.metrics()
        event = _attestation(1)
        status, answer = _post(srv, canonical_bytes(write_bundle(NUMBER, [event])))
        assert status == 201, answer
        event_id = answer["events"][0]["event_id"]
        line = wait_for(lines, f"event=accepted id={event_id}")
        assert "kind=author_attestation" in line and f"subject={NUMBER}" in line
        assert _post(srv, canonical_bytes(write_bundle(NUMBER, [event])))[0] == 200  # held: not accepted twice
        wait_for(lines, f"event=held id={event_id}")
        forged = _attestation(2) | {"payload": {"author_name": "Mallory"}}
        forged["event_id"] = (
            "sha256:"
            + hashlib.sha256(canonical_bytes({k: v for k, v in forged.items() if k != "event_id"})).hexdigest()
        )
        status, answer = _post(srv, canonical_bytes(write_bundle(NUMBER, [forged])))
        assert status == 422 and answer["error"] == "bad-signature"
        line = wait_for(lines, f"event=refused id={answer['events'][0]['event_id']}")
        assert "reason=bad-signature" in line
        assert _post(srv, b"{not json")[0] == 400
        wait_for(lines, "event=refused id=- kind=author_attestation")
        after = srv.metrics()
        assert value(after, "pithledger_events_accepted_total") - value(before, "pithledger_events_accepted_total") == 1
        assert value(after, "pithledger_events_held_total") - value(before, "pithledger_events_held_total") == 1
        assert value(after, "pithledger_events_refused_total", reason="bad-signature") == 1
        assert (
            value(
                after,
                "pithledger_http_requests_total",
                route="/pith/{suffix}/action/{kind}",
                method="POST",
                status="201",
            )
            == 1
        )
        assert value(after, "pithledger_ledger_events") == value(before, "pithledger_ledger_events") + 1
        assert lines()[0] == "kept"
        wait_for(lines, 'path="/metrics"')
    finally:
        srv.stop()
    assert not any("path=" in line for line in srv.lines)  # the file, not stderr


def test_an_access_log_that_cannot_be_opened_is_a_named_error_at_start(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    out = pl(tmp, "--ledger", str(base), "serve", "--port", "0", "--access-log", str(tmp / "no" / "such" / "dir.log"))
    assert (
        out.returncode == 1
        and out.stderr.startswith("error[cannot-write]: cannot open the access log")
        and "Traceback" not in out.stderr
    )
    out = pl(tmp, "--ledger", str(base), "serve", "--port", "0", "--forwarded-allow-ips", "127.0.0.1,nginx.local")
    assert out.returncode == 2 and "error[usage]" in out.stderr and "nginx.local" in out.stderr


# --- the client address behind a proxy -----------------------------------------------------------------------


def _one_post_each(base: Path, tmp: Path, *more: str) -> Server:
    """A server accepting events where each client address may POST once (no refill in a test's time)."""
    return Server(
        base, tmp, "--accept-events", "--post-burst", "1", "--post-rate", "0.001", "--post-total-rate", "1000", *more
    )


def _budget(srv: Server, headers: dict[str, str]) -> int:
    """POST a body the rate limit charges before it is read (and that is then refused 400): 429 once spent."""
    return _post(srv, b"{}", headers)[0]


def test_forwarded_from_an_untrusted_peer_changes_nothing(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    srv = _one_post_each(base, tmp)
    try:
        assert _budget(srv, {"x-forwarded-for": "198.51.100.1"}) == 400
        assert _budget(srv, {"x-forwarded-for": "198.51.100.2"}) == 429  # one budget: the TCP peer's
        assert _budget(srv, {"forwarded": "for=198.51.100.3"}) == 429
        line = wait_for(lambda: srv.lines, "status=429")
        assert "client=127.0.0.1 " in line and "198.51.100" not in line
    finally:
        srv.stop()


def test_forwarded_from_a_trusted_peer_names_the_client(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    srv = _one_post_each(base, tmp, "--forwarded-allow-ips", "10.0.0.0/8, 127.0.0.1")
    try:
        assert _budget(srv, {"x-forwarded-for": "198.51.100.1"}) == 400
        assert _budget(srv, {"x-forwarded-for": "198.51.100.2"}) == 400  # another client: its own budget
        assert _budget(srv, {"x-forwarded-for": "198.51.100.1"}) == 429
        # the right-most address that is no trusted proxy: what a client writes to the left is not believed
        assert _budget(srv, {"x-forwarded-for": "203.0.113.9, 198.51.100.1, 10.1.2.3"}) == 429
        assert _budget(srv, {"x-forwarded-for": "203.0.113.8, 198.51.100.4"}) == 400
        assert _budget(srv, {"x-forwarded-for": "203.0.113.7, 198.51.100.4"}) == 429
        assert _budget(srv, {"forwarded": 'for="[2001:db8::1]:4711";proto=https'}) == 400
        assert _budget(srv, {"forwarded": "for=2001:db8:0::1"}) == 429  # the same client, written another way
    finally:
        srv.stop()
    line = wait_for(lambda: srv.lines, "client=198.51.100.2 peer=127.0.0.1 method=POST")
    assert "status=400 " in line


def test_malformed_forwarded_headers_from_a_trusted_peer_fall_back_to_the_peer(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    srv = _one_post_each(base, tmp, "--forwarded-allow-ips", "127.0.0.1")
    try:
        assert _budget(srv, {"x-forwarded-for": "not-an-address"}) == 400  # the peer's budget
        for bad in ["198.51.100.1, junk", "198.51.100.1:99999", "[2001:db8::1", "unknown", "", " , "]:
            assert _budget(srv, {"x-forwarded-for": bad}) == 429, bad
        for bad in ["for=_hidden", "proto=https", "for=198.51.100.1;for=198.51.100.2", 'for="198.51.100.1']:
            assert _budget(srv, {"forwarded": bad}) == 429, bad
        line = wait_for(lambda: srv.lines, "status=429")
        assert "client=127.0.0.1 " in line and "peer=" not in line
    finally:
        srv.stop()


def test_a_trusted_proxy_is_exempt_from_the_per_address_connection_cap(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    for trusted, expect in ((False, 503), (True, 200)):
        srv = Server(base, tmp, *(("--forwarded-allow-ips", "127.0.0.1") if trusted else ()))
        held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(32)]
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == expect
            conn.close()
        finally:
            for s in held:
                s.close()
            srv.stop()


# --- pure parts ----------------------------------------------------------------------------------------------


def test_the_client_address_rule() -> None:
    p = Proxies("127.0.0.1, 10.0.0.0/8, ::1")
    h = lambda name, v: [(name.encode(), v.encode())]  # noqa: E731
    assert p.client("192.0.2.1", h("x-forwarded-for", "198.51.100.1")) == "192.0.2.1"  # untrusted peer
    assert p.client("10.9.9.9", h("x-forwarded-for", "198.51.100.1, 10.0.0.2")) == "198.51.100.1"
    assert p.client("::1", h("x-forwarded-for", "10.0.0.3, 10.0.0.2")) == "10.0.0.3"  # all proxies: the first
    assert (
        p.client("::1", [(b"x-forwarded-for", b"198.51.100.1"), (b"x-forwarded-for", b"198.51.100.2")])
        == "198.51.100.2"
    )
    assert p.client("::1", h("x-forwarded-for", "2001:DB8:0::1")) == "2001:db8::1"  # normalised: one budget
    assert p.client("::1", h("x-forwarded-for", "198.51.100.1:8080")) == "198.51.100.1"
    assert p.client("::1", h("x-forwarded-for", "[2001:db8::2]:8080")) == "2001:db8::2"
    assert p.client("::1", h("forwarded", 'for=198.51.100.1, for="[2001:db8::3]";by=10.0.0.1')) == "2001:db8::3"
    assert p.client("::1", h("x-forwarded-for", "198.51.100.1\x1b[2J")) == "::1"
    assert p.client("::1", h("x-forwarded-for", "1" * 5000)) == "::1"
    with pytest.raises(ValueError):
        Proxies("10.0.0.0/33")
    assert Proxies("*").trusts("203.0.113.1") and not Proxies("*").trusts("?") and not Proxies("").trusts("127.0.0.1")
    assert escaped('a"b\\c\n\x1b\u202e') == "a\\x22b\\x5cc\\x0a\\x1b\\u202e"


def test_metrics_name_each_logged_source_and_when_sync_last_checked_it(ledger: tuple[Path, Path]) -> None:
    tmp, base = ledger
    assert pl(tmp, "keys", "new", "opslog").returncode == 0
    out = pl(tmp, "--ledger", str(base), "publish", str(tmp / "site"), "--key", "opslog", "--origin", "example.org/ops")
    assert out.returncode == 0, out.stderr
    follower = tmp / "follower"
    out = pl(tmp, "--ledger", str(follower), "sync", str(tmp / "site"))
    assert out.returncode == 0, out.stderr
    assert list((follower / "checkpoints").glob("*.json"))  # what sync remembered of the source's log
    srv = Server(follower, tmp)
    try:
        samples = [s for s in srv.metrics().get("pithledger_source_last_success_timestamp_seconds", [])]
        assert [s.labels for s in samples] == [{"source": str(tmp / "site")}]
        assert samples[0].value > 1.7e9
    finally:
        srv.stop()
