"""The heap's free pages go back to the system after a peak (glibc), and the call is harmless
where the C library has no such thing."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from mdsearch_ls.engine.heap import _trim, release_free_memory


def _rss_anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


def test_it_is_harmless_everywhere() -> None:
    release_free_memory()
    release_free_memory()


@pytest.mark.skipif(not sys.platform.startswith("linux") or _trim() is None,
                    reason="glibc only")
def test_a_peak_of_small_blocks_freed_goes_back_to_the_system() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    # 64 MB in 1 KB blocks (below glibc's mmap threshold: they come from the heap), each
    # written so its page is resident; the last stays, so the heap's top cannot shrink alone
    blocks = [libc.malloc(1024) for _ in range(64 * 1024)]
    for b in blocks:
        ctypes.memset(b, 1, 1024)
    peak = _rss_anon_mb()
    for b in blocks[:-1]:
        libc.free(b)
    kept = _rss_anon_mb()
    release_free_memory()
    after = _rss_anon_mb()
    libc.free(blocks[-1])
    assert kept > peak - 16  # freed, but still held by the process
    assert after < kept - 40
