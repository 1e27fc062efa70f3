"""The real model on every backend: offline loading, unit vectors, batching that changes no
vector, the query cache, and queries during indexing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.slow

BACKENDS = ["real_embedder", "int8_embedder", "torch_embedder"]


@pytest.fixture(params=BACKENDS)
def embedder(request: pytest.FixtureRequest):
    return request.getfixturevalue(request.param)


def test_the_default_backend_is_onnx_fp32(real_embedder) -> None:
    from mdsearch_ls.engine.embedding.onnx_backend import OnnxEmbedder

    assert isinstance(real_embedder, OnnxEmbedder) and real_embedder.variant == "fp32"
    assert real_embedder.backend == "onnx" and real_embedder.name == "all-MiniLM-L6-v2"


def test_vectors_are_unit_length_and_batched_like_one_call(embedder) -> None:
    # Different lengths, so sorting reorders them and several batches are padded differently.
    texts = [f"note {i}: how we rotate backup keys every {i} days" + " and more" * (i % 7)
             for i in range(41)]
    vecs = embedder.embed_documents(texts)
    assert vecs.shape == (41, embedder.dimension) == (41, 384)
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    # Neither batching, padding nor sorting changes a vector: each alone gives the same one.
    # Except with int8, whose activations are quantised with one range per batch, so a text's
    # vector moves a little with its batch companions (measured: cosine 0.99 at worst).
    same = 0.98 if getattr(embedder, "variant", "") == "int8" else 0.9999
    for i in (0, 11, 40):
        single = embedder.embed_documents([texts[i]])[0]
        assert float(np.dot(single, vecs[i])) > same, i
    # A query is embedded exactly like a document.
    assert float(np.dot(embedder.embed_query(texts[5]), vecs[5])) > same


def test_long_texts_are_truncated_at_256_tokens(real_embedder) -> None:
    """sentence-transformers' max_seq_length for this model is 256: what follows is ignored."""
    head = "the quarterly revenue report lists invoices by customer " * 40  # > 256 tokens
    a, b = real_embedder.embed_documents([head + "kittens", head + "volcanoes erupting"])
    assert float(np.dot(a, b)) > 0.99999
    short_a, short_b = real_embedder.embed_documents(["revenue kittens", "revenue volcanoes"])
    assert float(np.dot(short_a, short_b)) < 0.9


def test_query_cache_returns_the_same_vector(embedder) -> None:
    before = embedder.cache_hits
    a = embedder.embed_query("escalate an outage to the on-call lead")
    b = embedder.embed_query("escalate an outage to the on-call lead")
    assert a is b and embedder.cache_hits == before + 1


def test_a_query_does_not_wait_for_a_long_indexing_job(real_embedder) -> None:
    """While 600 long chunks are being embedded, a new query is answered within about one
    batch: it waits for the batch in progress, not for the job."""
    texts = [("A long paragraph about invoices, ledgers and quarterly revenue. " * 14) + str(i)
             for i in range(600)]
    started = threading.Event()
    done = threading.Event()
    original = real_embedder._embed_batch

    def spy(payloads):  # type: ignore[no-untyped-def]
        started.set()
        return original(payloads)

    real_embedder._embed_batch = spy
    try:
        t_start = time.perf_counter()
        job = threading.Thread(target=lambda: (real_embedder.embed_documents(texts), done.set()))
        job.start()
        assert started.wait(60)
        t0 = time.perf_counter()
        real_embedder.embed_query(f"a fresh query {time.time()}")
        waited = time.perf_counter() - t0
        assert not done.is_set(), "the indexing job finished too early to measure anything"
        job.join()
        total = time.perf_counter() - t_start
    finally:
        del real_embedder._embed_batch
    assert waited < total / 4, (waited, total)


def _asked_while_a_batch_holds_the_model(embedder, ask):  # type: ignore[no-untyped-def]
    """``ask()``'s answer, given while a document batch on another thread holds the model (it
    keeps it until the answer is in, or 30 s), and whether that batch was still holding it."""
    in_batch = threading.Event()
    answered = threading.Event()
    original = embedder._embed_batch
    workers: list[threading.Thread] = []

    def holding(payloads):  # type: ignore[no-untyped-def]
        if threading.current_thread() is workers[0]:
            in_batch.set()
            answered.wait(30)  # the batch keeps the model until the answer is in
        return original(payloads)

    embedder._embed_batch = holding
    try:
        job = threading.Thread(target=embedder.embed_documents,
                               args=(["a note about invoices and ledgers " * 20] * 4,))
        workers.append(job)
        job.start()
        assert in_batch.wait(60)
        answer = ask()
        mid_batch = job.is_alive() and not answered.is_set()
        answered.set()
        job.join(60)
    finally:
        del embedder._embed_batch
    return answer, mid_batch


def test_a_query_runs_beside_the_batch_in_progress(real_embedder) -> None:
    """On ONNX Runtime a question does not wait for the document batch being embedded: it is
    answered while that batch still holds the model (an editor's search during a first index
    waited up to a whole batch, 250 ms at p95), and its vector is the one it gets alone."""
    question = f"a question asked in the middle of a batch {time.time()}"
    vector, mid_batch = _asked_while_a_batch_holds_the_model(
        real_embedder, lambda: real_embedder.embed_query(question))
    assert mid_batch, "the question waited for the batch to finish"
    alone = real_embedder.embed_documents([question])[0]
    np.testing.assert_allclose(vector, alone, atol=1e-6)


def test_sections_a_person_waits_for_run_beside_the_batch(real_embedder) -> None:
    """The sections of a hover over unsaved edits are embedded like a question: while a held
    document batch still has the model, with the vectors a document embedding gives them."""
    sections = [f"an edited section about receipts {time.time()}", "and a second, shorter one"]
    vectors, mid_batch = _asked_while_a_batch_holds_the_model(
        real_embedder, lambda: real_embedder.embed_waited(sections))
    assert mid_batch, "the sections waited for the batch to finish"
    np.testing.assert_allclose(vectors, real_embedder.embed_documents(sections), atol=1e-6)


_PRIVATE_MEMORY_OF_A_LOAD = """
import numpy, onnxruntime, tokenizers
from mdsearch_ls.engine.embedding.onnx_backend import OnnxEmbedder

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024

embedder = OnnxEmbedder("fp32")
before = anon()
embedder.embed_query("how do I link to a heading in another note")
print(anon() - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc (Linux)")
def test_the_model_adds_little_private_memory_to_a_process() -> None:
    # The weights are read in place from the mapped model.safetensors, pages every mdsearch
    # process shares; a pre-packed copy made each process 40 MB larger in private memory
    # (+50 MB against +10 MB for a load and one question).
    done = subprocess.run([sys.executable, "-c", _PRIVATE_MEMORY_OF_A_LOAD], capture_output=True,
                          text=True, timeout=120, check=True)
    assert int(done.stdout.strip()) < 25, done.stdout
