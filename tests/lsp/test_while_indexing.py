"""Requests made while the first index runs are answered from what is indexed so far."""

from __future__ import annotations

import time

import pytest

from .conftest import TLDR, copy_tldr, start_server

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not TLDR.is_dir(), reason="tldr corpus not available")
async def test_requests_answered_during_first_index(tmp_path) -> None:
    vault = copy_tldr(tmp_path / "tldr", 400)
    server = await start_server([vault], tmp_path / "cache")
    try:
        async def partially_indexed():
            st = await server.status()
            f = st["folders"][0]
            return st if st["state"] == "indexing" and f["chunks"] > 0 else None

        st = await server.wait_for(partially_indexed, timeout=90, interval=0.2)
        timings = {}
        t = time.monotonic()
        symbols = await server.symbols("compress files into an archive")
        timings["workspace/symbol"] = time.monotonic() - t
        t = time.monotonic()
        hits = await server.search("list running processes", limit=5)
        timings["mdsearch.search"] = time.monotonic() - t
        after = await server.status()
        print(f"while indexing ({st['folders'][0]['files']} files indexed): "
              + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in timings.items()))
        assert after["state"] == "indexing", "index finished too early to prove anything"
        # The embedder holds its lock for one batch of 8 chunks (~0.5 s on 2 CPUs) and lets a
        # waiting query go first, so each request waits for one batch at most, plus its own work
        # on CPUs the indexer keeps busy.
        assert all(v < 4.0 for v in timings.values()), timings
        assert symbols and hits
        indexed = {h["path"] for h in hits}
        assert all((vault / p).is_file() for p in indexed)
    finally:
        t = time.monotonic()
        await server.stop()
        print(f"shutdown mid-index took {time.monotonic() - t:.1f}s")
