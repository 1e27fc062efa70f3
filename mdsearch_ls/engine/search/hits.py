"""What a search answers: a hit (a place in a note, its score and how it was ranked) and the
result of one search.

Apart from :mod:`mdsearch_ls.engine.search.searcher` (which re-exports both) because every front
end and writing aid reads hits, while only the searcher makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from mdsearch_ls.engine.index.layout import IndexState
from mdsearch_ls.engine.locations import Location, Section
from mdsearch_ls.engine.search import preview


@dataclass(frozen=True, kw_only=True)
class Hit(Location):
    """One section that answers a query."""

    score: float | None
    """Cosine similarity of query and section; None when it was not computed (keyword mode)."""
    chunk_id: str = ""
    semantic_rank: int | None = None
    """Rank of the hit's best chunk in the semantic list (1 is first); None if not in it."""
    keyword_rank: int | None = None
    """Rank of the hit's best chunk in the keyword (BM25) list; None if not in it."""
    bm25: float | None = None
    """The BM25 score of that chunk (higher is better), when it is in the keyword list."""
    explain: dict[str, Any] = field(default_factory=dict, compare=False)
    text: str = field(default="", compare=False)
    """The section's markdown as the index holds it (its best chunk): what a front end renders
    its own snippet from, wherever the search ran."""

    @cached_property
    def snippet(self) -> str:
        """The section as one line of plain text, at most 200 characters: what a list of results
        shows under a hit's title, from :func:`~mdsearch_ls.engine.search.preview.snippet`, the
        one snippet maker. Made when first read, not for every hit found: it parses markdown
        (~0.3-1 ms a hit, a 5 ms search of the example vault took 20 ms with k=20), and the CLI
        cuts its own around the query's words from :attr:`text`."""
        return preview.snippet(self.text).text

    def to_json(self, *, explain: bool = False) -> dict[str, Any]:
        """The hit for ``--json`` and LSP results: 0-based lines, score rounded (or null)."""
        out: dict[str, Any] = {
            **self.location_fields(),
            "score": None if self.score is None else round(self.score, 4),
            "snippet": self.snippet,
        }
        if self.format is not None:
            # A document's lines are lines of its converted text (what read_section reads);
            # where a person finds the hit is its page (a PDF) or its heading path.
            out["format"] = self.format
            if self.page is not None:
                out["page"] = self.page
        if explain:
            out["explain"] = self.explain
        return out


@dataclass(frozen=True)
class SearchResult:
    """The hits of one search and the notes on how the query was read and run (a misspelt
    filter searched as text, a quoted phrase no section contains), for a front end to show, and
    how complete the index that answered was (a front end says "still indexing")."""

    hits: list[Hit]
    notes: tuple[str, ...] = ()
    index: IndexState = field(default_factory=lambda: IndexState("ready"))


@dataclass(frozen=True)
class Related:
    """The section under a cursor and the sections of other notes most like it."""

    section: Section | None
    hits: list[Hit]
