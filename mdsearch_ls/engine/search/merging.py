"""Several folders' rankings as one list, the same way in every front end.

Each folder ranks a query itself (hybrid: keywords, titles, its own BM25 statistics), and those
fused scores are not comparable across folders. The cosine of query and section is: the folders
share the model. So the merged list takes, at each step, the next hit of the folder whose next
hit is most similar to the query, and never reorders a folder's own list (sorting everything by
cosine would undo the hybrid ranking inside each folder). Without cosines (keyword mode) the
folders take turns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def merge_rankings(
    lists: Sequence[Sequence[T]], k: int, similarity: Callable[[T], float | None]
) -> list[T]:
    """The first ``k`` of ``lists`` (one ranking per folder, best first) merged: see the module
    docstring. ``similarity`` reads an item's cosine (None when not computed)."""
    lists = [lst for lst in lists if lst]
    if len(lists) == 1:
        return list(lists[0][:k])
    out: list[T] = []
    pos = [0] * len(lists)
    turn = 0
    while len(out) < k:
        heads = [(i, lst[pos[i]]) for i, lst in enumerate(lists) if pos[i] < len(lst)]
        if not heads:
            break
        scored = [(s, -i) for i, h in heads if (s := similarity(h)) is not None]
        if len(scored) == len(heads):
            best = -max(scored)[1]  # ties go to the earlier folder
        else:
            ids = [i for i, _ in heads]
            best = min(ids, key=lambda i: (i - turn) % len(lists))
            turn = best + 1
        out.append(lists[best][pos[best]])
        pos[best] += 1
    return out
