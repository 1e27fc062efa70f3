"""Hover: the sections of other notes most related to the section under the cursor.

The section is taken from the editor's buffer, so a hover reflects unsaved edits; its vectors come
from the index when its text is unchanged, else it is embedded on the fly. Hits are collapsed to
one per note and template boilerplate is pushed down, so the list shows distinct notes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from mdsearch_ls.engine.api import RelatedRequest
from mdsearch_ls.lsp.convert import related_markdown
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)


async def hover(
    manager: FolderManager, params: types.HoverParams, text: str | None
) -> types.Hover | None:
    uri = params.text_document.uri
    found = manager.rel_for(uri)
    if found is None:
        return None
    folder, rel = found
    if not folder.settings.hover_enabled:
        return None
    if not folder.opened or (folder.held and not manager.service.embedder.loaded):
        return None  # still starting: no hover rather than a stall
    request = RelatedRequest(rel, params.position.line, text=text)
    result = await manager.run(folder.related, request)
    if not result.hits:
        return None
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=related_markdown(folder.root, result.hits)
        ),
    )


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: MdSearchServer, params: types.HoverParams) -> types.Hover | None:
        return await hover(ls.manager, params, ls.document_text(params.text_document.uri))
