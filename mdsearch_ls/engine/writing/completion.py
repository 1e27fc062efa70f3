"""Link completion: notes and headings for the link being typed, by name and by meaning.

After ``[[`` (or ``](``), what follows is matched against every note's title, aliases and file
name and every heading (a fuzzy match: whole name, prefix, a word's start, anywhere, in order);
the paragraph being written is embedded once (its vector kept per paragraph text, so typing on
costs no model call) and its nearest chunks are asked of the Chroma collection, a section being
as near as its nearest chunk. The two are blended: once something is typed the name leads, and
an exact title or alias match always comes first; with nothing typed, meaning alone orders the
list. Sections of the note being written are left out.

Names and headings come from the index generation's
:class:`~mdsearch_ls.engine.writing.vault_view.VaultView`, matched by one regex pass over them
all; what is near a paragraph is kept per note, paragraph text and generation
(:class:`_Near`), so typing on after ``[[`` asks Chroma nothing again and reads from SQLite only
the vectors of notes a new name match brings in.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mdsearch_ls.engine.notes.links import github_anchor, relative_target, scan, wikilink
from mdsearch_ls.engine.notes.obsidian import normalise_inline
from mdsearch_ls.engine.notes.outline import outline
from mdsearch_ls.engine.search import preview
from mdsearch_ls.engine.writing.section_table import SectionTable, rows_of_chunks
from mdsearch_ls.engine.writing.vault_view import WORD_RE, VaultView

if TYPE_CHECKING:
    from mdsearch_ls.engine.writing.aids import WritingAids

SEMANTIC_FLOOR = 0.15
"""Below this similarity a paragraph and a section are unrelated (all-MiniLM-L6-v2 puts random
pairs around 0.0-0.1): such a section is offered only when its name matches what was typed."""
W_FUZZY, W_SEMANTIC = 0.6, 0.4
"""The blend once something is typed after ``[[``: the name match leads, meaning breaks ties
and brings in what the name alone would miss."""
SEMANTIC_NOTES, SEMANTIC_HEADINGS, MATCHED_MAX = 15, 25, 200
SEMANTIC_POOL = 100
"""Nearest chunks asked of Chroma for a paragraph (beside the note's own, which are dropped):
the notes and headings offered by meaning are the best of these, and a note often holds several
of them."""
NOTE_VECTORS_SQL = (
    "SELECT c.path, c.section, v.vector FROM chunks c "
    "JOIN vectors v ON v.embed_hash = c.embed_hash WHERE c.path IN ({marks})"
)

_WIKI_OPEN = re.compile(r"(!?)\[\[([^\[\]\n]*)$")
_WIKI_CLOSE = re.compile(r"^[^\[\]\n]*?\]\]|^\]")
_MD_OPEN = re.compile(r"(?<!!)\[([^\[\]\n]*)\]\(([^()\s]*)$")
_MD_CLOSE = re.compile(r"^[^()\s]*\)")
HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}(\s|$)")


@dataclass(frozen=True)
class LinkCandidate:
    """One note or heading offered after ``[[`` (or ``](``), with the text that replaces what
    was typed."""

    kind: str
    """``note`` or ``heading``."""
    label: str
    insert: str
    path: str
    heading: str | None
    line: int
    breadcrumb: str
    why: str
    """Why it is offered: "title", "alias ...", "name matches", "similar to this paragraph"."""
    score: float
    similarity: float | None
    snippet: str = ""


@dataclass(frozen=True)
class LinkCompletion:
    """Candidates for the link being typed and the range of the line they replace."""

    line: int
    start: int
    end: int
    typed: str
    """The line's text from ``start`` to the cursor (what an editor filters its list by)."""
    items: list[LinkCandidate]



def fuzzy_score(query: str, name: str) -> float:
    """How well a typed fragment matches a name (both case folded), 0 to 1: whole name, prefix,
    a word's start, anywhere, then in order with gaps (shorter spans better)."""
    if not query:
        return 0.0
    if name == query:
        return 1.0
    if name.startswith(query):
        return 0.8 + 0.1 * len(query) / len(name)
    i = name.find(query)
    if i > 0:
        return 0.72 if not name[i - 1].isalnum() else 0.62
    pos, first = -1, -1
    for ch in query:
        pos = name.find(ch, pos + 1)
        if pos < 0:
            return 0.0
        first = pos if first < 0 else first
    return 0.2 + 0.35 * len(query) / (pos - first + 1)


class _Names:
    """Case-folded names searchable by a fragment, in tiers: names starting with it, names with
    a word starting with it, names holding it, then (from three characters) names holding its
    characters in order. The tiers stop once ``limit`` names are found, and the first two look
    only at the names with a word starting with the fragment's first character (found once per
    character and index generation), so even a one-letter fragment over ten thousand headings
    costs milliseconds."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self._initials: dict[str, list[int]] = {}

    def _with_initial(self, ch: str) -> list[int]:
        found = self._initials.get(ch)
        if found is None:
            pattern = re.compile(r"(?<![^\W_])" + re.escape(ch))
            found = [i for i, name in enumerate(self.names) if pattern.search(name)]
            self._initials[ch] = found
        return found

    def matching(self, query: str, limit: int) -> list[tuple[float, int]]:
        if not query or not self.names:
            return []
        scores: dict[int, float] = {}
        n = len(query)
        for i in self._with_initial(query[0]):
            name = self.names[i]
            if name.startswith(query):  # fuzzy_score's values, without the call
                scores[i] = 1.0 if name == query else 0.8 + 0.1 * n / len(name)
            elif _starts_a_word(name, query):
                scores[i] = 0.72
        if len(scores) < limit and n >= 2:
            for i, name in enumerate(self.names):
                if i not in scores and query in name:
                    scores[i] = fuzzy_score(query, name)
        if len(scores) < limit and n >= 3:
            chars = set(query)
            for i, name in enumerate(self.names):
                if i not in scores and all(c in name for c in chars):
                    score = fuzzy_score(query, name)
                    if score > 0:
                        scores[i] = score
        found = sorted(((sc, i) for i, sc in scores.items()), key=lambda x: -x[0])
        return found[:limit]


def _starts_a_word(name: str, query: str) -> bool:
    i = name.find(query)
    while i > 0:
        if not name[i - 1].isalnum():
            return True
        i = name.find(query, i + 1)
    return i == 0


@dataclass
class _Lookup:
    """Per index generation: the names completion matches typed text against."""

    generation: int
    notes: list[tuple[str, str, str]]
    """(path, name as written, kind: title | alias | file)."""
    note_names: _Names
    heading_rows: list[int]
    heading_names: _Names


@dataclass
class _Near:
    """How near one paragraph is to the sections of one index generation: each section row's
    best chunk cosine. Chroma's nearest chunks fill it first (a note or section holding one of
    them has its best chunk among them); a note a name match brings in is read from the
    manifest's vectors once (``looked``), as search fills the cosine of a keyword-only hit."""

    generation: int
    vector: np.ndarray
    rows: dict[int, float]
    """Row -> cosine of its nearest chunk, for the rows known so far."""
    nearest: list[int]
    """The rows of Chroma's answer, nearest first."""
    nearest_notes: list[str]
    """Their notes, nearest first."""
    notes: dict[str, float] = field(default_factory=dict)
    """Note -> its best row's cosine, for the notes known so far."""
    looked: set[str] = field(default_factory=set)
    """Notes whose every row is known."""


class LinkCompleter:
    """Completes links over one workspace's index (through its :class:`WritingAids`)."""

    def __init__(self, aids: WritingAids) -> None:
        self._aids = aids
        self._lookup: _Lookup | None = None
        self._near: OrderedDict[tuple[str, str], _Near] = OrderedDict()
        self._lock = threading.Lock()

    def complete(self, path: str, text: str, line: int, column: int, *,
                 style: str | None = None, limit: int = 50,
                 semantic: bool = True) -> LinkCompletion | None:
        """Notes and headings for the link being typed at (line, column) of note ``path``'s
        buffer: after ``[[`` (wikilinks, or markdown links when the style says so) or after
        ``](``. None when the cursor is not in a link (or is in code)."""
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if not 0 <= line < len(lines):
            return None
        row = lines[line]
        column = min(max(column, 0), len(row))
        ctx = _context(row[:column], row[column:], column)
        if ctx is None:
            return None
        note_text = scan(text)
        if note_text.is_literal(note_text.offset(line, ctx["start"])):
            return None
        style = style or self._aids.settings.links_style
        view = self._aids.view()
        if ctx["note"] is not None:
            items = self._complete_headings(view, path, text, ctx, style)
        else:
            para = _paragraph(lines, line, ctx["start"], ctx["end"]) if semantic else None
            near = self._near_for(view, path, para) if para is not None else None
            items = self._complete_all(view, path, ctx, style, near, limit)
        return LinkCompletion(line, ctx["start"], ctx["end"], ctx["typed"],
                              self._with_snippets(view, items[:limit]))

    def _lookup_for(self, view: VaultView) -> _Lookup:
        found = self._lookup
        if found is not None and found.generation == view.generation:
            return found
        notes: list[tuple[str, str, str]] = []
        for p, names in view.names.items():
            stem = Path(p).stem
            notes.append((p, names[0], "title"))
            notes.extend((p, alias, "alias") for alias in names[1:])
            if stem.casefold() != names[0].casefold():
                notes.append((p, stem, "file"))
        table = view.sections
        rows = np.flatnonzero(table.is_heading).tolist()
        # A heading is found by its own words first, then by its note's ("worm feed" finds
        # Worm bins#Feeding the worms): the table keeps that key per row.
        found = _Lookup(view.generation, notes, _Names([n.casefold() for _, n, _ in notes]), rows,
                        _Names([table.keys[i] for i in rows]))
        self._lookup = found
        return found

    def _near_for(self, view: VaultView, source: str, para: str) -> _Near:
        """What ``para``, written in note ``source``, is near in this generation: asked of
        Chroma once per note and paragraph text (over-fetching by the note's own chunks,
        dropped: a ``where`` on the path costs Chroma more than the few extra neighbours)."""
        key = (source, para)
        with self._lock:
            found = self._near.get(key)
            if found is not None and found.generation == view.generation:
                self._near.move_to_end(key)
                return found
        vector = self._aids.embed(para)
        table = view.sections
        own = sum(len(table.hashes[r]) for r in table.rows(source))
        hits = self._aids.nearest([vector], SEMANTIC_POOL + own)[0]
        row_of = rows_of_chunks(self._aids.manifest, table, (cid for cid, _ in hits))
        rows: dict[int, float] = {}
        for cid, sim in hits:  # best first: a row's first chunk is its nearest
            r = row_of.get(cid)
            if r is not None and table.paths[r] != source:
                rows.setdefault(r, sim)
        notes: dict[str, float] = {}
        for r, sim in rows.items():
            notes.setdefault(table.paths[r], sim)
        near = _Near(view.generation, vector, rows, list(rows), list(notes), notes)
        with self._lock:
            self._near[key] = near
            while len(self._near) > 8:
                self._near.popitem(last=False)
        return near

    def _look_up(self, near: _Near, table: SectionTable, paths: set[str]) -> None:
        """The cosine of every section of ``paths`` not yet known (notes and headings a name
        brought in), from the manifest's vectors. Under the lock: another request about the
        same paragraph must not take a note for looked up before its rows are in."""
        with self._lock:
            need = sorted(p for p in paths if p not in near.looked)
            rows: dict[int, float] = {}
            for i in range(0, len(need), 500):
                batch = need[i:i + 500]
                for p, section, blob in self._aids.manifest.read(
                        NOTE_VECTORS_SQL.format(marks=",".join("?" * len(batch))), batch):
                    r = table.row_of(p, int(section))
                    if r is not None:
                        sim = float(np.frombuffer(blob, dtype=np.float32) @ near.vector)
                        rows[r] = max(sim, rows.get(r, -1.0))
            for r, sim in rows.items():
                near.rows[r] = sim
                p = table.paths[r]
                near.notes[p] = max(sim, near.notes.get(p, -1.0))
            near.looked.update(need)

    def _complete_all(self, view: VaultView, source: str, ctx: dict[str, Any], style: str,
                      near: _Near | None, limit: int) -> list[LinkCandidate]:
        query = ctx["query"].strip().casefold()
        table = view.sections
        lookup = self._lookup_for(view)
        # note -> (fuzzy score, name, kind) of its best-matching name
        matched: dict[str, tuple[float, str, str]] = {}
        for score, i in lookup.note_names.matching(query, MATCHED_MAX):
            p, name, kind = lookup.notes[i]
            if p != source and score > matched.get(p, (0.0, "", ""))[0]:
                matched[p] = (score, name, kind)
        heads: dict[int, float] = {}
        if query:
            for score, j in lookup.heading_names.matching(query, MATCHED_MAX):
                r = lookup.heading_rows[j]
                heads[r] = 1.0 if table.titles[r].strip().casefold() == query else min(score, 0.95)
        if near is not None:
            # the similarity of the notes and headings a name found
            self._look_up(near, table, {*matched, *(table.paths[r] for r in heads)})
            for p in near.nearest_notes[:SEMANTIC_NOTES]:
                if near.notes[p] >= SEMANTIC_FLOOR:
                    matched.setdefault(p, (0.0, view.title(p), "title"))
            near_heads = [r for r in near.nearest if table.is_heading[r]][:SEMANTIC_HEADINGS]
            for r in near_heads:
                if near.rows[r] >= SEMANTIC_FLOOR:
                    heads.setdefault(r, 0.0)
        # (score, note first, label key, build): only the best ``limit`` are built
        ranked: list[tuple[float, int, str, Any]] = []
        for p, (fz, name, kind) in matched.items():
            sim = near.notes.get(p) if near is not None else None
            score = _blend(fz, sim, query) + (2.0 if fz == 1.0 else 0.0)
            ranked.append((score, 0, name, ("note", p, fz, name, kind, sim)))
        for r, fz in heads.items():
            if table.paths[r] == source:
                continue
            sim = near.rows.get(r) if near is not None else None
            score = _blend(fz, sim, query) + (1.0 if fz == 1.0 else 0.0)
            ranked.append((score, 1, table.titles[r], ("heading", r, fz, sim)))
        ranked.sort(key=lambda x: (-x[0], x[1], x[2]))
        return [self._candidate(view, table, ctx, style, source, score, spec)
                for score, _, _, spec in ranked[: max(limit, 1)]]

    def _candidate(self, view: VaultView, table: Any, ctx: dict[str, Any], style: str,
                   source: str, score: float, spec: tuple[Any, ...]) -> LinkCandidate:
        if spec[0] == "note":
            _, p, fz, name, kind, sim = spec
            alias = name if kind == "alias" else None
            why = _why(kind if fz == 1.0 else ("name matches" if fz else ""), name, sim)
            return LinkCandidate(
                "note", _label(view, p, None, alias, style, ctx),
                self._insert(ctx, style, source, p, None, alias), p, None, 0,
                view.title(p), why, score, sim)
        _, r, fz, sim = spec
        p, heading = table.paths[r], table.titles[r]
        why = _why("heading" if fz == 1.0 else ("name matches" if fz else ""), heading, sim)
        return LinkCandidate(
            "heading", _label(view, p, heading, None, style, ctx),
            self._insert(ctx, style, source, p, heading, None), p, heading,
            int(table.start_lines[r]), table.breadcrumbs[r], why, score, sim)

    def _complete_headings(self, view: VaultView, source: str, text: str, ctx: dict[str, Any],
                           style: str) -> list[LinkCandidate]:
        """After ``[[Note#``: the headings of that note (of this one after ``[[#``)."""
        query = ctx["query"].strip().casefold()
        if ctx["note"]:
            target = view.resolver.resolve_name(ctx["note"], source)
            if target is None:
                return []
            table = view.sections
            heads = [(table.titles[r], int(table.start_lines[r]), table.breadcrumbs[r])
                     for r in table.rows(target) if table.is_heading[r]]
        else:
            target = source
            heads = [(h.title, h.line, h.title) for h in outline(text)]
        items = []
        for n, (title, line, crumb) in enumerate(heads):
            fz = fuzzy_score(query, title.casefold()) if query else 0.0
            if query and fz == 0:
                continue
            insert = (self._insert(ctx, style, source, target, title, None)
                      if ctx["note"] else _same_note(ctx, style, title))
            items.append(LinkCandidate(
                "heading", _label(view, target, title, None, style, ctx), insert, target, title,
                line, crumb, "heading", fz - n * 1e-6, None))
        items.sort(key=lambda c: -c.score)
        return items

    def _insert(self, ctx: dict[str, Any], style: str, source: str, path: str,
                heading: str | None, alias: str | None) -> str:
        if ctx["kind"] == "markdown":
            return relative_target(path, source, heading) + ")"
        return self._aids.link_to(path, source, heading, alias, style=style, embed=ctx["embed"])

    def _with_snippets(self, view: VaultView, items: list[LinkCandidate]) -> list[LinkCandidate]:
        table = view.sections
        want: dict[int, str] = {}
        for n, c in enumerate(items):
            rows = table.rows(c.path)
            row = next((r for r in rows if c.heading is None
                        or int(table.start_lines[r]) == c.line), rows.start if rows else None)
            if row is not None and rows:
                want[n] = table.first_chunk[row]
        texts = self._aids.chunk_texts(want.values())
        return [replace(c, snippet=preview.snippet(texts.get(want.get(n, ""), ""), limit=300).text)
                for n, c in enumerate(items)]


def _paragraph(lines: list[str], line: int, start: int, end: int) -> str | None:
    """The paragraph being written (the link being typed left out), or its section when the
    paragraph is a few words only; None with nothing to go on."""
    a = line
    while a > 0 and lines[a - 1].strip() and not HEADING_LINE.match(lines[a - 1]):
        a -= 1
    b = line
    while b + 1 < len(lines) and lines[b + 1].strip() and not HEADING_LINE.match(lines[b + 1]):
        b += 1
    current = lines[line][:start] + lines[line][end:]
    para = normalise_inline("\n".join([*lines[a:line], current, *lines[line + 1:b + 1]]))
    if len(WORD_RE.findall(para)) < 4:
        top = line
        while top > 0 and not HEADING_LINE.match(lines[top]):
            top -= 1
        para = normalise_inline("\n".join([*lines[top:line], current][-40:]))
    para = para.strip()
    return para if len(WORD_RE.findall(para)) >= 2 else None


def _context(prefix: str, suffix: str, column: int) -> dict[str, Any] | None:
    m = _WIKI_OPEN.search(prefix)
    if m is not None:
        typed = m.group(2)
        if "|" in typed:
            return None
        note, hash_, heading = typed.partition("#")
        close = _WIKI_CLOSE.match(suffix)
        return {"kind": "wiki", "embed": bool(m.group(1)), "start": m.start(),
                "end": column + (close.end() if close else 0), "typed": prefix[m.start():],
                "query": heading if hash_ else typed, "note": note.strip() if hash_ else None}
    m = _MD_OPEN.search(prefix)
    if m is not None:
        close = _MD_CLOSE.match(suffix)
        typed = m.group(2)
        return {"kind": "markdown", "embed": False, "start": m.start(2),
                "end": column + (close.end() if close else 0), "typed": typed,
                "query": typed.rsplit("/", 1)[-1].split("#")[0].removesuffix(".md") or m.group(1),
                "note": None}
    return None


def _blend(fuzzy: float, similarity: float | None, query: str) -> float:
    sim = max(similarity or 0.0, 0.0)
    return W_FUZZY * fuzzy + W_SEMANTIC * sim if query else sim


def _why(kind: str, name: str, similarity: float | None) -> str:
    parts = []
    if kind in ("title", "file", "heading"):
        parts.append(f"{kind} match")
    elif kind == "alias":
        parts.append(f"alias '{name}'")
    elif kind:
        parts.append(kind)
    if similarity is not None and similarity >= SEMANTIC_FLOOR:
        parts.append(f"similar to this paragraph ({similarity:.2f})")
    return " · ".join(parts)


def _label(view: VaultView, path: str, heading: str | None, alias: str | None, style: str,
           ctx: dict[str, Any]) -> str:
    if ctx["kind"] == "markdown" or style == "markdown":
        return f"{heading or alias or view.title(path)} ({path})"
    name = view.resolver.link_name(path)
    return name + (f"#{heading}" if heading else "") + (f"|{alias}" if alias else "")


def _same_note(ctx: dict[str, Any], style: str, heading: str) -> str:
    if ctx["kind"] == "markdown":
        return f"#{github_anchor(heading)})"
    if style == "markdown":
        return f"[{heading}](#{github_anchor(heading)})"
    return wikilink("", heading, None, embed=ctx["embed"])



__all__ = ["LinkCandidate", "LinkCompleter", "LinkCompletion", "fuzzy_score"]
