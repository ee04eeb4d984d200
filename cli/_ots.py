"""``pithledger ots verify``: an OpenTimestamps proof checked offline against given Bitcoin block headers
(spec/events.md §3.1.2, spec/adr/0016). Parse, call ``pithledger.verify_timestamp``, render."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pithledger.cli._base import Command, Group, UsageProblem
from pithledger.cli._options import JsonOption, _json
from pithledger.cli._output import emit_json, say

ots_app = typer.Typer(
    cls=Group, help="OpenTimestamps proofs, checked offline.", no_args_is_help=True, rich_markup_mode=None
)


def register(app: typer.Typer) -> None:
    app.add_typer(ots_app, name="ots")


@ots_app.command("verify", cls=Command)
def verify(
    ctx: typer.Context,
    proof: Annotated[Path, typer.Argument(metavar="PROOF", help="A detached .ots proof.")],
    digest: Annotated[
        Optional[str],
        typer.Option("--digest", metavar="HEX", help="The stamped file's digest (the proof's hash operation)."),
    ] = None,
    file: Annotated[
        Optional[Path],
        typer.Option("--file", metavar="PATH", help="The stamped file: hashed with the proof's hash operation."),
    ] = None,
    header: Annotated[
        Optional[list[str]],
        typer.Option(
            "--header",
            metavar="[HEIGHT:]HEX",
            help="An 80-byte Bitcoin block header in hex (repeatable); with HEIGHT: it answers for that height only.",
        ),
    ] = None,
    headers: Annotated[
        Optional[Path],
        typer.Option(
            "--headers",
            metavar="FILE",
            help="Instead of --header: a run of headers, one per line, the attested block's first, checked as a timestamp_anchor carrying them is (spec/events.md §3.1.3); says whether its work reaches the minimum that makes an anchor checked.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check a proof against Bitcoin block headers you give, offline: the proof is read as the reference
    OpenTimestamps library reads it, must stamp the digest, and one Bitcoin attestation must lead to a given
    header's Merkle root, the header carrying mainnet's proof of work. Exit 0 with the block's height, hash,
    time and work; 1 naming why not (pending only, no header for that height, proof of work short, Merkle root
    differs, digest differs, unreadable proof). The height is the attestation's claim: a header proves work,
    not its place in the best chain."""
    from pithledger import verify_timestamp
    from pithledger.api import MAX_OTS_FILE
    from pithledger.errors import CannotRead, OtsError
    from pithledger.records.events import _utc  # from the epoch, not fromtimestamp: a 32-bit time_t stops at 2038

    if (digest is None) == (file is None):
        raise UsageProblem("give the stamped file's digest (--digest HEX) or the file (--file PATH), one of the two")
    if header and headers is not None:
        raise UsageProblem("give single headers (--header) or a run of them (--headers FILE), not both")
    want: bytes | None = None
    if digest is not None:
        try:
            want = bytes.fromhex(digest)
        except ValueError:
            raise UsageProblem("--digest must be hexadecimal") from None
    try:
        with open(proof, "rb") as fh:
            data = fh.read(MAX_OTS_FILE + 1)  # bounded: a proof of any size (/dev/zero) is refused, not read whole
    except OSError as exc:
        raise CannotRead(f"cannot read {proof}: {exc.strerror}") from None
    if len(data) > MAX_OTS_FILE:
        raise OtsError(f"{proof} is over {MAX_OTS_FILE} bytes; a proof is a few KiB")
    run = None
    if headers is not None:
        from pithledger.ingest.inputs import read_headers

        run = read_headers(str(headers))
    check = verify_timestamp(data, header or [], digest=want, file=file, run=run)
    blocks = [
        {
            "height": v.height,
            "hash": v.header.hash,
            "time": v.header.time,
            "time_utc": _utc(v.header.time),
            "merkle_root": v.header.merkle_root[::-1].hex(),
            "bits": f"{v.header.bits:08x}",
            "work": str(v.header.work),
        }
        for v in check.verified
    ]
    summary = None
    if check.run is not None:
        from pithledger.records.bitcoin import MAINNET

        summary = {
            "headers": check.run.headers,
            "run_work": str(check.run.work),
            "minimum_work": str(MAINNET.min_work),  # asked of the attested block's own header
            "anchor_state": "bitcoin" if check.run.header.work >= MAINNET.min_work else "claimed",
        }
        if check.hash_op != "sha256":  # a timestamp_anchor stamps a record's sha256 digest: no anchor carries this
            summary["anchor_state"] = None
            summary["why"] = f"no timestamp_anchor can carry a {check.hash_op} proof: a record's digest is sha256"
    if _json(ctx, as_json):
        doc = {"verified": True, "hash_op": check.hash_op, "digest": check.digest.hex(), "blocks": blocks}
        emit_json(doc | ({"run": summary} if summary is not None else {}))
        return
    for b in blocks:
        say(
            f"verified: Bitcoin block {b['height']} hash {b['hash']} time {b['time']} ({b['time_utc']}) "
            f"work {b['work']} ({check.hash_op} {check.digest.hex()})"
        )
    if summary is not None and summary["anchor_state"] is None:
        say(f"run: {summary['headers']} header(s), {summary['run_work']} work in all; {summary['why']}")
    elif summary is not None:
        say(
            f"run: {summary['headers']} header(s), {summary['run_work']} work in all; the attested block's own work against "
            f"the minimum {summary['minimum_work']}: an anchor carrying it would be {summary['anchor_state']!r}"
        )
