"""One ranking everywhere: the same query and filters give the same hits in the same order from
the CLI (``mdsearch search --format json``, a process of its own), ``workspace/symbol`` and the
``mdsearch.search`` command of a real language server (what the VS Code QuickPick calls), and
the ``search_markdown`` tool of a real ``mdsearch mcp`` process through the MCP SDK's client.

All of them read one index with the real model: the server writes it, the CLI and the MCP
server open it beside it as readers (as they do on a user's machine while an editor is open), so
a front end that ranked on its own (another fusion, another per-note cap, a filter applied
after the cut) would show up here as a different order.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mdsearch_ls.lsp.convert import uri_to_path

from .conftest import REPO, Server, copy_vault, start_server

pytestmark = pytest.mark.slow

# The queries and k, shared with the VS Code end-to-end test
# (vscode-extension/test/e2e/order.e2e.test.ts), which types each into the real QuickPick and
# checks its rows against the CLI's JSON, so all four front ends are held to one list:
# paraphrases, exact terms, every filter a query can carry inline, and words that name several
# headings (which VS Code's QuickPick re-sorted by name until it was told not to).
_SHARED = json.loads((Path(__file__).parent / "one_ranking_queries.json").read_text("utf-8"))
K: int = _SHARED["k"]
QUERIES: list[str] = _SHARED["queries"]
# Filters given as arguments (the command's ``filters`` object, the CLI's flags), not typed.
FILTERED = [
    ("laptop stolen", {"path": "security/"}, ["--path", "security/"]),
    ("incident", {"tag": "operations"}, ["--tag", "operations"]),
]

Key = tuple[str, int]


def _keys(hits: list[dict[str, Any]]) -> list[Key]:
    """Each hit as (note, first line of its section, 0-based)."""
    return [(h["path"], h["start_line"]) for h in hits]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ranked(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Server, Path]]:
    """A server over a copy of the examples vault (20 notes, enough for orders to differ),
    asked for K results per search, and the cache folder that holds its index."""
    base = tmp_path_factory.mktemp("one-ranking")
    vault = copy_vault(base / "vault", REPO / "examples" / "vault")
    server = await start_server([vault], base / "cache", init_options={"maxResults": K})
    await server.wait_ready(timeout=900)  # the first index embeds 149 chunks
    yield server, base / "cache"
    await server.stop()


def _rel(server: Server, uri: str) -> str:
    path = uri_to_path(uri)
    assert path is not None, uri
    return path.relative_to(server.root).as_posix()


async def _mcp(cache: Path, root: Path, queries: list[str]) -> list[list[Key]]:
    """``search_markdown`` for each query from a real ``mdsearch mcp`` process (SDK client),
    once its read-only folder is ready; each hit as (note, 0-based first line)."""
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mdsearch_ls", "mcp", "--root", str(root)], env=env)
    with open(cache.parent / "mcp-server.log", "a", encoding="utf-8") as errlog:
        async with (stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            for _ in range(3000):  # the model loads in the background: poll its status
                st = (await session.call_tool("index_status", {})).structured_content
                assert st is not None
                if st["index"]["state"] == "ready" and st["model"]["state"] == "loaded":
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"the MCP server never got ready: {st}")
            out = []
            for q in queries:
                res = await session.call_tool("search_markdown", {"query": q, "limit": K})
                assert not res.is_error, res.content
                hits = res.structured_content["results"]
                out.append([(h["path"], h["start_line"] - 1) for h in hits])  # MCP lines: 1-based
            return out


def _cli(cache: Path, cwd: Path, *args: str, stdin: str | None = None) -> list[dict[str, Any]]:
    """``mdsearch search ... --format json``: one JSON object per query, in order."""
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    res = subprocess.run(
        # (asked of the language server, which holds the index: printed by the CLI itself)
        [sys.executable, "-m", "mdsearch_ls", "search", "--format", "json", "-k", str(K), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=cwd, input=stdin,
    )
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


async def test_cli_symbols_and_command_rank_alike(ranked: tuple[Server, Path]) -> None:
    server, cache = ranked
    batch = "\n".join(json.dumps({"query": q}) for q in QUERIES) + "\n"
    cli = _cli(cache, server.root, "--queries", "-", stdin=batch)
    assert [o["query"] for o in cli] == QUERIES
    mcp = await _mcp(cache, server.root, QUERIES)
    assert all(o["index"]["state"] == "ready" for o in cli), cli[0]["index"]
    for query, out, from_mcp in zip(QUERIES, cli, mcp, strict=True):
        from_cli = _keys(out["results"])
        assert from_cli, f"no hits for {query!r}"
        command = _keys(await server.search(query, limit=K))
        symbols = [(_rel(server, s.location.uri), s.location.range.start.line)
                   for s in await server.symbols(query)]
        assert command == from_cli, query
        assert symbols == from_cli, query
        assert from_mcp == from_cli, query


async def test_filters_as_arguments_rank_alike(ranked: tuple[Server, Path]) -> None:
    server, cache = ranked
    for query, filters, flags in FILTERED:
        (out,) = _cli(cache, server.root, *flags, query)
        from_cli = _keys(out["results"])
        assert from_cli and all(
            p.startswith(filters["path"]) for p, _ in from_cli if "path" in filters
        ), from_cli
        command = _keys(await server.search(query, limit=K, filters=filters))
        assert command == from_cli, query
        # The same filter typed inline gives the same order again.
        inline = f"{query} {next(iter(filters))}:{next(iter(filters.values()))}"
        assert _keys(await server.search(inline, limit=K)) == from_cli, inline

