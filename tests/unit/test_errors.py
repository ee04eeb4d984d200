"""One error hierarchy (issue #32): every error class pithledger defines derives from PithledgerError,
lives in pithledger.errors, has a code no other class uses by accident, and is listed in spec/errors.md."""

from __future__ import annotations

import gc
import importlib
import pkgutil
import re

import pithledger
from helpers.common import ROOT
from pithledger import errors
from pithledger.errors import PithledgerError

SPEC = ROOT / "spec" / "errors.md"
_ROW = re.compile(r"^\| `([a-z0-9-]+)`(?: \(per instance\))? \| `(\w+)` \|", re.M)

#: Classes that share another class's code on purpose, and whose: the faults of a source are all
#: bad-source (told apart by class and hint, spec/audit.md §5); a missing tile is a server's not-found.
SHARED = {
    **{
        name: "SourceError"
        for name in (
            "SourceTimeout",
            "SourceConnectionError",
            "SourceTLSError",
            "SourceProtocolError",
            "SourceTooLarge",
            "RedirectRefused",
            "SourceHTTPStatus",
            "SourceFileMissing",
            "UnsafePath",
            "MalformedSource",
        )
    },
    "NoSuchTile": "NotFound",
    # the code is chosen per answer; the class keeps the base's
    "HTTPError": "PithledgerError",
    "ActionError": "PithledgerError",
}


def error_classes() -> list[type[PithledgerError]]:
    """PithledgerError and every subclass defined in a module of pithledger (each module imported)."""
    for info in pkgutil.walk_packages(pithledger.__path__, "pithledger."):
        if info.name.endswith(".__main__"):  # installed as a package (CI), cli/__main__.py runs the command line
            continue
        importlib.import_module(info.name)
    found: dict[type[PithledgerError], None] = {PithledgerError: None}
    todo = [PithledgerError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.split(".")[0] == "pithledger":
                found[sub] = None
                todo.append(sub)
    return list(found)


def hierarchy_problems(classes: list[type[PithledgerError]]) -> list[str]:
    problems = [
        f"{c.__module__}.{c.__qualname__} is defined outside pithledger.errors"
        for c in classes
        if c.__module__ != "pithledger.errors"
    ]
    by_name = {c.__name__: c for c in classes}
    owners: dict[str, str] = {}
    for c in classes:
        if c.__name__ in SHARED:
            whose = by_name.get(SHARED[c.__name__])
            if whose is None or whose.code != c.code:
                problems.append(
                    f"{c.__name__} has code {c.code!r}, not the code of {SHARED[c.__name__]} it shares on purpose"
                )
        elif c.code in owners:
            problems.append(f"{c.__name__} has code {c.code!r}, already {owners[c.code]}'s")
        else:
            owners[c.code] = c.__name__
    problems += [f"SHARED names {name}, which is no error class" for name in SHARED if name not in by_name]
    return problems


def spec_problems(classes: list[type[PithledgerError]], spec: str) -> list[str]:
    rows = _ROW.findall(spec)
    listed = {(code, name) for code, name in rows}
    actual = {(c.code, c.__name__) for c in classes}
    problems = [f"spec/errors.md has no row `{code}` | `{name}`" for code, name in sorted(actual - listed)]
    problems += [
        f"spec/errors.md lists `{code}` | `{name}`, which is no error class with that code"
        for code, name in sorted(listed - actual)
    ]
    problems += [
        f"spec/errors.md lists {name} twice" for name in {n for _, n in rows if [r[1] for r in rows].count(n) > 1}
    ]
    return problems


def test_every_error_class_is_in_errors_with_its_own_code() -> None:
    classes = error_classes()
    assert len(classes) > 90  # the walk found the hierarchy, not just the base
    assert hierarchy_problems(classes) == []


def test_spec_lists_every_code_with_its_class() -> None:
    assert spec_problems(error_classes(), SPEC.read_text(encoding="utf-8")) == []


def test_the_check_names_a_class_outside_errors_and_a_duplicated_code() -> None:
    classes = [c for c in error_classes() if c.__name__ != "NoSuchTile"]
    # Built with type() after the walk, and collected at the end, so that no other walk meets them.
    outside = type("StrayError", (PithledgerError,), {"code": "stray", "__module__": "somewhere.else"})
    copied = type("CopiedCode", (PithledgerError,), {"code": "bad-proof", "__module__": "pithledger.errors"})
    wrong_share = type("NoSuchTile", (PithledgerError,), {"code": "tile-missing", "__module__": "pithledger.errors"})
    problems = hierarchy_problems([*classes, outside, copied, wrong_share])
    assert problems == [
        "somewhere.else.StrayError is defined outside pithledger.errors",
        "CopiedCode has code 'bad-proof', already BadProof's",
        "NoSuchTile has code 'tile-missing', not the code of NotFound it shares on purpose",
    ]
    del outside, copied, wrong_share, classes
    gc.collect()


def test_the_check_names_a_code_missing_from_the_spec_and_a_stale_row() -> None:
    spec = SPEC.read_text(encoding="utf-8")
    without = spec.replace("| `witness-refused` | `WitnessError` |", "| `witness-refused` | `WitnessErr` |")
    assert spec_problems(error_classes(), without) == [
        "spec/errors.md has no row `witness-refused` | `WitnessError`",
        "spec/errors.md lists `witness-refused` | `WitnessErr`, which is no error class with that code",
    ]


def test_former_value_errors_still_are_and_print_their_bare_message() -> None:
    # OtsError's and ProofError's text is quoted inside other errors' messages (an event's bad-proof reason is
    # stored in a ledger), so joining the hierarchy must not change str().
    for cls in (errors.OtsError, errors.ProofError):
        exc = cls("proof is truncated")
        assert isinstance(exc, ValueError) and isinstance(exc, PithledgerError)
        assert str(exc) == "proof is truncated"
        assert exc.describe().startswith(f"error[{cls.code}]: proof is truncated")
    assert issubclass(errors.TlogOutOfRange, LookupError)


def test_http_answers_carry_their_own_code() -> None:
    exc = errors.HTTPError(404, "not-found", "no such record")
    assert (exc.status, exc.code, exc.message) == (404, "not-found", "no such record")
    action = errors.ActionError(429, "rate-limited", "slow down", {"retry-after": "3"})
    assert (action.status, action.code, action.message, action.headers) == (
        429,
        "rate-limited",
        "slow down",
        {"retry-after": "3"},
    )
    assert action.document() == {"error": "rate-limited", "message": "slow down", "hint": ""}
