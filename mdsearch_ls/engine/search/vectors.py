"""Exact nearest-neighbour search over a copy of an index's vectors: in memory, or mapped from the
snapshot file the index's writer leaves (:mod:`~mdsearch_ls.engine.index.vector_snapshot`).

Chroma's HNSW graph answers unfiltered queries, but a filtered one there cost 20-30 ms (a
``where path $in [...]`` over thousands of paths) and an over-fetch could miss a narrow
folder's best sections. At 10k chunks a matrix product over the rows that pass costs about a
millisecond and is exact, and it is the only vector search a read-only searcher has (Chroma is
not process-safe; the manifest, where these vectors come from, is).

A table is built lazily in the parts a query does not need: a search asks for the product and
the ids of its best rows, so a process that searches once (the CLI) reads neither every id into
a string nor every path into a dict; path filters and id sets build their indexes on first use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property

import numpy as np


class VectorTable:
    """Every chunk vector of one index generation, for exact search over a filtered subset.

    ``ids`` are the chunk ids (a list of str, or a fixed-width bytes array mapped from a
    snapshot); ``paths`` a list of each row's note, or ``(index per row, names)``."""

    def __init__(self, generation: int, ids: Sequence[str] | np.ndarray,
                 paths: Sequence[str] | tuple[np.ndarray, list[str]], matrix: np.ndarray):
        self.generation = generation
        self._ids = ids
        if isinstance(paths, tuple):
            self._path_idx, self._path_names = paths
        else:
            names: dict[str, int] = {}
            self._path_idx = np.fromiter((names.setdefault(p, len(names)) for p in paths),
                                         dtype=np.int32, count=len(paths))
            self._path_names = list(names)
        self.matrix = matrix
        self._size = len(ids)
        # Rows per allowed-path set: Searcher caches those sets, so a filter typed again (or
        # refined word by word) finds its rows here instead of gathering thousands of arrays.
        self._rows_memo: OrderedDict[int, tuple[set[str], np.ndarray]] = OrderedDict()
        self._memo_lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def id_at(self, row: int) -> str:
        v = self._ids[row]
        return v if isinstance(v, str) else bytes(v).decode()

    def path_at(self, row: int) -> str:
        return self._path_names[int(self._path_idx[row])]

    @cached_property
    def ids(self) -> list[str]:
        """Every row's id (built on first use: a search needs only its best rows')."""
        return [self.id_at(i) for i in range(self._size)]

    @cached_property
    def paths(self) -> list[str]:
        return [self._path_names[i] for i in self._path_idx.tolist()]

    @cached_property
    def row_of(self) -> dict[str, int]:
        return {cid: i for i, cid in enumerate(self.ids)}

    @cached_property
    def rows_of_path(self) -> dict[str, np.ndarray]:
        """Each note's rows, grouped in C (a sort of the per-row path index)."""
        order = np.argsort(self._path_idx, kind="stable")
        cuts = np.flatnonzero(np.diff(self._path_idx[order])) + 1
        return {self._path_names[int(self._path_idx[g[0]])]: g.astype(np.int64)
                for g in np.split(order, cuts) if g.size}

    def _rows_of_ids(self, ids: set[str]) -> np.ndarray:
        if isinstance(self._ids, np.ndarray):
            wanted = np.array(sorted(ids), dtype=self._ids.dtype)
            return np.flatnonzero(np.isin(self._ids, wanted))
        row_of = self.row_of
        return np.asarray(sorted(row_of[c] for c in ids if c in row_of), dtype=np.int64)

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
            rows = self._rows_of_ids(ids)
            if paths is not None and rows.size:
                allowed = {i for i, name in enumerate(self._path_names) if name in paths}
                rows = rows[np.isin(self._path_idx[rows], np.fromiter(allowed, np.int32))]
        if self.matrix.size == 0 or (rows is not None and rows.size == 0):
            return []
        q = np.asarray(qvec, dtype=np.float32)
        # Never ``matrix[rows] @ q`` over most rows: the gather copies the matrix first (1.4x a
        # plain product at 8k chunks, 5.9x at 100k). A product over every row, then the rows
        # wanted, costs the same as the product alone; a narrow filter still gathers its few.
        if rows is None:
            sims = self.matrix @ q
        elif rows.size * 4 >= self._size:
            sims = (self.matrix @ q)[rows]
        else:
            sims = self.matrix[rows] @ q
        n = min(k, sims.size)
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top], kind="stable")]
        if rows is None:
            return [(self.id_at(int(i)), float(sims[i])) for i in top]
        return [(self.id_at(int(rows[i])), float(sims[i])) for i in top]

    def _rows_for(self, paths: set[str]) -> np.ndarray:
        with self._memo_lock:
            hit = self._rows_memo.get(id(paths))
            if hit is not None and hit[0] is paths:
                self._rows_memo.move_to_end(id(paths))
                return hit[1]
        by_path = self.rows_of_path
        parts = [by_path[p] for p in paths if p in by_path]
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
