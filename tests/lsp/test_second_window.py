"""Two editor windows on one vault: the second server cannot write the index (Chroma is not
process-safe), so it searches it read-only, then becomes the writer once the first has gone."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import copy_vault, start_server
from .test_sync import save

pytestmark = [pytest.mark.slow, pytest.mark.portable]


async def _drained(server) -> bool:
    st = await server.status()
    return st["folders"][0]["queue"] == 0


async def test_second_server_reads_then_takes_over(tmp_path) -> None:
    cache = tmp_path / "cache"  # same cache dir and folder: the same index
    vault = copy_vault(tmp_path / "notes")
    first = await start_server([vault], cache)
    second = None
    try:
        await first.wait_ready()
        expected = await first.search("telescope", mode="keyword")
        assert expected

        second = await start_server([vault], cache)
        st = await second.wait_ready()
        folder = st["folders"][0]
        assert folder["read_only"] is True and folder["state"] == "ready"
        assert folder["files"] == (await first.status())["folders"][0]["files"]
        infos = [m.message for m in second.client.messages if m.type == types.MessageType.Info]
        assert any("another mdsearch process" in m for m in infos), infos
        # Semantic and keyword search answer from the first server's index.
        assert [h["path"] for h in await second.search("telescope", mode="keyword")] == \
            [h["path"] for h in expected]
        sem = await second.search("which telescope should I buy to see galaxies", mode="semantic")
        assert sem and sem[0]["score"] > 0.2
        symbols = await second.symbols("which telescope should I buy to see galaxies")
        assert symbols

        # What the first server indexes, the second one finds.
        save(first, vault / "kiwi.md", "# Kiwi\n\nKiwi vines need a male plant nearby.\n")
        await second.wait_for(lambda: second.search("kiwi", mode="keyword"), timeout=60)

        # A save in the second window while the first still writes: not indexed here, no error.
        save(second, vault / "fig.md", "# Fig\n\nFig trees fruit twice a year.\n")
        await second.wait_for(lambda: _drained(second), timeout=30)
        st = await second.status()
        assert st["folders"][0]["read_only"] is True and st["folders"][0]["state"] == "ready"

        await first.stop()
        # The next save makes the second server the writer; it catches up with fig.md too.
        save(second, vault / "plum.md", "# Plum\n\nPlums are picked in late August.\n")

        async def took_over():
            st = await second.status()
            f = st["folders"][0]
            return f if not f["read_only"] and f["queue"] == 0 else None

        await second.wait_for(took_over, timeout=90)
        for word in ("plum", "fig", "kiwi"):
            hits = await second.wait_for(lambda w=word: second.search(w, mode="keyword"),
                                         timeout=60)
            assert hits[0]["path"] == f"{word}.md"
    finally:
        if second is not None:
            await second.stop()
        await first.stop()
