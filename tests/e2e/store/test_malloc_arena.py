"""The command line keeps one malloc arena (cli/_malloc.py, spec/storage.md §10): threads that allocate
(the process pool's, which pickle parts and unpickle results) share the main thread's arena instead of each
making one that, fragmented, keeps what it once held. Counted with glibc's own malloc_info()."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_PROBE = r"""
import ctypes, os, sys, tempfile, threading
if sys.argv[1] == "one":
    from pithledger.cli._malloc import one_malloc_arena
    one_malloc_arena()
def churn():
    for _ in range(2000):
        blocks = [bytearray(4096) for _ in range(64)]
        del blocks
threads = [threading.Thread(target=churn) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
path = tempfile.mktemp()
fh = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, fh)
libc.fclose(fh)
print(open(path).read().count("<heap nr="))
os.unlink(path)
"""


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "malloc_info")
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _glibc(), reason="malloc arenas are glibc's")


def _heaps(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_threads_share_the_one_arena() -> None:
    assert _heaps("one") == 1


def test_without_it_threads_make_arenas_of_their_own() -> None:
    # what the setting changes: the same threads, left to glibc's default, allocate in more than one arena
    assert _heaps("default") > 1
