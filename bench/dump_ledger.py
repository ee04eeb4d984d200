"""Apply bundles/ and a few hundred generated events into a fresh ledger and dump everything it holds.

The dump is every LMDB database's (key, value) pairs sorted, `pithledger digest`, every record's
`state` bytes, fsck's findings, and the same again after `pithledger rebuild`; then what the command line
prints for the same ledger (`--help` of every command, `ids`, `verify`, `state --view`, `export`, `log`,
`evidence`, `checkpoint`, `prove`, `audit`, `mint`, `latex`) and every file of a tree `publish --key` writes
(with a key made from a fixed seed). Run it before and after a change that must not alter the ledger or
what a user sees (a refactoring, a move of code) and compare the SHA-256s:

    python bench/dump_ledger.py OUT.txt      # prints the dump's SHA-256
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import lmdb

try:  # the layout of issue #32 (records/), or the flat one before it: the dump must run on both sides of a move
    from pithledger.records.bundle import Bundle
    from pithledger.records.events import make_event
    from pithledger.records.keys import LocalKey, b64encode
    from pithledger.records.model import record_ids
except ImportError:
    from pithledger.records.bundle import Bundle  # type: ignore[no-redef]
    from pithledger.records.events import make_event  # type: ignore[no-redef]
    from pithledger.records.keys import LocalKey, b64encode  # type: ignore[no-redef]
    from pithledger.records.model import record_ids  # type: ignore[no-redef]
from pithledger.store import Ledger

ROOT = Path(__file__).resolve().parent.parent


def _cli(ledger: Path, *args: str, keys: Path | None = None, stderr: bool = False) -> bytes:
    env = dict(os.environ, PITHLEDGER_LEDGER=str(ledger), COLUMNS="120")
    if keys is not None:
        env["PITHLEDGER_KEYS"] = str(keys)
    done = subprocess.run([sys.executable, "-m", "pithledger.cli", *args], env=env, capture_output=True, check=False)
    return (
        b"$ pithledger %s -> %d\n" % (" ".join(args).encode(), done.returncode)
        + done.stdout
        + (b"[stderr]\n" + done.stderr if stderr else b"")
    )


def _fixed_key(keys: Path, name: str) -> LocalKey:
    """A key file made from a fixed seed (`keys new` draws a random one), so signed outputs are the same bytes."""
    key = LocalKey(name=name, seed=hashlib.sha256(name.encode()).digest())
    keys.mkdir(mode=0o700, exist_ok=True)
    path = keys / f"{name}.key.json"
    path.write_bytes(
        json.dumps(
            {
                "key_type": "pithledger-ed25519-v1",
                "name": name,
                "seed_b64": b64encode(key.seed),
                "public_key_b64": b64encode(key.public_key),
            }
        ).encode()
        + b"\n"
    )
    path.chmod(0o600)
    return key


def _commands(ledger: Path) -> list[list[str]]:
    """Every command and subcommand the app offers, from its own --help."""
    found: list[list[str]] = []

    def walk(prefix: list[str]) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pithledger.cli", *prefix, "--help"],
            capture_output=True,
            text=True,
            env=dict(os.environ, COLUMNS="120"),
            check=False,
        )
        lines = done.stdout.splitlines()
        if "Commands:" not in [line.strip() for line in lines]:
            return
        start = [line.strip() for line in lines].index("Commands:")
        for line in lines[start + 1 :]:
            if not line.startswith("  ") or not line.strip():
                break
            name = line.split()[0]
            found.append([*prefix, name])
            walk([*prefix, name])

    walk([])
    return found


def _files(tree: Path) -> bytes:
    out = []
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            out.append(
                b"-- file %s %o %s\n"
                % (
                    str(p.relative_to(tree)).encode(),
                    p.stat().st_mode & 0o777,
                    hashlib.sha256(data).hexdigest().encode(),
                )
            )
    return b"".join(out)


def _outputs(path: Path, work: Path) -> bytes:
    """What the command line prints and writes for this ledger."""
    keys = work / "keys"
    _fixed_key(keys, "dump-log")
    parts = [_cli(path, "--help")]
    parts += [_cli(path, *cmd, "--help") for cmd in _commands(path)]
    record = ROOT / "bundles" / "source-data" / "pith-records.jsonl"
    parts.append(_cli(path, "ids", str(record)))
    parts.append(_cli(path, "verify", str(ROOT / "bundles"), stderr=True))
    subjects = sorted(Ledger(path, readonly=True).subjects())
    for s in subjects[:12]:
        parts.append(_cli(path, "state", s, "--view"))
        parts.append(_cli(path, "export", s))
        parts.append(_cli(path, "evidence", s))
    for arg in ("2502.21231", "2605.00424", "nope", "10.48550/arXiv.2502.21231"):
        parts.append(_cli(path, "state", arg, stderr=True))
    parts.append(_cli(path, "log"))
    parts.append(_cli(path, "--json", "log", "--since", "3"))
    parts.append(_cli(path, "evidence"))
    parts.append(_cli(path, "checkpoint", "--key", "dump-log", "--origin", "example.org/dump", keys=keys))
    first = json.loads(_cli(path, "--json", "log").split(b"\n", 1)[1].splitlines()[0])
    event_id = first.get("event_id") if isinstance(first, dict) else None
    if event_id:
        parts.append(_cli(path, "prove", str(event_id), "--key", "dump-log", "--origin", "example.org/dump", keys=keys))
    tree = work / "published"
    parts.append(
        _cli(path, "publish", str(tree), "--key", "dump-log", "--origin", "example.org/dump", keys=keys, stderr=True)
    )
    parts.append(_files(tree))
    parts.append(_cli(path, "audit", str(path), str(tree)))
    (work / "latex").mkdir()
    parts.append(_cli(path, "latex", "-o", str(work / "latex")))
    parts.append(_files(work / "latex"))
    return b"".join(parts)


def _generated(n: int) -> list[Bundle]:
    """Records from the source data, then attestations on them, and a few copies with a broken signature
    (so the evidence area is exercised too)."""
    records = [
        json.loads(line) for line in (ROOT / "bundles" / "source-data" / "pith-records.jsonl").read_text().splitlines()
    ]
    key = LocalKey(name="dump", seed=hashlib.sha256(b"dump").digest())
    events = []
    for i in range(n):
        r = records[i % len(records)]
        rid = record_ids(r)
        if i < len(records):
            events.append(
                make_event(
                    "record_created",
                    rid.pith_number,
                    {"canonical_record": r, "canonical_sha256": rid.canonical_sha256},
                    key,
                    created_at="2026-06-01T00:00:00Z",
                )
            )
        else:
            events.append(
                make_event(
                    "author_attestation",
                    rid.pith_number,
                    {"author_name": f"author {i}"},
                    key,
                    created_at=f"2026-06-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                )
            )
    for e in events[-5:]:
        bad = json.loads(json.dumps(e))
        bad["payload"]["author_name"] = "tampered"
        events.append(bad)
    by_subject: dict[str, list[dict[str, object]]] = {}
    for e in events:
        by_subject.setdefault(str(e["subject_pith_number"]), []).append(e)
    return [Bundle(pith_number=s, events=es) for s, es in by_subject.items()]


def _dump_dbs(path: Path) -> bytes:
    out = []
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64, subdir=True)
    with env.begin() as txn:
        names = sorted(bytes(k) for k, _ in txn.cursor())
    for name in names:
        try:
            db = env.open_db(name, create=False)
        except lmdb.Error:  # a plain key of the main database, not a table
            continue
        with env.begin(db=db) as txn:
            pairs = sorted((bytes(k), bytes(v)) for k, v in txn.cursor())
        out.append(b"== %s %d\n" % (name, len(pairs)))
        out.extend(b"%s %s\n" % (k.hex().encode(), v.hex().encode()) for k, v in pairs)
    env.close()
    return b"".join(out)


def _dump(path: Path) -> bytes:
    parts = [_dump_dbs(path), _cli(path, "digest"), _cli(path, "fsck")]
    with Ledger(path, readonly=True) as ledger:
        for s in sorted(ledger.subjects()):
            parts.append(b"-- state %s\n" % s.encode() + ledger.state_bytes(s) + b"\n")
    return b"".join(parts)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger"
        files = sorted(str(p) for p in (ROOT / "bundles").iterdir() if p.suffix in (".json", ".jsonl"))
        parts = [_cli(path, "init"), _cli(path, "apply", "--keep-going", *files)]
        with Ledger(path) as ledger:
            ledger.apply_batch(_generated(400))
        parts.append(_dump(path))
        parts.append(_cli(path, "rebuild"))
        parts.append(_dump(path))
        parts.append(_outputs(path, Path(tmp)))
    data = b"".join(parts).replace(tmp.encode(), b"TMP").replace(str(ROOT).encode(), b"ROOT")
    Path(sys.argv[1]).write_bytes(data)
    print(hashlib.sha256(data).hexdigest(), len(data))


if __name__ == "__main__":
    main()
