"""Names and versions a ledger's files are made of, apart from the code that writes them, so that a reader
(``pithledger state``) opens a ledger without importing the merge algorithm or the transparency log.
"""

#: The merge algorithm a ledger's derived views were computed by (spec/merge.md); a ledger records it.
MERGE_VERSION = "pithledger-merge-v3"
#: The transparency log's two databases (spec/storage.md §2.2, ledger/store/tlog_tables.py).
TLOG_ENTRIES_DB = b"tlog"
TLOG_HASHES_DB = b"tlogh"
#: The ledger's memory of the checkpoints it saw, per origin (spec/transparency.md §6.4), a directory in it.
CHECKPOINTS_DIR = "checkpoints"
