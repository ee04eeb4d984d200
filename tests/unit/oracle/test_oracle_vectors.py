"""The independent oracle (tests/oracle/, written from spec/ alone) against the conformance vectors that
pithledger's own code wrote (issue #42 item 3): every verdict and every state byte must agree, so a rule the
code gets wrong everywhere fails here even though the code agrees with itself."""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle.canon import admitted, canon
from oracle.keccak import keccak256
from oracle.parse_id import parse_id
from oracle.reduce import reduce_all
from oracle.verify import SIGNING_PREFIX, Verifier

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "spec" / "vectors" / "merge"
FILES = sorted(VECTORS.glob("*.json"))
ORACLE = ROOT / "tests" / "oracle"
STDLIB_AND_NACL = {"__future__", "base64", "dataclasses", "datetime", "hashlib", "json", "re", "typing", "nacl"}


def load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text())
    return vector


def run(vector: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The oracle on one vector: verdicts in the vector's shape, and state texts."""
    verifier = Verifier(vector.get("registry_keys"), vector.get("bitcoin_chain", "mainnet"))
    verdicts = [verifier(e) for e in vector["events"]]
    got = [{"status": v.status, "reason": v.reason, "event_id": v.event_id} for v in verdicts]
    states = reduce_all(list(zip(vector["events"], verdicts, strict=True)))
    return got, {s: b.decode() for s, b in states.items()}


def test_the_oracle_imports_nothing_of_pithledger() -> None:
    """Independence: every import in tests/oracle/ is the stdlib named in the brief, PyNaCl, or the oracle itself."""
    files = sorted(ORACLE.glob("*.py"))
    assert len(files) >= 5
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # `from .x import y`: the oracle's own modules
                    continue
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in STDLIB_AND_NACL, f"{path.name} imports {name}"
        assert "import_module" not in path.read_text() and "__import__" not in path.read_text(), path.name


def test_keccak256_has_the_original_padding_not_sha3s() -> None:
    assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    assert keccak256(b"abc").hex() == "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
    # 136 bytes fill one block exactly, so the padding takes a block of its own
    assert keccak256(b"\x00" * 136) != keccak256(b"\x00" * 135)


def test_there_is_a_vector_per_file() -> None:
    assert len(FILES) >= 89


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_oracle_agrees_with_vector(path: Path) -> None:
    vector = load(path)
    assert vector["merge_version"] == "pithledger-merge-v3"
    assert all(admitted(e) for e in vector["events"])  # spec/identifiers.md §1.1: what a strict decoding admits
    verdicts, states = run(vector)
    assert verdicts == vector["expected"]["verdicts"]
    assert states == vector["expected"]["states"]


def test_oracle_agrees_with_the_golden_event() -> None:
    golden = load(ROOT / "spec" / "vectors" / "event-v1-golden.json")
    key = SigningKey(bytes.fromhex(golden["seed_hex"]))
    public = bytes(key.verify_key)
    assert public.hex() == golden["public_key_hex"]
    event = {
        "created_at": golden["created_at"],
        "event_type": golden["kind"],
        "event_version": "pithledger-event-v1",
        "payload": golden["payload"],
        "signer": {
            "key_id": golden["key_name"],
            "public_key_b64": base64.b64encode(public).decode(),
            "public_key_fingerprint": golden["public_key_fingerprint"],
            "signer_id": golden["signer_id"],
            "signer_type": "self_signed",
        },
        "subject_pith_number": golden["subject"],
        "target": "record",
    }
    message = SIGNING_PREFIX + canon(event)
    assert message.hex() == golden["signing_message_hex"]
    signature = base64.b64encode(key.sign(message).signature).decode()  # Ed25519 is deterministic
    assert signature == golden["signature_b64"]
    event["signature_b64"] = signature
    event["event_id"] = golden["event_id"]
    assert canon(event).decode() == golden["event_canonical"]
    verdict = Verifier()(event)
    assert (verdict.status, verdict.reason, verdict.event_id) == ("valid", "", golden["event_id"])


def test_vectors_regenerated_by_the_code_in_process_pass_the_oracle() -> None:
    """Not only the committed files: what make_vectors.py's cases become when the code builds them now (in this
    process, nothing written), so a regeneration after a code change is checked by the oracle before it is
    committed."""
    spec = importlib.util.spec_from_file_location("make_merge_vectors", VECTORS / "make_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = module.cases()
    assert len(cases) == len(FILES)
    for name, case in cases.items():
        vector = module.build(name, case)
        verdicts, states = run(vector)
        assert verdicts == vector["expected"]["verdicts"], name
        assert states == vector["expected"]["states"], name


ID_VECTORS = [
    pytest.param(v, id=f"{kind}-{v['name']}")
    for kind in ("accepted", "refused")
    for v in json.loads((ROOT / "spec" / "vectors" / "ids" / f"{kind}.json").read_text())["vectors"]
]


@pytest.mark.parametrize("vector", ID_VECTORS)
def test_oracle_reads_identifier_vectors(vector: dict[str, Any]) -> None:
    assert parse_id(vector["input"]) == vector["answer"]
