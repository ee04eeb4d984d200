"""ingest: ``apply``'s checked reading of inputs, in the library (DESIGN.md: the layer above store).

- ``inputs``   naming and reading inputs: files, directories, ``-`` and pipes (spooled), bounded reads
- ``bundles``  the two passes: a checking pass over every document, then a guarded applying pass
- ``apply``    the pipeline: pass 1, pass 2 in batches (group commit), finish, and its report

Nothing is imported here, so that a caller of the light ``inputs`` (the command line's readers) does
not load the writer's code; the public entry points are in ``pithledger`` (ledger/__init__.py).
"""
