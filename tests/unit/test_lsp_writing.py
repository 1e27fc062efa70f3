"""The writing-help features of the language server, in-process (fake model, real index):
completion, definition, code lenses and inlay hints, code actions, diagnostics, and each one off
when its setting is off. End to end with the real model: tests/lsp/test_writing.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lsprotocol import types
from markdown_it import MarkdownIt

from mdsearch_ls.lsp.convert import path_to_uri
from mdsearch_ls.lsp.features import actions, commands, completion, definition, diagnostics, lenses
from mdsearch_ls.lsp.workspace_folders import FolderManager

VAULT = Path(__file__).resolve().parents[1] / "fixtures" / "writing-vault"
JOURNAL = "journal/Garden journal.md"
EVIL = "evil`[run](command:x)`<img src=x>.md"


@pytest.fixture
def manager(fake_embedder) -> FolderManager:
    mgr = FolderManager(embedder=fake_embedder)
    yield mgr
    for folder in list(mgr.folders.values()):
        folder.close()


@pytest.fixture
async def root(manager: FolderManager, tmp_path: Path) -> Path:
    vault = Path(shutil.copytree(VAULT, tmp_path / "vault"))
    (vault / EVIL).write_text("# Worm tea\n\nWorm bins make worm tea from castings.\n")
    folder = manager.add(vault)
    assert folder is not None
    report = await manager.start(folder)
    assert report is not None and report.files_indexed == 12
    return vault


def _doc(root: Path, rel: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=path_to_uri(root / rel))


def _pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def _configure(manager: FolderManager, **options: object) -> None:
    assert manager.configure(options, {}) == []  # search settings: nothing reopens


async def test_completion_items_replace_the_link_and_survive_the_editors_filter(
    manager, root
) -> None:
    text = "# Draft\n\n🌱 Feeding time: [[Worm]] later"
    line = text.split("\n")[2]
    # The cursor after "Worm", in UTF-16 units: the emoji before it counts two.
    cursor = len(line[: line.index("]]")]) + 1
    params = types.CompletionParams(text_document=_doc(root, "draft.md"), position=_pos(2, cursor))
    result = await completion.completion(manager, params, text)
    assert result is not None and result.is_incomplete
    first = result.items[0]
    assert first.label == "Worm bins" and first.kind == types.CompletionItemKind.File
    start = line.index("[[") + 1  # UTF-16 column of "[["
    assert first.text_edit.range == types.Range(start=_pos(2, start),
                                                end=_pos(2, start + len("[[Worm]]")))
    assert first.text_edit.new_text == "[[Worm bins]]"
    assert all(i.filter_text.startswith("[[Worm") for i in result.items)
    assert [i.sort_text for i in result.items] == sorted(i.sort_text for i in result.items)
    evil = next(i for i in result.items if i.label.startswith("evil"))
    html = MarkdownIt("commonmark").render(evil.documentation.value)
    assert "<a" not in html and "<img" not in html and "<code>" not in html
    _configure(manager, completion={"enabled": False})
    assert await completion.completion(manager, params, text) is None


async def test_definition_jumps_to_the_heading(manager, root) -> None:
    text = "# Draft\n\nSee [[Tomatoes#Watering]] and [[Nowhere]].\n"
    params = types.DefinitionParams(text_document=_doc(root, "draft.md"), position=_pos(2, 8))
    found = await definition.definition(manager, params, text)
    assert found is not None
    assert found.uri == path_to_uri(root / "garden/Tomatoes.md")
    assert found.range.start == _pos(8, 0)
    missing = types.DefinitionParams(text_document=_doc(root, "draft.md"), position=_pos(2, 34))
    assert await definition.definition(manager, missing, text) is None
    _configure(manager, definition={"enabled": False})
    assert await definition.definition(manager, params, text) is None


async def test_lens_counts_are_the_related_commands_list(manager, root) -> None:
    rel = "garden/Tomatoes.md"
    text = (root / rel).read_text()
    uri = path_to_uri(root / rel)
    _configure(manager, related={"minScore": 0.63, "maxResults": 10})
    found = lenses.code_lenses(manager, uri, text)
    assert [lens.range.start.line for lens in found] == [2, 8]  # the headings with a body
    assert all(lens.command is None for lens in found)  # counted only when resolved
    lens = await lenses.resolve_lens(manager, found[1], lambda u: text if u == uri else None)
    cmd = lens.command
    assert cmd is not None and cmd.command == "mdsearch.related"
    listed = await commands.related(manager, tuple(cmd.arguments), lambda u: text)
    assert cmd.title == f"{len(listed)} related · 1 linked" and listed
    assert all(hit["score"] >= 0.63 for hit in listed) and len(listed) < 10

    _configure(manager, related={"display": "inlayHint", "minScore": 0.63})
    assert lenses.code_lenses(manager, uri, text) == []
    hints = await lenses.inlay_hints(manager, types.InlayHintParams(
        text_document=_doc(root, rel),
        range=types.Range(start=_pos(0, 0), end=_pos(20, 0))), text)
    assert [h.position.line for h in hints] == [2, 8]
    assert hints[1].position.character == len("## Watering")
    assert hints[1].label[0].value == cmd.title
    _configure(manager, related={"display": "off"})
    assert lenses.code_lenses(manager, uri, text) == []
    assert await lenses.inlay_hints(manager, types.InlayHintParams(
        text_document=_doc(root, rel),
        range=types.Range(start=_pos(0, 0), end=_pos(20, 0))), text) == []


def _action_params(root: Path, rel: str, line: int, only: list[str] | None = None
                   ) -> types.CodeActionParams:
    return types.CodeActionParams(
        text_document=_doc(root, rel),
        range=types.Range(start=_pos(line, 0), end=_pos(line, 0)),
        context=types.CodeActionContext(diagnostics=[], only=only))


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.split("\n")
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                    reverse=True):
        a, b = e.range.start, e.range.end
        assert a.line == b.line
        row = lines[a.line]
        lines[a.line] = row[:a.character] + e.new_text + row[b.character:]
    return "\n".join(lines)


async def test_link_suggestion_for_an_unlinked_pair_and_none_for_a_linked_one(
    manager, root
) -> None:
    _configure(manager, suggest={"minScore": 0.1})
    text = (root / JOURNAL).read_text()
    uri = path_to_uri(root / JOURNAL)
    april = text.split("\n").index("## April")
    found = await actions.code_actions(manager, _action_params(root, JOURNAL, april + 2), text)
    link = [a for a in found or [] if a.title.startswith("Link to ")]
    assert [a.title.split(" (")[0] for a in link] == ["Link to Worm bins#Feeding the worms"]
    applied = _apply(text, link[0].edit.changes[uri])
    assert applied.rstrip().endswith("See also: [[Worm bins#Feeding the worms]]")
    tomatoes = (root / "garden/Tomatoes.md").read_text()
    watering = tomatoes.split("\n").index("## Watering")
    found = await actions.code_actions(
        manager, _action_params(root, "garden/Tomatoes.md", watering + 2), tomatoes)
    assert not [a for a in found or [] if a.title.startswith("Link to ")]
    _configure(manager, suggest={"enabled": False, "minScore": 0.1})
    found = await actions.code_actions(manager, _action_params(root, JOURNAL, april + 2), text)
    assert not [a for a in found or [] if a.title.startswith("Link to ")]


async def test_mention_fixes_and_the_link_all_source_action(manager, root) -> None:
    text = (root / JOURNAL).read_text()
    uri = path_to_uri(root / JOURNAL)
    march = text.split("\n").index("## March")
    found = await actions.code_actions(manager, _action_params(root, JOURNAL, march + 2), text)
    fix = next(a for a in found or [] if a.kind == types.CodeActionKind.QuickFix
               and "composting" in a.title)
    assert _apply(text, fix.edit.changes[uri]).count("[[Composting|composting]]") == 1
    source = await actions.code_actions(
        manager, _action_params(root, JOURNAL, 0, only=["source"]), text)
    assert [a.kind for a in source or []] == [actions.LINK_MENTIONS]
    assert len(source[0].edit.changes[uri]) == 1
    _configure(manager, mentions={"enabled": False}, suggest={"enabled": False})
    assert await actions.code_actions(
        manager, _action_params(root, JOURNAL, march + 2), text) == []


async def test_diagnostics_mentions_and_duplicates(manager, root) -> None:
    text = (root / JOURNAL).read_text()
    found, dups = await diagnostics.diagnostics_for(manager, path_to_uri(root / JOURNAL), text)
    assert dups == []
    assert [(d.severity, d.code, d.data["path"]) for d in found] == [
        (types.DiagnosticSeverity.Hint, "unlinked-mention", "garden/Composting.md")]
    bread = (root / "kitchen/Bread baking.md").read_text()
    found, dups = await diagnostics.diagnostics_for(
        manager, path_to_uri(root / "kitchen/Bread baking.md"), bread)
    assert found == dups and len(dups) == 1
    d = dups[0]
    assert d.severity == types.DiagnosticSeverity.Information and d.range.start.line == 2
    other = d.related_information[0].location
    assert other.uri == path_to_uri(root / "kitchen/Sourdough starter.md")
    assert other.range.start.line == 2
    daily = (root / "daily/2024-03-01.md").read_text()
    assert (await diagnostics.diagnostics_for(
        manager, path_to_uri(root / "daily/2024-03-01.md"), daily))[0] == []
    _configure(manager, duplicates={"enabled": False}, mentions={"enabled": False})
    assert (await diagnostics.diagnostics_for(
        manager, path_to_uri(root / "kitchen/Bread baking.md"), bread))[0] == []
    assert (await diagnostics.diagnostics_for(manager, path_to_uri(root / JOURNAL), text))[0] == []
