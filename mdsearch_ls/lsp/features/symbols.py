"""workspace/symbol as semantic search, and documentSymbol as the heading outline.

A workspace-symbol query is a search query (filters included); each hit is a section whose name
is its title and whose container is its breadcrumb and file. VS Code re-filters these results
by fuzzy-matching names, so there the extension's own QuickPick is the real search UI; Neovim,
Helix and others show them as they come.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from mdsearch_ls.engine.api import RequestError, SearchRequest, is_document, outline
from mdsearch_ls.lsp.convert import hit_range, hit_uri
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)


async def workspace_symbol(
    manager: FolderManager, params: types.WorkspaceSymbolParams
) -> list[types.WorkspaceSymbol]:
    try:
        request = SearchRequest.build(params.query, default_k=manager.settings.max_results)
    except RequestError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    if request.empty:
        return []
    found = await manager.run(manager.service.search, request)
    return [
        types.WorkspaceSymbol(
            name=hit.title,
            kind=types.SymbolKind.String if " > " in hit.breadcrumb else types.SymbolKind.Namespace,
            location=types.Location(uri=hit_uri(folder.root, hit), range=hit_range(hit)),
            container_name=f"{hit.breadcrumb} · {hit.path}",
        )
        for folder, hit in found
    ]


def outline_symbols(text: str) -> list[types.DocumentSymbol]:
    """The heading outline as nested DocumentSymbols (headings in code are not headings)."""
    lines = text.splitlines() or [""]

    def line_len(n: int) -> int:
        return len(lines[n]) if 0 <= n < len(lines) else 0

    roots: list[types.DocumentSymbol] = []
    made: list[types.DocumentSymbol] = []
    for h in outline(text):
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
        under = roots if h.parent is None else made[h.parent].children
        under.append(sym)  # type: ignore[union-attr]
        made.append(sym)
    return roots


def register_document_symbols(server: MdSearchServer) -> None:
    """Registered at initialize time only when the client wants our outline."""
    if not server.manager.settings.document_symbols:
        return

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(
        ls: MdSearchServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol] | None:
        text = ls.document_text(params.text_document.uri)
        if text is None or is_document(params.text_document.uri):
            return None  # a PDF's or notebook's buffer is not the text its hits' lines count
        return outline_symbols(text)


def register(server: MdSearchServer) -> None:
    server.initialize_hooks.append(register_document_symbols)

    @server.feature(types.WORKSPACE_SYMBOL)
    async def on_workspace_symbol(
        ls: MdSearchServer, params: types.WorkspaceSymbolParams
    ) -> list[types.WorkspaceSymbol]:
        return await workspace_symbol(ls.manager, params)
