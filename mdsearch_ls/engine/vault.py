"""What the writing aids know about a whole index, read once per index generation.

Link completion, related counts, unlinked mentions and near-duplicates ask about every note at
once (its names, its sections and their vectors, who links to whom), at every ``[[`` typed or file
opened. Asked of SQLite each time that costs tens of milliseconds at 10k sections, so it is read
in one pass when the index changes (a commit raises the manifest's generation) and kept in
memory, each part only once something asks for it:

* notes: each note's title and aliases, and a :class:`~mdsearch_ls.engine.links.Resolver`;
* sections: one row per section of every note with the normalised mean of its chunks' vectors
  (the same "meaning of a section" ``related`` uses), its place, its length and how many notes
  share its text (template boilerplate);
* the link graph: each note's resolved links, both ways;
* names for mentions: each note's title, aliases and file name as word sequences.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mdsearch_ls.engine.keyword import STOPWORDS
from mdsearch_ls.engine.links import Link, Resolver, strip_suffix

if TYPE_CHECKING:
    from mdsearch_ls.engine.manifest import Manifest

SECTION_SQL = (
    "SELECT c.id, c.path, c.section, c.title, c.breadcrumb, c.start_line, c.end_line, "
    "c.body_hash, length(c.text), v.vector FROM chunks c "
    "LEFT JOIN vectors v ON v.embed_hash = c.embed_hash ORDER BY c.path, c.ordinal"
)
LINK_SQL = "SELECT path, kind, target, anchor, line FROM links"
NAME_SQL = "SELECT path, title, aliases FROM files"

WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
MIN_NAME_CHARS = 3


@dataclass
class SectionTable:
    """Every indexed section, row ``i`` of each array describing section ``i``.

    Rows are in path order and, within a note, in reading order, so a note's sections are the
    contiguous rows ``spans[path]``.
    """

    paths: list[str]
    sections: np.ndarray
    """Each row's section number in its note (``ChunkRecord.section``)."""
    titles: list[str]
    breadcrumbs: list[str]
    first_chunk: list[str]
    start_lines: np.ndarray
    end_lines: np.ndarray
    length: np.ndarray
    """Characters of the section's text (its chunks' text, heading included)."""
    boiler: np.ndarray
    """In how many notes the section's most widespread chunk body occurs (1: its own only)."""
    vectors: np.ndarray
    """One normalised row per section; a zero row when no chunk of it has a vector."""
    spans: dict[str, tuple[int, int]]
    note_paths: list[str]
    note_starts: np.ndarray
    """First row of each note of ``note_paths`` (for per-note maxima with ``reduceat``)."""

    def __len__(self) -> int:
        return len(self.paths)

    def rows(self, path: str) -> range:
        a, b = self.spans.get(path, (0, 0))
        return range(a, b)

    def row_at(self, path: str, line: int) -> int | None:
        """The row of the section of ``path`` holding ``line`` (as indexed)."""
        found = None
        for r in self.rows(path):
            if int(self.start_lines[r]) <= line:
                found = r
        return found

    def is_title_section(self, row: int, note_title: str) -> bool:
        """The text before the first heading, or a top heading saying the note's title: a
        link to the note, not to a heading in it."""
        return " > " not in self.breadcrumbs[row] and (
            self.titles[row].strip().casefold() == note_title.strip().casefold()
        )


