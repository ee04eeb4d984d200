"""Mirrors as sources and targets: publish, sync, pull, the hostile transport, remembered checkpoints, published logs and verify-log."""
