"""Review rev-b: faults found in `serve`'s operations (spec/serve.md §9), through real servers on 127.0.0.1."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import servekit
from helpers.site import _env

VECTORS = Path(__file__).resolve().parents[2] / "vectors"
RECORD_DOC = VECTORS / "pith-record-FHIBFT2FCAH6TNYKWKJEBOYM4L.json"
ACTION = "/pith/FHIBFT2FCAH6TNYKWKJEBOYM4L/action/author_attestation"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("revb")
    out = subprocess.run(
        [sys.executable, "-m", "pithledger.cli", "--ledger", str(tmp / "L"), "apply", str(RECORD_DOC)],
        capture_output=True,
        text=True,
        env=_env(tmp),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    yield tmp, tmp / "L"


def _server(tmp: Path, ledger: Path, *extra: str) -> servekit.Server:
    # --access-log /dev/null: nobody reads the server's stderr here
    return servekit.Server(ledger, _env(tmp), "--access-log", "/dev/null", *extra, timeout=60.0)


def _budget(srv: servekit.Server, xff: str) -> int:
    """A POST the rate limit charges before its body is read (then refused 400): 429 once the budget is spent."""
    status, _, _ = srv.request(
        ACTION, "POST", body=b"{}", headers={"content-type": "application/json", "x-forwarded-for": xff}
    )
    return status


def _rate_limited(tmp: Path, ledger: Path, trusted: str) -> servekit.Server:
    return _server(
        tmp,
        ledger,
        "--accept-events",
        "--post-burst",
        "1",
        "--post-rate",
        "0.001",
        "--post-total-rate",
        "1000",
        "--forwarded-allow-ips",
        trusted,
    )


def test_star_does_not_lift_the_per_address_connection_cap_for_every_peer(ledger: tuple[Path, Path]) -> None:
    """`--forwarded-allow-ips '*'` trusts every peer's headers; it must not also exempt every peer from the
    per-address connection cap (spec/serve.md §4): one client would hold the whole total cap."""
    tmp, base = ledger
    srv = _server(tmp, base, "--forwarded-allow-ips", "*")
    held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(32)]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 503
        conn.close()
    finally:
        for s in held:
            s.close()
        srv.stop()


def test_an_ipv4_mapped_hop_of_a_trusted_proxy_is_trusted_and_clients_are_normalised(
    ledger: tuple[Path, Path],
) -> None:
    """A dual-stack proxy writes `::ffff:10.0.0.2`: that is 10.0.0.2, a trusted proxy, not the client (else every
    client behind it shares one budget); `::ffff:198.51.100.1` and `198.51.100.1` are one client."""
    tmp, base = ledger
    srv = _rate_limited(tmp, base, "127.0.0.1, 10.0.0.0/8")
    try:
        assert _budget(srv, "198.51.100.1, ::ffff:10.0.0.2") == 400
        assert _budget(srv, "198.51.100.2, ::ffff:10.0.0.2") == 400  # another client behind the same proxy
        assert _budget(srv, "::ffff:198.51.100.3") == 400
        assert _budget(srv, "198.51.100.3") == 429  # the same client, written another way
    finally:
        srv.stop()


def test_a_scoped_ipv6_element_is_no_new_client(ledger: tuple[Path, Path]) -> None:
    """`2001:db8::1%anything` (a zone index, meaningless off-link) must not make a budget per zone text."""
    tmp, base = ledger
    srv = _rate_limited(tmp, base, "127.0.0.1")
    try:
        assert _budget(srv, "2001:db8::1%a") == 400
        assert _budget(srv, "2001:db8::1%b") == 429
    finally:
        srv.stop()


def test_ipv6_clients_of_one_slash_64_share_a_budget(ledger: tuple[Path, Path]) -> None:
    """One IPv6 subscriber holds a /64: keyed by the whole address, each of its 2**64 addresses has its own
    per-client budget (and MAX_CLIENTS of them clear every client's bucket)."""
    tmp, base = ledger
    srv = _rate_limited(tmp, base, "127.0.0.1")
    try:
        assert _budget(srv, "2001:db8::1") == 400
        assert _budget(srv, "2001:db8::2") == 429
    finally:
        srv.stop()
