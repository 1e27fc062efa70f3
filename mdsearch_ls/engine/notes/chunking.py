"""Markdown note -> metadata, outline, sections and search chunks, in one pass.

Everything here is pure (text in, dataclasses out) so the indexer, the LSP features and the tests
share one notion of "where a section is". The work is done by three modules this one ties
together: :mod:`~mdsearch_ls.engine.notes.outline` (the block parse, headings, front matter and
section ranges), :mod:`~mdsearch_ls.engine.notes.obsidian` (Obsidian syntax read as text, inline
tags and links) and :mod:`~mdsearch_ls.engine.notes.splitting` (windows over long sections).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.locations import Location, Section
from mdsearch_ls.engine.notes import links as link_syntax
from mdsearch_ls.engine.notes import obsidian, splitting
from mdsearch_ls.engine.notes.outline import (
    Doc,
    Heading,
    as_list,
    front_matter,
    heading_at,
    headings,
    parse_doc,
    preamble,
)

__all__ = [
    "Chunk",
    "NoteMeta",
    "ParsedNote",
    "normalize_obsidian",
    "parse_note",
    "section_at_line",
]


@dataclass(frozen=True)
class NoteMeta:
    """Note-level metadata used for filters and for the embedded text."""

    title: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Chunk(Location):
    """One unit of retrieval: a section, or a window of a long section."""

    ordinal: int
    section: int
    """Index of its section in :attr:`ParsedNote.sections`."""
    text: str
    """The lines as written in the note, comments blanked (what a snippet shows)."""
    body: str
    """The reading text without the headings (Obsidian syntax rendered, comments gone): what
    is compared to tell template boilerplate shared by many notes."""
    embed_text: str
    """What the model embeds: the heading path, a blank line, then the body."""
    keyword_text: str
    """The FTS body column: the breadcrumb, then the body."""


@dataclass(frozen=True)
class ParsedNote:
    """Everything the indexer needs from one note, computed in one pass."""

    meta: NoteMeta
    headings: tuple[Heading, ...]
    sections: tuple[Section, ...]
    chunks: tuple[Chunk, ...]
    warnings: tuple[str, ...]
    links: tuple[link_syntax.Link, ...] = ()
    """Every link to a note (wikilinks, embeds, markdown links to ``.md`` files) outside code,
    comments and front matter, with its place: the index keeps them as the link graph."""


def _check_settings(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            f"chunk_overlap must be >= 0 and < chunk_size ({chunk_size}), got {chunk_overlap}"
        )


def _dedupe(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))


def _render(doc: Doc, a: int, b: int) -> str:
    return obsidian.render(doc.text, a, b, comments=doc.comments, code=doc.code)


def normalize_obsidian(text: str) -> str:
    """Rewrite Obsidian syntax into the words a reader sees, for embedding and keywords.

    ``[[Note|alias]]`` reads as "alias", a callout marker is noise, and a comment is not meant
    to be read at all; leaving them in skews both the vectors and BM25. Code blocks are left
    verbatim because ``[[`` or ``%%`` there is code.
    """
    doc = parse_doc(text)
    return _render(doc, 0, len(doc.text))


def parse_note(
    text: str,
    *,
    fallback_title: str,
    path: str = "",
    chunk_size: int = Settings.chunk_size,
    chunk_overlap: int = Settings.chunk_overlap,
) -> ParsedNote:
    """Parse one note into metadata, outline, sections and chunks in a single pass.

    Doing it in one place keeps the line ranges the LSP shows, the sections ``related`` looks
    up and the chunks that are embedded consistent with each other. ``path`` is carried into
    each chunk's location (the indexer passes the note's relative path; a caller that only
    wants sections may leave it empty). Bad front matter is reported in ``warnings`` rather
    than raised: one malformed note must not stop a vault from indexing.
    """
    _check_settings(chunk_size, chunk_overlap)
    doc = parse_doc(text)
    warnings: list[str] = []
    fm = front_matter(doc, warnings)

    title_value = fm.get("title")
    note_title = str(title_value).strip() if title_value not in (None, "") else ""
    if not note_title:
        note_title = fallback_title
    fm_tags = as_list(fm.get("tags", fm.get("tag")), split_spaces=True)
    aliases = as_list(fm.get("aliases", fm.get("alias")), split_spaces=False)
    inline_tags = obsidian.inline_tags(doc.tokens, doc.env)
    meta = NoteMeta(
        title=note_title,
        tags=_dedupe([obsidian.normalise_tag(t) for t in fm_tags] + inline_tags),
        aliases=_dedupe(aliases),
    )

    heads = headings(doc)
    first = preamble(doc, heads, note_title)
    spans = (first, *heads) if first else heads

    dtext, starts, lines = doc.text, doc.starts, doc.lines
    # What a snippet or a hover shows: the lines as written (wikilinks, markup), except that a
    # %%comment%% is blanked, as Obsidian's reading view hides it; offsets do not move.
    shown = obsidian.blank_spans(dtext, doc.comments) if doc.comments else dtext
    sections: list[Section] = []
    chunks: list[Chunk] = []
    same_title = note_title.casefold()
    blocks = splitting.block_starts(doc)

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset) - 1

    for idx, sp in enumerate(spans):
        sec_a = starts[sp.line]
        sec_b = starts[sp.section_end_line] + len(lines[sp.section_end_line])
        sections.append(
            Section(
                sp.title, sp.level, sp.path, sp.line, sp.section_end_line, shown[sec_a:sec_b]
            )
        )
        crumb = " > ".join(sp.path)
        head_line = (
            crumb
            if sp.path and sp.path[0].casefold() == same_title
            else f"{note_title}\n{crumb}"
        )
        if sp.selection_end_line >= sp.line:
            head_end = starts[sp.selection_end_line] + len(lines[sp.selection_end_line])
            body_a = min(head_end + 1, sec_b)
        else:
            head_end = None
            body_a = sec_a
        paras = splitting.boundaries(doc, blocks, sp.selection_end_line + 1, sp.section_end_line)
        windows = splitting.split(dtext, body_a, sec_b, chunk_size, chunk_overlap, paras)
        if not windows:
            windows = [(body_a, body_a)]
        for k, (a, b) in enumerate(windows):
            if a == b and head_end is None:
                continue
            if k == 0 and head_end is not None:
                shown_a = sec_a
                start_line = sp.line
            else:
                shown_a = a
                start_line = line_of(a)
            end_line = max(line_of(b - 1) if b > a else sp.selection_end_line, start_line)
            body = _render(doc, a, b) if b > a else ""
            if not body and k > 0:
                continue  # e.g. a window that is all %%comment%%: nothing to find there
            chunks.append(
                Chunk(
                    path=path,
                    title=sp.title,
                    breadcrumb=crumb,
                    start_line=start_line,
                    end_line=end_line,
                    ordinal=len(chunks),
                    section=idx,
                    text=shown[shown_a:b] if b > a else shown[sec_a : head_end or sec_a],
                    body=body,
                    embed_text=f"{head_line}\n\n{body}" if body else head_line,
                    keyword_text=f"{crumb}\n{body}" if body else crumb,
                )
            )

    found = (
        tuple(link for link, _, _ in link_syntax.read_links(doc).links)
        if "[[" in dtext or "](" in dtext else ()
    )
    return ParsedNote(meta, heads, tuple(sections), tuple(chunks), tuple(warnings),
                      found)


def section_at_line(note: ParsedNote, line: int) -> Section | None:
    """The section a cursor on ``line`` belongs to, for hover and ``related``.

    Lines in a gap (trailing blank lines, front matter) map to the nearest section before them,
    or the first one, so a hover never comes back empty on a non-empty note.
    """
    if not note.sections:
        return None
    before = len(note.sections) - len(note.headings)  # 1 when text precedes the first heading
    return note.sections[max(heading_at(note.headings, line) + before, 0)]
