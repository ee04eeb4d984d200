"""What tests/unit/tlog/test_tlog_plain.py and tests/e2e/tlog/test_tlog_plain.py share: `mldsa_vkey`: a well-formed
C2SP verifier key of type 0x06 (ML-DSA-44), built from the spec."""

from __future__ import annotations

import base64
import hashlib


def mldsa_vkey(name: str = "witness.example/pq") -> str:
    """A well-formed C2SP vkey of type 0x06 (ML-DSA-44: a 1,312-byte public key), built from the spec."""
    raw = bytes([0x06]) + bytes(range(256)) * 5 + bytes(32)
    kid = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex()
    return f"{name}+{kid}+{base64.b64encode(raw).decode()}"
