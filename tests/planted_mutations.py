"""Plant each bug of issue #42's audit (and more of their kind) in the consensus code, one at a time, run the
refusal and limit tables on it, and say which test fails; the file is restored after each (``git checkout``).
Run from the repository, in a checkout whose ledger/ is what the venv imports (an editable install):
``.venv/bin/python tests/planted_mutations.py`` (about a minute per mutation on one core). tests/README.md keeps
its last output. Exit 1 if a mutation goes unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/unit/records/test_refusals.py", "tests/unit/records/test_limits.py"]
#: the merge's rules are the merge tests' (the tie-breaks among them were caught by the audit already)
MERGE_TESTS = [
    "tests/unit/merge/test_consensus.py",
    "tests/unit/merge/test_merge_vectors.py",
    "tests/unit/merge/test_incremental.py",
]

# name -> (file, text, replacement): the text must occur exactly once
MUTATIONS: dict[str, tuple[str, str, str]] = {
    "registry-signer-key-check-deleted": (
        "ledger/records/events.py",
        'if "public_key_b64" in signer and signer["public_key_b64"] != keys.b64encode(reg.public_key):',
        "if False:",
    ),
    "check-run-takes-the-highest-height": ("ledger/records/bitcoin.py", "height = heights[0]", "height = heights[-1]"),
    "url-bound-raised-to-4096": ("ledger/records/events.py", "len(value) > 2048", "len(value) > 4096"),
    "check-value-objects-one-level-deeper": (
        "ledger/records/canonical.py",
        "        if isinstance(item, dict):\n            if depth > max_depth:",
        "        if isinstance(item, dict):\n            if depth > max_depth + 1:",
    ),
    "is-blank-by-str-strip": (
        "ledger/records/events.py",
        "return all(ch in ASCII_BLANKS for ch in text)",
        'return text.strip() == ""',
    ),
    # more of the same kind, planted for this check
    "ots-height-bound-off-by-one": (
        "ledger/records/ots.py",
        "if height > MAX_HEIGHT:\n            raise OtsError(f\"the claimed {kind or 'ethereum'}",
        "if height > MAX_HEIGHT + 1:\n            raise OtsError(f\"the claimed {kind or 'ethereum'}",
    ),
    "retarget-allows-5x": ("ledger/records/bitcoin.py", "h.target > 4 * prev.target", "h.target > 5 * prev.target"),
    "retarget-boundary-off-by-one": (
        "ledger/records/bitcoin.py",
        "(height + i) % RETARGET_INTERVAL == 0",
        "(height + i - 1) % RETARGET_INTERVAL == 0",
    ),
    "run-height-bound-off-by-one": (
        "ledger/records/bitcoin.py",
        "if height + count - 1 > _ots.MAX_HEIGHT:",
        "if height + count - 2 > _ots.MAX_HEIGHT:",
    ),
    "content-sha256-check-dropped": (
        "ledger/records/events.py",
        "if p.content_sha256 is not None and not HEX64_RE",
        "if False and p.content_sha256 is not None and not HEX64_RE",
    ),
    "severity-check-dropped": ("ledger/records/events.py", "if p.severity not in SEVERITIES:", "if False:"),
    "minimum-work-compared-with-le": (
        "ledger/records/events.py",
        "if header.work < chain.min_work:",
        "if header.work <= chain.min_work:",
    ),
    "compact-reading-one-level-deeper": (
        "ledger/records/canonical.py",
        "        if depth > max_depth:\n            return False",
        "        if depth > max_depth + 1:\n            return False",
    ),
    "ots-node-count-off-by-one": (
        "ledger/records/ots.py",
        'if r.nodes > MAX_NODES:\n        raise OtsError("proof has too many operations")\n    if tag == 0x00:\n'
        "        key, att",
        'if r.nodes > MAX_NODES + 1:\n        raise OtsError("proof has too many operations")\n    if tag == 0x00:\n'
        "        key, att",
    ),
    "ots-operations-input-off-by-one": (
        "ledger/records/ots.py",
        "if r.ops_input > MAX_OPERATIONS_INPUT:",
        "if r.ops_input > MAX_OPERATIONS_INPUT + 1:",
    ),
    "pith-envelope-target-check-dropped": (
        "ledger/records/events.py",
        'if event["target"] != "record":',
        "if False:",
    ),
    "receipt-signature-length-unchecked": (
        "ledger/records/events.py",
        'p.receipt.signature_b64, length=keys.SIGNATURE_LEN, what="receipt signature_b64"',
        'p.receipt.signature_b64, what="receipt signature_b64"',
    ),
    "base64-padding-bits-unchecked": (
        "ledger/records/keys.py",
        'if base64.b64encode(raw).decode("ascii") != text:',
        "if False:",
    ),
    "base64-length-unchecked": (
        "ledger/records/keys.py",
        "if length is not None and len(raw) != length:",
        "if False:",
    ),
    "merge-latest-tie-broken-by-highest-id": (
        "ledger/merge.py",
        'return min((e for e in group if e.event["created_at"] == latest), key=lambda e: e.event_id)',
        'return max((e for e in group if e.event["created_at"] == latest), key=lambda e: e.event_id)',
    ),
    "merge-incremental-latest-tie-broken-by-highest": (
        "ledger/merge.py",
        "return min(m for m in members if m[0] == latest)",
        "return max(m for m in members if m[0] == latest)",
    ),
}


def main() -> int:
    missed = []
    only = set(sys.argv[1:])  # names of mutations to plant (default: all)
    for name, (file, text, replacement) in MUTATIONS.items():
        if only and name not in only:
            continue
        path = ROOT / file
        source = path.read_text()
        assert source.count(text) == 1, (name, source.count(text))
        path.write_text(source.replace(text, replacement))
        try:
            run = subprocess.run(
                [
                    sys.executable,
                    *("-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly"),
                    *(MERGE_TESTS if file == "ledger/merge.py" else TESTS),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
        finally:
            subprocess.run(["git", "checkout", "--", file], cwd=ROOT, check=True)
        failed = [
            line.split(" ", 1)[1].split(" - ")[0] for line in run.stdout.splitlines() if line.startswith("FAILED ")
        ]
        print(f"{name}: {'caught by ' + failed[0] if failed else 'NOT CAUGHT'}", flush=True)
        if not failed:
            missed.append(name)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
