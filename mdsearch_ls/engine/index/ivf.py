"""An inverted-file (IVF) index over a vector snapshot, for indexes too large to search exactly.

Past a few hundred thousand chunks one matrix product over every row costs more than a query
should (80 ms and every page of a 1.5 GB file at a million). So the writer that leaves the
snapshot (:mod:`~mdsearch_ls.engine.index.vector_snapshot`) also clusters its rows (spherical
k-means on a sample, seeded, so the same vectors give the same lists) and writes them grouped
by list: each list is a contiguous slice of the mapped matrix, and a query reads the rows of
its ``nprobe`` nearest lists as views, with no copy and no page of the other lists touched.

Why IVF and not Chroma's HNSW graph, which the index already writes: the graph lives in the
writer's process (Chroma is not process-safe, so a reader cannot open it), it is rebuilt in
insertion order (two writers' graphs answer differently), and a filter there is a ``$in`` over
paths. The IVF is part of the snapshot every process maps, written once by the writer: every
front end probes the same lists of the same file and ranks alike. Measured in
benchmarks/ann_bench.py (benchmarks/README.md).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

# From this many rows the snapshot has lists. Not for speed alone (exact over 50k rows costs
# 7 ms, the lists 3): an exact product reads every row, so a one-shot CLI search of 96k chunks
# held all 147 MB of the mapped vectors in its RSS (285 MB at its peak), against 185 MB when it
# reads its lists (cold_search_bench.py), at recall@10 0.99 on real queries at 50k and 75k and
# 0.997 on the real 96k (ann_bench.py; results/ivf-threshold-50k/, ann-threshold-50k.json).
# Every process follows the file: a snapshot left without lists by a version with a higher
# threshold is searched exactly until the next writer closes and writes it again. Tests lower it.
MIN_ROWS = 50_000
SEED = 20  # the number: any fixed seed makes every build of the same rows alike
ITERATIONS = 12
SAMPLE_PER_LIST = 48
BLOCK = 16_384  # rows per assignment step: a block x lists score matrix stays ~64 MB at 1,000
# Lists probed per query. Real queries (short, unlike the sections) needed about 50 lists for
# recall@10 0.98 both at 100k rows (316 lists) and at 1M (1,000 lists); 80 leaves a margin
# (ann_bench.py). A fixed count, so a query reads ~80 sqrt(n) rows: 8% of a million.
PROBES = 80


class Rows(Protocol):
    """Rows read by slice or by row numbers: an array, or a snapshot's file read a block at a
    time (vector_snapshot.py: a million rows never in the writer's memory at once)."""

    def __len__(self) -> int: ...
    def __getitem__(self, key: Any) -> np.ndarray: ...


def list_count(n: int) -> int:
    """How many lists for ``n`` rows: about sqrt(n), so a list and the centroids cost alike
    (never more lists than rows)."""
    return max(1, min(n, max(8, min(4096, round(math.sqrt(n))))))


def probe_count(nlist: int) -> int:
    """Lists probed per query (see :data:`PROBES`)."""
    return min(nlist, PROBES)


def _normalised(x: np.ndarray) -> np.ndarray:
    """``x``'s rows scaled to unit length in place (``x``: a float32 array of its own; no
    second copy of a 74 MB sample)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    x /= norms
    return x


def _best(x: Rows, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's nearest centroid (by cosine: every vector is normalised) and its score."""
    labels = np.empty(len(x), dtype=np.int32)
    scores = np.empty(len(x), dtype=np.float32)
    for start in range(0, len(x), BLOCK):
        s = np.asarray(x[start:start + BLOCK], dtype=np.float32) @ centroids.T
        labels[start:start + len(s)] = np.argmax(s, axis=1)
        scores[start:start + len(s)] = s[np.arange(len(s)), labels[start:start + len(s)]]
    return labels, scores


def train(matrix: Rows, nlist: int, seed: int = SEED) -> np.ndarray:
    """``nlist`` unit centroids from a seeded sample of ``matrix``'s rows (Lloyd's spherical
    k-means on the sample: about 48 rows a list is enough to place a centroid, and keeps a
    million-row build to seconds and tens of MB). An empty list takes the sample row its
    centroid fits worst, so every list is used."""
    n = len(matrix)
    rng = np.random.default_rng(seed)
    m = min(n, max(nlist, nlist * SAMPLE_PER_LIST))
    pick = np.sort(rng.choice(n, size=m, replace=False)) if m < n else np.arange(n)
    sample = _normalised(np.array(matrix[pick], dtype=np.float32, copy=None))
    centroids = sample[rng.choice(m, size=nlist, replace=False)].copy()
    for _ in range(ITERATIONS):
        labels, scores = _best(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, sample)
        counts = np.bincount(labels, minlength=nlist)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            worst = np.argsort(scores, kind="stable")[:empty.size]
            sums[empty] = sample[worst]
        centroids = _normalised(sums)
    return centroids


def assign(matrix: Rows, centroids: np.ndarray) -> np.ndarray:
    """Every row's list, read in blocks (a mapped matrix is never copied whole)."""
    return _best(matrix, centroids)[0]


def layout(labels: np.ndarray, nlist: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, offsets)``: the rows in list order (stable, so rows keep their order within a
    list) and where each list starts; list ``i`` is ``order[offsets[i]:offsets[i + 1]]``."""
    order = np.argsort(labels, kind="stable")
    offsets = np.zeros(nlist + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=nlist), out=offsets[1:])
    return order, offsets


class Ivf:
    """The lists of one snapshot: unit centroids, each list's start row in the (list-ordered)
    matrix, and how many lists a query reads."""

    def __init__(self, centroids: np.ndarray, offsets: np.ndarray, nprobe: int):
        self.centroids = centroids
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.nprobe = max(1, min(int(nprobe), len(centroids)))

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    def ranked(self, q: np.ndarray) -> np.ndarray:
        """Every list, nearest ``q`` first (ties by list number: every process alike)."""
        return np.argsort(-(self.centroids @ q), kind="stable")

    def rows_of(self, lists: np.ndarray) -> np.ndarray:
        """The matrix rows of ``lists`` (ascending)."""
        if lists.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1])
                               for i in lists.tolist()])

    def scores(self, matrix: np.ndarray, q: np.ndarray,
               lists: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cosines)`` of every row in ``lists``: one product per run of adjacent lists,
        each over a slice (a view) of the matrix."""
        rows: list[np.ndarray] = []
        sims: list[np.ndarray] = []
        runs = np.split(lists, np.flatnonzero(np.diff(lists) != 1) + 1) if lists.size else []
        for run in runs:
            start, stop = int(self.offsets[run[0]]), int(self.offsets[run[-1] + 1])
            if stop > start:
                rows.append(np.arange(start, stop))
                sims.append(matrix[start:stop] @ q)
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(rows), np.concatenate(sims)
