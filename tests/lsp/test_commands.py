"""mdsearch.* commands: results, fields, options, and InvalidParams for every bad argument."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .conftest import Server
from .helpers import expected_counts, heading_line

HIT_FIELDS = {"path", "uri", "title", "breadcrumb", "start_line", "end_line", "score", "snippet"}


async def test_search_fields_and_limit(main: Server) -> None:
    hits = await main.search("pointing a telescope at a spiral galaxy in autumn", limit=2)
    assert 1 <= len(hits) <= 2
    top = hits[0]
    assert set(top) >= HIT_FIELDS
    assert top["path"] == "hobbies/stargazing.md"
    assert top["uri"] == main.uri("hobbies/stargazing.md")
    assert top["title"] == "Finding the Andromeda galaxy"
    assert top["breadcrumb"].startswith("Stargazing")
    assert top["start_line"] == heading_line(main.root / top["path"], top["title"])
    assert top["end_line"] >= top["start_line"]
    assert isinstance(top["score"], float)
    assert "Pegasus" in top["snippet"] or "Andromeda" in top["snippet"]
    many = await main.search("notes", limit=10)
    assert len(many) > 3  # limit overrides maxResults (3)


async def test_search_modes(main: Server) -> None:
    kw = await main.search("banneton", mode="keyword", limit=5)
    assert kw and kw[0]["path"] == "sourdough.md" and kw[0]["title"] == "Shaping the loaf"
    sem = await main.search("my ferns keep dying from too much water", mode="semantic", limit=5)
    assert sem[0]["path"] == "houseplants.md"
    assert sem[0]["title"] == "Watering schedule"
    hyb = await main.search("receipts for donations", mode="hybrid", limit=5)
    assert hyb[0]["path"] == "taxes.md"


async def test_search_path_filter(main: Server) -> None:
    hits = await main.search("maintenance path:projects/", limit=10)
    assert hits and all(h["path"].startswith("projects/") for h in hits)


async def test_search_structured_filters(main: Server) -> None:
    hits = await main.search("maintenance", filters={"path": ["projects/"]}, limit=10)
    assert hits and all(h["path"].startswith("projects/") for h in hits)
    inline = await main.search("maintenance path:projects/", limit=10)
    assert [h["path"] for h in hits] == [h["path"] for h in inline]
    phrase = await main.search("", filters={"phrase": "banneton"}, limit=10)
    assert phrase and all(h["path"] == "sourdough.md" for h in phrase)


async def test_related(main: Server) -> None:
    path = main.root / "flour.md"
    line = heading_line(path, "Protein content and gluten") + 1
    hits = await main.command("mdsearch.related", {"uri": path.as_uri(), "line": line, "limit": 3})
    assert 1 <= len(hits) <= 3
    assert all(h["path"] != "flour.md" for h in hits)
    assert hits[0]["path"] == "sourdough.md"
    assert set(hits[0]) >= HIT_FIELDS


async def test_status_fields(main: Server) -> None:
    st = await main.status()
    assert st["state"] == "ready"
    (folder,) = st["folders"]
    for key in ("files", "chunks", "model", "index_dir", "queue", "state", "last_error"):
        assert key in folder, key
    assert folder["index_dir"] and "cache" in folder["index_dir"]
    assert folder["model"]
    assert folder["queue"] == 0
    assert folder["last_error"] is None


@pytest.mark.slow
async def test_reindex_reports_progress_again(main: Server) -> None:
    before = len(main.progress_ends())
    result = await main.command("mdsearch.reindex")
    assert result["started"] is True
    assert result["folders"] == [str(main.root.resolve())]

    async def ended() -> bool:
        return len(main.progress_ends()) > before

    await main.wait_for(ended, timeout=120)
    st = await main.wait_ready()
    files = st["folders"][0]["files"]
    chunks = st["folders"][0]["chunks"]
    end = main.progress_ends()[-1]
    assert f"{files} files" in end and f"{chunks} chunks" in end
    # notes created by other tests may exist; the fixture notes are all still counted
    assert files >= expected_counts(main.root)[0] - 1


def _outside(tmp: Any) -> str:
    return "file:///definitely/not/in/the/workspace/note.md"


BAD_ARGS = [
    ("mdsearch.search", [], "query"),
    ("mdsearch.search", [{}], "query"),
    ("mdsearch.search", [{"query": 3}], "query"),
    ("mdsearch.search", ["just a string"], "argument object"),
    ("mdsearch.search", [{"query": "x"}, {"extra": 1}], "argument object"),
    ("mdsearch.search", [{"query": "x", "limit": "ten"}], "limit"),
    ("mdsearch.search", [{"query": "x", "limit": 0}], "limit"),
    ("mdsearch.search", [{"query": "x", "mode": "fuzzy"}], "mode"),
    ("mdsearch.search", [{"query": "bread modified:last week"}], "modified"),
    ("mdsearch.search", [{"query": "x", "root": "/not/a/folder"}], "workspace folder"),
    ("mdsearch.search", [{"query": "x", "filters": "path:a/"}], "filters"),
    ("mdsearch.search", [{"query": "x", "filters": {"folder": "a/"}}], "valid filters are"),
    ("mdsearch.search", [{"query": "x", "filters": {"modified": "yesterday"}}], "date"),
    ("mdsearch.search", [{"query": "x", "filters": {"tag": [3]}}], "tag"),
    ("mdsearch.related", [{}], "uri"),
    ("mdsearch.related", [{"uri": 5, "line": 1}], "uri"),
    ("mdsearch.related", [{"uri": "OUTSIDE", "line": "one"}], "line"),
    ("mdsearch.related", [{"uri": "OUTSIDE", "line": -1}], "line"),
    ("mdsearch.related", [{"uri": "OUTSIDE", "line": 1}], "workspace"),
    ("mdsearch.related", [{"uri": "MISSING", "line": 1}], "does not exist"),
    ("mdsearch.reindex", [{"root": "/not/a/folder"}], "workspace folder"),
    ("mdsearch.reindex", [{"root": 12}], "root"),
    ("mdsearch.reindex", ["x"], "argument object"),
    ("mdsearch.status", ["x"], "argument"),
    ("mdsearch.status", [{}, {}], "argument"),
]


@pytest.mark.parametrize(("command", "args", "needle"), BAD_ARGS)
async def test_bad_arguments_are_invalid_params(
    main: Server, command: str, args: list[Any], needle: str
) -> None:
    args = [
        {
            k: (
                _outside(None) if v == "OUTSIDE"
                else main.uri("no-such-note.md") if v == "MISSING" else v
            )
            for k, v in a.items()
        }
        if isinstance(a, dict) else a
        for a in args
    ]
    with pytest.raises(JsonRpcException) as info:
        await main.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=args)
        )
    err = info.value
    assert err.code == -32602, (err.code, str(err))
    assert needle.lower() in str(err).lower(), str(err)
    # and the server keeps answering
    st = await main.status()
    assert st["state"] in ("ready", "indexing")
