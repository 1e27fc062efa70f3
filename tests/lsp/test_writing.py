"""Help while writing, end to end: a real server over stdio, the real model, the writing vault.

tests/fixtures/writing-vault holds: a note to find by a paraphrase (Pruning roses), a related pair
that does not link (Garden journal › April and Worm bins › Feeding the worms), a linked pair
(Tomatoes › Watering and Watering schedule), a mention of a note in prose and others in code and
a link's text (Garden journal), a section copied with one word changed (Sourdough starter and
Bread baking) and a template section in three daily notes.

The shared ``writer`` server is only read from: drafts live in the editor's buffers (didOpen /
didChange), never on disk, so tests do not depend on each other's order.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import REPO, Server, copy_vault, start_server

WRITING_VAULT = REPO / "tests" / "fixtures" / "writing-vault"
JOURNAL = "journal/Garden journal.md"
OFF = {"completion": {"enabled": False}, "related": {"display": "off"},
       "suggest": {"enabled": False}, "mentions": {"enabled": False},
       "duplicates": {"enabled": False}, "definition": {"enabled": False}}

pytestmark = pytest.mark.slow


def record_versions(server: Server) -> None:
    """Keep the document version of each publishDiagnostics (pytest-lsp keeps only the list),
    so a test waits for the diagnostics of the text it sent, not a previous test's."""
    client = server.client
    client.published = {}  # type: ignore[attr-defined]
    features = client.protocol.fm.features
    original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def handler(params: types.PublishDiagnosticsParams) -> None:
        client.published[params.uri] = (params.version, list(params.diagnostics))  # type: ignore[attr-defined]
        original(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = handler


async def _server(base: Path, options: dict | None = None) -> Server:
    vault = copy_vault(base / "vault", WRITING_VAULT)
    server = await start_server([vault], base / "cache", init_options=options)
    record_versions(server)
    server.extra["ready"] = await server.wait_ready()
    return server


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def writer(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """The writing vault with every feature on, default settings."""
    server = await _server(tmp_path_factory.mktemp("writer"))
    yield server
    await server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def writer_off(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """The writing vault with every writing feature turned off."""
    server = await _server(tmp_path_factory.mktemp("writer-off"), OFF)
    yield server
    await server.stop()


class Buffer:
    """A document open in the test client, edited as an editor would (full-text changes)."""

    def __init__(self, server: Server, rel: str, text: str | None = None) -> None:
        self.server = server
        self.uri = server.uri(rel)
        self.text = text if text is not None else (server.root / rel).read_text("utf-8")
        self.version = 1
        server.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=self.uri, language_id="markdown",
                                                 version=1, text=self.text)))

    def doc(self) -> types.TextDocumentIdentifier:
        return types.TextDocumentIdentifier(uri=self.uri)

    def end(self) -> types.Position:
        lines = self.text.split("\n")
        return types.Position(line=len(lines) - 1, character=len(lines[-1]))

    def line_of(self, text: str) -> int:
        return self.text.split("\n").index(text)

    def apply(self, edits: list[types.TextEdit]) -> None:
        lines = self.text.split("\n")
        for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                        reverse=True):
            a, b = e.range.start, e.range.end
            head = "\n".join([*lines[:a.line], lines[a.line][:a.character]])
            tail = "\n".join([lines[b.line][b.character:], *lines[b.line + 1:]])
            lines = (head + e.new_text + tail).split("\n")
        self.text = "\n".join(lines)
        self.version += 1
        self.server.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri,
                                                                version=self.version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=self.text)]))

    def close(self) -> None:
        self.server.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=self.doc()))

    async def complete(self, position: types.Position | None = None) -> types.CompletionList:
        result = await self.server.client.text_document_completion_async(types.CompletionParams(
            text_document=self.doc(), position=position or self.end()))
        assert isinstance(result, types.CompletionList), result
        return result

    async def definition(self, line: int, character: int) -> types.Location | None:
        found = await self.server.client.text_document_definition_async(types.DefinitionParams(
            text_document=self.doc(), position=types.Position(line=line, character=character)))
        assert found is None or isinstance(found, types.Location), found
        return found

    async def actions(self, line: int, only: list[str] | None = None) -> list[types.CodeAction]:
        at = types.Position(line=line, character=0)
        found = await self.server.client.text_document_code_action_async(types.CodeActionParams(
            text_document=self.doc(), range=types.Range(start=at, end=at),
            context=types.CodeActionContext(diagnostics=[], only=only)))
        return [a for a in found or [] if isinstance(a, types.CodeAction)]

    async def diagnostics(self) -> list[types.Diagnostic]:
        """The diagnostics the server published for this document's current version."""
        async def published() -> tuple[list[types.Diagnostic]] | None:
            version, found = self.server.client.published.get(self.uri, (None, []))  # type: ignore[attr-defined]
            return (found,) if version == self.version else None

        (found,) = await self.server.wait_for(published, timeout=60)
        return found


