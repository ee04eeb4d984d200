"""Compare two mirrors' states (subject -> canonical state bytes) and say where they first differ, briefly.

pytest's own diff of two dicts of 20 KB byte strings runs difflib over them and took longer than CI's time when a
comparison failed; this names the subjects one side lacks and, for the first differing state, the byte offset and
80 bytes of each side around it."""

from __future__ import annotations

from collections.abc import Mapping


def difference(a: Mapping[str, bytes], b: Mapping[str, bytes], names: tuple[str, str] = ("code", "oracle")) -> str:
    """'' when equal; else a short description of the first difference."""
    if a.keys() != b.keys():
        return f"subjects only in {names[0]}: {sorted(a.keys() - b.keys())}; only in {names[1]}: {sorted(b.keys() - a.keys())}"
    for subject in sorted(a):
        x, y = a[subject], b[subject]
        if x != y:
            at = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lo = max(0, at - 40)
            return (
                f"{subject}: first difference at byte {at} ({len(x)} vs {len(y)} bytes)\n"
                f"  {names[0]}: {x[lo : at + 40]!r}\n  {names[1]}: {y[lo : at + 40]!r}"
            )
    return ""
