"""Note-level answers the searcher needs per query, cached until the index changes.

Which notes a file-level filter lets through, which notes a query names and how long each note
is are questions about notes (paths, mtimes, tags, titles, chunk counts), not chunks; they are
asked at every keystroke of a query in an editor, so the data is read from the manifest once per
index generation, and each filter's answer is kept until the next commit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.search import keyword
from mdsearch_ls.engine.search.query import Filters, PathMatcher

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest


class NoteLookups:
    """Cached note-level lookups over one manifest. Thread-safe."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._lock = threading.Lock()
        self._mtimes: tuple[int, dict[str, float]] | None = None
        self._names: tuple[int, dict[str, Any]] | None = None
        self._sizes: tuple[int, dict[str, Any]] | None = None
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
        """This generation's answers for ``paths``, read from the manifest for the notes not
        asked about yet: a query asks about its candidates' notes, never about all of them (a
        search process of a 96k-chunk index spent 3 s tokenizing every title to ask about 60)."""
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

    def chunk_counts(self, paths: Iterable[str]) -> dict[str, int]:
        """How many chunks each of ``paths`` has (the long-note penalty's measure of a note's
        size); a note no longer indexed counts 1."""
        known = self._per_note("_sizes", paths, self.manifest.chunk_counts)
        return {p: known[p] or 1 for p in set(paths)}

    def _name_tokens(self, paths: Iterable[str]) -> dict[str, tuple[frozenset[str], ...]]:
        def read(missing: list[str]) -> dict[str, tuple[frozenset[str], ...]]:
            names = {}
            for path, titles in self.manifest.titles(missing).items():
                sets = [frozenset(keyword.tokens(t)) for t in titles]
                # A name made only of stopwords ("How", "It") is named by half of all questions.
                names[path] = tuple(s for s in sets if s and not s <= keyword.STOPWORDS)
            return names

        return self._per_note("_names", paths, read)

    def named_notes(self, text: str, paths: Iterable[str]) -> dict[str, int]:
        """Notes among ``paths`` whose title or an alias the query names in full.

        Maps each to the word count of the longest name named: "revenue tracking q3" names both
        a note "Revenue" and a note "Revenue tracking", and the second is the more specific.
        Words are matched exactly (no stemming): folding plurals let "files" name a note "file".
        """
        words = set(keyword.tokens(text))
        if not words:
            return {}
        paths = set(paths)
        names = self._name_tokens(paths)
        out: dict[str, int] = {}
        for p in paths:
            n = max((len(s) for s in names.get(p) or () if s <= words), default=0)
            if n:
                out[p] = n
        return out
