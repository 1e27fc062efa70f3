"""workspace/symbol as semantic search, and documentSymbol as the heading outline.

A workspace-symbol query is a search query (filters included); each hit is a section whose name
is its title and whose container is its breadcrumb and file. VS Code re-filters these results
by fuzzy-matching names, so there the extension's own QuickPick is the real search UI; Neovim,
Helix and others show them as they come.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from mdsearch_ls.engine import chunking
from mdsearch_ls.engine.query import Filters, QueryError
from mdsearch_ls.engine.search import Hit
from mdsearch_ls.lsp.server import FolderIndex, MdSearchServer, path_to_uri

log = logging.getLogger(__name__)


def search_folders(
    ls: MdSearchServer,
    query: str,
    limit: int,
    *,
    mode: str | None = None,
    folders: list[FolderIndex] | None = None,
    filters: Filters | None = None,
) -> list[tuple[FolderIndex, Hit]]:
    """Search every (or the given) folder and merge by score; runs on a pool thread."""
    merged: list[tuple[FolderIndex, Hit]] = []
    for folder in folders if folders is not None else list(ls.folders.values()):
        ws = folder.ws
        if ws is None:
            continue
        merged.extend((folder, h) for h in ws.search(query, limit, mode=mode, filters=filters))
    if len(folders if folders is not None else ls.folders) > 1:
        merged.sort(key=lambda fh: -(fh[1].score or 0.0))  # None: keyword mode
    return merged[:limit]


def hit_uri(folder: FolderIndex, hit: Hit) -> str:
    return path_to_uri(folder.root / hit.path)


def hit_range(hit: Hit) -> types.Range:
    return types.Range(
        start=types.Position(line=hit.start_line, character=0),
        end=types.Position(line=hit.end_line + 1, character=0),
    )


async def run_in_pool(ls: MdSearchServer, fn: Any, *args: Any) -> Any:
    """Yield once first, so a request the client cancels right away is never computed."""
    await asyncio.sleep(0)
    return await asyncio.get_running_loop().run_in_executor(ls.thread_pool, fn, *args)


def _outline_symbols(text: str) -> list[types.DocumentSymbol]:
    lines = text.splitlines() or [""]

    def line_len(n: int) -> int:
        return len(lines[n]) if 0 <= n < len(lines) else 0

    roots: list[types.DocumentSymbol] = []
    stack: list[tuple[int, types.DocumentSymbol]] = []
    for h in chunking.outline(text):
        end = min(h.end_line, len(lines) - 1)
        sym = types.DocumentSymbol(
            name=h.title or "(untitled)",
            detail="#" * h.level,
            kind=types.SymbolKind.String if h.level > 1 else types.SymbolKind.Namespace,
            range=types.Range(
                start=types.Position(line=h.line, character=0),
                end=types.Position(line=max(end, h.line), character=line_len(max(end, h.line))),
            ),
            selection_range=types.Range(
                start=types.Position(line=h.line, character=0),
                end=types.Position(line=h.selection_end_line,
                                   character=line_len(h.selection_end_line)),
            ),
            children=[],
        )
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        if stack:
            stack[-1][1].children.append(sym)  # type: ignore[union-attr]
        else:
            roots.append(sym)
        stack.append((h.level, sym))
    return roots


def register_document_symbols(server: MdSearchServer) -> None:
    """Registered at initialize time only when the client wants our outline."""

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(
        ls: MdSearchServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol] | None:
        if not ls.settings.document_symbols:
            return None
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return _outline_symbols(doc.source)


def register(server: MdSearchServer) -> None:
    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(
        ls: MdSearchServer, params: types.WorkspaceSymbolParams
    ) -> list[types.WorkspaceSymbol]:
        query = params.query.strip()
        if not query:
            return []
        try:
            found = await run_in_pool(ls, search_folders, ls, query, ls.settings.max_results)
        except QueryError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        return [
            types.WorkspaceSymbol(
                name=hit.title,
                kind=types.SymbolKind.String if " > " in hit.breadcrumb
                else types.SymbolKind.Namespace,
                location=types.Location(uri=hit_uri(folder, hit), range=hit_range(hit)),
                container_name=f"{hit.breadcrumb} · {hit.path}",
            )
            for folder, hit in found
        ]
