"""The transparency log's artefacts: RFC 9162 Merkle proofs, C2SP signed notes and checkpoints, tiles, proof documents a person keeps, and the witness."""
