"""Vault hygiene: notes named but not linked, and sections that say what another note says.

* An **unlinked mention** is another note's title, alias or file name written as plain words
  (whole words, case aside) where a link could be: not in code, a comment, the front matter, a
  heading, a link, a URL or a tag. Only the first mention of each note is reported, and none of
  a note this one already links to (either way): one link per note is the convention, and a
  note that already links there needs no nagging.
* A **near-duplicate** is a section whose words are almost those of a section in another note:
  a copy, perhaps lightly edited. The stored vectors find the candidates (cosine at least
  ``DUPLICATE_CANDIDATE``, one matrix product over every section), and the words decide: the
  share of the two bodies' words that match in order (``difflib``'s ratio over words, headings
  left out) must reach ``duplicates.minScore``. The vectors alone cannot say "almost identical":
  they embed each section with its heading path, so a section copied word for word into a note
  of another title scored 0.90 on the test vault, while two paraphrases of one idea can score
  as high. Short sections, and template text that three or more notes share word for word (what
  ranking already discounts as boilerplate), are never reported: nobody copied them by hand.

Both read only the index and the buffer; neither embeds anything.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from mdsearch_ls.engine.notes.links import MD_LINK_RE, NoteText, merge_ranges
from mdsearch_ls.engine.notes.obsidian import WIKILINK_RE, in_ranges
from mdsearch_ls.engine.notes.outline import headings
from mdsearch_ls.engine.writing.vault_view import WORD_RE, VaultView

MIN_DUPLICATE_CHARS = 120
"""Characters a section needs before it can be a near-duplicate: "TODO" matches "TODO"."""
DUPLICATE_CANDIDATE = 0.75
"""Cosine from which two sections' words are compared (paraphrases of one topic score
0.6-0.75 with all-MiniLM-L6-v2; the copy in the test vault scores 0.90)."""
MAX_COMPARED_WORDS = 3000
BOILERPLATE_NOTES = 3
"""Text shared word for word by this many notes is a template (``ranking.boilerplate_weight``
starts discounting it there too)."""

_URL_RE = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]*:[^<>\s]*>|\b(?:https?|ftp|file)://[^\s<>()]+"
                     r"|\bwww\.[^\s<>()]+")
_HTML_RE = re.compile(r"</?[A-Za-z][^<>\n]*>")


@dataclass(frozen=True)
class Mention:
    """Another note's name written as plain text: where, which note, and the link to put
    there instead."""

    line: int
    start: int
    end: int
    text: str
    path: str
    name: str
    replacement: str = ""


@dataclass(frozen=True)
class DuplicateOf:
    """The other place of a near-duplicate."""

    path: str
    title: str
    breadcrumb: str
    start_line: int
    end_line: int
    score: float
    """The share of words the two sections have in common, in order (1: word for word)."""
    similarity: float
    """Cosine similarity of the two sections' vectors."""


@dataclass(frozen=True)
class Duplicate:
    """A section (lines as indexed) almost identical to sections of other notes, best first."""

    start_line: int
    end_line: int
    title: str
    score: float
    others: tuple[DuplicateOf, ...]


def with_replacement(mention: Mention, link: str) -> Mention:
    return replace(mention, replacement=link)


def _not_prose(note: NoteText) -> list[tuple[int, int]]:
    """Offset ranges where a name is not a mention: code, comments, front matter (literal), any
    link, URL or HTML tag, and every heading."""
    doc = note.doc
    text = doc.text
    ranges = list(note.literal)
    ranges.extend((a, b) for _, a, b in note.links)
    if "[[" in text:
        ranges.extend(m.span() for m in WIKILINK_RE.finditer(text))
    if "](" in text:
        ranges.extend(m.span() for m in MD_LINK_RE.finditer(text))
    ranges.extend(m.span() for m in _URL_RE.finditer(text))
    if "<" in text:
        ranges.extend(m.span() for m in _HTML_RE.finditer(text))
    starts = doc.starts
    for h in headings(doc):
        end = starts[h.selection_end_line] + len(doc.lines[h.selection_end_line])
        ranges.append((starts[h.line], end))
    return merge_ranges(ranges)


