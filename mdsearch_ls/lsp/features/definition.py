"""textDocument/definition on a link: ``[[Note#Heading]]`` (or ``[text](note.md#heading)``) opens
the note at its heading.

Editors without an Obsidian plugin cannot follow a wikilink at all, so the links completion
inserts would be dead ends there without this. Resolution is the engine's, from the index (a note
by path, file name, title or alias; a heading by its text or GitHub slug; a ``^block`` by its
line), with the buffer for links within the same note.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.lsp.convert import Lines, path_to_uri
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)


async def definition(
    manager: FolderManager, params: types.DefinitionParams, text: str | None, codec: Any = None,
) -> types.Location | None:
    """Where the link under the cursor goes; None on anything else (no link, a link to a note
    that does not exist)."""
    if text is None:
        return None
    found = manager.writing_for(params.text_document.uri, lambda s: s.definition_enabled)
    if found is None:
        return None
    folder, rel, aids = found
    lines = Lines(text, codec)
    line, column = lines.point(params.position)
    target = await manager.run(aids.resolve_link, rel, text, line, column)
    if target is None:
        return None
    start = types.Position(line=target.line, character=0)
    return types.Location(uri=path_to_uri(folder.root / target.path),
                          range=types.Range(start=start, end=start))


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def on_definition(
        ls: MdSearchServer, params: types.DefinitionParams
    ) -> types.Location | None:
        return await definition(ls.manager, params, ls.document_text(params.text_document.uri),
                                ls.codec())
