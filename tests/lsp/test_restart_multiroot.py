"""A warm start re-embeds nothing; several workspace folders get one index each."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import copy_vault, start_server

pytestmark = pytest.mark.slow


async def test_warm_start_then_multi_root(tmp_path) -> None:
    cache = tmp_path / "cache"
    first = copy_vault(tmp_path / "notes-a")
    second = copy_vault(tmp_path / "notes-b")
    (second / "extra.md").write_text("# Extra\n\nOnly in the second folder: frobnitz.\n")

    server = await start_server([first], cache)
    try:
        await server.wait_ready()
        assert any("0 embedded" not in e for e in server.progress_ends())
    finally:
        await server.stop()

    # Same index (same cache dir, same folder), plus a new folder: one warm, one cold.
    server = await start_server([first, second], cache)
    try:
        st = await server.wait_ready()
        ends = server.progress_ends()
        assert any(e.startswith("notes-a:") and " 0 embedded" in e for e in ends), ends
        assert any(e.startswith("notes-b:") and " 0 embedded" not in e for e in ends), ends
        by_root = {f["root"]: f for f in st["folders"]}
        assert set(by_root) == {str(first.resolve()), str(second.resolve())}
        a, b = by_root[str(first.resolve())], by_root[str(second.resolve())]
        assert a["index_dir"] != b["index_dir"]
        assert b["files"] == a["files"] + 1
        hits = await server.search("frobnitz", mode="keyword")
        assert hits[0]["root"] == str(second.resolve())

        # Two folders merge the way the engine merges them for every front end: each folder's
        # own (hybrid) order is kept, the more similar head first.
        query = "how do we roll back a bad release"
        merged = await server.search(query, limit=10)
        alone = {r: await server.search(query, limit=10, root=r)
                 for r in (str(first.resolve()), str(second.resolve()))}
        assert {h["root"] for h in merged} == set(alone)
        for root, own in alone.items():
            mine = [h["path"] for h in merged if h["root"] == root]
            assert mine == [h["path"] for h in own][: len(mine)], (root, mine, own)
        heads = {r: 0 for r in alone}
        for h in merged:  # each pick was the most similar of the two folders' next hits
            candidates = [alone[r][i]["score"] for r, i in heads.items() if i < len(alone[r])]
            assert h["score"] == max(candidates), (h, candidates)
            heads[h["root"]] += 1
        assert hits[0]["uri"] == (second / "extra.md").as_uri()

        server.client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[],
                    removed=[types.WorkspaceFolder(uri=second.as_uri(), name=second.name)],
                )
            )
        )

        async def dropped():
            st = await server.status()
            return st if [f["root"] for f in st["folders"]] == [str(first.resolve())] else None

        await server.wait_for(dropped, timeout=20)
        assert await server.search("frobnitz", mode="keyword") == []
    finally:
        await server.stop()
