"""workspace/symbol is semantic search over sections; documentSymbol is the heading outline."""

from __future__ import annotations

from lsprotocol import types

from .conftest import MAIN_OPTIONS, Server
from .helpers import heading_line, section_end_line


async def test_paraphrased_query_finds_the_section(main: Server) -> None:
    found = await main.symbols("how do I keep my wild yeast culture alive and bubbly")
    assert found, "no symbols"
    top = found[0]
    assert top.name == "Feeding the starter", [s.name for s in found]
    assert "Sourdough Baking" in top.container_name
    assert "sourdough.md" in top.container_name
    assert top.location.uri == main.uri("sourdough.md")
    path = main.root / "sourdough.md"
    start = heading_line(path, "Feeding the starter")
    assert top.location.range.start == types.Position(line=start, character=0)
    end = top.location.range.end.line
    assert section_end_line(path, "Feeding the starter") <= end <= heading_line(
        path, "Shaping the loaf"
    )


async def test_subfolder_section_found_with_its_path(main: Server) -> None:
    found = await main.symbols("repairing a punctured inner tube on my bike")
    assert found[0].name == "Fixing a flat tire"
    assert "projects/bicycle.md" in found[0].container_name
    assert "Bicycle Maintenance" in found[0].container_name


async def test_empty_query_is_empty_list(main: Server) -> None:
    assert await main.symbols("") == []
    assert await main.symbols("   ") == []


async def test_at_most_max_results(main: Server) -> None:
    found = await main.symbols("notes")
    assert 1 <= len(found) <= MAIN_OPTIONS["maxResults"]


async def test_document_symbol_outline(main: Server) -> None:
    path = main.root / "sourdough.md"
    uri = path.as_uri()
    main.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="markdown", version=1,
                text=path.read_text(encoding="utf-8"),
            )
        )
    )
    result = await main.client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert result is not None and len(result) == 1
    (root,) = result
    assert root.name == "Sourdough Baking"
    assert root.range.start.line == 0
    assert [c.name for c in root.children] == [
        "Feeding the starter", "Shaping the loaf", "Baking in a Dutch oven",
    ]
    for child in root.children:
        assert child.range.start.line == heading_line(path, child.name)
        assert child.selection_range.start.line == child.range.start.line
    assert root.children[0].range.end.line < root.children[1].range.start.line


async def test_document_symbol_absent_when_disabled(alt: Server) -> None:
    caps = alt.init_result.capabilities
    assert not caps.document_symbol_provider
    path = alt.root / "sourdough.md"
    uri = path.as_uri()
    alt.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="markdown", version=1,
                text=path.read_text(encoding="utf-8"),
            )
        )
    )
    try:
        result = await alt.client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    except Exception as exc:  # method not found is fine too
        assert "-32601" in str(exc) or "not found" in str(exc).lower(), exc
    else:
        assert result is None
