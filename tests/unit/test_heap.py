"""The heap's free pages go back to the system after a peak (glibc), and the call is harmless
where the C library has no such thing."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from mdsearch_ls.engine.heap import _glibc, release_free_memory


def _rss_anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


def test_it_is_harmless_everywhere() -> None:
    release_free_memory()
    release_free_memory()


@pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None,
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


ARENAS = r"""
import ctypes, os, sys, tempfile, threading
from mdsearch_ls.engine.heap import one_arena
if sys.argv[1] == "one":
    one_arena()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
threads = [threading.Thread(target=lambda: libc.malloc(64)) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
path = tempfile.mktemp()
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
print(open(path).read().count("<heap nr="))
os.remove(path)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None,
                    reason="glibc only")
@pytest.mark.parametrize(("how", "most"), [("one", 1), ("default", 99)])
def test_one_arena_serves_every_thread(how: str, most: int) -> None:
    out = subprocess.run([sys.executable, "-c", ARENAS, how], capture_output=True, text=True,
                         check=True).stdout
    arenas = int(out)
    assert arenas <= most
    if how == "default":  # the test can tell: without it, threads get arenas of their own
        assert arenas > 1
