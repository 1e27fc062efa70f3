"""The manifest's vector cache: vectors keyed by the hash of the embedded text.

It is why rebuilding is cheap (an unchanged chunk keeps its vector, template sections share
one, a damaged Chroma is refilled without the model) and where exact search reads its matrix.
A mixin of :class:`~mdsearch_ls.engine.index.manifest.Manifest`, apart so that each file reads
as one concern.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class VectorCache:
    """The vector-cache methods of a manifest; the connection and counts come from it."""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _rows_in(self, sql: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        raise NotImplementedError

    def counts(self) -> tuple[int, int]:
        raise NotImplementedError

    def vectors(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        import numpy as np

        sql = "SELECT embed_hash, vector FROM vectors WHERE embed_hash IN ({marks})"
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in self._rows_in(sql, hashes)}

    def sample_vectors(self, n: int) -> list[np.ndarray]:
        """Cached vectors of up to ``n`` indexed chunks spread over the table, the most recently
        written among them (the one a crash most likely left out of Chroma's graph)."""
        import numpy as np

        conn = self._conn()
        top = conn.execute("SELECT max(rowid) FROM chunks").fetchone()[0]
        if not top:
            return []
        rng = random.Random(int(top))
        starts = sorted({int(top), *(rng.randint(1, int(top)) for _ in range(max(0, n - 1)))})
        found: dict[int, np.ndarray] = {}
        for start in starts:
            row = conn.execute(
                "SELECT c.rowid, v.vector FROM chunks c JOIN vectors v "
                "ON v.embed_hash = c.embed_hash WHERE c.rowid >= ? ORDER BY c.rowid LIMIT 1",
                (start,),
            ).fetchone()
            if row is not None:
                found[row[0]] = np.frombuffer(row[1], dtype=np.float32)
        return list(found.values())

    def vector_rows(self) -> Iterator[tuple[str, str, bytes]]:
        """``(chunk id, path, vector bytes)`` of every chunk with a cached vector, in the one
        order the in-memory table and the writer's snapshot of it both take."""
        yield from self._conn().execute(
            "SELECT c.id, c.path, v.vector FROM chunks c "
            "JOIN vectors v ON v.embed_hash = c.embed_hash")

    def vector_table(self) -> tuple[list[str], list[str], np.ndarray]:
        """Every chunk that has a cached vector: ids, paths and the vectors as one matrix.

        One read for exact filtered search (see ``Searcher``); row order is arbitrary but the
        three agree.
        """
        import numpy as np

        ids: list[str] = []
        paths: list[str] = []
        # Each row goes straight into one preallocated matrix (sized by the chunk count, which
        # bounds the rows of the join): never the list of blobs and their joined copy at once.
        capacity = self.counts()[1]
        matrix: np.ndarray | None = None
        for cid, path, blob in self.vector_rows():
            row = np.frombuffer(blob, dtype=np.float32)
            if matrix is None:
                matrix = np.empty((max(capacity, 1), row.size), dtype=np.float32)
            elif len(ids) == len(matrix):  # a writer added chunks since the count
                matrix = np.concatenate([matrix, np.empty_like(matrix)])
            matrix[len(ids)] = row
            ids.append(cid)
            paths.append(path)
        if matrix is None:
            return ids, paths, np.zeros((0, 0), dtype=np.float32)
        if len(ids) < len(matrix):
            matrix = matrix[: len(ids)].copy()
        return ids, paths, matrix

    def put_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        import numpy as np

        if not vectors:
            return
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (embed_hash, vector) VALUES (?, ?)",
                [(h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()],
            )

    def gc_vectors(self) -> int:
        """Drop cached vectors no chunk uses any more; returns how many went."""
        conn = self._conn()
        with conn:
            cur = conn.execute(
                "DELETE FROM vectors WHERE embed_hash NOT IN (SELECT embed_hash FROM chunks)"
            )
        return cur.rowcount

    # ---- the vector journal (manifest_schema: every chunk whose vector row may have changed) --

    def journal_position(self) -> int:
        """The journal's last entry: what a snapshot written now has taken in."""
        row = self._conn().execute("SELECT max(seq) FROM vector_journal").fetchone()
        return int(row[0] or 0)

    def journal_since(self, seq: int, most: int) -> list[str] | None:
        """The chunks (ids, sorted) the journal names after ``seq``; None when it no longer
        reaches back that far (pruned after a newer snapshot) or names more than ``most``."""
        conn = self._conn()
        row = conn.execute("SELECT value FROM meta WHERE key = 'journal_pruned'").fetchone()
        if int(row[0] if row else 0) > seq:
            return None
        entries = conn.execute("SELECT count(*) FROM vector_journal WHERE seq > ?",
                               (seq,)).fetchone()[0]
        if entries > 8 * most:  # (a rebuild's worth: no DISTINCT over all of it)
            return None
        ids = sorted({r[0] for r in conn.execute(
            "SELECT id FROM vector_journal WHERE seq > ?", (seq,))})
        return ids if len(ids) <= most else None

    def patch_since(self, seq: int, most: int
                    ) -> tuple[list[str], list[tuple[str, str, bytes]]] | None:
        """:meth:`journal_since` and the current ``(id, path, vector)`` rows of the chunks it
        names that are still there (by id), read as one state of the file: what a snapshot
        taken at ``seq`` needs to become this state's table."""
        conn = self._conn()
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")  # both reads see one state, whatever a writer commits
        try:
            ids = self.journal_since(seq, most)
            if ids is None:
                return None
            rows = sorted(self._rows_in(
                "SELECT c.id, c.path, v.vector FROM chunks c JOIN vectors v "
                "ON v.embed_hash = c.embed_hash WHERE c.id IN ({marks})", ids))
            return ids, rows
        finally:
            if own:
                conn.execute("COMMIT")

    def prune_journal(self, seq: int) -> None:
        """Forget the entries a snapshot written at ``seq`` has taken in (no new generation:
        nothing a search reads changed)."""
        conn = self._conn()
        with conn:
            conn.execute("DELETE FROM vector_journal WHERE seq <= ?", (seq,))
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('journal_pruned', ?)",
                         (str(seq),))
