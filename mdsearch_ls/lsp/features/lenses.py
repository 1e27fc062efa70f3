"""Related but not linked, per heading: "3 related · 1 linked" as a code lens or an inlay hint.

``related.display`` picks the surface (``codeLens``, ``inlayHint`` or ``off``; a change applies
at the next request). Code lenses are listed from the buffer's outline at once and their counts
computed only when the editor resolves the ones it shows (``codeLens/resolve``): each is one
``related`` query from stored vectors, the same request the ``mdsearch.related`` command makes
with the lens's limit and minimum score, so the count is the length of the list its command
opens. Inlay hints carry their label when sent, so they are computed for the headings in the
range the editor asks about. "Linked" counts related sections whose note links to this one or
is linked from it (the buffer's own links included, saved or not).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.engine.api import IndexedFolder, LinkedRelated, outline
from mdsearch_ls.lsp.convert import Lines
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

RELATED_COMMAND = "mdsearch.related"


def section_headings(text: str) -> list[int]:
    """Lines of the headings whose section (up to the next heading of any level) has a body."""
    return [h.line for h in outline(text) if h.section_end_line > h.selection_end_line]


def title(result: LinkedRelated | None, limit: int) -> str:
    if result is None:
        return "related: the index is not ready yet"
    n = len(result.hits)
    shown = f"{n}+" if n >= limit else str(n)
    return f"{shown} related · {result.n_linked} linked"


def command(uri: str, line: int, folder: IndexedFolder, label: str) -> types.Command:
    """Opens the related list (VS Code's extension shows its QuickPick for it)."""
    settings = folder.settings
    return types.Command(title=label, command=RELATED_COMMAND, arguments=[{
        "uri": uri, "line": line, "limit": settings.related_max_results,
        "minScore": settings.related_min_score}])


async def _count(manager: FolderManager, folder: IndexedFolder, rel: str, line: int,
                 text: str | None) -> LinkedRelated | None:
    aids = folder.writing
    if aids is None:
        return None
    settings = folder.settings
    return await manager.run(lambda: aids.related_linked(
        rel, line, text, k=settings.related_max_results, min_score=settings.related_min_score))


def code_lenses(manager: FolderManager, uri: str, text: str | None) -> list[types.CodeLens]:
    """A lens per heading with a body, unresolved (no count yet)."""
    found = manager.rel_for(uri)
    if text is None or found is None or found[0].settings.related_display != "codeLens":
        return []
    return [types.CodeLens(range=types.Range(start=types.Position(line=line, character=0),
                                             end=types.Position(line=line, character=0)),
                           data={"uri": uri, "line": line})
            for line in section_headings(text)]


async def resolve_lens(manager: FolderManager, lens: types.CodeLens, documents: Any
                       ) -> types.CodeLens:
    """The lens's count and its command."""
    data = lens.data if isinstance(lens.data, dict) else {}
    uri, line = data.get("uri"), data.get("line")
    found = manager.rel_for(uri) if isinstance(uri, str) else None
    if found is None or not isinstance(line, int) or line < 0:
        lens.command = types.Command(title="related: unknown section", command="")
        return lens
    folder, rel = found
    result = await _count(manager, folder, rel, line, documents(uri))
    lens.command = command(uri, line, folder, title(result, folder.settings.related_max_results))
    return lens


async def inlay_hints(manager: FolderManager, params: types.InlayHintParams, text: str | None,
                      codec: Any = None) -> list[types.InlayHint]:
    uri = params.text_document.uri
    found = manager.rel_for(uri)
    if text is None or found is None or found[0].settings.related_display != "inlayHint":
        return []
    folder, rel = found
    lines = Lines(text, codec)
    first, last = params.range.start.line, params.range.end.line
    hints = []
    for line in section_headings(text):
        if not first <= line <= last:
            continue
        result = await _count(manager, folder, rel, line, text)
        label = title(result, folder.settings.related_max_results)
        hints.append(types.InlayHint(
            position=lines.position(line, len(lines.lines[line])),
            label=[types.InlayHintLabelPart(value=label,
                                            command=command(uri, line, folder, label))],
            padding_left=True,
        ))
    return hints


def _refresh(server: MdSearchServer) -> None:
    """Ask the client to request lenses and hints again (the index is ready now)."""
    caps = server.client_capabilities.workspace if server.initialized else None
    if caps is None:
        return
    try:
        if caps.code_lens and caps.code_lens.refresh_support:
            server.workspace_code_lens_refresh(None)
        if caps.inlay_hint and caps.inlay_hint.refresh_support:
            server.workspace_inlay_hint_refresh(None)
    except Exception:  # the client may be gone
        log.debug("lens refresh failed", exc_info=True)


def register(server: MdSearchServer) -> None:
    server.manager.ready_hooks.append(lambda folder: _refresh(server))

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))
    def on_code_lens(ls: MdSearchServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        return code_lenses(ls.manager, uri, ls.document_text(uri))

    @server.feature(types.CODE_LENS_RESOLVE)
    async def on_resolve(ls: MdSearchServer, lens: types.CodeLens) -> types.CodeLens:
        return await resolve_lens(ls.manager, lens, ls.document_text)

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    async def on_inlay_hint(ls: MdSearchServer, params: types.InlayHintParams
                            ) -> list[types.InlayHint]:
        uri = params.text_document.uri
        return await inlay_hints(ls.manager, params, ls.document_text(uri), ls.codec())
