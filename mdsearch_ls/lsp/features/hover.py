"""Hover: the sections of other notes most related to the section under the cursor.

The section is taken from the editor's buffer, so a hover reflects unsaved edits; its vectors come
from the index when its text is unchanged, else it is embedded on the fly. Hits are collapsed to
one per note and template boilerplate is pushed down, so the list shows distinct notes.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from mdsearch_ls.engine.api import Hit, RelatedRequest
from mdsearch_ls.lsp.features.symbols import hit_uri, run_in_pool
from mdsearch_ls.lsp.server import FolderIndex, MdSearchServer

log = logging.getLogger(__name__)


def _escape(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


def render_related(folder: FolderIndex, hits: list[Hit]) -> str:
    """Markdown for a hover: a link to each section's line, its breadcrumb, score and snippet."""
    lines = ["**Related sections**", ""]
    for hit in hits:
        link = f"{hit_uri(folder, hit)}#L{hit.start_line + 1}"
        lines.append(
            f"- [{_escape(hit.title)}]({link}) · `{hit.path}` · {(hit.score or 0.0):.2f}  "
        )
        lines.append(f"  {_escape(hit.breadcrumb)}  ")
        if hit.snippet:
            lines.append(f"  _{_escape(hit.snippet[:160])}_")
    return "\n".join(lines)


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: MdSearchServer, params: types.HoverParams) -> types.Hover | None:
        if not ls.settings.hover_enabled:
            return None
        uri = params.text_document.uri
        found = ls.rel_for(uri)
        if found is None:
            return None
        folder, rel = found
        ws = folder.ws
        if ws is None or not ls.embedder.loaded:
            return None  # still starting: no hover rather than a stall
        doc = ls.workspace.get_text_document(uri)
        try:
            text = doc.source
        except Exception:
            text = None
        request = RelatedRequest(rel, params.position.line, text=text)
        result = await run_in_pool(ls, lambda: ws.related(request))
        if not result.hits:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value=render_related(folder, result.hits)
            ),
        )
