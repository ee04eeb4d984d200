"""Commands about serving: serve, submit.
Moved whole from cli/_mirrors.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from pithledger.cli._base import Command, UsageProblem, settings
from pithledger.cli._options import Commands, JsonOption, KeyDirOption, _json, _store
from pithledger.cli._output import emit_json, fail, iter_documents
from pithledger.errors import PithledgerError

command = Commands()


def _wildcard(host: str) -> bool:
    """An address that binds every interface (0.0.0.0, ::, or an empty host)."""
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host.strip() == ""


@command(cls=Command)
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", metavar="ADDR", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port to listen on (0: any free port).")
    ] = 8080,
    base_url: Annotated[
        str,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="The public URL of this mirror, for the manifest, the record JSON and the page's commands [default: the bound address].",
        ),
    ] = "",
    name: Annotated[
        str, typer.Option("--name", metavar="NAME", help="This mirror's name in its manifest.")
    ] = "pithledger mirror",
    key: Annotated[
        Optional[str],
        typer.Option(
            "--key", metavar="NAME", help="Local key whose public part the manifest names; it also signs /checkpoint."
        ),
    ] = None,
    origin: Annotated[
        Optional[str],
        typer.Option(
            "--origin",
            metavar="ORIGIN",
            help="With --key: the log's origin [default: from --base-url, else pithledger/<key fingerprint>].",
        ),
    ] = None,
    key_dir: KeyDirOption = None,
    accept_events: Annotated[
        bool,
        typer.Option(
            "--accept-events",
            help="Also accept signed events at POST /pith/<suffix>/action/<kind> (spec/serve.md §8); off: every POST is 405.",
        ),
    ] = False,
    post_rate: Annotated[
        float,
        typer.Option(
            "--post-rate", metavar="N", min=0.001, help="--accept-events: POSTs per second per client address."
        ),
    ] = 5.0,
    post_burst: Annotated[
        int, typer.Option("--post-burst", metavar="N", min=1, help="--accept-events: POSTs a client may send at once.")
    ] = 20,
    post_total_rate: Annotated[
        float,
        typer.Option(
            "--post-total-rate",
            metavar="N",
            min=0.001,
            help="--accept-events: POSTs per second from all clients (burst: twice that).",
        ),
    ] = 200.0,
    post_wait: Annotated[
        float,
        typer.Option(
            "--post-wait",
            metavar="SECONDS",
            min=0.05,
            max=600,
            help="--accept-events: how long a POST waits for the ledger's write lock (another process's apply) before 503.",
        ),
    ] = 5.0,
    witness_config: Annotated[
        Optional[Path],
        typer.Option(
            "--witness",
            metavar="CONFIG",
            help="Also be a witness (C2SP tlog-witness) of the logs of CONFIG at POST /add-checkpoint (spec/transparency.md §6).",
        ),
    ] = None,
    access_log: Annotated[
        str,
        typer.Option(
            "--access-log",
            metavar="FILE",
            help="Append one line per request (and per POSTed event) to FILE; '-': stderr (spec/serve.md §9.3).",
        ),
    ] = "-",
    forwarded_allow_ips: Annotated[
        str,
        typer.Option(
            "--forwarded-allow-ips",
            metavar="IPS",
            help="Comma-separated proxy addresses or networks (CIDR) whose X-Forwarded-For / Forwarded names the client, for the rate limits and the log (spec/serve.md §9.1); '*' trusts every peer.",
        ),
    ] = "",
) -> None:
    """Serve the ledger over HTTP: record pages, Pith's JSON paths, a resolver for any ID form.

    Paths (spec/serve.md): /pith/<suffix> (HTML, or the record JSON for Accept: application/ld+json),
    /pith/<suffix>/bundle.json, /pith/<suffix>/state.json, /pith/<suffix>/events.json,
    /.well-known/pith/<suffix>/bundle.json, /resolve?id=ID, /pith-mirrors.json, /pith-signing-key.json,
    /digest.json, /events.json, /healthz, /metrics. It reads while `apply` writes in another process.
    One access-log line per request on stderr (or --access-log FILE).
    """
    from pithledger.records.keys import public_key_doc
    from pithledger.web.ops import Proxies
    from pithledger.web.serve import run

    try:
        Proxies(forwarded_allow_ips)
    except ValueError as exc:
        raise UsageProblem(
            f"--forwarded-allow-ips: {exc}", hint="e.g. --forwarded-allow-ips 127.0.0.1,10.0.0.0/8"
        ) from None

    if base_url and not base_url.startswith(("http://", "https://")):
        raise UsageProblem(
            f"--base-url {base_url!r} is not an http(s) URL", hint="e.g. --base-url https://mirror.example.org"
        )
    if not base_url and _wildcard(host):
        # every link, the manifest and the record documents name the base URL: http://0.0.0.0:PORT reaches nobody
        raise UsageProblem(
            f"--host {host} listens on every interface, so the bound address is no URL a client can use",
            hint=f"say where clients reach this mirror: --base-url http://HOSTNAME:{port} (or https://... behind a proxy)",
        )
    from pithledger.cli._tlog import log_signer

    if origin is not None and not key:
        raise UsageProblem("--origin names the log a --key signs", hint="add --key NAME, or leave --origin out")
    mirror_key = None
    log = None
    if key:
        local = _store(key_dir).load(key)
        mirror_key = public_key_doc(local.name, local.public_key)
        log = log_signer(key, origin, base_url, key_dir)  # the origin from --base-url as given, never the bound address
    limits = None
    if accept_events:
        from pithledger.web.actions import Limits

        limits = Limits(
            client_rate=post_rate,
            client_burst=post_burst,
            total_rate=post_total_rate,
            total_burst=max(1, int(post_total_rate * 2)),
            lock_wait=post_wait,
        )
    witness = None
    if witness_config is not None:
        from pithledger.tlog.witness import Witness, load_config

        witness = Witness.from_config(load_config(witness_config), _store(key_dir))
    run(
        settings(ctx).ledger,
        host=host,
        port=port,
        base_url=base_url,
        name=name,
        mirror_key=mirror_key,
        quiet=settings(ctx).quiet,
        accept_events=limits,
        log=log,
        witness=witness,
        access_log=access_log,
        forwarded_allow_ips=forwarded_allow_ips,
    )


@command(cls=Command)
def submit(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="A bundle (or JSON lines of bundles) of signed events, e.g. what `pithledger event` wrote; '-' for stdin.",
        ),
    ],
    url: Annotated[
        str,
        typer.Argument(
            metavar="URL",
            help="A mirror's base URL (events go to URL/pith/<suffix>/action/<kind>), or a URL pattern holding {suffix} and/or {kind}.",
        ),
    ],
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", min=0.1, help="Wall clock for one request.")
    ] = 30.0,
    as_json: JsonOption = False,
) -> None:
    """Post each event of a bundle to the action URL of its record on a mirror (`serve --accept-events`).

    One line per event: new, duplicate, invalid, unverified or refused, with the mirror's reason.
    Exit 1 if any event was refused (or could not be posted).
    """
    from pithledger.records.bundle import read_bundle

    events: list[dict[str, Any]] = []
    for where, value in iter_documents(source):
        try:
            events.extend(read_bundle(value).events)
        except PithledgerError as exc:
            exc.message = f"{where}: {exc.message}"
            raise
    _post_events(ctx, events, url, timeout, _json(ctx, as_json))


def _post_events(
    ctx: typer.Context,
    events: list[dict[str, Any]],
    url: str,
    timeout: float,
    json_out: bool,
    *,
    signed: Optional[dict[str, Any]] = None,
    kept_in: Optional[Path] = None,
) -> None:
    """Post each event to its action URL and print one line per event (``--json``: one document). Exit 1 if
    any was refused. ``signed``: the bundle `event --post` just signed (``kept_in``: the file -o wrote it
    to): when the mirror accepted none of it, exit 1 too, and without ``-o`` the bundle is printed on
    stdout (in the JSON document with --json) and the verdict goes to stderr, so nothing signed is lost."""
    from pithledger.errors import SourceError
    from pithledger.mirror.http11 import Client
    from pithledger.mirror.transport import Deadline, check_url
    from pithledger.web.actions import ACTION_KINDS, action_url, post_event

    if "{suffix}" not in url and "{kind}" not in url:
        check_url(url)  # a bad base URL is one error, before anything is posted
    results: list[dict[str, Any]] = []
    client = Client()
    deadline = Deadline(None)
    try:
        for event in events:
            kind, number = event.get("event_type"), str(event.get("subject_pith_number"))
            if kind not in ACTION_KINDS:
                results.append(
                    {
                        "event_id": event.get("event_id", ""),
                        "event_type": kind,
                        "subject": number,
                        "url": "",
                        "http_status": 0,
                        "status": "skipped",
                        "reason": "no-action",
                        "message": f"a mirror takes no {kind} events by POST (actions: {', '.join(sorted(ACTION_KINDS))}); apply it instead",
                    }
                )
                continue
            target = action_url(url, number, str(kind))
            try:
                results.append(post_event(client, target, event, timeout=timeout, deadline=deadline))
            except SourceError as exc:
                results.append(
                    {
                        "event_id": event.get("event_id", ""),
                        "event_type": kind,
                        "subject": number,
                        "url": target,
                        "http_status": 0,
                        "status": "refused",
                        "reason": exc.code,
                        "message": exc.message,
                    }
                )
    finally:
        client.close()
    refused = [r for r in results if r["status"] not in ("new", "duplicate", "skipped")]
    unaccepted = signed is not None and not any(r["status"] in ("new", "duplicate") for r in results)
    printed = unaccepted and kept_in is None  # the signed bundle goes to stdout, or it is lost
    if json_out:
        doc: dict[str, Any] = {
            "posted": sum(r["status"] != "skipped" for r in results),
            "refused": len(refused),
            "events": results,
        }
        if printed:
            doc["bundle"] = signed
        emit_json(doc)
    else:
        for r in results:
            why = f" [{r['reason']}] {r['message']}" if r["reason"] else ""
            http = f" (HTTP {r['http_status']})" if r["http_status"] else ""
            typer.echo(f"{r['status']:<10} {r['subject']} {r['event_type']} {r['event_id']}{why}{http}", err=unaccepted)
        if printed:
            from pithledger.records.canonical import canonical_bytes

            sys.stdout.buffer.write(canonical_bytes(signed) + b"\n")
            sys.stdout.flush()
    if unaccepted:
        where = f"written to {kept_in}" if kept_in is not None else "printed on stdout"
        reason = results[0]["reason"] if results else ""
        advice = (
            "apply it to a ledger (`pithledger apply FILE`): a mirror takes only the action kinds by POST"
            if reason == "no-action"
            else "post it again later (`pithledger submit FILE URL`), or apply it to a ledger (`pithledger apply FILE`)"
        )
        fail(f"the mirror accepted nothing; the signed bundle is {where}", code=reason or "not-accepted", hint=advice)
    if refused:
        raise typer.Exit(1)
