"""The real model: offline loading, unit vectors, the query cache, and queries during indexing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_vectors_are_unit_length_and_batched_like_one_call(real_embedder) -> None:
    texts = [f"note {i}: how we rotate backup keys every {i} days" for i in range(19)]
    vecs = real_embedder.embed_documents(texts)
    assert vecs.shape == (19, real_embedder.dimension) == (19, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    # Batching (8 at a time) must not change a vector.
    single = real_embedder.embed_documents([texts[11]])[0]
    assert float(np.dot(single, vecs[11])) > 0.9999


def test_query_cache_returns_the_same_vector(real_embedder) -> None:
    before = real_embedder.cache_hits
    a = real_embedder.embed_query("escalate an outage to the on-call lead")
    b = real_embedder.embed_query("escalate an outage to the on-call lead")
    assert a is b and real_embedder.cache_hits == before + 1


def test_a_query_does_not_wait_for_a_long_indexing_job(real_embedder) -> None:
    """While 160 chunks are being embedded, a new query is answered within about one batch."""
    texts = [("A long paragraph about invoices, ledgers and quarterly revenue. " * 14) + str(i)
             for i in range(160)]
    done = threading.Event()
    started = time.perf_counter()
    job = threading.Thread(target=lambda: (real_embedder.embed_documents(texts), done.set()))
    job.start()
    time.sleep(1.0)
    t0 = time.perf_counter()
    real_embedder.embed_query(f"a fresh query {time.time()}")
    waited = time.perf_counter() - t0
    assert not done.is_set(), "the indexing job finished too early to measure anything"
    job.join()
    total = time.perf_counter() - started
    assert waited < 3.0 and waited < total / 3, (waited, total)