PARAPHRASE = ("It is February and the rose bushes need cutting back before they leaf out; I "
              "want to trim them just above the buds that face outwards. Notes: [[")


async def test_completion_ranks_the_paraphrased_note_first_and_the_link_resolves(
    writer: Server
) -> None:
    draft = Buffer(writer, "drafts/roses.md", f"# Roses this year\n\n{PARAPHRASE}")
    try:
        result = await draft.complete()
        first = result.items[0]
        assert first.text_edit.new_text in ("[[Pruning roses]]", "[[Pruning roses#When to prune]]")
        assert "similar to this paragraph" in (first.detail or "")
        # Semantic items keep a filterText the editor's own filter cannot drop.
        assert all(i.filter_text.startswith("[[") for i in result.items)
        draft.apply([first.text_edit])
        assert draft.text.endswith(first.text_edit.new_text)
        line = len(draft.text.split("\n")) - 1
        target = await draft.definition(line, draft.text.split("\n")[line].index("[[") + 3)
        assert target is not None
        assert target.uri == writer.uri("garden/Pruning roses.md")
        expected = 0 if "#" not in first.text_edit.new_text else 2
        assert target.range.start.line == expected
    finally:
        draft.close()


async def test_an_exact_title_comes_first_for_a_typed_prefix(writer: Server) -> None:
    draft = Buffer(writer, "drafts/exact.md", f"# Roses\n\n{PARAPHRASE}Tomatoes")
    try:
        result = await draft.complete()
        assert result.items[0].label == "Tomatoes", [i.label for i in result.items[:5]]
        assert "title match" in (result.items[0].detail or "")
        draft.apply([types.TextEdit(range=types.Range(start=draft.end(), end=draft.end()),
                                    new_text="")])
        prefix = Buffer(writer, "drafts/prefix.md", "# Worms\n\nAsk the neighbours: [[Worm")
        try:
            result = await prefix.complete()
            assert result.items[0].text_edit.new_text == "[[Worm bins]]"
        finally:
            prefix.close()
    finally:
        draft.close()


async def test_the_lens_count_is_the_related_list_above_the_threshold(writer: Server) -> None:
    note = Buffer(writer, "garden/Tomatoes.md")
    try:
        lenses = await writer.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=note.doc()))
        assert [lens.range.start.line for lens in lenses] == [
            note.line_of("## Staking"), note.line_of("## Watering")]
        counts = {}
        for lens in lenses:
            resolved = await writer.client.code_lens_resolve_async(lens)
            command = resolved.command
            assert command is not None and command.command == "mdsearch.related"
            listed = await writer.command(command.command, *command.arguments)
            match = re.fullmatch(r"(\d+) related · (\d+) linked", command.title)
            assert match, command.title
            assert int(match.group(1)) == len(listed)
            assert command.arguments[0]["minScore"] == 0.5
            assert all(hit["score"] >= 0.5 for hit in listed)
            counts[lens.range.start.line] = (int(match.group(1)), int(match.group(2)), listed)
        n, linked, listed = counts[note.line_of("## Watering")]
        assert n >= 1 and linked == 1
        assert listed[0]["path"] == "garden/Watering schedule.md"
    finally:
        note.close()


async def test_link_action_for_an_unlinked_pair_and_not_for_a_linked_one(writer: Server) -> None:
    journal = Buffer(writer, JOURNAL)
    tomatoes = Buffer(writer, "garden/Tomatoes.md")
    try:
        april = journal.line_of("## April")
        offered = [a for a in await journal.actions(april + 2) if a.title.startswith("Link to ")]
        assert [a.title.split(" (")[0] for a in offered] == [
            "Link to Worm bins#Feeding the worms"]
        assert offered[0].kind == types.CodeActionKind.QuickFix
        journal.apply(offered[0].edit.changes[journal.uri])
        lines = journal.text.split("\n")
        added = next(n for n, line in enumerate(lines) if line.startswith("See also: [[Worm"))
        assert added > april
        target = await journal.definition(added, len("See also: [[") + 2)
        assert target is not None and target.uri == writer.uri("garden/Worm bins.md")
        worms = (writer.root / "garden/Worm bins.md").read_text().split("\n")
        assert target.range.start.line == worms.index("## Feeding the worms")
        # linked now (the buffer's new link counts at once): no second offer
        again = [a for a in await journal.actions(april + 2) if a.title.startswith("Link to ")]
        assert again == []
        watering = tomatoes.line_of("## Watering")
        linked = [a for a in await tomatoes.actions(watering + 2) if a.title.startswith("Link")]
        assert linked == []
    finally:
        journal.close()
        tomatoes.close()


async def test_unlinked_mentions_outside_code_and_links_only(writer: Server) -> None:
    journal = Buffer(writer, JOURNAL)
    try:
        found = await journal.diagnostics()
        hints = [d for d in found if d.code == "unlinked-mention"]
        assert len(hints) == 1, found
        hint = hints[0]
        assert hint.severity == types.DiagnosticSeverity.Hint
        line = journal.text.split("\n")[hint.range.start.line]
        assert line[hint.range.start.character:hint.range.end.character] == "composting"
        # "worm bins" is written in a code span, a fence and a link's text: no hint for it
        assert all("Worm bins" not in d.message for d in found)
        fixes = [a for a in await journal.actions(hint.range.start.line)
                 if "composting" in a.title]
        assert len(fixes) == 1
        journal.apply(fixes[0].edit.changes[journal.uri])
        assert "[[Composting|composting]]" in journal.text
        n = journal.text.split("\n").index(line.replace("composting",
                                                         "[[Composting|composting]]"))
        target = await journal.definition(n, journal.text.split("\n")[n].index("[[") + 2)
        assert target is not None and target.uri == writer.uri("garden/Composting.md")
    finally:
        journal.close()


async def test_near_duplicates_for_a_copied_section_not_for_distinct_ones(writer: Server) -> None:
    bread = Buffer(writer, "kitchen/Bread baking.md")
    daily = Buffer(writer, "daily/2024-03-02.md")
    worms = Buffer(writer, "garden/Worm bins.md")
    try:
        found = [d for d in await bread.diagnostics() if d.code == "near-duplicate"]
        assert [d.range.start.line for d in found] == [bread.line_of("## Feeding schedule")]
        assert found[0].severity == types.DiagnosticSeverity.Information
        other = found[0].related_information[0].location
        assert other.uri == writer.uri("kitchen/Sourdough starter.md")
        assert "Sourdough starter" in found[0].message or "Feeding schedule" in found[0].message
        # a template shared by three daily notes, and sections that are merely related: none
        assert [d for d in await daily.diagnostics() if d.code == "near-duplicate"] == []
        assert [d for d in await worms.diagnostics() if d.code == "near-duplicate"] == []
    finally:
        bread.close()
        daily.close()
        worms.close()


async def test_each_feature_is_off_when_its_setting_is(writer_off: Server) -> None:
    server = writer_off
    draft = Buffer(server, "drafts/off.md", f"# Off\n\n{PARAPHRASE}")
    journal = Buffer(server, JOURNAL)
    bread = Buffer(server, "kitchen/Bread baking.md")
    try:
        result = await server.client.text_document_completion_async(types.CompletionParams(
            text_document=draft.doc(), position=draft.end()))
        assert result is None or not getattr(result, "items", result)
        lenses = await server.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=journal.doc()))
        assert not lenses
        april = journal.line_of("## April")
        assert await journal.actions(april + 2) == []
        assert await journal.diagnostics() == []
        assert await bread.diagnostics() == []
        tomatoes = "See [[Tomatoes#Watering]]."
        linked = Buffer(server, "drafts/link.md", tomatoes)
        try:
            assert await linked.definition(0, 7) is None
        finally:
            linked.close()
    finally:
        draft.close()
        journal.close()
        bread.close()