def build_sections(rows: list[tuple[Any, ...]]) -> SectionTable:
    """The table from ``SECTION_SQL`` rows (chunks in path and reading order)."""
    body_notes: dict[str, set[str]] = {}
    for row in rows:
        body_notes.setdefault(row[7], set()).add(row[1])
    paths: list[str] = []
    numbers: list[int] = []
    titles: list[str] = []
    crumbs: list[str] = []
    first: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    length: list[int] = []
    boiler: list[int] = []
    group: list[int] = []
    blobs: list[bytes | None] = []
    last: tuple[str, int] | None = None
    for cid, path, section, title, crumb, start, end, body_hash, n_chars, blob in rows:
        key = (path, section)
        if key != last:
            last = key
            paths.append(path)
            numbers.append(section)
            titles.append(title)
            crumbs.append(crumb)
            first.append(cid)
            starts.append(start)
            ends.append(end)
            length.append(0)
            boiler.append(1)
        i = len(paths) - 1
        ends[i] = max(ends[i], end)
        length[i] += int(n_chars or 0)
        boiler[i] = max(boiler[i], len(body_notes[body_hash]))
        group.append(i)
        blobs.append(blob)
    dim = next((len(b) // 4 for b in blobs if b), 0)
    vectors = np.zeros((len(paths), dim), dtype=np.float32)
    if dim and rows:
        zero = bytes(dim * 4)
        chunks = np.frombuffer(b"".join(b if b else zero for b in blobs),
                               dtype=np.float32).reshape(len(blobs), dim)
        group_starts = np.flatnonzero(np.r_[True, np.diff(np.asarray(group)) != 0])
        vectors = np.add.reduceat(chunks, group_starts, axis=0).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
    spans: dict[str, tuple[int, int]] = {}
    for i, p in enumerate(paths):
        a, _ = spans.get(p, (i, i))
        spans[p] = (a, i + 1)
    note_paths = list(spans)
    return SectionTable(
        paths, np.asarray(numbers, dtype=np.int64), titles, crumbs, first,
        np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64), np.asarray(length, dtype=np.int64),
        np.asarray(boiler, dtype=np.int64), vectors, spans, note_paths,
        np.asarray([spans[p][0] for p in note_paths], dtype=np.int64),
    )


@dataclass
class LinkGraph:
    """Resolved links between notes (a note's links to itself left out)."""

    outgoing: dict[str, set[str]] = field(default_factory=dict)
    incoming: dict[str, set[str]] = field(default_factory=dict)

    def linked(self, path: str) -> set[str]:
        """Notes linked with ``path`` either way."""
        return self.outgoing.get(path, set()) | self.incoming.get(path, set())


def name_words(name: str) -> tuple[str, ...]:
    """A name as the words a mention of it must have, case folded."""
    return tuple(w.casefold() for w in WORD_RE.findall(name))


def worth_a_mention(words: tuple[str, ...]) -> bool:
    """Names too short, made of stopwords or of numbers only ("It", "The End", a daily note's
    date) would be found in every note."""
    if not words or sum(len(w) for w in words) < MIN_NAME_CHARS:
        return False
    if all(w in STOPWORDS for w in words):
        return False
    return not all(w.isdigit() for w in words)


class VaultView:
    """One index generation's notes, sections, links and names. Thread-safe; parts are built
    on first use."""

    def __init__(self, manifest: Manifest, generation: int) -> None:
        self.generation = generation
        self._manifest = manifest
        self._lock = threading.Lock()
        self.names: dict[str, tuple[str, ...]] = {}
        """Each note's title, then its aliases."""
        for path, title, aliases in manifest.read(NAME_SQL):
            self.names[path] = (title, *json.loads(aliases))
        self.resolver = Resolver(self.names)
        self._sections: SectionTable | None = None
        self._graph: LinkGraph | None = None
        self._mentions: tuple[dict[tuple[str, ...], str], dict[str, list[int]]] | None = None

    def title(self, path: str) -> str:
        names = self.names.get(path)
        return names[0] if names else strip_suffix(path).rsplit("/", 1)[-1]

    @property
    def sections(self) -> SectionTable:
        if self._sections is None:
            with self._lock:
                if self._sections is None:
                    self._sections = build_sections(self._manifest.read(SECTION_SQL))
        return self._sections

    @property
    def graph(self) -> LinkGraph:
        if self._graph is None:
            with self._lock:
                if self._graph is None:
                    graph = LinkGraph()
                    for path, kind, target, anchor, line in self._manifest.read(LINK_SQL):
                        dest = self.resolver.resolve(Link(kind, target, anchor, "", line, 0, 0),
                                                     path)
                        if dest is not None and dest != path:
                            graph.outgoing.setdefault(path, set()).add(dest)
                            graph.incoming.setdefault(dest, set()).add(path)
                    self._graph = graph
        return self._graph

    @property
    def mention_names(self) -> tuple[dict[tuple[str, ...], str], dict[str, list[int]]]:
        """Word sequence of each note's names -> the note (the shortest path when notes share a
        name), and for each first word the lengths of the sequences it starts, longest first."""
        if self._mentions is None:
            with self._lock:
                if self._mentions is None:
                    table: dict[tuple[str, ...], str] = {}
                    for path in sorted(self.names, key=lambda p: (p.count("/"), len(p), p)):
                        stem = strip_suffix(path).rsplit("/", 1)[-1]
                        for name in (*self.names[path], stem):
                            words = name_words(name)
                            if worth_a_mention(words):
                                table.setdefault(words, path)
                    firsts: dict[str, set[int]] = {}
                    for words in table:
                        firsts.setdefault(words[0], set()).add(len(words))
                    self._mentions = (table, {w: sorted(n, reverse=True)
                                              for w, n in firsts.items()})
        return self._mentions


class Vault:
    """The current :class:`VaultView` of one manifest, rebuilt when its generation moves."""

    def __init__(self, manifest: Manifest) -> None:
        self._manifest = manifest
        self._view: VaultView | None = None
        self._lock = threading.Lock()

    def view(self) -> VaultView:
        gen = self._manifest.generation
        view = self._view
        if view is not None and view.generation == gen:
            return view
        with self._lock:
            view = self._view
            if view is None or view.generation != gen:
                view = VaultView(self._manifest, gen)
                self._view = view
        return view


__all__ = ["LinkGraph", "SectionTable", "Vault", "VaultView", "build_sections", "name_words"]
