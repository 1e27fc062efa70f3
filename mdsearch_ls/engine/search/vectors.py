"""Nearest-neighbour search over a copy of an index's vectors: in memory, or mapped from the
snapshot file the index's writer leaves (:mod:`~mdsearch_ls.engine.index.vector_snapshot`).
Exact below :data:`~mdsearch_ls.engine.index.ivf.MIN_ROWS` rows; above it the snapshot carries
IVF lists and a query reads the rows of its nearest lists only
(:mod:`~mdsearch_ls.engine.index.ivf`; the choice and its recall in benchmarks/ann_bench.py).

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
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.ivf import Ivf
    from mdsearch_ls.engine.index.manifest import Manifest

BLOCK = 32_768  # rows gathered at a time for a filtered exact product: a bounded copy
GATHER_COST = 4  # a row gathered by index costs ~4x a row of a contiguous slice (ann_bench.py)


class VectorTable:
    """Every chunk vector of one index generation, searched exactly or through IVF lists.

    ``ids`` are the chunk ids (a list of str, or a fixed-width bytes array mapped from a
    snapshot); ``paths`` a list of each row's note, or ``(index per row, names)``; ``lists``
    the snapshot's IVF lists when it is large enough to have them."""

    def __init__(self, generation: int, ids: Sequence[str] | np.ndarray,
                 paths: Sequence[str] | tuple[np.ndarray, list[str]], matrix: np.ndarray,
                 lists: Ivf | None = None):
        self.generation = generation
        self.lists = lists
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

    @property
    def mapped(self) -> bool:
        """Whether the vectors are a snapshot's file pages (shared by every process) rather
        than this process's own memory."""
        return isinstance(self.matrix, np.memmap)

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
        neither, among all (a read-only searcher, and any searcher of a snapshot's state)."""
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
        if self.lists is not None and (rows is None or self._probe_beats_exact(rows.size)):
            found, sims = self._probed(q, k, rows)
        elif rows is None:
            found, sims = None, self.matrix @ q
        elif rows.size * 4 >= self._size:
            # Never ``matrix[rows] @ q`` over most rows: the gather copies the matrix first
            # (1.4x a plain product at 8k chunks, 5.9x at 100k). A product over every row, then
            # the rows wanted, costs the same as the product alone.
            found, sims = rows, (self.matrix @ q)[rows]
        else:
            found, sims = rows, self._gathered(rows, q)
        n = min(k, sims.size)
        if n == 0:
            return []
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top], kind="stable")]
        if found is None:
            return [(self.id_at(int(i)), float(sims[i])) for i in top]
        return [(self.id_at(int(found[i])), float(sims[i])) for i in top]

    def _gathered(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosines of a narrow filter's rows, gathered a block at a time (a bounded copy)."""
        if rows.size <= BLOCK:
            return self.matrix[rows] @ q
        return np.concatenate([self.matrix[rows[i:i + BLOCK]] @ q
                               for i in range(0, rows.size, BLOCK)])

    def _probe_beats_exact(self, passing: int) -> bool:
        """Whether a filter that ``passing`` rows pass is probed rather than searched exactly.

        Exact over a filter's rows reads its share ``s`` of the matrix, gathered (a gathered
        row cost about :data:`GATHER_COST` times a row of a list's slice, ann_bench.py);
        probing reads ``nprobe / nlist`` of the rows divided by ``sqrt(s)`` (see
        :meth:`_probed`). They cross where ``s ** 1.5 = nprobe / (GATHER_COST * nlist)``: 7% of
        the rows at a million (1,000 lists), 16% at 100k. A narrower filter (a folder, a tag,
        a phrase's chunks) is searched exactly, with every row it passes."""
        assert self.lists is not None
        share = passing / self._size
        return share ** 1.5 > self.lists.nprobe / (GATHER_COST * self.lists.nlist)

    def _probed(self, q: np.ndarray, k: int,
                rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cosines)`` read from the lists nearest ``q``: ``nprobe`` of them (divided by
        the square root of a filter's share), then twice as many again while fewer than ``k``
        rows pass, so a filter whose rows lie far from the query still gets its best ones. The
        lists read do not depend on ``k`` unless the first ones cannot fill it: the order does
        not either.

        Measured at a million rows, 60 candidates, random filters of 5-60% of the notes:
        ``nprobe`` unchanged gave recall@10 0.987-0.994 (15-20 ms), divided by the share
        0.998-1.0 (23-213 ms), divided by its square root 0.995-0.999 (25-81 ms). The middle
        keeps a margin for a filter that follows the topics (a folder), at a bounded cost."""
        lists = self.lists
        assert lists is not None
        mask = None
        nprobe = lists.nprobe
        if rows is not None:
            mask = np.zeros(self._size, dtype=bool)
            mask[rows] = True
            nprobe = int(np.ceil(nprobe * np.sqrt(self._size / rows.size)))
        ranked = lists.ranked(q)
        found: list[np.ndarray] = []
        sims: list[np.ndarray] = []
        taken, count = 0, 0
        target = min(nprobe, lists.nlist)
        while True:
            r, s = lists.scores(self.matrix, q, np.sort(ranked[taken:target]))
            if mask is not None:
                keep = mask[r]
                r, s = r[keep], s[keep]
            found.append(r)
            sims.append(s)
            count += r.size
            taken = target
            if count >= k or taken >= lists.nlist:
                break
            target = min(lists.nlist, taken * 2)
        return np.concatenate(found), np.concatenate(sims)

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


class PatchedTable:
    """A snapshot's table and what changed since it was written (the manifest's vector journal):
    its rows of changed chunks are left out, and those chunks' current rows (new ones too) are
    a small exact table beside it. After a one-note save a search reads that note's vectors,
    not every vector (0.45 s at 96k chunks), and the writer need not write every row again.

    Rows are numbered base first, then the patch; a base row left out is never returned."""

    def __init__(self, generation: int, base: VectorTable, dead: np.ndarray,
                 patch: VectorTable) -> None:
        self.generation = generation
        self.base, self.patch = base, patch
        self.lists = base.lists
        self._dead = dead
        self._dead_ids = {base.id_at(int(r)) for r in np.flatnonzero(dead)}

    @property
    def mapped(self) -> bool:
        return self.base.mapped

    def __len__(self) -> int:
        return len(self.base) - len(self._dead_ids) + len(self.patch)

    def id_at(self, row: int) -> str:
        n = len(self.base)
        return self.base.id_at(row) if row < n else self.patch.id_at(row - n)

    def path_at(self, row: int) -> str:
        n = len(self.base)
        return self.base.path_at(row) if row < n else self.patch.path_at(row - n)

    @cached_property
    def rows_of_path(self) -> dict[str, np.ndarray]:
        out = {p: rows[~self._dead[rows]] for p, rows in self.base.rows_of_path.items()}
        for p, rows in self.patch.rows_of_path.items():
            out[p] = np.concatenate([out.get(p, np.zeros(0, dtype=np.int64)),
                                     rows + len(self.base)])
        return {p: rows for p, rows in out.items() if rows.size}

    def nearest(self, qvec: np.ndarray, k: int, paths: set[str] | None,
                ids: set[str] | None) -> list[tuple[str, float]]:
        """The base's best (over-fetched by the rows left out) and the patch's, merged: the
        ``k`` best of the table this state would have had."""
        dead = self._dead_ids
        found = [h for h in self.base.nearest(qvec, k + len(dead), paths, ids)
                 if h[0] not in dead][:k]
        found += self.patch.nearest(qvec, k, paths, ids)
        found.sort(key=lambda h: -h[1])
        return found[:k]


def snapshot_table(manifest: Manifest, generation: int) -> VectorTable | PatchedTable | None:
    """The table of this manifest state from the writer's snapshot files (mapped): the snapshot
    of exactly this state, or the last one patched with what changed since; None when neither
    can be had (the caller reads every vector from the manifest)."""
    from mdsearch_ls.engine.index import vector_snapshot

    exact = vector_snapshot.load(manifest.path, vector_snapshot.state(manifest, generation))
    if exact is not None:
        return VectorTable(generation, *exact)
    patched = vector_snapshot.load_patched(manifest)
    if patched is None:
        return None
    base, dead, (ids, paths, matrix) = patched
    return PatchedTable(generation, VectorTable(generation, *base), dead,
                        VectorTable(generation, ids, paths, matrix))


def superseded(manifest: Manifest, table: VectorTable | PatchedTable) -> bool:
    """Whether ``table``, this process's own copy of every vector of its state (read when that
    state had no snapshot), now has the writer's snapshot of the same state beside it. A reader
    that searched a large index before its writer first left one would otherwise keep ranking
    exactly, and holding every vector, while every other process probes the snapshot's lists,
    until the next write; only a copy of its own is checked, so a mapped table costs nothing."""
    if table.mapped:
        return False
    from mdsearch_ls.engine.index import vector_snapshot

    state = vector_snapshot.state(manifest, table.generation)
    return vector_snapshot.load(manifest.path, state) is not None
