"""Exact nearest-neighbour search over an in-memory copy of an index's vectors.

Chroma's HNSW graph answers unfiltered queries, but a filtered one there cost 20-30 ms (a
``where path $in [...]`` over thousands of paths) and an over-fetch could miss a narrow
folder's best sections. At 10k chunks a matrix product over the rows that pass costs about a
millisecond and is exact, and it is the only vector search a read-only searcher has (Chroma is
not process-safe; the manifest, where these vectors come from, is).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class VectorTable:
    """Every chunk vector of one index generation, for exact search over a filtered subset."""

    def __init__(self, generation: int, ids: list[str], paths: list[str], matrix: np.ndarray):
        self.generation = generation
        self.ids = ids
        self.paths = paths
        self.matrix = matrix
        self.row_of = {cid: i for i, cid in enumerate(ids)}
        rows: dict[str, list[int]] = {}
        for i, p in enumerate(paths):
            rows.setdefault(p, []).append(i)
        self.rows_of_path = {p: np.asarray(r, dtype=np.int64) for p, r in rows.items()}
        # Rows per allowed-path set: Searcher caches those sets, so a filter typed again (or
        # refined word by word) finds its rows here instead of gathering thousands of arrays.
        self._rows_memo: OrderedDict[int, tuple[set[str], np.ndarray]] = OrderedDict()
        self._memo_lock = threading.Lock()

    def nearest(
        self,
        qvec: np.ndarray,
        k: int,
        paths: set[str] | None,
        ids: set[str] | None,
    ) -> list[tuple[str, float]]:
        """The ``k`` chunks closest to ``qvec`` among those of ``paths`` and in ``ids``; with
        neither, among all (only a read-only searcher asks that: it has no Chroma)."""
        if ids is None and paths is None:
            rows = None
        elif ids is None:
            assert paths is not None
            rows = self._rows_for(paths)
        else:
            rows = np.asarray(sorted(self.row_of[c] for c in ids if c in self.row_of
                                     and (paths is None or self.paths[self.row_of[c]] in paths)),
                              dtype=np.int64)
        if self.matrix.size == 0 or (rows is not None and rows.size == 0):
            return []
        q = np.asarray(qvec, dtype=np.float32)
        # Never ``matrix[rows] @ q`` over most rows: the gather copies the matrix first (1.4x a
        # plain product at 8k chunks, 5.9x at 100k). A product over every row, then the rows
        # wanted, costs the same as the product alone; a narrow filter still gathers its few.
        if rows is None:
            sims = self.matrix @ q
        elif rows.size * 4 >= len(self.ids):
            sims = (self.matrix @ q)[rows]
        else:
            sims = self.matrix[rows] @ q
        n = min(k, sims.size)
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top], kind="stable")]
        if rows is None:
            return [(self.ids[int(i)], float(sims[i])) for i in top]
        return [(self.ids[int(rows[i])], float(sims[i])) for i in top]

    def _rows_for(self, paths: set[str]) -> np.ndarray:
        with self._memo_lock:
            hit = self._rows_memo.get(id(paths))
            if hit is not None and hit[0] is paths:
                self._rows_memo.move_to_end(id(paths))
                return hit[1]
        parts = [self.rows_of_path[p] for p in paths if p in self.rows_of_path]
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        with self._memo_lock:
            self._rows_memo[id(paths)] = (paths, rows)  # holding `paths` keeps its id unique
            while len(self._rows_memo) > 16:
                self._rows_memo.popitem(last=False)
        return rows


def mean_vector(vectors: Sequence[np.ndarray]) -> np.ndarray | None:
    """The normalised centroid of a section's chunk vectors (its "meaning" for related)."""
    if not vectors:
        return None
    v = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v
