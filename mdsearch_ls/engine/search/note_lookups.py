"""Note-level answers the searcher needs per query, cached until the index changes.

Which notes a file-level filter lets through, which notes a query names and how long each note
is are questions about notes (paths, mtimes, tags, titles, chunk counts), not chunks; they are
asked at every keystroke of a query in an editor, so the data is read from the manifest once per
index generation, and each filter's answer is kept until the next commit.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.search import keyword
from mdsearch_ls.engine.search.query import Filters, PathMatcher

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest


_QUOTED = re.compile(r"`([^`]+)`|(?<!\w)'([^']+)'(?!\w)")


@dataclass(frozen=True)
class Name:
    """How a query names a note (see :meth:`NoteLookups.named_notes`)."""

    words: int
    """Content words (stopwords aside) of the longest of its names the query holds: "from
    json" is one word, "revenue tracking" two."""
    written: bool
    """The query writes that name as a name, not as a word of a sentence: in a code span
    (`` `sort` ``) or quotes (``'make'``), capitalised past the query's first word ("when is
    Year empty"), as the whole query, or, for a name of two or more tokens, all of them in one
    piece ("on-call", "from json"; a stopword is part of such a name)."""
    rare: bool = False
    """A name of one content word that few of the vault's notes hold (see
    :meth:`NoteLookups.named_notes`): tldr's ``xargs`` is rare in its prose, an API
    reference's ``table`` is not."""


def written_as_name(text: str, name: frozenset[str], quoted: Iterable[str] = ()) -> bool:
    """Whether ``text`` writes the name (its tokens ``name``) as a name (see :class:`Name`);
    ``quoted``: the phrases typed in double quotes (no longer in ``text``)."""
    words = [w for w in keyword.tokens(text) if w not in keyword.STOPWORDS]
    if set(words) == name:
        return True
    spans = [a or b for a, b in _QUOTED.findall(text)] + list(quoted)
    if any(name <= set(keyword.tokens(span)) for span in spans):
        return True
    capitals = {t.lower() for t in keyword._TOKEN.findall(text)[1:] if t[:1].isupper()}
    return name <= capitals


def _typed_in_order(name: tuple[str, ...], typed: list[str]) -> bool:
    """Whether a name of two or more tokens is in the query as typed, in one piece: "on-call"
    (``on`` is a stopword: one content word, but typed as the name it is)."""
    n = len(name)
    return n >= 2 and any(tuple(typed[i:i + n]) == name for i in range(len(typed) - n + 1))


