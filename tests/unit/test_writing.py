"""Help while writing, in the engine: the link graph in the index, link completion, where a link
goes, related-not-linked, unlinked mentions and near-duplicates (fake embedder, real index).

The fixture vault (tests/fixtures/writing-vault) holds a related pair that does not link
(Garden journal › April and Worm bins › Feeding the worms), a linked pair (Tomatoes › Watering
and Watering schedule), mentions of notes in prose and in code and links (Garden journal), a
copied section (Sourdough starter and Bread baking, one word changed) and a template section in
three daily notes.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.workspace import Workspace

VAULT = Path(__file__).resolve().parents[1] / "fixtures" / "writing-vault"
JOURNAL = "journal/Garden journal.md"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return Path(shutil.copytree(VAULT, tmp_path / "vault"))


@pytest.fixture
def ws(vault: Path, tmp_path: Path, fake_embedder):
    with Workspace.open(vault, Settings(), embedder=fake_embedder,
                        index_dir=tmp_path / "index") as opened:
        opened.index()
        yield opened


def _end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def test_the_index_keeps_each_notes_links(ws) -> None:
    graph = ws.writing.view().graph
    assert graph.outgoing == {"garden/Tomatoes.md": {"garden/Watering schedule.md"}}
    assert graph.incoming["garden/Watering schedule.md"] == {"garden/Tomatoes.md"}
    assert ws.writing.linked_paths("garden/Watering schedule.md") == {"garden/Tomatoes.md"}


def test_an_index_from_before_links_gets_them_without_embedding_again(
    vault: Path, tmp_path: Path, fake_embedder
) -> None:
    index = tmp_path / "index"
    with Workspace.open(vault, Settings(), embedder=fake_embedder,
                        index_dir=index) as ws:
        ws.index()
        manifest = next(index.glob("*.sqlite3"))
    # What an index written before the links table looks like: no table, no marker.
    conn = sqlite3.connect(manifest)
    with conn:
        conn.execute("DROP TABLE links")
        conn.execute("DELETE FROM meta WHERE key = 'links'")
    conn.close()
    fake_embedder.reset_counts()
    with Workspace.open(vault, Settings(), embedder=fake_embedder,
                        index_dir=index) as ws:
        report = ws.index()
        assert report.files_indexed == 11 and report.chunks_embedded == 0
        assert fake_embedder.documents_embedded == 0
        assert ws.writing.view().graph.outgoing == {
            "garden/Tomatoes.md": {"garden/Watering schedule.md"}}
        assert ws.index().files_indexed == 0  # marked once only


def test_an_exact_title_comes_first_whatever_the_paragraph(ws) -> None:
    draft = "# Draft\n\nThe rose bushes need cutting back above the outward buds. [[Tomatoes"
    done = ws.writing.complete_link("draft.md", draft, *_end(draft))
    assert done is not None and done.items[0].label == "Tomatoes"
    assert done.items[0].insert == "[[Tomatoes]]"
    assert "title match" in done.items[0].why
    assert (done.line, done.start, done.end) == (2, draft.split("\n")[2].index("[["),
                                                 len(draft.split("\n")[2]))
    assert done.typed == "[[Tomatoes"


def test_meaning_ranks_notes_when_nothing_is_typed(ws) -> None:
    draft = ("# Draft\n\nA worm bin: balance greens (vegetable peelings, coffee grounds) with "
             "browns (shredded cardboard, dry leaves) as bedding, and never add meat. [[")
    done = ws.writing.complete_link("draft.md", draft, *_end(draft))
    assert done is not None
    assert done.items[0].path == "garden/Worm bins.md"
    assert "similar to this paragraph" in done.items[0].why
    kinds = {c.kind for c in done.items}
    assert kinds == {"note", "heading"}
    heading = next(c for c in done.items if c.kind == "heading")
    assert heading.insert == f"[[{heading.label}]]" and "#" in heading.label
    assert heading.snippet  # the section's text, to show beside it


def test_an_alias_inserts_the_note_with_the_alias_shown(ws) -> None:
    draft = "# Draft\n\nToday: [[compost he"
    done = ws.writing.complete_link("draft.md", draft, *_end(draft))
    assert done is not None and done.items[0].insert == "[[Composting|compost heap]]"


def test_after_a_hash_the_headings_of_that_note(ws) -> None:
    draft = "# Draft\n\nSee [[Tomatoes#wat"
    done = ws.writing.complete_link("draft.md", draft, *_end(draft))
    assert done is not None
    assert [c.insert for c in done.items] == ["[[Tomatoes#Watering]]"]
    own = "# Draft\n\n## Later part\n\nBack to [[#"
    done = ws.writing.complete_link("draft.md", own, *_end(own))
    assert done is not None and "[[#Later part]]" in [c.insert for c in done.items]


def test_an_auto_closed_link_is_replaced_whole(ws) -> None:
    draft = "# Draft\n\nSee [[Worm]] here"
    line = draft.split("\n")[2]
    done = ws.writing.complete_link("draft.md", draft, 2, line.index("]]"))
    assert done is not None
    assert (done.start, done.end) == (line.index("[["), line.index("]]") + 2)
    assert done.items[0].insert == "[[Worm bins]]"


def test_markdown_style_and_markdown_targets(ws) -> None:
    draft = "# Draft\n\nSee [[Worm bins"
    done = ws.writing.complete_link("journal/draft.md", draft, *_end(draft), style="markdown")
    assert done is not None and done.items[0].insert == "[Worm bins](../garden/Worm%20bins.md)"
    heading = next(c for c in done.items if c.kind == "heading")
    assert heading.path == "garden/Worm bins.md"  # by the note's name, after the note itself
    assert heading.insert.startswith(f"[{heading.heading}](../garden/Worm%20bins.md#")
    target = "# Draft\n\nSee [the worms](Wor"
    done = ws.writing.complete_link("journal/draft.md", target, *_end(target))
    assert done is not None and done.items[0].insert == "../garden/Worm%20bins.md)"


def test_no_completion_in_code_or_outside_a_link(ws) -> None:
    for text in ("# D\n\n```\n[[Tom", "# D\n\nplain words", "# D\n\n[[a|b"):
        assert ws.writing.complete_link("draft.md", text, *_end(text)) is None
    span = "# D\n\nIn code: `see [[Tom` here"
    inside = span.split("\n")[2].index("` here")
    assert ws.writing.complete_link("draft.md", span, 2, inside) is None


def test_the_note_being_written_is_not_offered(ws, vault: Path) -> None:
    text = (vault / "garden/Tomatoes.md").read_text() + "\nSee [[Tomat"
    done = ws.writing.complete_link("garden/Tomatoes.md", text, *_end(text))
    assert done is not None and all(c.path != "garden/Tomatoes.md" for c in done.items)
    # By meaning alone, and the same words then written in another note: there, Tomatoes is
    # what they are nearest (what is near a paragraph is kept per note as well as per text).
    text = (vault / "garden/Tomatoes.md").read_text() + "\nSee [["
    mine = ws.writing.complete_link("garden/Tomatoes.md", text, *_end(text))
    assert mine is not None and mine.items
    assert all(c.path != "garden/Tomatoes.md" for c in mine.items)
    theirs = ws.writing.complete_link("garden/Composting.md", text, *_end(text))
    assert theirs is not None and theirs.items[0].path == "garden/Tomatoes.md"
    assert all(c.path != "garden/Composting.md" for c in theirs.items)


def test_links_resolve_to_notes_headings_and_blocks(ws, vault: Path) -> None:
    text = ("# D\n\n[[Tomatoes#Staking]] [w](garden/Watering%20schedule.md#containers) "
            "[[Nowhere]] [[#Later]]\n\n## Later\n\nA line ^here\n\n[[draft#^here]]\n")
    (vault / "draft.md").write_text(text)
    ws.update(["draft.md"])
    resolve = ws.writing.resolve_link
    target = resolve("draft.md", text, 2, 3)
    assert target is not None and (target.path, target.line) == ("garden/Tomatoes.md", 2)
    line = text.split("\n")[2]
    target = resolve("draft.md", text, 2, line.index("[w]"))
    assert target is not None and (target.path, target.line) == ("garden/Watering schedule.md", 9)
    assert resolve("draft.md", text, 2, line.index("[[Nowhere")) is None
    target = resolve("draft.md", text, 2, line.index("[[#Later"))
    assert target is not None and (target.path, target.line) == ("draft.md", 4)
    target = resolve("draft.md", text, 8, 3)
    assert target is not None and (target.path, target.line) == ("draft.md", 6)
    assert resolve("draft.md", text, 0, 0) is None


def test_related_sections_say_which_are_linked(ws, vault: Path) -> None:
    text = (vault / "garden/Tomatoes.md").read_text()
    line = text.split("\n").index("## Watering")
    found = ws.writing.related_linked("garden/Tomatoes.md", line, text, k=10, min_score=-1.0)
    by_path = dict(zip([h.path for h in found.hits], found.linked, strict=True))
    assert by_path["garden/Watering schedule.md"] is True
    assert found.n_linked == 1 and len(found.hits) > 1


def test_a_link_is_suggested_for_an_unlinked_pair_only(ws, vault: Path) -> None:
    text = (vault / JOURNAL).read_text()
    april = text.split("\n").index("## April")
    suggestion = ws.writing.suggest_link(JOURNAL, text, april + 2, min_score=0.1)
    assert suggestion is not None
    assert suggestion.label == "Worm bins#Feeding the worms"
    assert suggestion.new_text == "\n\nSee also: [[Worm bins#Feeding the worms]]"
    lines = text.split("\n")
    assert (suggestion.line, suggestion.column) == (len(lines) - 2, len(lines[-2]))
    tomatoes = (vault / "garden/Tomatoes.md").read_text()
    watering = tomatoes.split("\n").index("## Watering")
    assert ws.writing.suggest_link("garden/Tomatoes.md", tomatoes, watering, min_score=0.1) is None
    # a template section (three daily notes) is never a suggestion; nor is a short one
    daily = (vault / "daily/2024-03-01.md").read_text()
    assert ws.writing.suggest_link("daily/2024-03-01.md", daily, 2, min_score=0.0) is None
    assert ws.writing.suggest_link("daily/2024-03-01.md", daily, 9, min_score=0.0) is None
    # applied, the link resolves and the pair counts as linked from then on
    n = suggestion.line
    applied = "\n".join([*lines[:n], lines[n] + suggestion.new_text, *lines[n + 1:]])
    assert ws.writing.suggest_link(JOURNAL, applied, april + 2, min_score=0.1) is None
    last = applied.split("\n")
    target = ws.writing.resolve_link(JOURNAL, applied, len(last) - 2, len("See also: ") + 2)
    assert target is not None and target.path == "garden/Worm bins.md"


def test_unlinked_mentions_outside_code_links_and_headings(ws, vault: Path) -> None:
    text = (vault / JOURNAL).read_text()
    found = ws.writing.unlinked_mentions(JOURNAL, text)
    assert [(m.text, m.path, m.replacement) for m in found] == [
        ("composting", "garden/Composting.md", "[[Composting|composting]]"),
    ]
    m = found[0]
    assert text.split("\n")[m.line][m.start:m.end] == "composting"
    # worm bins is named in a code span, a fence and an external link's text: never a mention
    assert "garden/Worm bins.md" not in {x.path for x in found}


def test_mentions_first_only_whole_words_and_not_once_linked(ws) -> None:
    text = ("# Notes\n\n## Composting\n\nComposting works; more composting; compostingly "
            "not.\nThe worm\nbins are full. Tomato and tomatoes.\n")
    found = ws.writing.unlinked_mentions("notes.md", text)
    assert [(m.line, m.text) for m in found] == [(4, "Composting"), (6, "tomatoes")]
    assert found[0].replacement == "[[Composting]]"
    linked = text + "\nSee [[Composting]].\n"
    assert [m.text for m in ws.writing.unlinked_mentions("notes.md", linked)] == ["tomatoes"]
    styled = ws.writing.unlinked_mentions("journal/x.md", text, style="markdown")
    assert styled[0].replacement == "[Composting](../garden/Composting.md)"


def test_near_duplicates_a_copy_not_a_template_nor_a_neighbour(ws) -> None:
    found = ws.writing.near_duplicates("kitchen/Bread baking.md")
    assert [(d.title, d.others[0].path, d.others[0].title) for d in found] == [
        ("Feeding schedule", "kitchen/Sourdough starter.md", "Feeding schedule")]
    assert 0.95 <= found[0].score < 1.0  # one word changed
    assert found[0].start_line == 2
    assert ws.writing.near_duplicates("daily/2024-03-01.md") == []  # the template
    assert ws.writing.near_duplicates("garden/Worm bins.md") == []
    assert ws.writing.near_duplicates("kitchen/Bread baking.md", min_score=0.999) == []


def test_a_long_copied_section_is_found_by_its_chunks(ws, vault: Path) -> None:
    crops = ["tomato", "pepper", "aubergine", "chilli", "basil", "lettuce", "cabbage", "leek",
             "onion", "celery", "parsnip", "beetroot"]
    body = "\n\n".join(
        f"Sow the {w} seeds in a tray of fine compost, keep the tray warm until the {w} "
        f"seedlings show, then prick each {w} seedling into a pot of its own and harden it off "
        f"for two weeks before the {w} plants go outside." for w in crops)
    (vault / "garden/Sowing.md").write_text(f"# Sowing\n\n## Seed trays\n\n{body}\n")
    copy = body.replace("fine compost", "sieved compost", 1)
    (vault / "journal/Allotment notes.md").write_text(
        f"# Allotment notes\n\n## Seed trays\n\n{copy}\n")
    ws.update(["garden/Sowing.md", "journal/Allotment notes.md"])
    assert len(ws.chunks_of("garden/Sowing.md")) >= 3  # one section of several chunks
    found = ws.writing.near_duplicates("garden/Sowing.md")
    assert [(d.title, [o.path for o in d.others]) for d in found] == [
        ("Seed trays", ["journal/Allotment notes.md"])]
    assert 0.95 <= found[0].score < 1.0


def test_the_section_table_is_refreshed_from_the_previous_one(ws, vault: Path) -> None:
    from mdsearch_ls.engine.writing.section_table import SECTION_SQL, build_sections

    before = ws.writing.view().sections
    (vault / "garden/Tomatoes.md").write_text("# Tomatoes\n\n## Feeding\n\nFeed weekly once the "
                                              "first truss sets fruit.\n")
    (vault / "garden/Pruning roses.md").unlink()
    (vault / "kitchen/Sourdough starter 2.md").write_text(
        (vault / "kitchen/Sourdough starter.md").read_text())
    ws.update(["garden/Tomatoes.md", "garden/Pruning roses.md", "kitchen/Sourdough starter 2.md"])
    after = ws.writing.view().sections
    assert after is not before
    full = build_sections(ws.manifest.read(SECTION_SQL))
    rows = {(p, t): i for i, (p, t) in enumerate(zip(full.paths, full.titles, strict=True))}
    assert sorted(rows) == sorted(zip(after.paths, after.titles, strict=True))
    for i, key in enumerate(zip(after.paths, after.titles, strict=True)):
        j = rows[key]
        assert after.boiler[i] == full.boiler[j], key
        assert after.start_lines[i] == full.start_lines[j] and after.length[i] == full.length[j]
        assert after.keys[i] == full.keys[j] and after.is_heading[i] == full.is_heading[j]
    # the copied note shares its sections' text with the original: both count it now
    storing = after.row_at("kitchen/Sourdough starter.md", 9)
    assert storing is not None and after.boiler[storing] == 2
    assert "garden/Pruning roses.md" not in after.spans
    assert ws.writing.view().sections is after  # nothing changed since: the same table
