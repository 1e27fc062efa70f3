"""Exact nearest neighbours over the in-memory table: the same answer whatever path the product
takes (all rows, a wide filter, a narrow one, an id set)."""

from __future__ import annotations

import numpy as np
import pytest

from mdsearch_ls.engine.search.vectors import VectorTable


@pytest.fixture(scope="module")
def table() -> VectorTable:
    rng = np.random.default_rng(7)
    n = 400
    matrix = rng.standard_normal((n, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(n)]
    paths = [f"note{i % 40}.md" for i in range(n)]
    return VectorTable(3, ids, paths, matrix)


def brute(table: VectorTable, q: np.ndarray, k: int, keep) -> list[tuple[str, float]]:
    sims = table.matrix @ q
    order = sorted((i for i in range(len(table.ids)) if keep(i)), key=lambda i: -sims[i])
    return [(table.ids[i], float(sims[i])) for i in order[:k]]


@pytest.mark.parametrize("share", [None, 0.9, 0.3, 0.05])
def test_nearest_matches_a_brute_force_ranking(table: VectorTable, share: float | None) -> None:
    rng = np.random.default_rng(11)
    q = rng.standard_normal(16).astype(np.float32)
    if share is None:
        paths = None
        keep = lambda i: True  # noqa: E731
    else:
        paths = {f"note{j}.md" for j in range(40) if rng.random() < share} or {"note0.md"}
        keep = lambda i: table.paths[i] in paths  # noqa: E731
    got = table.nearest(q, 10, paths, None)
    want = brute(table, q, 10, keep)
    assert [c for c, _ in got] == [c for c, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_nearest_within_ids_and_paths(table: VectorTable) -> None:
    q = table.matrix[5]
    ids = {f"c{i}" for i in range(0, 400, 3)}
    paths = {"note5.md", "note6.md", "note9.md"}
    got = table.nearest(q, 5, paths, ids)
    want = brute(table, q, 5, lambda i: f"c{i}" in ids and table.paths[i] in paths)
    assert [c for c, _ in got] == [c for c, _ in want]
    assert table.nearest(q, 5, {"none.md"}, None) == []
    assert table.nearest(q, 5, None, set()) == []


def test_a_row_finds_itself_first(table: VectorTable) -> None:
    assert table.nearest(table.matrix[123], 1, None, None)[0][0] == "c123"
