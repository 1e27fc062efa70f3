"""textDocument/completion: links by meaning after ``[[`` (and after ``](``).

The engine ranks notes and headings by a blend of how well their names match what follows
``[[`` and how close they are in meaning to the paragraph being written (see
``engine/writing/completion.py``); this module turns them into completion items. Each item replaces
the
whole link being typed (from ``[[`` to the cursor, and an auto-closed ``]]`` after it), and its
``filterText`` starts with exactly what was typed, so an editor's own fuzzy filter (VS Code's)
keeps the items found by meaning, whose names share no letter with it, and orders them by our
``sortText``. The list is marked incomplete: typing on asks again, and the paragraph's vector is
reused, so that costs no model call.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.engine.api import LinkCandidate
from mdsearch_ls.lsp.convert import Lines, escape_markdown
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

TRIGGERS = ["[", "("]


def documentation(item: LinkCandidate) -> types.MarkupContent:
    """What the item is: its place, why it is offered and its text, all escaped (a note's
    text must never become a link or HTML in the editor's popup)."""
    place = escape_markdown(item.breadcrumb.replace(" > ", " › "))
    parts = [f"**{place}** · {escape_markdown(item.path)}"]
    if item.why:
        parts.append(f"_{escape_markdown(item.why)}_")
    if item.snippet:
        parts.append(escape_markdown(item.snippet))
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts))


def _place(item: LinkCandidate) -> str:
    """The heading path, unless it only repeats the label (a note item)."""
    crumb = item.breadcrumb.replace(" > ", " › ")
    return "" if crumb.casefold() == item.label.casefold() else crumb


async def completion(
    manager: FolderManager, params: types.CompletionParams, text: str | None,
    codec: Any = None,
) -> types.CompletionList | None:
    """Link completion for the note at ``params``; None outside a link (other providers, like
    VS Code's own markdown paths, then answer alone)."""
    if text is None:
        return None
    found = manager.writing_for(params.text_document.uri, lambda s: s.completion_enabled)
    if found is None:
        return None
    _folder, rel, aids = found
    lines = Lines(text, codec)
    line, column = lines.point(params.position)
    semantic = manager.service.embedder.loaded  # names only while the model loads
    result = await manager.run(functools.partial(
        aids.complete_link, rel, text, line, column, semantic=semantic))
    if result is None:
        return None
    edit_range = lines.range(result.line, result.start, result.line, result.end)
    items = [
        types.CompletionItem(
            label=c.label,
            kind=types.CompletionItemKind.File if c.kind == "note"
            else types.CompletionItemKind.Reference,
            detail=" · ".join(p for p in (_place(c), c.why) if p),
            documentation=documentation(c),
            text_edit=types.TextEdit(range=edit_range, new_text=c.insert),
            filter_text=result.typed + c.label,
            sort_text=f"{n:04d}",
            preselect=n == 0 or None,
        )
        for n, c in enumerate(result.items)
    ]
    return types.CompletionList(is_incomplete=True, items=items)


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=TRIGGERS))
    async def on_completion(
        ls: MdSearchServer, params: types.CompletionParams
    ) -> types.CompletionList | None:
        return await completion(ls.manager, params, ls.document_text(params.text_document.uri),
                                ls.codec())
