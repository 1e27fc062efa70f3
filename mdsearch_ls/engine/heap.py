"""Handing freed heap memory back to the operating system, where the C library allows it.

glibc keeps what a process freed in its arenas for reuse and returns little of it by itself: a
holder that looked at every note of the 96k scale vault (a dict per note, SQLite rows, paths)
or embedded a batch kept that peak for good. ``malloc_trim(0)`` gives the free pages back in a
few milliseconds. macOS's and Windows' allocators return free pages themselves and have no such
call, nor has musl: there this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most arenas its malloc makes (malloc.h)."""


@functools.cache
def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if libc.malloc_trim and libc.mallopt else None
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc only; see the module docstring)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def one_arena() -> None:
    """Let glibc's malloc keep one arena for every thread of this process, not one per thread
    up to eight per core: what a thread frees is then reused by the next one instead of sitting
    in that thread's arena. A holder answers each request on a new thread, and Chroma's,
    ONNX Runtime's and the writer's threads each kept an arena of their own: at 96k chunks,
    with one arena a holder kept 28 MB less after 20 searches and three `mdsearch index` runs
    (459 -> 431 MB), its searches as fast.
    Threads still allocate small blocks without the lock (glibc's per-thread cache).
    Effective only before a second thread allocates (glibc fixes the limit then): a holding
    process calls it first thing. Elsewhere a no-op."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, 1)

