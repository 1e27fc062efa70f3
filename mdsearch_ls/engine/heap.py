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


@functools.cache
def _trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc only; see the module docstring)."""
    trim = _trim()
    if trim is not None:
        trim(0)


__all__ = ["release_free_memory"]
