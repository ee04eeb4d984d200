"""Plain C2SP logs and the keys a reader gives (issue #31, items 5 and 6; spec/transparency.md §6.5, §2.1).

A plain C2SP tlog-tiles log — ``checkpoint`` and ``tile/...`` at its base, no pithledger manifest or
digest — written by other code than pithledger's (Go's golang.org/x/mod/sumdb/tlog and note, through
tests/interop/c2sp_log.go), read by ``consistency --source`` and ``witness`` from a directory and from a
static HTTP server on loopback. Keys given on the command line are checked before anything is fetched:
a malformed one is ``bad-verifier-key``, one of a type pithledger cannot check (ML-DSA-44, 0x06) is
``unsupported-key-type``, never a checkpoint that "does not verify" (which reads as tampering).
Real CLI subprocesses throughout.

The tests of this feature that run in-process; those that start processes or servers are in tests/e2e/tlog/test_tlog_plain.py."""

from __future__ import annotations

import base64

from helpers.tlog_plain import mldsa_vkey


def test_an_ml_dsa_vkey_is_well_formed() -> None:
    assert len(base64.b64decode(mldsa_vkey().split("+", 2)[2])) == 1 + 1312
