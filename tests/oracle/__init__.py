"""An independent oracle for pithledger's consensus rules, written from spec/ alone (issue #42 item 3).

Nothing here imports pithledger: the reducer and verifier are a second reading of spec/events.md,
spec/merge.md and spec/identifiers.md, so a rule the code gets wrong everywhere shows up as a disagreement
with the conformance vectors or with the code on generated streams (tests/unit/oracle/).
"""
