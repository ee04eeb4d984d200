"""fsck on a damaged ledger names the damage and goes on: a stored value of the wrong shape, an index naming a
log entry the log lacks, an entry that no longer decodes. Before, each of these ended fsck itself, with a
traceback (an undecodable log entry, digest node or leaf) or with "run `pithledger fsck`" (an inbound
citation or event id naming nothing), so the one command meant to say what is wrong said nothing.

Each case is named after the damage it carries; each asserts fsck returns (no exception) and names it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

from helpers import scale
from helpers.common import FIXTURES, derive_on_workers
from helpers.ledgers import example_bundles
from pithledger.records.bundle import read_bundle
from pithledger.records.canonical import strict_decode
from pithledger.store import Ledger

Damage = Callable[[Ledger, lmdb.Transaction], str]


def _first(txn: lmdb.Transaction, db: lmdb._Database) -> tuple[bytes, bytes]:  # type: ignore[name-defined]
    key, value = next(iter(txn.cursor(db=db)))
    return bytes(key), bytes(value)


def unreadable_log_entry(ledger: Ledger, txn: lmdb.Transaction) -> str:
    key, value = _first(txn, ledger.db[b"log"])
    txn.put(key, b"\xc1" + value[1:], db=ledger.db[b"log"])  # 0xc1: never used in msgpack
    return f"log entry {int.from_bytes(key, 'big')}: not readable (damaged ledger)"


def log_entry_without_event_id(ledger: Ledger, txn: lmdb.Transaction) -> str:
    key, value = _first(txn, ledger.db[b"log"])
    txn.put(key, value.replace(b'"event_id"', b'"evxnt_id"'), db=ledger.db[b"log"])
    return "cannot be recomputed: its log entries are not readable (damaged ledger)"


def inbound_citation_of_no_event(ledger: Ledger, txn: lmdb.Transaction) -> str:
    cited, _ = _first(txn, ledger.db[b"inbound"])
    txn.put(cited, b"\x01" * 32, db=ledger.db[b"inbound"])
    return f"state of {cited.decode()} cannot be recomputed: an inbound citation of {cited.decode()} names event"


def event_id_index_entry_deleted(ledger: Ledger, txn: lmdb.Transaction) -> str:
    _, digest = _first(txn, ledger.db[b"inbound"])  # the id of a citation: its citer's log entry is then lost
    txn.delete(digest, db=ledger.db[b"ids"])
    return "the event_id index does not point at it"


def event_id_index_value_far_longer_than_a_sequence(ledger: Ledger, txn: lmdb.Transaction) -> str:
    """A flipped length bit (seeded random damage found it): naming the entry as a decimal int of 16,000 bits
    raised ValueError (Python's 4,300-digit limit), a traceback in fsck."""
    _, digest = _first(txn, ledger.db[b"inbound"])
    txn.put(digest, b"\x01" * 2000, db=ledger.db[b"ids"])
    return "log entry 0x0101010101010101... (2,000 bytes) is missing (damaged ledger)"


def undecodable_digest_node(ledger: Ledger, txn: lmdb.Transaction) -> str:
    key, value = _first(txn, ledger.db[b"node"])
    txn.put(key, bytes(len(value)), db=ledger.db[b"node"])
    return f"digest node {key[1:].decode() or '(root)'} differs from its recomputation"


def undecodable_digest_leaf(ledger: Ledger, txn: lmdb.Transaction) -> str:
    key, _ = _first(txn, ledger.db[b"rec"])
    txn.put(key, b"\x00", db=ledger.db[b"rec"])
    subject = key.split(b"\0", 1)[1].decode()
    return f"digest entry of {subject} differs from its recomputation"


def undecodable_outbound_citations(ledger: Ledger, txn: lmdb.Transaction) -> str:
    key, _ = _first(txn, ledger.db[b"outcite"])
    txn.put(key, b"{not json", db=ledger.db[b"outcite"])
    return f"the outbound citation index of {key.decode()} differs from its recomputation"


def index_key_not_utf8(ledger: Ledger, txn: lmdb.Transaction) -> str:
    """A suffix index entry whose key lost its UTF-8 (a bit flip): its ``decode()`` ended fsck (UnicodeDecodeError)."""
    key, value = _first(txn, ledger.db[b"suffix"])
    txn.put(b"\xff" + key[1:], value, db=ledger.db[b"suffix"])
    return "suffix index holds a stale entry \\xff"


def state_key_not_utf8(ledger: Ledger, txn: lmdb.Transaction) -> str:
    """A record's state stored under a key that is not UTF-8: read back as text it names no stored state, which
    ended fsck in ``_fsck_state`` (UnboundLocalError: ``index``) once its ``decode()`` no longer did."""
    key, value = _first(txn, ledger.db[b"state"])
    txn.delete(key, db=ledger.db[b"state"])
    txn.put(key[:-1] + b"\xff", value, db=ledger.db[b"state"])
    return "\\xff"


DAMAGES = [
    index_key_not_utf8,
    state_key_not_utf8,
    unreadable_log_entry,
    log_entry_without_event_id,
    inbound_citation_of_no_event,
    event_id_index_entry_deleted,
    event_id_index_value_far_longer_than_a_sequence,
    undecodable_digest_node,
    undecodable_digest_leaf,
    undecodable_outbound_citations,
]


@pytest.fixture(scope="module")
def papers(tmp_path_factory: pytest.TempPathFactory) -> list:  # type: ignore[type-arg]
    """Records citing one another (inbound and outbound citation entries), and the example bundles."""
    path = tmp_path_factory.mktemp("papers") / "papers.jsonl"
    scale.papers(path, 12, per_record=4)
    return example_bundles() + [read_bundle(strict_decode(line)) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("on_workers", [False, True], ids=["in-place", "on-workers"])
@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__.replace("_", "-"))
def test_fsck_names_the_damage_and_goes_on(
    tmp_path: Path,
    papers: list,  # type: ignore[type-arg]
    damage: Damage,
    on_workers: bool,
) -> None:
    with Ledger(tmp_path, create=True, tuning=derive_on_workers(on_workers)) as ledger:
        ledger.apply_batch(papers)
        assert ledger.fsck() == []
        with ledger.env.begin(write=True) as txn:
            named = damage(ledger, txn)
        problems = ledger.fsck()
    assert any(named in p for p in problems), problems


def test_the_tlog_check_ends_at_an_unreadable_log_entry(tmp_path: Path, papers: list) -> None:  # type: ignore[type-arg]
    """The tlog entry an unreadable log entry implies is unknown, and so is every hash above it: the check says
    where it stopped instead of naming every later hash as differing."""
    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(papers)
        with ledger.env.begin(write=True) as txn:
            unreadable_log_entry(ledger, txn)
        problems = ledger.fsck()
    assert "the transparency log cannot be checked from entry 0 on: log entry 0 is not readable" in problems
    assert not any("transparency log hash" in p for p in problems)


def _with_evidence(path: Path) -> Ledger:
    """A ledger holding evidence: a bundle whose event was altered after it was signed."""
    ledger = Ledger(path, create=True)
    ledger.apply_batch(example_bundles())
    ledger.apply_batch([read_bundle(strict_decode((FIXTURES / "bundles" / "altered-created-at.json").read_bytes()))])
    assert ledger.evidence_usage().entries > 0
    return ledger


def _unreadable_first(ledger: Ledger, table: bytes) -> bytes:
    """Overwrite the first value of ``table`` with a byte msgpack never uses; its key."""
    with ledger.env.begin(write=True) as txn:
        key, _ = _first(txn, ledger.db[table])
        txn.put(key, b"\xc1", db=ledger.db[table])
    return key


def test_an_unreadable_evidence_entry_is_named(tmp_path: Path) -> None:
    with _with_evidence(tmp_path) as ledger:
        key = _unreadable_first(ledger, b"evidence")
        problems = ledger.fsck()
    assert f"evidence {key.hex()}: not readable (damaged ledger)" in problems
    assert "the total evidence usage counts" in problems[-1]  # it is no longer counted as held


def test_an_unreadable_evidence_usage_counter_is_named_and_repaired(tmp_path: Path) -> None:
    with _with_evidence(tmp_path) as ledger:
        key = _unreadable_first(ledger, b"evsize")
        problems = ledger.fsck()
        assert any(p.startswith(f"evidence usage of {key.decode()} counts 0 copies") for p in problems), problems
        assert ledger.repair_evidence_usage() != []
        assert ledger.fsck() == []


@pytest.mark.parametrize(
    ("key", "value"),
    [(b"merge_version", b"pithledger-mer\xe7e-v3"), (b"layout_version", b"\xff5")],
    ids=["merge-version-not-utf8", "layout-version-not-ascii"],
)
def test_a_layout_record_damaged_past_reading_is_ledger_damaged(tmp_path: Path, key: bytes, value: bytes) -> None:
    """The meta table's version strings, damaged (seeded random damage flipped a bit of the merge version's
    'g'): every open of the ledger, fsck's too, is ledger-damaged (fsck: a fault found). Before, a
    UnicodeDecodeError escaped Ledger() (a traceback)."""
    from pithledger.errors import LedgerDamaged

    with Ledger(tmp_path, create=True) as ledger:
        ledger.apply_batch(example_bundles()[:1])
        with ledger.env.begin(write=True) as txn:
            txn.put(key, value, db=ledger.db[b"meta"])
    with pytest.raises(LedgerDamaged):
        Ledger(tmp_path, readonly=True)
