"""One malloc arena for the whole process (glibc; elsewhere nothing).

glibc gives each thread that allocates its own arena (up to 8 per core). The process pool's threads
pickle the parts sent to the workers and unpickle their results, so those buffers are allocated in
other arenas than the main thread's that frees them, and a non-main arena returns memory to the
system only from the top of its heap: fragmented, it kept what a whole-ledger command had touched.
fsck of a 1 M-event ledger peaked at 71 MiB anonymous with the default arenas and at 53 MiB with one,
against 48 MiB at 0.4 M events (spec/storage.md §10); apply's and fsck's times did not change (the GIL
serialises the threads' allocations anyway)."""

from __future__ import annotations

_M_ARENA_MAX = -8  # glibc's malloc.h


def one_malloc_arena() -> None:
    """Ask glibc for a single arena; call before any thread starts (later threads then share it)."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (or no C library to ask): nothing to set
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mallopt(_M_ARENA_MAX, 1)
