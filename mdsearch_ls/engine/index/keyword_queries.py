"""The manifest's keyword queries: BM25 over the FTS5 table, and which chunks hold a phrase.

A mixin of :class:`~mdsearch_ls.engine.index.manifest.Manifest`, apart so that each file reads
as one concern. The cost of each query here is meant to follow what a search needs, not the
vault's size: a ranked query is cut inside FTS5, a phrase is looked up among the candidates.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.index.manifest_schema import _batched

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.phrase_scores import PhraseScores


READ_PER_SEEK = 100
"""A phrase's rows read whole cost about 1/100 of a seek each (96k chunks, December 2026): read
them whole up to this many per candidate chunk."""


class KeywordQueries:
    """The FTS5 methods of a manifest; the connection comes from it."""

    phrase_scores: PhraseScores | None = None
    """The common phrases' scores a long-running process keeps (:meth:`keep_phrase_scores`)."""

    def keep_phrase_scores(self, warm: Collection[str] | None = None) -> None:
        """Keep common phrases' scores from search to search (engine/index/phrase_scores.py):
        for a process that searches many times; numpy is imported here, not by a CLI search.
        ``warm``: also read the index's commonest words, but these, once searches begin."""
        from mdsearch_ls.engine.index.phrase_scores import PhraseScores

        if self.phrase_scores is None:
            self.phrase_scores = PhraseScores(carry=not getattr(self, "read_only", False),
                                              warm=warm)

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _rows_in(self, sql: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        raise NotImplementedError

    def keyword_search(
        self, match: str, limit: int, paths: set[str] | None = None,
        weights: Sequence[float] = (4.0, 1.0), terms: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 over the FTS5 table; title hits weigh ``weights[0]`` x a body hit. Best first.

        ``terms``: the phrases ``match`` ORs, when it is only that (a typed query with no
        required phrase); with kept phrase scores and no ``paths`` they are summed from them.

        With ``paths``, the ranked rows are streamed and filtered until ``limit`` pass, so a
        narrow filter still gets its best ``limit`` matches (a fixed over-fetch could hold none
        of them), at about the cost of the unfiltered query: FTS5 ranks every match either way,
        while an ``IN`` over thousands of rowids or paths made SQLite 20-100x slower (measured).
        """
        conn = self._conn()
        w_title, w_body = (float(w) for w in weights)
        sql = (
            "SELECT c.id, c.path, bm25(chunks_fts, ?, ?) AS rank FROM chunks_fts "
            "JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? "
            "ORDER BY rank, chunks_fts.rowid"
        )
        top: list[tuple[int, float]] | None = None
        try:
            if paths is None and terms and self.phrase_scores is not None:
                # None: FTS5's whole query costs less this time (see PhraseScores.top)
                top = self.phrase_scores.top(conn, terms, limit, (w_title, w_body), self._conn)
            if top is not None:
                rowids = [r for r, _ in top]  # (a pool: far fewer than SQLite's 32,766 marks)
                id_of = dict(conn.execute("SELECT rowid, id FROM chunks WHERE rowid IN "
                                          f"({','.join('?' * len(rowids))})", rowids))
                return [(id_of[r], s) for r, s in top if r in id_of]
            if paths is None:
                # Ranked and cut inside FTS5 before the join: joining every match to its chunk
                # row first (a common word matches half a vault) cost more than the ranking.
                rows = conn.execute(
                    "SELECT c.id, f.rank FROM (SELECT rowid, bm25(chunks_fts, ?, ?) AS rank "
                    "FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank, rowid LIMIT ?) f "
                    "JOIN chunks c ON c.rowid = f.rowid ORDER BY f.rank, f.rowid",
                    (w_title, w_body, match, limit),
                ).fetchall()
                if self.phrase_scores is not None:
                    self.phrase_scores.read_later()
                return [(cid, -float(rank)) for cid, rank in rows]
            out: list[tuple[str, float]] = []
            for cid, path, rank in conn.execute(sql, (w_title, w_body, match)):
                if path in paths:
                    out.append((cid, -float(rank)))
                    if len(out) >= limit:
                        break
            return out
        except sqlite3.OperationalError as exc:
            raise ValueError(f"keyword query could not be parsed: {exc}") from exc

    def phrase_exists(self, match: str) -> bool:
        """Whether any chunk holds what the FTS expression asks for (found at its first match)."""
        return self._conn().execute(
            "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (match,)).fetchone() \
            is not None

    def notes_matching(self, match: str, limit: int) -> int:
        """How many notes hold a chunk the FTS expression matches, counted up to ``limit``: a
        common word stops early, a rare one reads its few rows."""
        return int(self._conn().execute(
            "SELECT count(*) FROM (SELECT DISTINCT c.path FROM chunks_fts JOIN chunks c "
            "ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? LIMIT ?)",
            (match, limit)).fetchone()[0])

    def phrase_holders(self, match: str, ids: Iterable[str], scan: int = 2000) -> set[str]:
        """Which of the chunks ``ids`` the FTS expression matches, at a cost bounded by the
        candidates, not the vault: a phrase held by at most ``scan`` chunks, or by at most
        :data:`READ_PER_SEEK` per candidate, is read whole (its rowids only: about 0.3 us a row
        at 96k chunks); a commoner one is tested chunk by chunk (FTS5 seeks each rowid, 30-70 us
        each). Listing every holder of "file" (39k rows) took 11-13 ms; 150 seeks of "line"
        (7k rows) 10.6 ms where reading its rows took 3."""
        conn = self._conn()
        rowid_of = dict(self._rows_in("SELECT rowid, id FROM chunks WHERE id IN ({marks})", ids))
        if not rowid_of:
            return set()
        rows = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?",
                            (match, scan + 1)).fetchall()
        if len(rows) > scan and conn.execute(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",  # (no row read)
                (match,)).fetchone()[0] <= READ_PER_SEEK * len(rowid_of):
            rows = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?",
                                (match,)).fetchall()
            scan = len(rows)
        if len(rows) <= scan:
            return {rowid_of[r[0]] for r in rows if r[0] in rowid_of}
        held: set[str] = set()
        for batch in _batched(list(rowid_of), 500):
            sql = ("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN "
                   f"({','.join('?' * len(batch))})")
            held.update(rowid_of[r[0]] for r in conn.execute(sql, (match, *batch)))
        return held

    def phrase_chunk_ids(self, match: str) -> set[str]:
        """Every chunk the FTS expression matches (unranked): the sections holding a phrase."""
        conn = self._conn()
        rows = conn.execute(
            "SELECT c.id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ?",
            (match,),
        )
        return {r[0] for r in rows}
