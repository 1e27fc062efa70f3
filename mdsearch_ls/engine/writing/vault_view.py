"""What the writing aids know about a whole index, read once per index generation.

Link completion, related counts, unlinked mentions and near-duplicates ask about every note at
once (its names, its headings, who links to whom), at every ``[[`` typed or file opened. Asked of
SQLite each time that costs tens of milliseconds at 10k sections, so it is read in one pass when
the index changes (a commit raises the manifest's generation) and kept in memory, each part only
once something asks for it. Vectors are not among them: which sections are near something is
asked of the Chroma collection.

* notes: each note's title and aliases, and a :class:`~mdsearch_ls.engine.notes.links.Resolver`;
* sections: one row per section of every note, its place, its length and how many notes share
  its text (template boilerplate); refreshed from the previous generation's table, see
  :mod:`~mdsearch_ls.engine.writing.section_table`;
* the link graph: each note's resolved links, both ways;
* names for mentions: each note's title, aliases and file name as word sequences.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdsearch_ls.engine.notes.links import Link, Resolver, strip_suffix
from mdsearch_ls.engine.search.keyword import STOPWORDS
from mdsearch_ls.engine.writing.section_table import SectionTable, read_sections

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest

LINK_SQL = "SELECT path, kind, target, anchor, line FROM links"
NAME_SQL = "SELECT path, title, aliases FROM files"

WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
MIN_NAME_CHARS = 3


@dataclass
class LinkGraph:
    """Resolved links between notes (a note's links to itself left out)."""

    outgoing: dict[str, set[str]] = field(default_factory=dict)
    incoming: dict[str, set[str]] = field(default_factory=dict)


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

    def __init__(self, manifest: Manifest, generation: int,
                 previous: VaultView | None = None) -> None:
        self.generation = generation
        self._manifest = manifest
        self._previous = previous._sections if previous is not None else None
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
                    self._sections = read_sections(self._manifest, self._previous, self.names)
                    self._previous = None
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
                view = VaultView(self._manifest, gen, view)
                self._view = view
        return view


__all__ = ["LinkGraph", "Vault", "VaultView", "name_words"]
