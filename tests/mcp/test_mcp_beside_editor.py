"""An editor's language server and the MCP server on one vault: one index, one writer.

The language server (``mdsearch serve``, driven by a real LSP client) writes the index; the MCP
server, started second, answers from it read-only, sees what the writer indexes, and becomes the
writer itself once the language server has exited.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from mcp_harness import EXAMPLE_VAULT, PYTHON, start
from pytest_lsp import ClientServerConfig, client_capabilities
from pytest_lsp.client import make_test_lsp_client

pytestmark = [pytest.mark.slow, pytest.mark.portable]


async def _eventually(check, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {value!r})")
        await asyncio.sleep(0.25)


async def _editor(vault: Path, cache: Path) -> Any:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    config = ClientServerConfig(server_command=[PYTHON, "-m", "mdsearch_ls", "serve"],
                                client_factory=make_test_lsp_client, server_env=env)
    client = await config.start()
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=vault.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=vault.as_uri(), name=vault.name)],
    ))
    return client


async def _lsp_status(client: Any) -> dict[str, Any]:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="mdsearch.status", arguments=[]))


async def test_mcp_reads_the_editors_index_then_takes_over(tmp_path: Path) -> None:
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    cache = tmp_path / "cache"  # the same cache and folder: the same index
    editor = await _editor(vault, cache)
    mcp = None
    try:
        async def editor_ready() -> bool:
            st = await _lsp_status(editor)
            return st["state"] == "ready" and all(
                f["state"] == "ready" and f["queue"] == 0 for f in st["folders"])

        await _eventually(editor_ready, 400, "the language server indexed the vault")

        mcp = await asyncio.to_thread(start, tmp_path, [vault], cache=cache)

        async def mcp_ready() -> dict[str, Any] | None:
            st = await asyncio.to_thread(mcp.status)
            ok = st["index"]["state"] == "ready" and st["model"]["state"] == "loaded"
            return st if ok else None

        st = await _eventually(mcp_ready, 300, "the MCP server answers from the editor's index")
        (folder,) = st["folders"]
        assert folder["read_only"] is True and folder["files"] == 20
        hits = (await asyncio.to_thread(mcp.call, "search_markdown", {
            "query": "what happens when a client pays late", "limit": 1})).structured_content
        assert hits["results"][0]["path"] == "finance/Revenue tracking.md"

        # The editor saves a new note; the language server indexes it; the MCP server sees it.
        kiwi = vault / "garden" / "Kiwi.md"
        kiwi.parent.mkdir()
        kiwi.write_text("# Kiwi\n\nKiwi vines need a male plant nearby to bear fruit.\n",
                        encoding="utf-8")
        editor.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=kiwi.as_uri())))

        async def mcp_finds(query: str, rel: str) -> bool:
            result = await asyncio.to_thread(mcp.call, "search_markdown",
                                             {"query": query, "limit": 3})
            return rel in [h["path"] for h in result.structured_content["results"]]

        await _eventually(lambda: mcp_finds("do kiwi plants need a male", "garden/Kiwi.md"), 60,
                          "the MCP server sees the note the editor indexed")
        st = await asyncio.to_thread(mcp.status)
        assert st["folders"][0]["read_only"] is True

        # The editor closes: the MCP server becomes the writer (on its timer, or at the next
        # change it sees) and indexes what changes from then on itself.
        await editor.shutdown_session()
        await editor.stop()
        editor = None
        plum = vault / "garden" / "Plum.md"
        plum.write_text("# Plum\n\nPlums are picked in late August, when they come away "
                        "with a gentle twist.\n", encoding="utf-8")
        await _eventually(lambda: mcp_finds("when are plums ready to pick", "garden/Plum.md"),
                          90, "the MCP server took over and indexed a new note")
        st = await asyncio.to_thread(mcp.status)
        assert st["folders"][0]["read_only"] is False
    finally:
        if editor is not None:
            await editor.stop()
        if mcp is not None:
            await asyncio.to_thread(mcp.close)
