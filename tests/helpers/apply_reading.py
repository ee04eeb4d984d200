"""What the in-process and the end-to-end tests of cli apply reading share (cut from tests/e2e/cli/test_cli_apply_reading.py,
now split between tests/unit/ and tests/e2e/)."""

from __future__ import annotations

from hypothesis import strategies as st

from helpers.common import ROOT

BUNDLES = ROOT / "bundles"


FIFTY = BUNDLES / "demo-50-records.jsonl"

lines = st.lists(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")) | st.just(b"") | st.just(b"\r"), max_size=30
)
