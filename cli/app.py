"""Typer commands. Each one: parse, call the library, render."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

import pithledger
from pithledger import keys as keys_
from pithledger.canonical import canonical_bytes
from pithledger.errors import PithledgerError
from pithledger.mint import mint as mint_record
from pithledger.model import record_ids

from ._output import emit_json, iter_documents, report

app = typer.Typer(
    name="pithledger",
    help="A mirror for Pith records: verify signed bundles, keep an append-only ledger, merge, audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pithledger {pithledger.__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """pithledger: verify, store, merge and audit Pith records and their signed events."""


@app.command()
def ids(
    record: Annotated[str, typer.Argument(help="A canonical record (or a document holding one under canonical_record); '-' for stdin; JSON lines allowed.")],
) -> None:
    """Print canonical_sha256, the long and short Pith Number and the six aliases of a record."""
    failed = 0
    for where, value in iter_documents(record):
        if isinstance(value, dict) and "canonical_record" in value:
            value = value["canonical_record"]
        try:
            emit_json(record_ids(value))
        except PithledgerError as exc:
            report(exc, where)
            failed += 1
    if failed:
        raise typer.Exit(1)


@app.command()
def mint(
    meta: Annotated[str, typer.Argument(help="arXiv metadata: one object, or JSON lines as in arXiv's bulk snapshot; '-' for stdin.")],
) -> None:
    """Turn arXiv metadata into canonical records (canonical bytes, one record per line)."""
    failed = 0
    for where, value in iter_documents(meta):
        try:
            sys.stdout.buffer.write(canonical_bytes(mint_record(value)) + b"\n")
        except PithledgerError as exc:
            report(exc, where)
            failed += 1
    sys.stdout.flush()
    if failed:
        raise typer.Exit(1)


@app.command()
def verify(
    files: Annotated[Optional[list[str]], typer.Argument(help="Bundles to check offline; nothing is written.")] = None,
    digest: Annotated[Optional[str], typer.Option(help="A SHA-256 digest, 64 lowercase hex characters.")] = None,
    signature: Annotated[Optional[str], typer.Option(help="An Ed25519 signature over the raw digest, standard base64.")] = None,
    key_id: Annotated[Optional[str], typer.Option(help="Check against this registry key only.")] = None,
) -> None:
    """Check bundles offline, or one receipt signature (--digest --signature) against the registry keys."""
    if digest is not None or signature is not None:
        if files:
            raise typer.BadParameter("give either FILE... or --digest/--signature, not both")
        if digest is None or signature is None:
            raise typer.BadParameter("--digest and --signature go together")
        raw_digest = keys_.digest_from_hex(digest)
        raw_sig = keys_.b64decode_strict(signature, length=keys_.SIGNATURE_LEN, what="--signature")
        key = keys_.verify_receipt_signature(raw_digest, raw_sig, key_id)
        typer.echo(f"valid: signed by {key.key_id} (fingerprint {key.fingerprint})")
        return
    if not files:
        raise typer.BadParameter("name at least one FILE, or give --digest and --signature")
    raise PithledgerError("bundle verification is not available in this version")
