"""A signed audit report (spec/audit.md): each refusal of ``verify_report``, named after the mutation of a validly
signed report it carries (issue #42 item 1)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from helpers.eventpool import ALICE, BOB
from pithledger.audit import AuditResult, report_value, sign_report, verify_report
from pithledger.errors import VerificationFailed
from pithledger.records import keys

REPORT = sign_report(
    report_value(
        AuditResult(
            consistent=True, a_root={"all": "00" * 32}, b_root={"all": "00" * 32}, divergent=[], digests_read=2
        ),
        "a",
        "b",
    ),
    ALICE,
    "2026-06-01T00:00:00Z",
)


def test_a_signed_report_verifies_and_names_its_signer() -> None:
    assert verify_report(copy.deepcopy(REPORT)) == f"alice (fingerprint {keys.fingerprint_hex(ALICE.public_key)})"


def _with(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def change(r: dict[str, Any]) -> None:
        for path, value in changes.items():
            where, _, name = path.rpartition("__")
            target = r[where] if where else r
            if value is None:
                del target[name]
            else:
                target[name] = value

    return change


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "signature-removed": (_with(signature_b64=None), "carries no signer or signature"),
    "signer-removed": (_with(signer=None), "carries no signer or signature"),
    "public-key-removed": (_with(signer__public_key_b64=None), "carries no signer or signature"),
    "signature-a-number": (_with(signature_b64=7), "must be base64 strings"),
    "public-key-of-31-bytes": (_with(signer__public_key_b64=keys.b64encode(b"\x01" * 31)), "expected 32"),
    "signature-not-base64": (_with(signature_b64="!!"), "not standard padded base64"),
    "fingerprint-of-another-key": (
        _with(signer__public_key_fingerprint=keys.fingerprint_hex(BOB.public_key)),
        "public_key_fingerprint is not its key's",
    ),
    "verdict-flipped-after-signing": (_with(consistent=False), "does not verify"),
    "key-of-another-signer": (
        _with(
            signer__public_key_b64=keys.b64encode(BOB.public_key),
            signer__public_key_fingerprint=keys.fingerprint_hex(BOB.public_key),
        ),
        "does not verify",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_refusal(name: str) -> None:
    change, words = MUTATIONS[name]
    report = copy.deepcopy(REPORT)
    change(report)
    with pytest.raises(VerificationFailed, match=words):
        verify_report(report)
