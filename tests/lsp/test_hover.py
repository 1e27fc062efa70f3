"""Hover lists sections of *other* notes related to the section under the cursor."""

from __future__ import annotations

import re
from urllib.parse import urldefrag

from lsprotocol import types

from .conftest import Server
from .helpers import heading_line

LINK = re.compile(r"\]\(([^)\s]+)\)")


async def hover(server: Server, rel: str, line: int) -> types.Hover | None:
    return await server.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=server.uri(rel)),
            position=types.Position(line=line, character=2),
        )
    )


async def test_hover_lists_other_files_only(main: Server) -> None:
    path = main.root / "sourdough.md"
    line = heading_line(path, "Feeding the starter") + 2
    result = await hover(main, "sourdough.md", line)
    assert result is not None
    assert result.contents.kind == types.MarkupKind.Markdown
    value = result.contents.value
    links = LINK.findall(value)
    assert links, value
    hovered = main.uri("sourdough.md")
    for link in links:
        target, frag = urldefrag(link)
        assert target != hovered, value
        assert target.startswith("file://")
        assert re.fullmatch(r"L\d+", frag), link
    # the related note about flour is the obvious neighbour of a sourdough starter
    assert any(urldefrag(link)[0] == main.uri("flour.md") for link in links), value


async def test_hover_none_with_high_min_score(alt: Server) -> None:
    path = alt.root / "sourdough.md"
    line = heading_line(path, "Feeding the starter") + 2
    assert await hover(alt, "sourdough.md", line) is None