class NoteLookups:
    """Cached note-level lookups over one manifest. Thread-safe."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._lock = threading.Lock()
        self._mtimes: tuple[int, dict[str, float]] | None = None
        self._names: tuple[int, dict[str, Any]] | None = None
        self._sizes: tuple[int, dict[str, Any]] | None = None
        self._sections: tuple[int, dict[str, Any]] | None = None
        self._held: tuple[int, dict[Any, Any]] | None = None
        self._allowed: dict[tuple[Any, ...], set[str]] = {}
        self._allowed_gen = -1

    def count(self) -> int:
        """How many notes the index holds."""
        return len(self._file_mtimes())

    def allowed_paths(self, filters: Filters) -> set[str] | None:
        """Notes passing the file-level filters, or None when there are none (all pass).

        Cached per filter until the index changes: the LSP asks the same filtered query again
        at every keystroke of the text after it.
        """
        if not filters.file_level:
            return None
        gen = self.manifest.generation
        key = filters.key()[:5]
        with self._lock:
            if self._allowed_gen != gen:
                self._allowed, self._allowed_gen = {}, gen
            hit = self._allowed.get(key)
        if hit is not None:
            return hit
        paths = self._compute_allowed(filters)
        with self._lock:
            if self._allowed_gen == gen:
                if len(self._allowed) >= 64:
                    self._allowed.clear()
                self._allowed[key] = paths
        return paths

    def _compute_allowed(self, filters: Filters) -> set[str]:
        mtimes = self._file_mtimes()
        paths = set(mtimes)
        if filters.paths:
            matcher = PathMatcher.of(filters.paths)
            paths = {p for p in paths if matcher(p)}
        if filters.types:
            paths = {p for p in paths if p.rsplit(".", 1)[-1].lower() in filters.types}
        if filters.modified_after is not None:
            paths = {p for p in paths if mtimes[p] >= filters.modified_after}
        if filters.modified_before is not None:
            paths = {p for p in paths if mtimes[p] < filters.modified_before}
        if filters.tags:
            paths &= self.manifest.paths_with_tags(filters.tags)
        return paths

    def _file_mtimes(self) -> dict[str, float]:
        gen = self.manifest.generation
        cached = self._mtimes
        if cached is not None and cached[0] == gen:
            return cached[1]
        mtimes = self.manifest.file_mtimes()
        self._mtimes = (gen, mtimes)
        return mtimes

    def _per_note(self, slot: str, paths: Iterable[str], read: Any) -> dict[str, Any]:
        """This generation's answers for ``paths`` (or other keys: words for
        :meth:`rare_words`), read from the manifest for those not asked about yet: a query asks
        about its candidates' notes, never about all of them (a search process of a 96k-chunk
        index spent 3 s tokenizing every title to ask about 60)."""
        gen = self.manifest.generation
        with self._lock:
            cached = getattr(self, slot)
            if cached is None or cached[0] != gen:
                cached = (gen, {})
                setattr(self, slot, cached)
        known: dict[str, Any] = cached[1]
        missing = [p for p in set(paths) if p not in known]
        if missing:
            found = read(missing)
            for p in missing:
                known[p] = found.get(p)
        return known

    def note_sizes(self, paths: Iterable[str], unit: str = "chunks") -> dict[str, int]:
        """How many chunks (or ``unit`` "sections") each of ``paths`` has: the long-note
        penalty's measure of a note's size; a note no longer indexed counts 1."""
        sections = unit == "sections"
        known = self._per_note("_sections" if sections else "_sizes", paths, lambda missing:
                               self.manifest.chunk_counts(missing, sections=sections))
        return {p: known[p] or 1 for p in set(paths)}

    def _name_tokens(self, paths: Iterable[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Each note's names as their tokens, in order."""
        def read(missing: list[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
            names = {}
            for path, titles in self.manifest.titles(missing).items():
                seqs = [tuple(keyword.tokens(t)) for t in titles]
                # A name made only of stopwords ("How", "It") is named by half of all questions.
                names[path] = tuple(t for t in seqs if t and not set(t) <= keyword.STOPWORDS)
            return names

        return self._per_note("_names", paths, read)

    def rare_words(self, words: Iterable[str], share: float) -> set[str]:
        """Those of ``words`` that at most ``share`` of the notes hold (as FTS5 matches them:
        stemmed). Counted once per index generation and share, and only up to the share: a
        common word stops its count early."""
        limit = int(share * self.manifest.counts()[0])
        known = self._per_note("_held", [(w, limit) for w in words], lambda missing: {
            key: self.manifest.notes_matching(keyword._quote(key[0]), key[1] + 1)
            for key in missing})
        return {w for w in words if known[(w, limit)] <= limit}

    def named_notes(self, text: str, paths: Iterable[str], quoted: Iterable[str] = (),
                    rare_share: float = 0.0) -> dict[str, Name]:
        """Notes among ``paths`` whose title or an alias the query names in full, with how
        (``quoted``: the phrases the query typed in double quotes; ``rare_share``: a one-word
        name is rare when at most this share of the notes hold it, 0: not asked).

        "revenue tracking q3" names both a note "Revenue" and a note "Revenue tracking"; each
        is mapped to its longest name named (the second is the more specific), in content
        words. Words are matched exactly (no stemming): folding plurals let "files" name a
        note "file".
        """
        typed = keyword.tokens(text)
        words = set(typed)
        if not words:
            return {}
        paths = set(paths)
        names = self._name_tokens(paths)
        longest: dict[str, tuple[str, ...]] = {}
        for p in paths:
            held = [t for t in names.get(p) or () if set(t) <= words]
            if held:
                longest[p] = max(held, key=lambda t: (len(set(t) - keyword.STOPWORDS), len(t)))
        content = {p: frozenset(t) - keyword.STOPWORDS for p, t in longest.items()}
        single = {w for s in content.values() if len(s) == 1 for w in s}
        rare = self.rare_words(single, rare_share) if single and rare_share else set()
        quoted = tuple(quoted)
        return {p: Name(len(content[p]), written_as_name(text, content[p], quoted)
                        or _typed_in_order(longest[p], typed), bool(content[p] & rare))
                for p in longest}
