"""The language server's features, in-process: the folder manager and each feature's function,
with the fake embedder and a real index on disk (no server process, no order between tests).

The end-to-end behaviour over stdio with the real model is in tests/lsp/; these pin down what
each feature does with its inputs, quickly and independently.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from markdown_it import MarkdownIt
from pygls.exceptions import JsonRpcInvalidParams

from mdsearch_ls.lsp.convert import escape_markdown, path_to_uri, related_markdown
from mdsearch_ls.lsp.features import commands, hover, symbols, sync
from mdsearch_ls.lsp.workspace_folders import FolderManager


def render(markdown: str) -> str:
    """HTML as an editor renders hover markdown: every link kept whatever its scheme, so a
    command: or javascript: link would show up here rather than be dropped by the renderer."""
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True
    return md.render(markdown)


EVIL = "evil`[run](command:workbench.action.terminal.new)`.md"


def _vault(root: Path) -> Path:
    notes = {
        "garden/Tomatoes.md": "# Tomatoes\n\n## Watering\n\nWater tomatoes deeply twice a week "
                              "in summer; mulch keeps the soil moist.\n",
        "garden/Roses.md": "# Roses\n\n## Pruning\n\nPrune roses in late winter, above an "
                           "outward bud.\n",
        "kitchen/Bread.md": "# Bread\n\n## Proofing\n\nLet the dough proof until doubled; "
                            "a warm kitchen speeds it up.\n",
        EVIL: "# <script>alert(1)</script> [x](command:evil)\n\nWater the garden tomatoes and "
              "mulch the soil in summer.\n",
    }
    for rel, text in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def manager(tmp_path: Path, fake_embedder) -> FolderManager:
    mgr = FolderManager(embedder=fake_embedder)
    yield mgr
    for folder in list(mgr.folders.values()):
        folder.close()


async def _ready(manager: FolderManager, root: Path):
    folder = manager.add(root)
    assert folder is not None
    report = await manager.start(folder)
    assert report is not None and not report.cancelled
    return folder


def _drain(folder) -> None:
    """Wait for every job queued so far: the writer runs them in order on one thread."""
    folder.settled().result(timeout=30)


async def test_workspace_symbol_searches_and_answers_ranges(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    await _ready(manager, root)
    found = await symbols.workspace_symbol(
        manager, types.WorkspaceSymbolParams(query="prune roses winter"))
    assert found and found[0].name == "Pruning"
    assert found[0].location.uri == path_to_uri(root / "garden/Roses.md")
    assert found[0].location.range.start.line == 2
    assert await symbols.workspace_symbol(manager, types.WorkspaceSymbolParams(query="  ")) == []
    with pytest.raises(JsonRpcInvalidParams, match="modified"):
        await symbols.workspace_symbol(
            manager, types.WorkspaceSymbolParams(query="roses modified:lastweek"))


async def test_hover_markdown_cannot_be_injected_by_a_file_name_or_a_title(
    manager, tmp_path
) -> None:
    root = _vault(tmp_path / "notes")
    folder = await _ready(manager, root)
    folder.apply_settings(folder.settings.__class__(hover_min_score=-1.0))
    params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=path_to_uri(root / "garden/Tomatoes.md")),
        position=types.Position(line=4, character=0),
    )
    text = (root / "garden/Tomatoes.md").read_text("utf-8")
    result = await hover.hover(manager, params, text)
    assert result is not None
    value = result.contents.value
    assert "evil" in value  # the hostile note is listed ...
    html = render(value)
    # ... but renders as text: the only links are file: URIs, no HTML survives.
    hrefs = html.split('href="')[1:]
    assert hrefs and all(h.startswith("file:") for h in hrefs), html
    assert "<script" not in html and "&lt;script&gt;" in html  # shown, not run


@pytest.mark.parametrize("text", [EVIL, "<img src=x onerror=alert(1)>", "a`b`c", "[x](y)", "*z*"])
def test_escaped_text_renders_as_itself(text: str) -> None:
    html = render(escape_markdown(text)).strip()
    assert html.startswith("<p>") and "<a" not in html and "<img" not in html
    assert "<code>" not in html and "<em>" not in html


def test_related_markdown_links_point_at_the_section_line(tmp_path) -> None:
    from mdsearch_ls.engine.api import Hit

    hit = Hit(path="a b/(c).md", title="T", breadcrumb="T > U", start_line=9, end_line=12,
              score=0.5, text="s")
    value = related_markdown(tmp_path, [hit])
    html = render(value)
    href = html.split('href="')[1].split('"')[0]
    assert href.endswith("#L10") and "%28c%29" in href and " " not in href


async def test_search_command_validates_through_the_engine(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    await _ready(manager, root)
    hits = await commands.search(manager, ({"query": "proof the dough", "limit": 1},))
    assert [h["path"] for h in hits] == ["kitchen/Bread.md"]
    assert hits[0]["uri"] == path_to_uri(root / "kitchen/Bread.md")
    for bad, field in ((({"query": "x", "filters": {"tag": 5}},), "filters.tag"),
                       (({"query": "x", "limit": 0},), "limit"),
                       (({"query": 3},), "query"),
                       (({"query": "x", "colour": 1},), "colour"),
                       ((), "argument object")):
        with pytest.raises(JsonRpcInvalidParams, match=field):
            await commands.search(manager, bad)


async def test_related_command_uses_the_open_buffer(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    await _ready(manager, root)
    uri = path_to_uri(root / "kitchen/Bread.md")
    buffer = "# Bread\n\n## Proofing\n\nPrune the roses above an outward bud in late winter.\n"
    hits = await commands.related(manager, ({"uri": uri, "line": 4, "limit": 1},),
                                  lambda u: buffer if u == uri else None)
    assert [h["path"] for h in hits] == ["garden/Roses.md"]
    with pytest.raises(JsonRpcInvalidParams, match="line"):
        await commands.related(manager, ({"uri": uri, "line": -1},), lambda u: None)


async def test_saves_are_queued_to_the_writer_and_indexed(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    folder = await _ready(manager, root)
    new = root / "kitchen/Soup.md"
    new.write_text("# Soup\n\nSimmer the lentils with cumin until soft.\n", "utf-8")
    sync.did_save(manager, path_to_uri(new))
    _drain(folder)
    assert folder.is_indexed("kitchen/Soup.md")
    new.unlink()
    sync.changed(manager, [path_to_uri(new)])
    _drain(folder)
    assert not folder.is_indexed("kitchen/Soup.md")


async def test_a_gitignore_change_rescans_with_the_new_rules(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    folder = await _ready(manager, root)
    (root / ".gitignore").write_text("kitchen/\n", "utf-8")
    sync.changed(manager, [path_to_uri(root / ".gitignore")])
    await asyncio.gather(*manager._background)
    assert not folder.is_indexed("kitchen/Bread.md")
    assert folder.is_indexed("garden/Roses.md")


async def test_configuration_per_folder_and_search_settings_at_once(manager, tmp_path) -> None:
    a = await _ready(manager, _vault(tmp_path / "a"))
    b = await _ready(manager, _vault(tmp_path / "b"))
    reopen = manager.configure({"maxResults": 1, "perFile": 1},
                               {a.root: {"exclude": ["kitchen/"]}, b.root: {}})
    assert reopen == [a]  # only the folder whose index settings changed
    assert b.settings.max_results == 1  # a search setting: applied at once
    assert manager.settings_for(a.root).exclude == ("kitchen/",)
    assert manager.settings_for(b.root).exclude == ()
    fresh = await manager.reopen(a)
    await asyncio.gather(*manager._background)
    assert fresh is not None and not fresh.is_indexed("kitchen/Bread.md")
    assert fresh.settings.max_results == 1
    assert b.is_indexed("kitchen/Bread.md")


async def test_bad_settings_warn_and_keep_the_default(tmp_path, fake_embedder) -> None:
    messages: list[tuple[str, str]] = []
    mgr = FolderManager(embedder=fake_embedder,
                        on_message=lambda text, level: messages.append((text, level)))
    mgr.initialize({"chunkSize": "big", "maxResults": 7})
    assert mgr.settings.chunk_size == 1000 and mgr.settings.max_results == 7
    assert [lvl for _, lvl in messages] == ["warning"] and "chunkSize" in messages[0][0]


async def test_status_reports_each_folder(manager, tmp_path) -> None:
    root = _vault(tmp_path / "notes")
    await _ready(manager, root)
    st = commands.status(manager, ())
    assert st["state"] == "ready"
    (folder,) = st["folders"]
    assert folder["files"] == 4 and folder["index"]["state"] == "ready"
    assert folder["uri"] == path_to_uri(root)
    with pytest.raises(JsonRpcInvalidParams):
        commands.status(manager, (1, 2))


def test_outline_nests_headings() -> None:
    text = "# A\n\ntext\n\n## B\n\n### C\n\n## D\n\n```\n# not a heading\n```\n"
    (top,) = symbols.outline_symbols(text)
    assert top.name == "A" and [c.name for c in top.children] == ["B", "D"]
    assert [c.name for c in top.children[0].children] == ["C"]
