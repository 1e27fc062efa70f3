"""Code actions: link a related section that is not linked yet, link an unlinked mention, link
every mention in the note.

* "Link to Note#Heading" (``quickfix``) on a section whose best related section in another note
  scores at least ``suggest.minScore`` while the two notes are not linked either way: it appends
  ``See also: [[Note#Heading]]`` (or a markdown link, per ``links.style``) at the end of the
  section, or adds to a "See also:" line already there. Sections shorter than the engine's
  minimum get none, and at most ``MAX_SUGGESTIONS`` are offered for one request.
* "Link “text” to Note" (``quickfix``) on an unlinked mention (the hint diagnostics of
  ``diagnostics.py``): wraps the words into a link that still reads the same.
* "Link every unlinked mention in this note" (``source.mdsearch.linkMentions``).

Every action carries its edit: the editor applies it (mdsearch never writes a note itself).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.engine.api import heading_at, outline
from mdsearch_ls.lsp.convert import Lines
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

MAX_SUGGESTIONS = 3
LINK_MENTIONS = "source.mdsearch.linkMentions"
KINDS = [types.CodeActionKind.QuickFix, LINK_MENTIONS]


def _wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def sections_in(text: str, first: int, last: int) -> list[int]:
    """A line in each section that the lines first..last touch (its heading line, or ``first``
    for the text before the first heading)."""
    heads = outline(text)
    at = heading_at(heads, first)
    return [heads[at].line if at >= 0 else first,
            *(h.line for h in heads if first < h.line <= last)]


async def code_actions(
    manager: FolderManager, params: types.CodeActionParams, text: str | None, codec: Any = None,
) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    found = manager.writing_for(uri)
    if text is None or found is None:
        return None
    folder, rel, aids = found
    settings = folder.settings
    only = [str(k) for k in params.context.only] if params.context.only else None
    lines = Lines(text, codec)
    first, _ = lines.point(params.range.start)
    last, _ = lines.point(params.range.end)
    actions: list[types.CodeAction] = []

    if settings.mentions_enabled and any(_wanted(k, only) for k in KINDS):
        mentions = await manager.run(aids.unlinked_mentions, rel, text)
        context = [d for d in params.context.diagnostics if d.source == "mdsearch"
                   and d.code == "unlinked-mention"]
        edits = [types.TextEdit(range=lines.range(m.line, m.start, m.line, m.end),
                                new_text=m.replacement) for m in mentions]
        if _wanted(types.CodeActionKind.QuickFix, only):
            for m, edit in zip(mentions, edits, strict=True):
                if not first <= m.line <= last:
                    continue
                actions.append(types.CodeAction(
                    title=f"Link “{m.text}” to {m.name}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d for d in context if d.range == edit.range] or None,
                    edit=types.WorkspaceEdit(changes={uri: [edit]}),
                    is_preferred=True,
                ))
        if edits and _wanted(LINK_MENTIONS, only):
            actions.append(types.CodeAction(
                title=f"Link every unlinked mention in this note ({len(edits)})",
                kind=LINK_MENTIONS,
                edit=types.WorkspaceEdit(changes={uri: edits}),
            ))

    loaded = manager.service.embedder.loaded
    if settings.suggest_enabled and loaded and _wanted(types.CodeActionKind.QuickFix, only):
        for line in sections_in(text, first, last)[:MAX_SUGGESTIONS]:
            suggestion = await manager.run(aids.suggest_link, rel, text, line)
            if suggestion is None:
                continue
            at = lines.position(suggestion.line, suggestion.column)
            actions.append(types.CodeAction(
                title=f"Link to {suggestion.label} (related, {suggestion.hit.score or 0:.2f})",
                kind=types.CodeActionKind.QuickFix,
                edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(
                    range=types.Range(start=at, end=at), new_text=suggestion.new_text)]}),
            ))
    return actions


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=KINDS))
    async def on_code_action(
        ls: MdSearchServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        return await code_actions(ls.manager, params, ls.document_text(params.text_document.uri),
                                  ls.codec())
