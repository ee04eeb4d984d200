"""Commands about mirrors: digest, publish, audit, metadata, latex (sync and pull are in cli/_sync.py, serve and
submit in cli/_serve.py).
Moved whole from cli/app.py (issue #32 item 4: no CLI module over ~700 lines); app.py registers them
(:class:`Commands`) where they stood, so --help lists the commands in the same order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pithledger.cli._base import Command, UsageProblem, settings
from pithledger.cli._options import (
    Commands,
    JsonOption,
    KeyDirOption,
    TimeoutOption,
    WitnessKeyOption,
    _deadline_option,
    _json,
    _now,
    _open,
    _plural,
    _store,
)
from pithledger.cli._output import emit_json, iter_documents, report, say, write_file_atomically
from pithledger.errors import PithledgerError

if TYPE_CHECKING:
    from pithledger.audit import AuditResult
    from pithledger.mirror.checkpoints import Check

command = Commands()


# --- mirrors ---------------------------------------------------------------------------------------


@command(cls=Command)
def digest(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Print this mirror's order-independent roots (event sets and states)."""
    import msgspec

    import pithledger

    got = pithledger.digest(settings(ctx).ledger)
    if _json(ctx, as_json):
        emit_json(msgspec.structs.asdict(got))
    else:
        typer.echo(
            f"events_root {got.events_root}\nstates_root {got.states_root}\n"
            f"{_plural(got.records, 'record')}, {_plural(got.events, 'event')}"
        )