def _joined(text: str, words: list[tuple[int, int, str]]) -> bool:
    """Whether consecutive words are written as one name: spaces, one line break, a hyphen or an
    underscore between them, nothing else."""
    for (_, end, _), (start, _, _) in itertools.pairwise(words):
        gap = text[end:start]
        if gap.strip(" \t") not in ("", "-", "_", "\n") or len(gap) > 4:
            return False
    return True


def unlinked_mentions(view: VaultView, note: NoteText, source: str, linked: set[str], *,
                      limit: int = 100) -> list[Mention]:
    """The first plain-text mention of each other note ``source`` does not link with."""
    table, lengths = view.mention_names
    if not table:
        return []
    text = note.doc.text
    skip = _not_prose(note)
    keys = [a for a, _ in skip]
    words = [(m.start(), m.end(), m.group().casefold()) for m in WORD_RE.finditer(text)]
    found: list[Mention] = []
    done = {source, *linked}
    i = 0
    while i < len(words) and len(found) < limit:
        start, _, first = words[i]
        sizes = lengths.get(first)
        if not sizes or in_ranges(start, skip, keys) or (start and text[start - 1] == "#"):
            i += 1
            continue
        step = 1
        for n in sizes:
            run = words[i:i + n]
            if len(run) < n:
                continue
            path = table.get(tuple(w for _, _, w in run))
            if path is None or not _joined(text, run) or any(
                in_ranges(a, skip, keys) for a, _, _ in run[1:]
            ):
                continue
            step = n
            if path not in done:
                done.add(path)
                line, col = note.position(start)
                end_line, end_col = note.position(run[-1][1])
                if end_line == line:
                    found.append(Mention(line, col, end_col, text[start:run[-1][1]], path,
                                         view.title(path)))
            break
        i += step
    return found


def _words(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[0].lstrip().startswith("#"):
        lines = lines[1:]
    return [w.casefold() for w in WORD_RE.findall("\n".join(lines))][:MAX_COMPARED_WORDS]


def near_duplicates(view: VaultView, path: str, min_score: float,
                    section_text: Callable[[str, int], str], *,
                    limit: int = 20) -> list[Duplicate]:
    """Sections of ``path`` (as indexed) with another note's section whose words match at least
    ``min_score`` of theirs, with up to three such places each. ``section_text(path, number)``
    reads a section's text (the index keeps it)."""
    table = view.sections
    rows = table.rows(path)
    if not rows or not table.vectors.size:
        return []
    norms = np.linalg.norm(table.vectors, axis=1)
    eligible = (table.length >= MIN_DUPLICATE_CHARS) & (table.boiler < BOILERPLATE_NOTES) & (
        norms > 0)
    mine = np.asarray([r for r in rows if eligible[r]], dtype=np.int64)
    if not mine.size:
        return []
    sims = table.vectors @ table.vectors[mine].T
    sims[~eligible, :] = -1.0
    sims[rows.start:rows.stop, :] = -1.0
    out: list[Duplicate] = []
    for j, r in enumerate(mine.tolist()):
        col = sims[:, j]
        candidates = np.flatnonzero(col >= DUPLICATE_CANDIDATE)
        if not candidates.size:
            continue
        own = _words(section_text(path, int(table.sections[r])))
        others = []
        for h in candidates[np.argsort(-col[candidates], kind="stable")][:10].tolist():
            theirs = _words(section_text(table.paths[h], int(table.sections[h])))
            score = difflib.SequenceMatcher(None, own, theirs, autojunk=False).ratio()
            if score >= min_score:
                others.append(DuplicateOf(table.paths[h], table.titles[h], table.breadcrumbs[h],
                                          int(table.start_lines[h]), int(table.end_lines[h]),
                                          score, float(col[h])))
        if others:
            others.sort(key=lambda o: (-o.score, -o.similarity))
            out.append(Duplicate(int(table.start_lines[r]), int(table.end_lines[r]),
                                 table.titles[r], others[0].score, tuple(others[:3])))
            if len(out) >= limit:
                break
    return out


__all__ = ["Duplicate", "DuplicateOf", "Mention", "near_duplicates", "unlinked_mentions"]
