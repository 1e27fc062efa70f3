"""Several folders' rankings as one list: each folder's order kept, the most similar head first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mdsearch_ls.engine.api import merge_rankings

Item = tuple[int, int, float | None]  # (folder, rank in it, cosine)


def ranking(folder: int, scores: list[float | None]) -> list[Item]:
    return [(folder, i, s) for i, s in enumerate(scores)]


@given(st.lists(st.lists(st.floats(-1, 1), max_size=8), max_size=4), st.integers(0, 40))
@settings(max_examples=200, deadline=None)
def test_each_folders_order_is_kept_and_the_most_similar_head_goes_first(
    lists: list[list[float]], k: int
) -> None:
    rankings = [ranking(f, scores) for f, scores in enumerate(lists)]
    out = merge_rankings(rankings, k, lambda item: item[2])
    assert len(out) == min(k, sum(map(len, lists)))
    pos = [0] * len(rankings)
    for folder, rank, score in out:
        assert rank == pos[folder]  # never reordered inside a folder, never skipped
        heads = [r[pos[i]][2] for i, r in enumerate(rankings) if pos[i] < len(r)]
        assert score == max(heads)  # type: ignore[type-var]
        pos[folder] += 1


def test_a_folders_hybrid_order_is_not_resorted_by_cosine() -> None:
    # Folder 0 ranks a keyword match (cosine 0.3) above a closer paraphrase (0.5): kept.
    a = ranking(0, [0.3, 0.5])
    b = ranking(1, [0.4])
    assert merge_rankings([a, b], 10, lambda item: item[2]) == [b[0], a[0], a[1]]


def test_without_cosines_the_folders_take_turns() -> None:
    a, b = ranking(0, [None] * 3), ranking(1, [None] * 2)
    out = merge_rankings([a, b], 10, lambda item: item[2])
    assert [(f, r) for f, r, _ in out] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]


def test_one_folder_is_its_own_ranking_cut_to_k() -> None:
    a = ranking(0, [0.1, 0.9, 0.5])
    assert merge_rankings([a, []], 2, lambda item: item[2]) == a[:2]