@command(cls=Command)
def publish(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Where to write the static mirror tree.")],
    key: Annotated[
        Optional[str],
        typer.Option(
            "--key",
            metavar="NAME",
            help="Local key whose public part the manifest names; it also signs the log's checkpoint (spec/transparency.md §4).",
        ),
    ] = None,
    base_url: Annotated[
        str, typer.Option("--base-url", metavar="URL", help="The URL the tree will be served at (for the manifest).")
    ] = "",
    origin: Annotated[
        Optional[str],
        typer.Option(
            "--origin",
            metavar="ORIGIN",
            help="With --key: the log's origin [default: from --base-url, else pithledger/<key fingerprint>].",
        ),
    ] = None,
    witnesses: Annotated[
        Optional[list[str]],
        typer.Option(
            "--witness",
            metavar="URL",
            help="With --key: ask this witness (C2SP tlog-witness, URL/add-checkpoint) to cosign the checkpoint; its cosignature is added to the published one. Repeatable.",
        ),
    ] = None,
    key_dir: KeyDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write (or update) a static mirror tree any web server can host; with --key, its log too (checkpoint and tiles).

    With --witness URL, each witness is asked to cosign the new checkpoint; a witness that refuses is
    named (exit 1) and the checkpoint stays published without its cosignature."""
    from pithledger.cli._tlog import log_signer
    from pithledger.mirror.publish import publish as publish_mirror

    if origin is not None and not key:
        raise UsageProblem("--origin names the log a --key signs", hint="add --key NAME, or leave --origin out")
    if witnesses and not key:
        raise UsageProblem(
            "--witness cosigns the checkpoint a --key signs", hint="add --key NAME, or leave --witness out"
        )
    for url in witnesses or []:
        if not url.startswith(("http://", "https://")):
            raise UsageProblem(
                f"--witness {url!r} is not an http(s) URL",
                hint="give the witness's submission prefix, e.g. https://witness.example",
            )
    signing = _store(key_dir).load(key) if key else None
    log = log_signer(key, origin, base_url, key_dir) if key else None
    with _open(ctx, settled=True) as ledger:
        counts = publish_mirror(ledger, directory, signing, base_url.rstrip("/"), log=log)
    asked = []
    if witnesses:
        from pithledger.mirror.checkpoints import ask_witnesses

        asked = ask_witnesses(directory, witnesses)
    if _json(ctx, as_json):
        emit_json(
            counts
            | {
                "directory": str(directory),
                "origin": log.name if log else None,
                "log_key": log.vkey if log else None,
                "witnesses": [{"url": a.url, "cosigned": not a.refused, "refused": a.refused} for a in asked],
            }
        )
    else:
        for a in asked:
            say(
                f"witness {a.url}: cosigned"
                if not a.refused
                else f"witness {a.url} refused: {a.refused}; the checkpoint is published without its cosignature"
            )
        typer.echo(
            f"published to {directory}: {_plural(counts['records_written'], 'record')} written, "
            f"{_plural(counts['nodes_written'], 'digest node')} written, {counts['nodes_removed']:,} removed"
        )
        if log is not None:
            typer.echo(
                f"log {log.name}: checkpoint at size {counts['log_size']:,}, {_plural(counts['tiles_written'], 'tile')} written; "
                f"log key {log.vkey}"
            )
        else:
            typer.echo("no checkpoint signed: publish --key NAME also writes the log (checkpoint and tiles)")
    if any(a.refused for a in asked):
        raise typer.Exit(1)


@command(cls=Command)
def audit(
    ctx: typer.Context,
    a: Annotated[
        str, typer.Argument(metavar="A", help="A ledger directory, a published directory, or an http(s) URL.")
    ],
    b: Annotated[Optional[str], typer.Argument(metavar="[B]", help="The other side (not with --bundles).")] = None,
    as_json: JsonOption = False,
    sign: Annotated[
        Optional[str], typer.Option("--sign", metavar="KEY", help="Sign the report with this local key (JSON output).")
    ] = None,
    key_dir: KeyDirOption = None,
    timeout: TimeoutOption = 30.0,
    deadline: Annotated[float, _deadline_option()] = 600.0,
    bundles: Annotated[
        bool,
        typer.Option(
            "--bundles",
            help="Read the published mirror A's bundles against its own digests: "
            "name every record whose bundle does not carry, as valid events, "
            "what its digests advertise.",
        ),
    ] = False,
    sample: Annotated[
        Optional[int],
        typer.Option("--sample", metavar="N", min=1, help="With --bundles: check a random sample of N records."),
    ] = None,
    seed: Annotated[
        Optional[int],
        typer.Option("--seed", metavar="S", help="With --sample: the seed of the sample (printed when not given)."),
    ] = None,
    witness_keys: WitnessKeyOption = None,
) -> None:
    """Compare two mirrors: exit 0 when consistent, else name every divergent record and the event ids each side lacks.

    With --bundles, check one published mirror's bundles against its own digests instead (every record,
    or --sample N with --seed S): exit 1 when any record's bundle does not deliver what is advertised.
    """
    from pithledger.audit import compare, report_value, sign_report
    from pithledger.mirror.publish import open_source
    from pithledger.store import Ledger

    if bundles:
        _audit_bundles(ctx, a, b, as_json, sign, timeout, deadline, sample, seed)
        return
    if sample is not None or seed is not None:
        raise UsageProblem(
            "--sample and --seed choose the records --bundles checks", hint="add --bundles, or leave them out"
        )
    if b is None:
        raise UsageProblem(
            "audit compares two mirrors: give A and B",
            hint="or check one published mirror's bundles: audit A --bundles",
        )
    from pithledger.mirror.checkpoints import check_pair, check_vkeys

    check_vkeys(None, witness_keys or [])
    ledger_path = settings(ctx).ledger
    # published sides' checkpoints: against this ledger's memory, and against each other for one origin
    checks = check_pair(
        ledger_path if (ledger_path / "data.mdb").is_file() else None,
        a,
        b,
        witness_keys=list(witness_keys or []),
        timeout=timeout,
        deadline=deadline or None,
    )
    side_a = open_source(a, timeout=timeout, deadline=deadline or None)
    # LMDB allows one handle per environment and process: a ledger audited against itself is shared.
    side_b = (
        side_a if Path(a).resolve() == Path(b).resolve() else open_source(b, timeout=timeout, deadline=deadline or None)
    )
    try:
        result = compare(side_a, side_b)
    finally:
        for side in {id(side_a): side_a, id(side_b): side_b}.values():
            if isinstance(side, Ledger):
                side.close()
    doc = report_value(result, a, b)
    if sign:
        emit_json(sign_report(doc, _store(key_dir).load(sign), _now()))
    elif _json(ctx, as_json):
        emit_json(
            doc
            | {
                "digests_read": result.digests_read,
                "checkpoints": [c.document() | {"source": c.source} for c in checks],
            }
        )
    else:
        _say_audit(result, checks)
    if not result.consistent:
        raise typer.Exit(1)


def _say_audit(result: AuditResult, checks: list[Check]) -> None:
    """`audit A B`'s text output: each checkpoint check, then consistent, or each divergent record and what each
    side lacks."""
    for c in checks:
        say(c.line())
    if result.consistent:
        typer.echo(f"consistent: events_root {result.a_root['events']} states_root {result.a_root['states']}")
    for d in result.divergent:
        line = f"DIVERGENT {d.pith_number} {d.kind}"
        for label, listed, count in (("A", d.a_lacks, d.a_lacks_count), ("B", d.b_lacks, d.b_lacks_count)):
            if count:
                more = f" and {count - len(listed):,} more" if count > len(listed) else ""
                line += f"; {label} lacks {', '.join(listed)}{more}"
        say(line)
    if result.merge_bug_suspected:
        typer.echo(
            "both mirrors hold the same events yet states differ: a merge bug or a tampered stored state "
            "(run `pithledger fsck` on each ledger)"
        )
    if not result.consistent:
        typer.echo(
            f"{_plural(len(result.divergent), 'divergent record')} ({_plural(result.digests_read, 'digest')} read)"
        )


def _audit_bundles(
    ctx: typer.Context,
    a: str,
    b: Optional[str],
    as_json: bool,
    sign: Optional[str],
    timeout: float,
    deadline: float,
    sample: Optional[int],
    seed: Optional[int],
) -> None:
    """``audit A --bundles``: spec/audit.md §5.1."""
    import secrets

    from pithledger.mirror.publish import DIGEST_FILE, Published, check_bundles

    if b is not None:
        raise UsageProblem(
            "--bundles checks one published mirror against its own digests: give only A",
            hint="compare two mirrors without --bundles",
        )
    if sign:
        raise UsageProblem("--sign signs a comparison report, not a bundle check")
    if seed is not None and sample is None:
        raise UsageProblem("--seed chooses the records of a --sample", hint="add --sample N")
    if not a.startswith(("http://", "https://")) and not Path(a, DIGEST_FILE).is_file():
        raise UsageProblem(
            f"{a} is not a published mirror (no {DIGEST_FILE}); --bundles reads a published tree or URL",
            hint="a ledger's bundles are its own exports: check a ledger with `pithledger fsck`",
        )
    if sample is not None and seed is None:
        seed = secrets.randbelow(2**32)
    result = check_bundles(Published(a, timeout=timeout, deadline=deadline or None), sample=sample, seed=seed)
    if _json(ctx, as_json):
        emit_json(
            {
                "source": a,
                "records": result.records,
                "checked": result.checked,
                "sample": sample,
                "seed": seed,
                "consistent": not result.faults,
                "faults": result.faults,
            }
        )
    else:
        for f in result.faults:
            line = f"BAD-BUNDLE {f['pith_number']} [{f['reason']}] {f['message']}"
            if f.get("missing_event_ids"):
                more = (
                    f" and {f['missing_count'] - len(f['missing_event_ids']):,} more"
                    if f["missing_count"] > len(f["missing_event_ids"])
                    else ""
                )
                line += f": {', '.join(f['missing_event_ids'])}{more}"
            say(line)
        drawn = f" (a sample drawn with --seed {seed})" if sample is not None else ""
        verdict = (
            "every bundle carries what its digests advertise"
            if not result.faults
            else _plural(len(result.faults), "bad bundle")
        )
        typer.echo(
            f"bundles of {a}: {result.checked:,} of {_plural(result.records, 'record')} checked{drawn}: {verdict}"
        )
    if result.faults:
        raise typer.Exit(1)


@command(cls=Command)
def metadata(
    ctx: typer.Context,
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...",
            help="arXiv snapshot lines (what `mint` reads) or Pith record documents (what a Pith record URL returns for JSON: its paper block); '-' for stdin.",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Keep display metadata (titles, authors, abstracts) beside the records, outside consensus.

    Pages show each field with its check against the record's title/abstract hash (match, mismatch,
    unchecked; Pith's abstract excerpt: "unchecked: excerpt"); nothing here changes a state, a digest
    or an export (spec/serve.md §6).
    """
    from pithledger.records.display import FROM_RECORD_DOCUMENT, parse_any
    from pithledger.store.sidecars import MetadataStore

    items = []
    documents = []  # a record document's paper block never replaces a field that matches with one that does not
    failed = 0
    errors: list[dict[str, Any]] = []  # --json: each failed document's reason, in the one report document
    for path in files:
        for where, value in iter_documents(path, tolerant=True):
            try:
                if isinstance(value, PithledgerError):
                    raise value
                key, meta = parse_any(value)
            except PithledgerError as exc:
                report(exc, where)
                errors.append({**exc.document(), "where": where})
                failed += 1
                continue
            if meta.source == FROM_RECORD_DOCUMENT:
                documents.append((value["canonical_record"], meta))
            else:
                items.append((key, meta))
    store = MetadataStore(settings(ctx).ledger, readonly=False)
    try:
        kept = store.put_many(items) + store.keep_documents(documents)
        total = store.count()
    finally:
        store.close()
    if _json(ctx, as_json):
        emit_json({"kept": kept, "failed": failed, "records_with_metadata": total, "errors": errors})
    else:
        typer.echo(
            f"kept display metadata of {_plural(kept, 'record')} ({failed:,} failed); {total:,} held beside {settings(ctx).ledger}"
        )
    if failed:
        raise typer.Exit(1)


