"""BM25 of a typed query summed from its phrases, the common phrases' scores kept in memory.

FTS5's ``bm25()`` is a sum over the phrases of the query: each adds, for a row it matches,
``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))``, with its own idf (from the rows it
matches), ``f`` its column-weighted count in the row, ``D`` the row's length and ``avgdl`` the
table's. So the score of an OR of phrases is the sum of each phrase's score searched alone. A
typed question is such an OR, and its common words are what makes FTS5 slow: at 96k chunks "files"
matches 39k rows, and FTS5 scores every row any word matches (40 ms for a typical question, most
of a hybrid search). A long-running process (a language or MCP server, the background process)
keeps each common phrase's per-row scores for the index state they were read at, and asks FTS5
per search only for the other phrases, each alone; the sums and the first ``limit`` rows (best
first, then by rowid, FTS5's order) are taken in numpy.

The sums are FTS5's to the last bit: each phrase's score is the same double, and they are added in
the query's order, as FTS5 adds them (a phrase a row lacks adds 0.0 there). A process that
searches once (the CLI) keeps nothing and asks FTS5 the whole query: reading each common phrase
alone costs more than scoring them together (65 ms against 38 for a typical question at 96k).
Every write invalidates what is kept (a write moves every idf and ``avgdl``); the next search reads
the common phrases again, at about the cost of the plain query.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

COMMON_ROWS = 500
"""A phrase matching at least this many rows is kept; a rarer one costs less to read again."""

BUDGET = 3_000_000
"""Rows kept over all phrases (12 bytes each: 36 MB at most); the least recently used phrase
goes first. At 96k chunks the phrases of 500+ rows of all 365 nl2bash questions hold 3.1M rows;
with 1.5M kept, a question the server had answered before took 13 ms (p50) instead of 5
(benchmarks/keyword_bench.py)."""

_Scores = tuple[np.ndarray, np.ndarray]


class PhraseScores:
    """Per-row scores of common phrases for one index state (lineage and generation)."""

    def __init__(self, budget: int = BUDGET, common_rows: int = COMMON_ROWS) -> None:
        self.budget = budget
        self.common_rows = common_rows
        self._state: tuple[str | None, str | None] | None = None
        self._kept: OrderedDict[tuple[str, float, float], _Scores] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.reads = 0
        """Phrases read from FTS5 alone since the start (a test's and a benchmark's measure)."""

    @property
    def held(self) -> int:
        return self._held

    def top(self, conn: sqlite3.Connection, phrases: Sequence[str], limit: int,
            weights: tuple[float, float]) -> list[tuple[int, float]]:
        """The first ``limit`` ``(rowid, score)`` of the OR of ``phrases``, best first, ties by
        rowid: what ``ORDER BY bm25(...), rowid LIMIT`` gives, read in one snapshot."""
        began = not conn.in_transaction
        if began:
            conn.execute("BEGIN")
        try:
            parts = self._parts(conn, phrases, weights)
        finally:
            if began:
                conn.execute("COMMIT")
        return _best(parts, limit)

    def _parts(self, conn: sqlite3.Connection, phrases: Sequence[str],
               weights: tuple[float, float]) -> list[_Scores]:
        """Each phrase's scores, in the query's order (so the sums add as FTS5's do): kept, or
        read alone (a rare phrase's few rows cost less to read than to keep)."""
        state = conn.execute("SELECT (SELECT value FROM meta WHERE key = 'lineage'), "
                             "(SELECT value FROM meta WHERE key = 'generation')").fetchone()
        with self._lock:
            if state != self._state:
                self._state, self._held = state, 0
                self._kept.clear()
        parts: list[_Scores] = []
        for phrase in phrases:
            key = (phrase, *weights)
            with self._lock:
                kept = self._kept.get(key)
                if kept is not None:
                    self._kept.move_to_end(key)
            if kept is None:
                kept = _read(conn, phrase, weights)
                self._keep(state, key, kept)
            parts.append(kept)
        return parts

    def _keep(self, state: object, key: tuple[str, float, float], scores: _Scores) -> None:
        size = int(scores[0].size)
        with self._lock:
            self.reads += 1
            if (size < self.common_rows or size > self.budget or state != self._state
                    or key in self._kept):
                return
            while self._kept and self._held + size > self.budget:
                _, (old, _s) = self._kept.popitem(last=False)
                self._held -= int(old.size)
            self._kept[key] = scores
            self._held += size


def _read(conn: sqlite3.Connection, match: str, weights: tuple[float, float]) -> _Scores:
    """Every row ``match`` matches, with its score (bm25() is negative: better is lower)."""
    rows = conn.execute("SELECT rowid, bm25(chunks_fts, ?, ?) FROM chunks_fts "
                        "WHERE chunks_fts MATCH ?", (*weights, match)).fetchall()
    n = len(rows)
    rowids = np.fromiter((r[0] for r in rows), np.int64, n)
    scores = np.fromiter((-r[1] for r in rows), np.float64, n)
    if n and int(rowids.max()) < 2**31:
        rowids = rowids.astype(np.int32)
    return rowids, scores


def _best(parts: list[_Scores], limit: int) -> list[tuple[int, float]]:
    """Each row's summed score, and the first ``limit`` rows: best first, then by rowid."""
    parts = [p for p in parts if p[0].size]
    if not parts or limit < 1:
        return []
    rowids = np.concatenate([r.astype(np.int64, copy=False) for r, _ in parts])
    scores = np.concatenate([s for _, s in parts])
    top = int(rowids.max())
    if top < 4 * rowids.size + 1_000_000:
        # Dense: one slot per rowid (bincount adds in input order, phrase after phrase).
        total = np.bincount(rowids, weights=scores, minlength=top + 1)
        matched = np.zeros(top + 1, dtype=bool)
        matched[rowids] = True
        cand = np.flatnonzero(matched)
        sums = total[cand]
    else:  # rowids far apart (an index rewritten many times over): sorted instead
        cand, inverse = np.unique(rowids, return_inverse=True)
        sums = np.bincount(inverse, weights=scores, minlength=cand.size)
    if cand.size > limit:
        cut = np.partition(sums, cand.size - limit)[cand.size - limit]
        keep = sums >= cut  # every row tied with the last one kept, so ties go by rowid
        cand, sums = cand[keep], sums[keep]
    order = np.lexsort((cand, -sums))[:limit]
    return [(int(cand[i]), float(sums[i])) for i in order]
