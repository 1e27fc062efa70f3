"""The two lists of a hybrid search, run side by side.

BM25 in SQLite, the query's embedding in ONNX Runtime and the vector product in numpy all
release the GIL, so the keyword list can run on a second core while the query is embedded and
the vectors searched: a search costs the longer of its two lists rather than their sum. At 96k
chunks BM25 alone is most of a search (it scores every chunk holding a query word).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_legs: ThreadPoolExecutor | None = None
_legs_lock = threading.Lock()


def keyword_leg(fn: Callable[..., list[tuple[str, float]]], *args: Any) -> Future[Any]:
    """Start ``fn`` (the keyword list) on a worker: one pool per process, two workers, so a
    server answering two searches at once does not queue one behind the other."""
    global _legs
    with _legs_lock:
        if _legs is None:
            _legs = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mdsearch-keyword")
    return _legs.submit(fn, *args)


class QueryVector:
    """The query's embedding, made when first needed: after the keyword list has started."""

    def __init__(self, embed: Callable[[], np.ndarray]) -> None:
        self._embed = embed
        self._vector: np.ndarray | None = None

    def get(self) -> np.ndarray:
        if self._vector is None:
            self._vector = self._embed()
        return self._vector
