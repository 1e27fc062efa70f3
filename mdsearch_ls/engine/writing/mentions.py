"""Vault hygiene: notes named but not linked, and sections that say what another note says.

* An **unlinked mention** is another note's title, alias or file name written as plain words
  (whole words, case aside) where a link could be: not in code, a comment, the front matter, a
  heading, a link, a URL or a tag. Only the first mention of each note is reported, and none of
  a note this one already links to (either way): one link per note is the convention, and a
  note that already links there needs no nagging.
* A **near-duplicate** is a section whose words are almost those of a section in another note:
  a copy, perhaps lightly edited. The Chroma collection finds the candidates: each of the
  section's chunks (up to ``QUERIED_CHUNKS`` of them, spread over it) asks for its nearest
  chunks, and the sections of those at cosine ``DUPLICATE_CANDIDATE`` or more are compared. A
  copy shares its chunks nearly word for word, so any of them finds the other copy, whereas a
  section's mean vector would drift from each chunk of a long one. The words decide: the share
  of the two bodies' words that match in order (``difflib``'s ratio over words, headings left
  out) must reach ``duplicates.minScore``. The vectors alone cannot say "almost identical": they
  embed each chunk with its heading path, so a section copied word for word into a note of
  another title scored 0.90 on the test vault, while two paraphrases of one idea can score as
  high. Short sections, and template text that three or more notes share word for word (what
  ranking already discounts as boilerplate), are never reported: nobody copied them by hand.

Both read only the index and the buffer; neither embeds anything.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdsearch_ls.engine.locations import ChunkRecord
from mdsearch_ls.engine.notes.links import MD_LINK_RE, NoteText, merge_ranges
from mdsearch_ls.engine.notes.obsidian import WIKILINK_RE, in_ranges
from mdsearch_ls.engine.notes.outline import headings
from mdsearch_ls.engine.writing.section_table import rows_of_chunks
from mdsearch_ls.engine.writing.vault_view import WORD_RE, VaultView

if TYPE_CHECKING:
    from mdsearch_ls.engine.writing.aids import WritingAids

MIN_DUPLICATE_CHARS = 120
"""Characters a section needs before it can be a near-duplicate: "TODO" matches "TODO"."""
DUPLICATE_CANDIDATE = 0.75
"""Cosine from which two sections' words are compared (paraphrases of one topic score
0.6-0.75 with all-MiniLM-L6-v2; the copy in the test vault scores 0.90)."""
QUERIED_CHUNKS = 3
"""Chunks of a section that ask Chroma for their neighbours (the first, the middle and the last
of a long one): a copy of the section shares them all, and one query per window of a section
hundreds of windows long would make opening its note wait."""
DUPLICATE_NEIGHBOURS = 20
"""Nearest chunks each query keeps beyond the note's own (which are dropped): room for a few
template copies, which are never candidates, before the copy that is."""
COMPARED = 10
"""Candidate sections whose words are compared with a section's, nearest first."""
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
    """Cosine similarity of the nearest pair of chunks of the two sections (what found it)."""


@dataclass(frozen=True)
class Duplicate:
    """A section (lines as indexed) almost identical to sections of other notes, best first."""

    start_line: int
    end_line: int
    title: str
    score: float
    others: tuple[DuplicateOf, ...]


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


def _spread(items: list[ChunkRecord], n: int) -> list[ChunkRecord]:
    """Up to ``n`` of ``items``, first and last among them."""
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def near_duplicates(aids: WritingAids, path: str, min_score: float, *,
                    limit: int = 20) -> list[Duplicate]:
    """Sections of ``path`` (as indexed) with another note's section whose words match at least
    ``min_score`` of theirs, with up to three such places each."""
    table = aids.view().sections
    manifest = aids.manifest

    def eligible(r: int) -> bool:
        return bool(table.length[r] >= MIN_DUPLICATE_CHARS and table.boiler[r] < BOILERPLATE_NOTES)

    mine = [r for r in table.rows(path) if eligible(r)]
    if not mine:
        return []
    texts: dict[str, dict[int, str]] = {}
    chunks: dict[str, dict[int, list[ChunkRecord]]] = {}

    def sections_of(note: str) -> dict[int, list[ChunkRecord]]:
        if note not in chunks:
            by_section: dict[int, list[ChunkRecord]] = {}
            for rec in manifest.chunks_for(note):
                by_section.setdefault(rec.section, []).append(rec)
            chunks[note] = by_section
            texts[note] = {n: "\n".join(c.text for c in recs) for n, recs in by_section.items()}
        return chunks[note]

    def section_words(row: int) -> list[str]:
        note = table.paths[row]
        sections_of(note)
        return _words(texts[note].get(int(table.sections[row]), ""))

    own = sum(len(recs) for recs in sections_of(path).values())
    asking = {r: _spread(sections_of(path).get(int(table.sections[r]), []), QUERIED_CHUNKS)
              for r in mine}
    vectors = manifest.vectors(c.embed_hash for recs in asking.values() for c in recs)
    queries = [(r, vectors[c.embed_hash]) for r, recs in asking.items() for c in recs
               if c.embed_hash in vectors]
    found: dict[int, list[tuple[str, float]]] = {}
    answers = aids.nearest([v for _, v in queries], DUPLICATE_NEIGHBOURS + own) if queries else []
    for (r, _), hits in zip(queries, answers, strict=True):
        found.setdefault(r, []).extend((cid, sim) for cid, sim in hits
                                       if sim >= DUPLICATE_CANDIDATE)
    row_of = rows_of_chunks(manifest, table, (cid for hits in found.values() for cid, _ in hits))
    out: list[Duplicate] = []
    for r in mine:
        near: dict[int, float] = {}
        for cid, sim in found.get(r, ()):
            h = row_of.get(cid)
            if h is not None and table.paths[h] != path and eligible(h):
                near[h] = max(sim, near.get(h, -1.0))
        if not near:
            continue
        own_words = section_words(r)
        others = []
        for h in sorted(near, key=lambda h: -near[h])[:COMPARED]:
            score = difflib.SequenceMatcher(None, own_words, section_words(h),
                                            autojunk=False).ratio()
            if score >= min_score:
                others.append(DuplicateOf(table.paths[h], table.titles[h], table.breadcrumbs[h],
                                          int(table.start_lines[h]), int(table.end_lines[h]),
                                          score, near[h]))
        if others:
            others.sort(key=lambda o: (-o.score, -o.similarity))
            out.append(Duplicate(int(table.start_lines[r]), int(table.end_lines[r]),
                                 table.titles[r], others[0].score, tuple(others[:3])))
            if len(out) >= limit:
                break
    return out


__all__ = ["Duplicate", "DuplicateOf", "Mention", "near_duplicates", "unlinked_mentions"]
