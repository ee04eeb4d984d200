"""Signed notes, checkpoints and cosignatures (ledger/tlog/note.py) against Go's sumdb/note, transparency-dev/formats
and the C2SP examples (tests/vectors/tlog, named after the mutation each carries), plus hostile inputs."""

from __future__ import annotations

import base64
import json
from typing import Any

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.common import TESTS
from pithledger.errors import (
    BadNoteSignature,
    BadVerifierKey,
    MalformedCheckpoint,
    MalformedNote,
    NoteError,
    NoVerifiedSignature,
    UnexpectedOrigin,
    UnknownNoteKey,
)
from pithledger.records.keys import LocalKey
from pithledger.tlog import note
from pithledger.tlog.merkle import leaf_hash

VECTORS = TESTS / "vectors" / "tlog"


def load(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


GO = load("go-sumdb-note.json")
TD = load("transparency-dev-formats.json")
C2 = load("c2sp-examples.json")
GO_TLOG = load("go-sumdb-tlog.json")


def go_signer(skey: str) -> note.NoteSigner:
    """Go's skey: PRIVATE+KEY+name+hex8+base64(0x01 || 32-byte seed)."""
    _, _, name, _, b64 = skey.split("+", 4)
    raw = base64.b64decode(b64)
    assert raw[0] == note.ALG_ED25519
    return note.NoteSigner(name, nacl.signing.SigningKey(raw[1:]))


PETER = note.NoteVerifier.from_vkey(GO["peter_vkey"])
ENOCH = note.NoteVerifier.from_vkey(GO["enoch_vkey"])


# --- interop: Go sumdb/note ------------------------------------------------------------------------


def test_go_signer_reproduces_go_signature_and_vkey() -> None:
    signer = go_signer(GO["peter_skey"])
    assert signer.vkey == GO["peter_vkey"]
    assert signer.key_id.hex() == "c74f20a3"
    assert signer.sign(GO["text"]) == GO["signed_by_peter"].encode()


def test_go_note_one_of_two_signatures_trusted() -> None:
    n = note.open_note((GO["text"] + "\n" + GO["peter_sig_line"] + GO["enoch_sig_line"]).encode(), [PETER])
    assert n.text == GO["text"]
    assert n.verified_by == ("PeterNeumann",)
    assert [s.name for s in n.signatures] == ["PeterNeumann", "EnochRoot"]


def test_go_note_both_trusted() -> None:
    n = note.open_note((GO["text"] + "\n" + GO["peter_sig_line"] + GO["enoch_sig_line"]).encode(), [PETER, ENOCH])
    assert n.verified_by == ("PeterNeumann", "EnochRoot")


def test_go_note_no_trusted_key_is_refused() -> None:
    with pytest.raises(NoVerifiedSignature):
        note.open_note((GO["text"] + "\n" + GO["peter_sig_line"] + GO["enoch_sig_line"]).encode(), [])


@pytest.mark.parametrize("mutation", sorted(GO["malformed_notes"]))
def test_go_malformed_note_is_refused(mutation: str) -> None:
    with pytest.raises(MalformedNote):
        note.open_note(GO["malformed_notes"][mutation].encode(), [PETER])


@pytest.mark.parametrize("mutation", sorted(GO["malformed_note_bytes_hex"]))
def test_go_malformed_note_bytes_are_refused(mutation: str) -> None:
    with pytest.raises(MalformedNote):
        note.open_note(bytes.fromhex(GO["malformed_note_bytes_hex"][mutation]), [PETER])


@pytest.mark.parametrize("mutation", sorted(GO["bad_signature_notes"]))
def test_go_bad_signature_by_trusted_key_refuses_the_note(mutation: str) -> None:
    with pytest.raises(BadNoteSignature):
        note.open_note(GO["bad_signature_notes"][mutation].encode(), [PETER])


def test_go_bad_signature_by_unknown_key_is_ignored() -> None:
    sig = GO["enoch_sig_line"]
    tampered = sig[:60] + "ABCD" + sig[60:]
    n = note.open_note((GO["text"] + "\n" + GO["peter_sig_line"] + tampered).encode(), [PETER])
    assert n.verified_by == ("PeterNeumann",)


def test_go_duplicate_signatures_are_dropped() -> None:
    data = GO["text"] + "\n" + GO["peter_sig_line"] * 2 + GO["enoch_sig_line"] * 2
    n = note.open_note(data.encode(), [PETER])
    assert len(n.signatures) == 2


@pytest.mark.parametrize("mutation", sorted(GO["bad_vkeys"]))
def test_go_bad_vkey_is_refused(mutation: str) -> None:
    with pytest.raises(BadVerifierKey):
        note.NoteVerifier.from_vkey(GO["bad_vkeys"][mutation])


def test_go_vkey_every_substring_and_every_byte_plus_one_is_refused() -> None:
    vkey = GO["peter_vkey"]
    for i in range(len(vkey)):
        for j in range(i + 1, len(vkey) + 1):
            if (i, j) != (0, len(vkey)):
                with pytest.raises(BadVerifierKey):
                    note.NoteVerifier.from_vkey(vkey[i:j])
        mangled = vkey[:i] + chr(ord(vkey[i]) + 1) + vkey[i + 1 :]
        with pytest.raises(BadVerifierKey):
            note.NoteVerifier.from_vkey(mangled)


def test_go_signature_under_wrong_name_or_key_id_is_unknown_not_verified() -> None:
    misnamed = GO["peter_sig_line"].replace("PeterNeumann", "CarmenSandiego")
    with pytest.raises(NoVerifiedSignature):
        note.open_note((GO["text"] + "\n" + misnamed).encode(), [PETER])
    wrong_id = GO["peter_sig_line"].replace("x08g", "xxxx")
    with pytest.raises(NoVerifiedSignature):
        note.open_note((GO["text"] + "\n" + wrong_id).encode(), [PETER])


def test_the_same_trusted_key_listed_twice_is_fine() -> None:
    assert note.open_note(GO["signed_by_peter"].encode(), [PETER, PETER]).verified_by == ("PeterNeumann",)


# --- interop: C2SP examples and transparency-dev/formats -----------------------------------------------


def test_c2sp_signed_note_example_verifies() -> None:
    v = note.NoteVerifier.from_vkey(C2["signed_note_vkey"])
    assert note.open_note(C2["signed_note"].encode(), [v]).text == "This is an example message.\n"


def test_c2sp_checkpoint_example_parses_and_round_trips() -> None:
    cp = note.Checkpoint.parse(C2["checkpoint_body"])
    assert (cp.origin, cp.size, base64.b64encode(cp.root).decode()) == (
        C2["checkpoint"]["origin"],
        C2["checkpoint"]["size"],
        C2["checkpoint"]["root_base64"],
    )
    assert cp.body() == C2["checkpoint_body"]


def test_c2sp_cosigned_checkpoint_carries_the_example_timestamp() -> None:
    text, sigs = note.split_note(C2["cosigned_checkpoint"].encode())
    assert text == C2["checkpoint_body"]
    assert note.cosignature_timestamp(sigs[1]) == C2["cosignature_timestamp"]
    assert note.cosignature_message(text, C2["cosignature_timestamp"]) == C2["cosignature_signed_message"].encode()


def test_transparency_dev_sumdb_checkpoint_verifies_under_every_listed_key() -> None:
    text = TD["checkpoint_text"]
    for vkey, line in TD["signatures"].items():
        v = note.NoteVerifier.from_vkey(vkey)
        assert note.open_note((text + "\n" + line).encode(), [v]).verified_by == (v.name,)
    all_lines = "".join(TD["signatures"].values()) + "".join(TD["unknown_signatures_copied_under_other_names"])
    cp, n = note.open_checkpoint(
        (text + "\n" + all_lines).encode(),
        [note.NoteVerifier.from_vkey(k) for k in TD["signatures"]],
        origin="go.sum database tree",
    )
    assert cp.size == 6476701 and len(n.verified_by) == 4 and len(n.signatures) == 6


def test_transparency_dev_checkpoint_under_wrong_origin_is_refused() -> None:
    vkey, line = next(iter(TD["signatures"].items()))
    with pytest.raises(UnexpectedOrigin):
        note.open_checkpoint(
            (TD["checkpoint_text"] + "\n" + line).encode(),
            [note.NoteVerifier.from_vkey(vkey)],
            origin="Go rocks but I might have the wrong ID",
        )


def test_transparency_dev_cosignature_vkey_and_timestamp() -> None:
    v = note.NoteVerifier.from_vkey(TD["cosignature_vkey_type_0x04"])
    assert v.alg == note.ALG_COSIGNATURE_V1 and v.vkey == TD["cosignature_vkey_type_0x04"]
    raw = base64.b64decode(TD["cosignature_timestamp"]["signature_base64"])
    sig = note.NoteSignature("x", raw[:4], raw[4:])
    assert note.cosignature_timestamp(sig) == TD["cosignature_timestamp"]["timestamp"]
    raw = base64.b64decode(TD["cosignature_timestamp_wrong_type_of_signature"])
    with pytest.raises(MalformedNote):
        note.cosignature_timestamp(note.NoteSignature("x", raw[:4], raw[4:]))


@pytest.mark.parametrize("mutation", sorted(TD["bad_vkeys"]))
def test_transparency_dev_bad_vkey_is_refused(mutation: str) -> None:
    with pytest.raises(BadVerifierKey):
        note.NoteVerifier.from_vkey(TD["bad_vkeys"][mutation])


@pytest.mark.parametrize("mutation", sorted(TD["checkpoint_bodies_refused"]))
def test_transparency_dev_checkpoint_body_is_refused(mutation: str) -> None:
    with pytest.raises(MalformedCheckpoint):
        note.Checkpoint.parse(TD["checkpoint_bodies_refused"][mutation])


def test_go_tlog_tree_body_is_a_checkpoint() -> None:
    t = GO_TLOG["tree_body"]
    cp = note.Checkpoint(t["origin"], t["size"], leaf_hash(t["root_is_leaf_hash_of"].encode()))
    assert cp.body() == t["body"]
    assert note.Checkpoint.parse(t["body"]) == cp


@pytest.mark.parametrize("mutation", sorted(GO_TLOG["tree_bodies_refused"]))
def test_go_tlog_tree_body_is_refused(mutation: str) -> None:
    with pytest.raises(MalformedCheckpoint):
        note.Checkpoint.parse(GO_TLOG["tree_bodies_refused"][mutation])


# --- our own signing, checkpoints, cosignatures --------------------------------------------------------


def signer(name: str = "mirror.example/log") -> note.NoteSigner:
    return note.NoteSigner(name, nacl.signing.SigningKey.generate())


def checkpoint(size: int = 5) -> note.Checkpoint:
    return note.Checkpoint("mirror.example/log", size, leaf_hash(b"%d" % size))


def test_signer_from_key_directory_key() -> None:
    key = LocalKey("alice", bytes(range(32)))
    s = note.signer_from_key(key, "mirror.example/log")
    assert s.public_key == key.public_key
    signed = s.sign(checkpoint().body())
    assert note.open_note(signed, [note.NoteVerifier.from_vkey(s.vkey)]).verified_by == ("mirror.example/log",)
    assert s.vkey.startswith("mirror.example/log+" + s.key_id.hex() + "+")


@pytest.mark.parametrize("name", ["", "has space", "plus+sign", "nbsp\u00a0name", "tab\tname", "line\u2028sep"])
def test_key_name_with_space_plus_or_empty_is_refused(name: str) -> None:
    with pytest.raises(MalformedNote):
        note.NoteSigner(name, nacl.signing.SigningKey.generate())


@pytest.mark.parametrize("text", ["no final newline", "bell\x07\n", "cr\r\n", "lone \ud800 surrogate\n"])
def test_signing_malformed_text_is_refused(text: str) -> None:
    with pytest.raises(MalformedNote):
        signer().sign(text)


def test_text_with_blank_lines_round_trips() -> None:
    s = signer()
    for text in ["a\n\nb\n", "Note\n\n", "\n"]:
        assert note.open_note(s.sign(text), [s.verifier]).text == text


def test_checkpoint_with_extensions_round_trips() -> None:
    cp = note.Checkpoint("o", 0, bytes(32), ("ext one", "ext two"))
    assert note.Checkpoint.parse(cp.body()) == cp


@pytest.mark.parametrize(
    "mutation,body",
    [
        ("size-leading-zero", "o\n05\n" + base64.b64encode(bytes(32)).decode() + "\n"),
        ("size-negative", "o\n-5\n" + base64.b64encode(bytes(32)).decode() + "\n"),
        ("size-plus-sign", "o\n+5\n" + base64.b64encode(bytes(32)).decode() + "\n"),
        ("size-above-2^63-1", f"o\n{2**63}\n" + base64.b64encode(bytes(32)).decode() + "\n"),
        ("root-base64-without-padding", "o\n5\n" + base64.b64encode(bytes(32)).decode().rstrip("=") + "\n"),
        ("root-base64-nonzero-pad-bits", "o\n5\n" + base64.b64encode(bytes(32)).decode()[:-2] + "B=\n"),
        ("root-31-bytes", "o\n5\n" + base64.b64encode(bytes(31)).decode() + "\n"),
        ("empty-extension-line", "o\n5\n" + base64.b64encode(bytes(32)).decode() + "\n\n"),
        ("size-with-space", "o\n 5\n" + base64.b64encode(bytes(32)).decode() + "\n"),
    ],
)
def test_checkpoint_mutation_is_refused(mutation: str, body: str) -> None:
    with pytest.raises(MalformedCheckpoint):
        note.Checkpoint.parse(body)


def test_cosignature_round_trip_and_spec_layout() -> None:
    log, witness = signer(), signer("witness.example/w1")
    cp = checkpoint()
    line = note.cosign(cp.body(), witness, 1679315147)
    raw = base64.b64decode(line.split(" ")[2])
    assert raw[:4] == note.key_id("witness.example/w1", 0x04, witness.public_key) != witness.key_id
    assert int.from_bytes(raw[4:12], "big") == 1679315147 and len(raw) == 4 + 8 + 64
    assert note.verify_cosignature(cp.body(), line, witness.cosigner) == 1679315147
    cosigned = note.add_signatures(note.sign_checkpoint(cp, log), [line])
    n = note.open_note(cosigned, [log.verifier, witness.cosigner])
    assert n.verified_by == (log.name, witness.name)
    # the witness's key as a plain note key (type 0x01) does not verify a cosignature: different key IDs
    with pytest.raises(NoVerifiedSignature):
        note.open_note(cosigned, [witness.verifier])


def test_cosignature_over_another_checkpoint_is_refused() -> None:
    witness = signer("w")
    line = note.cosign(checkpoint(5).body(), witness, 10)
    with pytest.raises(BadNoteSignature):
        note.verify_cosignature(checkpoint(6).body(), line, witness.cosigner)


def test_cosignature_with_changed_timestamp_is_refused() -> None:
    witness = signer("w")
    cp = checkpoint()
    raw = bytearray(base64.b64decode(note.cosign(cp.body(), witness, 10).split(" ")[2]))
    raw[11] ^= 1
    line = f"— w {base64.b64encode(bytes(raw)).decode()}\n"
    with pytest.raises(BadNoteSignature):
        note.verify_cosignature(cp.body(), line, witness.cosigner)


def test_cosignature_by_another_witness_is_unknown() -> None:
    line = note.cosign(checkpoint().body(), signer("w1"), 10)
    with pytest.raises(UnknownNoteKey):
        note.verify_cosignature(checkpoint().body(), line, signer("w2").cosigner)
    with pytest.raises(BadVerifierKey):
        note.verify_cosignature(checkpoint().body(), line, signer("w1").verifier)


@pytest.mark.parametrize("timestamp", [-1, 2**63])
def test_cosignature_timestamp_out_of_range_is_refused(timestamp: int) -> None:
    with pytest.raises(MalformedNote):
        note.cosign(checkpoint().body(), signer("w"), timestamp)


def test_cosigning_a_non_checkpoint_is_refused() -> None:
    with pytest.raises(MalformedCheckpoint):
        note.cosign("just text\n", signer("w"), 1)


def test_extra_and_unknown_signatures_are_ignored() -> None:
    log, other = signer(), signer("someone.else")
    data = note.sign_checkpoint(checkpoint(), log)
    data = note.add_signatures(
        data,
        [
            other.signature(checkpoint().body()).line(),
            note.cosign(checkpoint().body(), signer("w"), 5),
            note.NoteSignature(log.name, b"\0\0\0\0", b"junk").line(),
        ],
    )
    n = note.open_note(data, [log.verifier])
    assert n.verified_by == (log.name,) and len(n.signatures) == 4


def test_too_many_signatures_refused_but_16_accepted() -> None:
    log = signer()
    body = checkpoint().body()
    lines = [signer(f"w{i}").signature(body).line() for i in range(note.MAX_SIGNATURES)]
    ok = note.add_signatures(log.sign(body), lines[:15])
    assert note.open_note(ok, [log.verifier]).verified_by == (log.name,)
    with pytest.raises(MalformedNote):
        note.open_note(log.sign(body) + "".join(lines).encode(), [log.verifier])


def test_oversized_note_is_refused() -> None:
    log = signer()
    with pytest.raises(MalformedNote):
        note.open_note(log.sign("x" * note.MAX_NOTE_BYTES + "\n"), [log.verifier])


def test_note_trust_errors_are_note_errors() -> None:
    for cls in (
        MalformedNote,
        BadVerifierKey,
        UnknownNoteKey,
        BadNoteSignature,
        NoVerifiedSignature,
        MalformedCheckpoint,
        UnexpectedOrigin,
    ):
        assert issubclass(cls, NoteError) and cls.hint


# --- hostile inputs ----------------------------------------------------------------------------------

SIGNED = go_signer(GO["peter_skey"]).sign(GO["text"])


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=400)
    | st.builds(lambda a, b: SIGNED[:a] + b + SIGNED[a:], st.integers(0, len(SIGNED)), st.binary(max_size=8))
)
def test_open_note_on_arbitrary_bytes_raises_only_note_errors(data: bytes) -> None:
    try:
        n = note.open_note(data, [PETER])
    except NoteError:
        return
    assert n.verified_by == ("PeterNeumann",)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=200)
    | st.builds(
        lambda a, b: C2["checkpoint_body"][:a] + b + C2["checkpoint_body"][a:], st.integers(0, 80), st.text(max_size=4)
    )
)
def test_checkpoint_parse_on_arbitrary_text_raises_only_malformed_checkpoint(text: str) -> None:
    try:
        cp = note.Checkpoint.parse(text)
    except MalformedCheckpoint:
        return
    assert cp.body() == text  # whatever parses is in its one canonical form


NOTE_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=[chr(c) for c in range(32)]) | st.just("\n"),
    max_size=80,
).map(lambda t: t + "\n")


@settings(max_examples=200, deadline=None)
@given(NOTE_TEXT)
def test_any_valid_text_round_trips_through_sign_and_open(text: str) -> None:
    s = go_signer(GO["peter_skey"])
    assert note.open_note(s.sign(text), [PETER]).text == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_from_vkey_on_arbitrary_text_raises_only_bad_verifier_key(text: str) -> None:
    try:
        v = note.NoteVerifier.from_vkey(text)
    except BadVerifierKey:
        return
    assert v.vkey == text
