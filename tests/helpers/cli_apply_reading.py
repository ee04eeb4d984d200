"""What tests/e2e/cli/test_cli_apply_reading.py and tests/unit/cli/test_cli_apply_reading.py share: The example
bundles, the 50-record demo file, and a Hypothesis strategy for JSON-lines framing (blank, CR and junk lines)."""

from __future__ import annotations

from hypothesis import strategies as st

from helpers.common import ROOT

BUNDLES = ROOT / "bundles"


FIFTY = BUNDLES / "demo-50-records.jsonl"

lines = st.lists(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")) | st.just(b"") | st.just(b"\r"), max_size=30
)
