"""`pull` from Pith-shaped mirrors (spec/pull.md): a real loopback server exposing only Pith's paths,
real LMDB ledgers, the real records and demo events of bundles/."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.pith_site import PithSite
from helpers.pull import same_as_truth
from pithledger.errors import NotFound, RedirectRefused, SourceProtocolError, SourceTooLarge
from pithledger.mirror.http11 import Client
from pithledger.mirror.pull import RateLimit, pull, targets_of_args
from pithledger.mirror.transport import Deadline
from pithledger.records import ids
from pithledger.store import Ledger

# --- a ground truth ledger and the records in it ----------------------------------------------------


def mixed_ids(truth: dict[str, Any]) -> list[str]:
    """Every record once, in every ID form a user may type: arXiv ids (resolved by the server), DOIs,
    short Pith Numbers, bare 8-character suffixes, long Pith Numbers and 26-character suffixes."""
    out = []
    for i, (number, arxiv) in enumerate(sorted(truth["arxiv"].items())):
        suffix = ids.suffix_of_pith_number(number)
        out.append([arxiv, f"10.48550/arXiv.{arxiv}", f"pith:{suffix[:8]}", suffix[:12].lower(), number, suffix][i % 6])
    return out


# --- the happy path, through the command line --------------------------------------------------------


def test_pull_of_every_record_equals_apply_and_a_rerun_fetches_nothing_new(
    cli: Any, tmp_path: Path, truth: dict[str, Any]
) -> None:
    idfile = tmp_path / "ids.txt"
    n = len(truth["states"])
    idfile.write_text("# every record, in every form\n\n" + "\n".join(mixed_ids(truth)) + "\n")
    with PithSite(truth["bundles"]) as site:
        first = cli(
            "--ledger", str(tmp_path / "l"), "pull", site.base_url, "--ids", str(idfile), "--rate", "0", "--json"
        )
        assert first.code == 0, first.err
        report = first.json()
        assert report["records_fetched"] == n and report["ids"] == n
        assert report["new"] == sum(len(json.loads(b)["events"]) for b in truth["bundles"].values())
        assert report["skipped"] == report["lying"] == report["unresolved"] == report["not_published"] == []
        # arXiv ids, DOIs and short forms go through the resolver; long numbers and 26-char suffixes do not
        resolved = sum(
            1 for i in mixed_ids(truth) if ids.parse_id(i).kind in ("arxiv", "doi") or len(ids.parse_id(i).suffix) < 26
        )
        assert 0 < resolved < n and site.requests["/api/pith-number/resolve"] == resolved
        assert report["requests"] == sum(site.requests.values()) == 1 + resolved + n
        # keep-alive: one connection per worker (4) and the manifest's, for all those requests
        assert site.connections <= 5 and report["connections_opened"] == site.connections
        with Ledger(tmp_path / "l", readonly=True) as ledger:
            same_as_truth(ledger, truth)
            assert ledger.root() == truth["root"]
        bodies = site.requests["/api/pith-number/resolve"]
        second = cli(
            "--ledger", str(tmp_path / "l"), "pull", site.base_url, "--rate", "0", "--json"
        )  # no IDs: all held
        assert second.code == 0, second.err
        again = second.json()
        assert (again["ids"], again["unchanged"], again["records_fetched"], again["new"], again["batches"]) == (
            n,
            n,
            0,
            0,
            0,
        )
        assert site.requests["/api/pith-number/resolve"] == bodies  # the ledger resolves what it holds
        text = cli("--ledger", str(tmp_path / "l"), "pull", site.base_url, *mixed_ids(truth)[:6], "--rate", "0")
        assert text.code == 0, text.err
        assert "nothing new" in text.out and "6 unchanged" in text.out
    digest = cli("--ledger", str(tmp_path / "l"), "digest", "--json").json()
    assert (digest["events_root"], digest["states_root"]) == (truth["root"].events.hex(), truth["root"].states.hex())


def test_a_changed_body_is_applied_again_and_a_server_without_etags_is_checked_by_hash(
    tmp_path: Path, truth: dict[str, Any]
) -> None:
    numbers = sorted(truth["arxiv"])[:5]
    with PithSite(truth["bundles"], etags=False) as site, Ledger(tmp_path / "l", create=True) as ledger:
        assert pull(ledger, site.base_url, targets_of_args(numbers), rate=0)["records_fetched"] == 5
        rerun = pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert (rerun["records_fetched"], rerun["unchanged"]) == (0, 5)  # the bodies came again; their hashes matched
        suffix = ids.suffix_of_pith_number(numbers[0])
        doc = json.loads(site.bundles[suffix])
        doc["x_note"] = "republished"
        site.bundles[suffix] = json.dumps(doc).encode()
        changed = pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert (changed["records_fetched"], changed["unchanged"], changed["new"], changed["duplicate"]) == (
            1,
            4,
            0,
            len(doc["events"]),
        )
        same_as_truth(ledger, truth, set(numbers))


# --- hostile servers ---------------------------------------------------------------------------------


def test_each_hostile_answer_is_named_per_record_and_the_rest_are_pulled(tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])
    suffix = {n: ids.suffix_of_pith_number(n) for n in numbers}
    hang, e500, garbage, oversize, other, missing, lied_about, liar_target = numbers[:8]
    faults = {
        suffix[hang]: "hang",
        suffix[e500]: "500",
        suffix[garbage]: "garbage",
        suffix[oversize]: "oversize",
        suffix[other]: f"other:{suffix[numbers[-1]]}",
        suffix[missing]: "missing",
    }
    # the resolver names liar_target's record for lied_about's arXiv id
    resolve = {truth["arxiv"][lied_about]: liar_target}
    wanted = [truth["arxiv"][n] for n in numbers] + ["2101.99999"]  # every record by arXiv id, and one nobody has
    with (
        PithSite(truth["bundles"], faults=faults, resolve=resolve) as site,
        Ledger(tmp_path / "l", create=True) as ledger,
    ):
        report = pull(ledger, site.base_url, targets_of_args(wanted), rate=0, timeout=1.0)
        named = {
            k: sorted((d["id"], d.get("reason")) for d in report[k])
            for k in ("skipped", "lying", "unresolved", "not_published")
        }
        a = truth["arxiv"]
        assert named["skipped"] == sorted(
            [
                (a[hang], "bad-source"),
                (a[e500], "bad-source"),
                (a[garbage], "malformed-json"),
                (a[oversize], "bad-source"),
            ]
        )
        assert named["lying"] == sorted([(a[other], "lying"), (a[lied_about], "lying")])
        assert named["unresolved"] == [("2101.99999", "unresolved")]
        assert named["not_published"] == [(a[missing], None)]
        messages = {d["id"]: d["message"] for d in report["skipped"] + report["lying"]}
        assert (
            "within 1 s" in messages[a[hang]] and "HTTP 500" in messages[a[e500]] and "limit" in messages[a[oversize]]
        )
        assert f"is about {numbers[-1]}" in messages[a[other]]
        assert f"arXiv {a[liar_target]}" in messages[a[lied_about]]
        failed = {hang, e500, garbage, oversize, other, missing, lied_about}
        same_as_truth(ledger, truth, set(numbers) - failed)
        for n in failed:  # nothing of a lying or broken answer was applied
            with pytest.raises(NotFound):
                ledger.resolve(n)


def test_the_command_names_a_lie_and_exits_1(cli: Any, tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])
    with PithSite(
        truth["bundles"],
        faults={ids.suffix_of_pith_number(numbers[0]): f"other:{ids.suffix_of_pith_number(numbers[1])}"},
    ) as site:
        r = cli("--ledger", str(tmp_path / "l"), "pull", site.base_url, numbers[0], numbers[1], "--rate", "0")
    assert r.code == 1
    assert f"lying          {numbers[0]}: the bundle is about {numbers[1]}, not {numbers[0]}" in r.out
    assert "1 lying" in r.out and "Traceback" not in r.err


def test_an_unresolved_id_is_named_and_exits_1(cli: Any, tmp_path: Path, truth: dict[str, Any]) -> None:
    number = sorted(truth["arxiv"])[0]
    with PithSite(truth["bundles"]) as site:  # its resolver answers 404 for a paper it does not hold
        r = cli("--ledger", str(tmp_path / "l"), "pull", site.base_url, "2101.99999", number, "--rate", "0")
    assert r.code == 1, r.out + r.err  # an ID asked for and not pulled (spec/pull.md §5); it was 0
    assert "unresolved     2101.99999: no mirror resolved it" in r.out and "1 unresolved" in r.out
    with Ledger(tmp_path / "l", readonly=True) as ledger:
        same_as_truth(ledger, truth, {number})


def test_an_id_named_on_the_command_line_and_not_published_exits_1(
    cli: Any, tmp_path: Path, truth: dict[str, Any]
) -> None:
    held, missing = sorted(truth["arxiv"])[:2]
    faults = {ids.suffix_of_pith_number(missing): "missing"}  # the source publishes no bundle of it
    listing = tmp_path / "ids.txt"
    listing.write_text(f"{held}\n{missing}\n")
    with PithSite(truth["bundles"], faults=faults) as site:
        named = cli("--ledger", str(tmp_path / "a"), "pull", site.base_url, held, missing, "--rate", "0")
        listed = cli("--ledger", str(tmp_path / "b"), "pull", site.base_url, "--ids-from", str(listing), "--rate", "0")
    # named: asked for and not pulled (issue #41 item 7; it was 0); from --ids-from: the source's fact, counted
    assert named.code == 1 and f"not published  {missing}" in named.out, named.out + named.err
    assert listed.code == 0 and f"not published  {missing}" in listed.out, listed.out + listed.err
    for name in ("a", "b"):
        with Ledger(tmp_path / name, readonly=True) as ledger:
            same_as_truth(ledger, truth, {held})


def test_the_run_deadline_stops_the_run_and_keeps_what_was_applied(tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])
    faults = {ids.suffix_of_pith_number(n): "hang" for n in numbers[10:]}
    with PithSite(truth["bundles"], faults=faults) as site, Ledger(tmp_path / "l", create=True) as ledger:
        report = pull(ledger, site.base_url, targets_of_args(numbers), rate=0, connections=1, timeout=10, deadline=4.0)
        assert report["stopped"] and "deadline" in report["stopped"]
        assert report["records_fetched"] == 10 and report["not_tried"] == len(numbers) - 10
        same_as_truth(ledger, truth, set(numbers[:10]))


# --- fallbacks -----------------------------------------------------------------------------------


def test_well_known_is_used_when_bundle_pattern_404s(tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])[:6]
    odd = {ids.suffix_of_pith_number(n): "no-primary" for n in numbers[::2]}
    with PithSite(truth["bundles"], faults=odd) as site, Ledger(tmp_path / "l", create=True) as ledger:
        report = pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert report["records_fetched"] == 6 and report["not_published"] == []
        same_as_truth(ledger, truth, set(numbers))
        assert sorted(p for p in site.requests if p.startswith("/.well-known/")) == sorted(
            f"/.well-known/pith/{s}/bundle.json" for s in odd
        )
        again = pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert (again["unchanged"], again["records_fetched"]) == (6, 0)  # the well-known answers are cached too


def test_a_second_mirror_serves_what_the_primary_lacks(tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])[:8]
    lacking = {ids.suffix_of_pith_number(n): "missing" for n in numbers[:3]}
    with (
        PithSite(truth["bundles"], faults=lacking) as a,
        PithSite(truth["bundles"]) as b,
        Ledger(tmp_path / "l", create=True) as ledger,
    ):

        def entry(site: PithSite, status: str) -> dict[str, Any]:
            return {
                "name": status,
                "base_url": site.base_url,
                "status": status,
                "bundle_pattern": f"{site.base_url}/pith/{{suffix}}/bundle.json",
                "well_known_pattern": f"{site.base_url}/.well-known/pith/{{suffix}}/bundle.json",
            }

        a.mirrors = [entry(b, "mirror"), entry(a, "primary")]  # the primary is tried first wherever it is listed
        report = pull(ledger, a.base_url, targets_of_args(numbers), rate=0)
        assert report["mirrors"] == ["primary", "mirror"]
        assert report["records_fetched"] == 8 and report["not_published"] == []
        same_as_truth(ledger, truth, set(numbers))
        assert sorted(p for p in b.requests if p.startswith("/pith/")) == sorted(
            f"/pith/{s}/bundle.json" for s in lacking
        )


# --- the manifest ------------------------------------------------------------------------------------


def test_a_bad_source_is_a_named_error_on_the_command_line(cli: Any, tmp_path: Path) -> None:
    r = cli("--ledger", str(tmp_path / "l"), "pull", str(tmp_path / "nowhere"), "2605.00424")
    assert r.code == 1 and r.err.startswith("error[bad-manifest]: no mirror manifest at") and "hint:" in r.err
    (tmp_path / "ids").write_text("2605.00424\nnot an id at all\n")
    r = cli("--ledger", str(tmp_path / "l"), "pull", str(tmp_path), "--ids", str(tmp_path / "ids"))
    assert r.code == 1 and r.err.startswith("error[malformed-id]: ") and "ids:2: " in r.err
    r = cli("--ledger", str(tmp_path / "empty"), "pull", str(tmp_path))
    assert r.code == 2 and "no IDs to pull" in r.err


# --- IDs -----------------------------------------------------------------------------------------


# --- politeness ------------------------------------------------------------------------------------


def test_pull_goes_through_the_rate_limit_for_every_request(tmp_path: Path, truth: dict[str, Any]) -> None:
    numbers = sorted(truth["arxiv"])[:5]
    limit = RateLimit(0)
    with PithSite(truth["bundles"]) as site, Ledger(tmp_path / "l", create=True) as ledger:
        report = pull(ledger, site.base_url, targets_of_args([truth["arxiv"][n] for n in numbers]), limit=limit)
        assert (
            limit.granted == report["requests"] == sum(site.requests.values()) == 1 + 5 + 5
        )  # manifest, resolver, bundle


# --- the HTTP/1.1 client against scripted servers -----------------------------------------------------


class Scripted:
    """A loopback server answering each request with the next scripted bytes (after reading the
    request head); ``close_after``: close the connection after each answer."""

    def __init__(self, answers: list[bytes], *, close_after: bool = False, hang: bool = False) -> None:
        self.answers = list(answers)
        self.close_after = close_after
        self.hang = hang
        self.done = threading.Event()
        self.accepted = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            if self.hang:
                conn.recv(65536)
                self.done.wait(10)
                return
            buf = b""
            while self.answers:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf.split(b"\r\n\r\n", 1)[1]
                conn.sendall(self.answers.pop(0))
                if self.close_after:
                    return

    def close(self) -> None:
        self.done.set()
        self.sock.close()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def make(answers: list[bytes], **kw: Any) -> Scripted:
        servers.append(Scripted(answers, **kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def test_one_connection_serves_many_requests_and_a_closed_one_is_reopened(scripted: Any) -> None:
    s = scripted([_ok(b"%d" % i) for i in range(10)])
    client = Client()
    got = [client.get(f"{s.url}/{i}", timeout=5, deadline=Deadline(None), max_bytes=100).body for i in range(10)]
    assert got == [b"%d" % i for i in range(10)] and s.accepted == 1 == client.connections_opened
    closing = scripted([_ok(b"a"), _ok(b"b"), _ok(b"c")], close_after=True)  # closes after each answer, unannounced
    got = [client.get(f"{closing.url}/x", timeout=5, deadline=Deadline(None), max_bytes=100).body for _ in range(3)]
    assert got == [b"a", b"b", b"c"] and closing.accepted == 3


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            SourceProtocolError,
            "ambiguous framing",
        ),
        (_ok(b"x", b"Content-Encoding: gzip\r\n"), SourceProtocolError, "Content-Encoding"),
        (_ok(b"x", b"".join(b"X-%d: y\r\n" % i for i in range(101))), SourceProtocolError, "100 header fields"),
        (
            b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
            SourceProtocolError,
            "bytes of header fields|not a valid HTTP/1.1 response",
        ),
        (_ok(b"x" * 101), SourceTooLarge, "limit is 100"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"40\r\n"
            + b"x" * 64
            + b"\r\n"
            + b"40\r\n"
            + b"x" * 64
            + b"\r\n0\r\n\r\n",
            SourceTooLarge,
            "larger than 100",
        ),
        (
            b"HTTP/1.1 302 Found\r\nLocation: http://other.example/\r\nContent-Length: 0\r\n\r\n",
            RedirectRefused,
            "another origin",
        ),
        (b"HTTP/1.1 304 Not Modified\r\n\r\n", SourceProtocolError, "named no ETag"),
        (
            b"HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n",
            SourceProtocolError,
            "not a valid HTTP/1.1 response|switched",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", SourceProtocolError, "not a valid HTTP/1.1 response"),
        (b"garbage\r\n\r\n", SourceProtocolError, "not a valid HTTP/1.1 response"),
    ],
)
def test_hostile_answers_are_named_errors(scripted: Any, answer: bytes, error: type, message: str) -> None:
    s = scripted([answer], close_after=True)
    with pytest.raises(error, match=message):
        Client().get(f"{s.url}/x", timeout=5, deadline=Deadline(None), max_bytes=100)


def test_a_silent_server_is_cut_off_by_the_timeout(scripted: Any) -> None:
    s = scripted([], hang=True)  # accepts, reads, never answers
    with pytest.raises(Exception, match="within 0.3 s"):
        Client().get(f"{s.url}/x", timeout=0.3, deadline=Deadline(None), max_bytes=100)


def test_the_cache_lives_beside_the_ledger_and_removing_it_only_costs_a_refetch(
    tmp_path: Path, truth: dict[str, Any]
) -> None:
    numbers = sorted(truth["arxiv"])[:3]
    with PithSite(truth["bundles"]) as site, Ledger(tmp_path / "l", create=True) as ledger:
        pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert (tmp_path / "l" / "pull-cache" / "data.mdb").exists()
        shutil.rmtree(tmp_path / "l" / "pull-cache")
        again = pull(ledger, site.base_url, targets_of_args(numbers), rate=0)
        assert (again["records_fetched"], again["new"], again["duplicate"]) == (
            3,
            0,
            sum(len(json.loads(truth["bundles"][ids.suffix_of_pith_number(n)])["events"]) for n in numbers),
        )
