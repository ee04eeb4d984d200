"""A stateful simulation of three mirrors, each a real LMDB ledger, fed by random deliveries.

Rules: deliver a random subset (some messages dropped), re-deliver (duplicates), restart a mirror
(close and reopen), an equivocating signer who signs two different snapshots for one slot and time, and
an adversary who sends garbled copies of any event to any mirror at any time.
After every step each mirror's states equal the pure reducer over what it received; at the end every
mirror receives everything and all states are byte-identical.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from helpers.adversary import GARBLINGS, garble
from helpers.common import LMDB_EXAMPLES
from helpers.eventpool import MALLORY, P, bundles_of, entries, pool
from pithledger.merge import reduce_all
from pithledger.records.canonical import canonical_bytes
from pithledger.records.events import make_event
from pithledger.store import Ledger

MIRRORS = 3


class Mirrors(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="pithledger-mirrors-"))
        self.ledgers = [Ledger(self.root / f"m{i}", create=True) for i in range(MIRRORS)]
        self.received: list[set[int]] = [set() for _ in range(MIRRORS)]
        self.events: list[dict[str, Any]] = list(pool())
        self.equivocations = 0

    def teardown(self) -> None:
        try:
            self.deliver_everything_everywhere_and_converge()  # every run ends fully delivered
        finally:
            self._close()

    def _close(self) -> None:
        for ledger in self.ledgers:
            ledger.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(m=st.integers(0, MIRRORS - 1), data=st.data())
    def deliver(self, m: int, data: st.DataObject) -> None:
        picks = data.draw(st.lists(st.integers(0, len(self.events) - 1), max_size=12))
        dropped = data.draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
        arrived = [i for i, lost in zip(picks, dropped, strict=True) if not lost]
        self.ledgers[m].apply_batch(bundles_of([self.events[i] for i in arrived]))
        self.received[m].update(arrived)

    @precondition(lambda self: any(self.received))
    @rule(m=st.integers(0, MIRRORS - 1), data=st.data())
    def redeliver(self, m: int, data: st.DataObject) -> None:
        held = sorted(self.received[m]) or [0]
        picks = data.draw(st.lists(st.sampled_from(held), min_size=1, max_size=6))
        self.ledgers[m].apply_batch(bundles_of([self.events[i] for i in picks]))
        self.received[m].update(picks)

    @rule(m=st.integers(0, MIRRORS - 1), data=st.data())
    def adversary_sends_junk(self, m: int, data: st.DataObject) -> None:
        """Garbled copies of any event (a relay that censors, forges or replays), sent before or after the
        real one: none of it may change a state or a digest (the invariant compares with valid events only)."""
        signed = [e for e in self.events if "signature_b64" in e]
        picks = data.draw(
            st.lists(st.tuples(st.sampled_from(range(len(signed))), st.sampled_from(sorted(GARBLINGS))), max_size=6)
        )
        self.ledgers[m].apply_batch(bundles_of([garble(signed[i], how) for i, how in picks]))

    @rule(m=st.integers(0, MIRRORS - 1))
    def restart(self, m: int) -> None:
        self.ledgers[m].close()
        self.ledgers[m] = Ledger(self.root / f"m{m}")

    @precondition(lambda self: self.equivocations < 3)
    @rule(subject=st.sampled_from(P))
    def equivocate(self, subject: str) -> None:
        when = f"2026-07-0{self.equivocations + 1}T00:00:00Z"
        for variant in ("left", "right"):
            self.events.append(
                make_event(
                    "graph_snapshot", subject, {"graph_snapshot": {"variant": variant}}, MALLORY, created_at=when
                )
            )
        self.equivocations += 1

    @invariant()
    def each_mirror_equals_the_pure_reducer_over_what_it_received(self) -> None:
        for ledger, got in zip(self.ledgers, self.received, strict=True):
            expected = {s: canonical_bytes(d) for s, d in reduce_all(entries_of(self.events, got)).items()}
            assert {s: ledger.state_bytes(s) for s in ledger.subjects()} == expected

    @rule()
    def deliver_everything_everywhere_and_converge(self) -> None:
        everything = set(range(len(self.events)))
        for m, ledger in enumerate(self.ledgers):
            missing = sorted(everything - self.received[m], reverse=bool(m % 2))
            ledger.apply_batch(bundles_of([self.events[i] for i in missing]))
            self.received[m] = set(everything)
        states = [{s: ledger.state_bytes(s) for s in ledger.subjects()} for ledger in self.ledgers]
        assert states[0] == states[1] == states[2]
        assert self.ledgers[0].root() == self.ledgers[1].root() == self.ledgers[2].root()
        assert all(ledger.fsck() == [] for ledger in self.ledgers)
        if self.equivocations:
            assert sum(int(b'"equivocation_count":0' not in s) for s in states[0].values()) >= 1


def entries_of(events: list[dict[str, Any]], picks: set[int]) -> list[Any]:
    signed_pool = pool()
    extra = [events[i] for i in sorted(picks) if i >= len(signed_pool)]
    base = entries([events[i] for i in sorted(picks) if i < len(signed_pool)])
    from pithledger.merge import Entry
    from pithledger.records.events import verify_event

    return base + [Entry(e, verify_event(e)) for e in extra]


TestMirrors = pytest.mark.slow(Mirrors.TestCase)  # ~14 s on one core: out of the quick lane
TestMirrors.settings = settings(max_examples=LMDB_EXAMPLES, stateful_step_count=25, deadline=None)