# --- the `pith` LaTeX package ---------------------------------------------------------------------------


@command(cls=Command)
def latex(
    ctx: typer.Context,
    resolver: Annotated[
        str,
        typer.Option(
            "--resolver",
            metavar="URL",
            help="The package's default resolver: badges link to URL/pith/<suffix> (authors can still set \\usepackage[resolver=...]{pith}).",
        ),
    ] = "https://pith.science",
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="DIR", help="Write pith.sty into this directory.")
    ] = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Write the `pith` LaTeX package (pith.sty): \\usepackage{pith} and \\pithnumber{<26-char suffix>}
    print a linked badge after the title and put the Pith Number in the PDF's metadata
    (spec/badge-and-latex.md). Put pith.sty beside your .tex file (arXiv compiles it from there)."""
    from pithledger.render.latex import sty_bytes

    data = sty_bytes(resolver)
    created = _latex_directory(output)
    path = output / "pith.sty"
    write_file_atomically(path, data)
    if _json(ctx, as_json):
        emit_json({"written": str(path), "resolver": resolver.removesuffix("/"), "bytes": len(data)})
    else:
        typer.echo(
            f"wrote {path}{' (created ' + str(output) + ')' if created else ''} (default resolver {resolver.removesuffix('/')}); use it with \\usepackage{{pith}} and \\pithnumber{{SUFFIX}}"
        )


def _latex_directory(output: Path) -> bool:
    """``latex -o DIR``: DIR, created when it is missing and its parent exists (as ``mkdir DIR``, not
    ``mkdir -p``: a mistyped path is named, not built); whether it was created (issue #41)."""
    from pithledger.errors import CannotWrite

    if output.is_dir():
        return False
    if os.path.lexists(output):
        raise UsageProblem(
            f"-o {output}: not a directory", hint="give a directory, e.g. -o . (pith.sty is written into it)"
        )
    if output.suffix == ".sty":
        raise UsageProblem(
            f"-o {output}: -o names the directory pith.sty is written into, not the file",
            hint=f"e.g. -o {output.parent} (writes {output.parent / 'pith.sty'})",
        )
    try:
        os.mkdir(output, 0o777)  # less the umask, as publish's directories (spec/serve.md §7)
    except FileNotFoundError:
        raise CannotWrite(
            f"cannot create {output}: {output.parent} does not exist",
            hint="create the parent directory first, or give an existing directory to -o",
        ) from None
    except OSError as exc:
        raise CannotWrite(f"cannot create {output}: {exc.strerror}") from None
    return True
