"""What every backend shares: lazy loading, sort-then-batch, queries first, the query cache.

A backend says how to load its model, how to tokenize (it must report each text's token count)
and how to embed one batch; :class:`BatchingEmbedder` does the rest, identically for all of them:

* **Sort, then batch.** A group of documents is ordered by token count, cut into batches bounded
  by a count and by padded tokens, embedded, and put back in the caller's order. Batching texts
  of similar length wastes little on padding (arrival order cost 1.2-1.5x the padded tokens), and
  the token bound caps the activations of a batch of long chunks (ONNX Runtime's arena otherwise
  grows to the largest batch it ever saw).
* **A waiting query goes first.** The model lock is taken per batch, and a document loop does
  not start its next batch while a query is waiting, so a search typed during a long index waits
  for at most one batch.
* **Query cache.** Query vectors sit in an LRU behind their own lock: a cached query never waits
  for the model.

Nothing heavy is imported here: numpy only when a method runs, so importing the engine (for
``mdsearch --help`` or a keyword search) costs nothing for the model.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.errors import MdsearchError

if TYPE_CHECKING:
    import numpy as np


class ModelLoadError(MdsearchError, RuntimeError):
    """The embedding model could not be loaded from disk (never fetched from a network); its
    message says what to do, so every front end shows it as it shows any engine refusal."""


def physical_cores() -> int:
    """Physical cores this process may run on: the right intra-op thread count for a matrix
    multiply (a hyper-thread shares its core's vector units, so it adds contention, not speed).

    Counts distinct (package, core) pairs of the CPUs in the affinity mask from sysfs; where that
    is unavailable, the usable CPUs. (The CI machine has 2 cores without SMT, so 2; 1 thread
    against 2 was not measured reliably there, the machine being shared.)
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
            with open(base + "core_id") as f:
                core = f.read().strip()
        except OSError:
            return max(1, len(cpus))
        cores.add((package, core))
    return max(1, len(cores) or len(cpus))


#: a text joins a batch only if it is at least this share of the batch's longest text. Padding is
#: computed like real tokens, and on a CPU a batch of one costs about what it costs in a batch of
#: 16 (benchmarks/embed_bench.py): so a few small batches of like lengths beat one padded batch.
#: It matters when a caller hands over few texts of mixed lengths, as the indexer's ~1 s batches
#: do (16 random chunks padded to their longest cost 1.2x the tokens, 1.4-1.6x the time).
PAD_RATIO = 0.9


def plan_batches(
    lengths: Sequence[int], *, max_batch: int, max_tokens: int, pad_ratio: float = PAD_RATIO
) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches, longest texts first.

    Each batch holds texts of neighbouring lengths, at most ``max_batch`` of them, at most
    ``max_tokens`` tokens once padded to its longest (a single text longer than that is a batch
    of its own), and none shorter than ``pad_ratio`` of its longest, so padding stays under
    about a tenth of the work. Sorting is stable, so equal lengths keep their order.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = max(1, lengths[i])
        if current and (len(current) >= max_batch
                        or max(longest, n) * (len(current) + 1) > max_tokens
                        or n < longest * pad_ratio):
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


class BatchingEmbedder:
    """Base of the real backends. Thread-safe: one lock serialises document batches (each uses
    every core already), a condition lets waiting queries overtake the next one; a backend
    whose model may run twice at once (``concurrent_queries``) embeds a query beside the batch
    in progress instead of after it, queries taking turns among themselves."""

    #: the value of the ``embedder_backend`` setting this class implements
    backend = ""
    #: most texts in one batch, and most padded tokens (a bound on a batch's activations)
    max_batch = 32
    max_tokens = 4096
    #: whether a query may run beside a document batch instead of after it (the model is safe
    #: to call from two threads at once)
    concurrent_queries = False

    @property
    def pad_ratio(self) -> float:
        """How much padding a batch may carry (see :data:`PAD_RATIO`): a CPU's measure; a
        backend on a GPU, where a small batch leaves the device idle, pads instead."""
        return PAD_RATIO

    def __init__(self, *, query_cache_size: int = 256) -> None:
        self._lock = threading.RLock()
        # (with concurrent_queries: questions take turns among themselves, beside the batch;
        # all at once, 8-32 clients of one server ran 8-15 % fewer calls a second on 2 cores)
        self._query_lock = threading.Lock()
        self._model: Any = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._cache_lock = threading.Lock()
        self._queries = threading.Condition()
        self._queries_waiting = 0
        self.cache_hits = 0

    # ---- what a backend implements ------------------------------------------------------------

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def _load_model(self) -> Any:
        """Load and return the model (called once, under the lock)."""
        raise NotImplementedError

    def _tokenize(self, texts: list[str]) -> tuple[list[Any], list[int]]:
        """One payload per text (what :meth:`_embed_batch` takes) and its token count."""
        raise NotImplementedError

    def _embed_batch(self, payloads: list[Any]) -> np.ndarray:
        """Unit vectors, float32 [len(payloads), dimension], in the order given."""
        raise NotImplementedError

    # ---- shared behaviour -----------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._load_model()
            return self._model

    def load(self) -> None:
        """Load now (a server does this in the background so the first query is fast)."""
        self._load()

    def _wait_for_queries(self) -> None:
        with self._queries:
            while self._queries_waiting:
                self._queries.wait()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_texts(texts, waited=False)

    def embed_waited(self, texts: Sequence[str]) -> np.ndarray:
        """Sections a person is waiting for (the one under an editor's cursor, edited since it
        was indexed): embedded as a question is, before the next document batch and, where
        the backend allows it, beside the one in progress. The vectors of
        :meth:`embed_documents`."""
        with self._queries:
            self._queries_waiting += 1
        try:
            return self._embed_texts(texts, waited=True)
        finally:
            with self._queries:
                self._queries_waiting -= 1
                self._queries.notify_all()

    def _embed_texts(self, texts: Sequence[str], *, waited: bool) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        self._load()
        texts = list(texts)
        lock = self._query_lock if waited and self.concurrent_queries else self._lock
        with lock:
            payloads, lengths = self._tokenize(texts)
        out: np.ndarray | None = None
        for batch in plan_batches(lengths, max_batch=self.max_batch, max_tokens=self.max_tokens,
                                  pad_ratio=self.pad_ratio):
            if not waited:
                self._wait_for_queries()
            with lock:
                vectors = self._embed_batch([payloads[i] for i in batch])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
        assert out is not None
        return out

    def embed_query(self, text: str) -> np.ndarray:
        with self._cache_lock:  # not the model lock: a cached query never waits for indexing
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                self.cache_hits += 1
                return hit
        vector = self.embed_waited([text])[0]
        vector.setflags(write=False)
        with self._cache_lock:
            self._cache[text] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector
