"""``serve --accept-events``: the action endpoints (``POST /pith/<suffix>/action/<kind>``), spec/serve.md §8.

A POSTed signed event (or event bundle about the record) is read under the rules ``apply`` reads a
bundle by (strict JSON, spec/bundle.md structure), checked event by event exactly as a ledger batch
checks it, and, when every event of the request is valid, appended through **one writer thread** that
owns the server's writing ledger handle: requests that arrive while it writes form the next group,
committed as one durable LMDB transaction (group commit, spec/adr/0010-action-endpoints.md). The LMDB
writer lock is taken per group, never held between groups, so an ``apply`` in another process still
runs; a request whose group waited longer than the bounded wait for that lock is answered 503 and is
withdrawn before anything is written. A refused request keeps nothing: no log entry, no evidence.

IO stays at the edges: the handler (on the event loop) reads and bounds the body, the writer thread
owns every write; checking is :func:`pithledger.records.events.check_event` on the event's canonical bytes.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ipaddress
import math
import re
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import lmdb
import msgspec

from pithledger.errors import ActionError, LedgerError, PithledgerError
from pithledger.fanout import Fanout
from pithledger.records.bundle import BUNDLE_TYPE, BUNDLE_VERSION, Bundle, read_bundle
from pithledger.records.canonical import canonical_bytes, strict_decode
from pithledger.records.events import MAX_EVENT_BYTES, Verdict, check_event, claimed_event_id, subject_of
from pithledger.render.record_doc import ACTIONS
from pithledger.store import BatchWithdrawn, Ledger

#: The event kinds an action URL names (the record document's ``agent_actions.actions``).
ACTION_KINDS = frozenset(ACTIONS.values())
#: The largest body read: one event at the ledger's limit (1 MiB canonical) plus a bundle's own keys
#: (type, version, number, an optional record and its aliases): 128 KiB is far more than they take.
MAX_BODY = MAX_EVENT_BYTES + 128 * 1024
#: Events one request may carry (a bundle of events about the record); each is one event to check.
MAX_EVENTS = 64
#: The ``{``, ``[`` and ``,`` one body may hold outside strings: a bound on its JSON values (each value but
#: the first opens a container or follows a comma). What a body costs to decode and check grows with its
#: values (a Python object and a step of each walk per value), not with its bytes: a 1 MiB body of empty
#: arrays cost ~0.35 s of the event loop and the writer. A real action event holds about 21, a full bundle
#: of MAX_EVENTS about 1,100. Local policy of the HTTP edge (spec/serve.md §8), not what ``apply`` accepts.
MAX_BODY_VALUES = 16_384
#: Events a group commit takes at most (one LMDB transaction); the rest wait for the next one.
MAX_GROUP_EVENTS = 4096
#: Seconds a client has to send its body once its head arrived (a slow body holds a connection).
BODY_SECONDS = 30.0
#: Clients whose rate is remembered; beyond it the table is emptied (each then starts with a full burst).
MAX_CLIENTS = 10_000

_decode = msgspec.json.Decoder()
# One JSON string (or an unterminated one, to the end: every '"' outside a string starts a match, so one scan
# is linear whatever the escapes), or one structural byte.
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\(?:.|\Z))*+(?:"|\Z)|[,\[{]', re.S)


def too_structured(body: bytes, limit: int = MAX_BODY_VALUES) -> bool:
    """Whether ``body`` holds more than ``limit`` of ``{``, ``[`` and ``,`` outside JSON strings: found before any
    decoding, at C speed. Counted with ``bytes.count`` first (inside strings too: an upper bound), and only
    when that passes ``limit`` (text full of commas) token by token, stopping once past it. A JSON text (and
    each of its prefixes) holds at most 1 + 2n strings for n such bytes (a string is the root, a key or an
    array element after one of them, or a member's value after its key's colon): past 3 * limit + 1 tokens
    the body is not JSON, and the decoder refuses it where it stops being JSON, before it has built more."""
    if body.count(b",") + body.count(b"[") + body.count(b"{") <= limit:
        return False
    n = tokens = 0
    for m in _TOKEN.finditer(body):
        tokens += 1
        if body[m.start()] != 0x22:  # not a string: a structural byte
            n += 1
            if n > limit:
                return True
        elif tokens > 3 * limit + 1:
            break
    return False


@dataclass(frozen=True)
class Limits:
    """Local policy of one server (never consensus): rates in requests per second."""

    client_rate: float = 5.0
    client_burst: int = 20
    total_rate: float = 200.0
    total_burst: int = 400
    lock_wait: float = 5.0  # seconds a request waits for the writer lock (another process's apply) before 503
    max_queued: int = 2048  # requests waiting for the writer; beyond it 503


# --- rate limits -------------------------------------------------------------------------------------


def rate_key(client: str) -> str:
    """Whose budget a client address spends: an IPv4 address its own, an IPv6 address its /64 (one
    subscriber is routed a whole /64 and could otherwise rotate through its addresses for fresh budgets)."""
    try:
        ip = ipaddress.ip_address(client)
    except ValueError:
        return client  # not an address (a test's or a socket's name): itself
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class RateLimit:
    """Token buckets: per client (by address; an IPv6 client by its /64, :func:`rate_key`) and in total.
    ``take`` returns 0 when both allow the request (and charges both), else the seconds until they would
    (charging nothing)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._clients: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self._total = (float(limits.total_burst), time.monotonic())
        self._lock = threading.Lock()

    @staticmethod
    def _refill(state: tuple[float, float], rate: float, burst: int, now: float) -> float:
        tokens, at = state
        return min(float(burst), tokens + (now - at) * rate)

    def take(self, client: str, now: float | None = None) -> float:
        client = rate_key(client)
        lim = self.limits
        now = time.monotonic() if now is None else now
        with self._lock:
            mine = self._refill(
                self._clients.get(client, (float(lim.client_burst), now)), lim.client_rate, lim.client_burst, now
            )
            total = self._refill(self._total, lim.total_rate, lim.total_burst, now)
            wait = max(
                0.0 if mine >= 1 else (1 - mine) / lim.client_rate, 0.0 if total >= 1 else (1 - total) / lim.total_rate
            )
            if wait > 0:
                return wait
            if client not in self._clients and len(self._clients) >= MAX_CLIENTS:
                self._clients.clear()  # bounded memory; a client forgotten starts again with a full burst
            self._clients[client] = (mine - 1, now)
            self._total = (total - 1, now)
            return 0.0


# --- the writer --------------------------------------------------------------------------------------


class ServingLedger(Ledger):
    """The server's one writing handle (py-lmdb refuses an environment opened twice in a process, so
    reads share it). Its pure work runs in place (ledger/fanout.py): forking a server's threads is not
    safe, and a request's events are few. Growing the map happens under ``gate``, which every read of the server holds
    (LMDB: no transaction of this process may be open while the map is resized)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.gate = threading.RLock()
        kwargs.setdefault("fanout", Fanout.in_place())
        super().__init__(*args, grow_gate=self.gate, **kwargs)


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class _Item:
    bundle: Bundle
    kind: str
    future: Future[Answer] = field(default_factory=Future)
    verdicts: list[Verdict] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    claimed: bool = False
    cancelled: bool = False


def _event_doc(v: Verdict, status: str) -> dict[str, Any]:
    return {
        "event_id": v.event_id,
        "event_type": v.event_type,
        "subject": v.subject,
        "status": status,
        "reason": v.reason,
        "message": v.message,
        "trust": v.trust,
        "signer_key": v.signer_key,
    }


def verdict_of(event: dict[str, Any]) -> Verdict:
    """The verdict a ledger batch gives this event: every step of spec/events.md §2.2 on its canonical
    bytes, decoded plainly (as ``Batch`` does on its workers)."""
    data = canonical_bytes(event)
    return check_event(_decode.decode(data), event_id=claimed_event_id(event) or None, size=len(data))


class Writer:
    """The thread that owns every write of the server: it drains the queue of checked requests, one
    group (one LMDB write transaction) at a time, and derives what is pending while it is idle."""

    def __init__(self, ledger: ServingLedger, limits: Limits) -> None:
        self.ledger = ledger
        self.limits = limits
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._stop = False
        self._pending_work = True  # a killed apply may have left work: derive it while idle
        self.groups = 0  # group commits done (bench)
        self._thread = threading.Thread(target=self._run, name="pithledger-writer", daemon=True)
        self._thread.start()

    def submit(self, item: _Item) -> None:
        with self._cond:
            if len(self._queue) >= self.limits.max_queued:
                raise ActionError(
                    503,
                    "busy",
                    f"{len(self._queue):,} submissions are waiting to be written; try again shortly",
                    {"retry-after": "1"},
                )
            self._queue.append(item)
            self._cond.notify()

    def cancel(self, item: _Item) -> bool:
        """Withdraw a request whose wait ran out; False when its group already holds the writer lock
        (its answer follows shortly)."""
        with self._cond:
            if item.claimed:
                return False
            item.cancelled = True
            return True

    def close(self, timeout: float = 10.0) -> bool:
        """Stop after the queued groups; False when the thread is still blocked (on another process's
        writer lock) after ``timeout``: the ledger must then be left open."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop and not self._pending_work:
                    self._cond.wait()
                if not self._queue and not self._stop:  # idle with work pending: a short pause, so that a running
                    self._cond.wait(0.2)  # apply's own finishing is not raced step for step
                if self._stop and not self._queue:
                    return
                group: list[_Item] = []
                events = 0
                while self._queue and events < MAX_GROUP_EVENTS:
                    item = self._queue.popleft()
                    if not item.cancelled:
                        group.append(item)
                        events += len(item.bundle.events)
            try:
                if group:
                    self._commit(group)
                if self._pending_work:  # one step between groups: derivation never starves under load
                    self._derive_step()
            except BaseException:  # noqa: BLE001 - the writer must outlive any one group; the log gets the traceback
                traceback.print_exc(file=sys.stderr)
                for item in group:
                    _resolve(
                        item, Answer(500, {"error": "server-error", "message": "the submission could not be written"})
                    )
                time.sleep(0.1)

    def _derive_step(self) -> None:
        """One transaction of pending derivation (spec/storage.md §3.1), between groups."""
        try:
            if self.ledger.pending():
                self.ledger.finish(steps=1)
            self._pending_work = self.ledger.pending() > 0
        except PithledgerError:
            traceback.print_exc(file=sys.stderr)
            self._pending_work = False  # retried after the next group

    def _commit(self, group: list[_Item]) -> None:
        live = _verified(group)
        while live:
            defer = self.ledger.pending() > 0  # someone else's pending work: derive it between groups, not in ours
            batch = self.ledger.batch()
            try:
                for item in live:
                    batch.add(item.bundle, signatures_verified=True)  # checked just above, these exact bytes
            except BaseException:
                batch.abandon()
                raise
            try:
                result = batch.commit(defer=defer, admit=functools.partial(self._admit, live))
            except BatchWithdrawn:
                live = [item for item in live if not item.cancelled]  # the others try again at once
                continue
            except LedgerError as exc:
                for item in live:
                    _resolve(
                        item,
                        Answer(
                            503, {"error": exc.code, "message": f"not written: {exc.message}"}, {"retry-after": "30"}
                        ),
                    )
                return
            self.groups += 1
            if defer or result.rejected:
                self._pending_work = True
            _accepted(live)
            return

    def _admit(self, live: list[_Item], txn: lmdb.Transaction) -> bool:
        """The group's commit, in its write transaction: claim the group, unless a request gave up; then each
        event's status, new or duplicate."""
        with self._cond:  # the writer lock is ours now: claim the group, unless a request gave up
            if any(item.cancelled for item in live):
                return False
            for item in live:
                item.claimed = True
        seen: set[str] = set()
        for item in live:  # in the write transaction: nobody else can add an event meanwhile
            item.statuses = []
            for v in item.verdicts:
                held = v.event_id in seen or self.ledger.holds(txn, v.event_id)
                item.statuses.append("duplicate" if held else "new")
                seen.add(v.event_id)
        return True


def _verified(group: list[_Item]) -> list[_Item]:
    """The items of ``group`` whose every event is valid; each other one is answered 422 (its first refusal)."""
    live = []
    for item in group:
        item.verdicts = [verdict_of(e) for e in item.bundle.events]
        if all(v.status == "valid" for v in item.verdicts):
            live.append(item)
            continue
        refused = [v for v in item.verdicts if v.status != "valid"]
        docs = [_event_doc(v, v.status if v.status != "valid" else "not-written") for v in item.verdicts]
        _resolve(
            item,
            Answer(
                422,
                {
                    "error": refused[0].reason,
                    "message": refused[0].message,
                    "result": "refused",
                    "pith_number": item.bundle.pith_number,
                    "action": item.kind,
                    "events": docs,
                },
            ),
        )
    return live


def _accepted(live: list[_Item]) -> None:
    """Each item of a committed group answered: 201 when it added an event, else 200 (all held already)."""
    for item in live:
        new = "new" in item.statuses
        docs = [_event_doc(v, s) for v, s in zip(item.verdicts, item.statuses, strict=True)]
        _resolve(
            item,
            Answer(
                201 if new else 200,
                {
                    "result": "accepted" if new else "held",
                    "pith_number": item.bundle.pith_number,
                    "action": item.kind,
                    "events": docs,
                },
            ),
        )


def _resolve(item: _Item, answer: Answer) -> None:
    if not item.future.done():
        item.future.set_result(answer)


# --- the request -------------------------------------------------------------------------------------


def request_bundle(body: bytes, subject: str, kind: str) -> Bundle:
    """The events a request body carries, checked as ``apply`` checks a bundle's structure, and
    bound to the URL: every event about ``subject`` and of ``kind`` (else 400). Only the events are
    kept: a bundle's unknown top-level fields are not stored from a public endpoint."""
    if too_structured(body):  # before decoding: what the rest costs grows with this
        raise ActionError(
            413,
            "too-many-values",
            f"the body holds more than {MAX_BODY_VALUES:,} of '{{', '[' and ',' outside strings "
            "(an action event holds a few dozen); send fewer events per request, or give the bundle to the mirror's "
            "operator to apply",
        )
    try:
        value = strict_decode(body, max_bytes=MAX_BODY, what="the request body")
    except PithledgerError as exc:
        raise ActionError(413 if exc.code == "document-too-large" else 400, exc.code, exc.message) from None
    if isinstance(value, dict) and "bundle_type" not in value:
        if "record_type" in value:
            raise ActionError(
                400, "bad-bundle", "a record document is not an action: POST a signed event, or an event bundle"
            )
        try:
            number = subject_of(value)
        except PithledgerError as exc:
            raise ActionError(
                400, "bad-bundle", f"the body is neither a signed event nor a bundle: {exc.message}"
            ) from None
        value = {"bundle_type": BUNDLE_TYPE, "bundle_version": BUNDLE_VERSION, "pith_number": number, "events": [value]}
    try:
        bundle = read_bundle(value)
    except PithledgerError as exc:
        raise ActionError(400, exc.code, exc.message) from None
    if bundle.pith_number != subject:
        raise ActionError(
            400, "subject-mismatch", f"the events are about {bundle.pith_number}, but this action URL is {subject}'s"
        )
    if not bundle.events:
        raise ActionError(400, "no-events", "the bundle carries no events")
    if len(bundle.events) > MAX_EVENTS:
        raise ActionError(
            400, "too-many-events", f"{len(bundle.events):,} events; one request carries at most {MAX_EVENTS}"
        )
    for i, event in enumerate(bundle.events):
        if event.get("event_type") != kind:
            shown = event.get("event_type")
            raise ActionError(
                400,
                "kind-mismatch",
                f"events[{i}] is of kind {str(shown)[:60]!r}, but this action URL takes {kind} events",
            )
    return Bundle(pith_number=bundle.pith_number, events=bundle.events)


class Actions:
    """What ``serve --accept-events`` adds to a site: the limits and the writer."""

    def __init__(self, ledger: ServingLedger, limits: Limits) -> None:
        self.limits = limits
        self.rates = RateLimit(limits)
        self.writer = Writer(ledger, limits)

    def close(self) -> bool:
        return self.writer.close(max(10.0, self.limits.lock_wait * 2))

    def check_head(self, client: str, content_length: str | None) -> None:
        """Before the body is read: its declared length (413), then the rate limits (429)."""
        if content_length is not None:
            if not content_length.isdigit() or len(content_length) > 18:
                raise ActionError(400, "bad-request", "Content-Length is not a decimal length")
            if int(content_length) > MAX_BODY:
                raise ActionError(
                    413,
                    "body-too-large",
                    f"the body is {int(content_length):,} bytes; an action takes at most {MAX_BODY:,} "
                    "(one event of at most 1 MiB in a bundle)",
                    {"connection": "close"},
                )
        wait = self.rates.take(client)
        if wait > 0:
            raise ActionError(
                429,
                "rate-limited",
                "too many submissions; wait before sending more",
                {"retry-after": str(max(1, math.ceil(wait)))},
            )

    async def submit(self, bundle: Bundle, kind: str) -> Answer:
        item = _Item(bundle=bundle, kind=kind)
        self.writer.submit(item)
        waiting = asyncio.wrap_future(item.future)
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout=self.limits.lock_wait)
        except TimeoutError:
            if self.writer.cancel(item):
                retry = str(max(1, math.ceil(self.limits.lock_wait)))
                return Answer(
                    503,
                    {
                        "error": "ledger-busy",
                        "message": f"another process held the ledger's write lock for more than "
                        f"{self.limits.lock_wait:g} s (a long apply or sync); nothing was written",
                    },
                    {"retry-after": retry},
                )
            return await waiting  # its group holds the lock: the commit is under way


async def read_body(receive_stream: Any) -> bytes:
    """The body, counted while it streams (a chunked body declares no length): 413 past MAX_BODY."""
    body = bytearray()

    async def read() -> None:
        async for chunk in receive_stream:
            body.extend(chunk)
            if len(body) > MAX_BODY:
                raise ActionError(
                    413,
                    "body-too-large",
                    f"the body is over {MAX_BODY:,} bytes; an action takes at most that",
                    {"connection": "close"},
                )

    try:
        await asyncio.wait_for(read(), timeout=BODY_SECONDS)
    except TimeoutError:
        raise ActionError(
            408, "body-timeout", f"the body did not arrive within {BODY_SECONDS:g} s", {"connection": "close"}
        ) from None
    return bytes(body)


# --- the client side (``pithledger submit``, ``event --post``) ----------------------------------------

#: Bytes of a mirror's answer read (its verdicts of at most MAX_EVENTS events are far smaller).
MAX_ANSWER = 1024 * 1024
#: Tries of one event when the mirror answers 429 or 503 (busy), and the pause before each retry.
TRIES = 3
RETRY_PAUSE = 1.0


def action_url(url: str, pith_number: str, kind: str) -> str:
    """Where an event goes: a URL pattern with ``{suffix}`` and/or ``{kind}`` filled in, else a mirror
    base URL + ``/pith/<suffix>/action/<kind>``."""
    from pithledger.records.ids import suffix_of_pith_number

    suffix = suffix_of_pith_number(pith_number)
    if "{suffix}" in url or "{kind}" in url:
        return url.replace("{suffix}", suffix).replace("{kind}", kind)
    return url.rstrip("/") + f"/pith/{suffix}/action/{kind}"


def post_event(
    client: Any, url: str, event: dict[str, Any], *, timeout: float, deadline: Any, sleep: Any = time.sleep
) -> dict[str, Any]:
    """POST one event (as an event bundle) to its action URL; its verdict as the mirror gave it:
    ``status`` new, duplicate, invalid, unverified, or refused (any other answer), with ``http_status``,
    ``reason`` and ``message``. A mirror that answers 429 or 503 is tried again (TRIES in all)."""
    from pithledger.records.bundle import write_bundle

    number = event.get("subject_pith_number")
    body = canonical_bytes(write_bundle(str(number), [event])) + b"\n"
    declared = event.get("event_id")
    out: dict[str, Any] = {
        "event_id": declared if isinstance(declared, str) else "",
        "event_type": event.get("event_type"),
        "subject": number,
        "url": url,
    }
    for attempt in range(TRIES):
        resp = client.post(url, body, timeout=timeout, deadline=deadline, max_bytes=MAX_ANSWER)
        if resp.status in (429, 503) and attempt + 1 < TRIES:
            sleep(RETRY_PAUSE * (attempt + 1))
            continue
        break
    try:
        answer = _decode.decode(resp.body)
    except msgspec.DecodeError:
        answer = None
    answer = answer if isinstance(answer, dict) else {}
    events = answer.get("events")
    first = events[0] if isinstance(events, list) and events and isinstance(events[0], dict) else {}
    out["http_status"] = resp.status
    if resp.status in (200, 201, 422) and first.get("status") in ("new", "duplicate", "invalid", "unverified"):
        out.update(status=first["status"], reason=str(first.get("reason", "")), message=str(first.get("message", "")))
        if first["status"] in ("new", "duplicate") and isinstance(first.get("event_id"), str):
            out["event_id"] = first["event_id"]
    else:
        code = answer.get("error")
        out.update(
            status="refused",
            reason=code if isinstance(code, str) else f"http-{resp.status}",
            message=str(answer.get("message", f"the mirror answered HTTP {resp.status}"))[:500],
        )
    return out
