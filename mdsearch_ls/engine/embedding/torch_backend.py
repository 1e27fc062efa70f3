"""The torch backend: sentence-transformers, for a GPU or any other sentence-transformers model.

Installed with the extra ``mdsearch-ls[torch]``. The thread policy is set before torch is first
imported: with OpenMP's default (active) waiting, worker threads spin after every op and, on a
machine that is busy with anything else, a query embedding stalled for ~500 ms (23-74 of 100
queries over 200 ms). ``OMP_WAIT_POLICY=PASSIVE`` removes the stall (benchmarks/embed_bench.py
on a busy machine: query p50 55 ms instead of 1,232 ms, and 1.15x the throughput); torch's
intra-op threads are set to the physical cores. Both are left alone when the user has set them,
or when torch was imported before us.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from mdsearch_ls.engine.embedding.base import BatchingEmbedder, ModelLoadError, physical_cores

log = logging.getLogger(__name__)


def _force_offline() -> None:
    # Set before transformers / huggingface_hub are imported, so no code path can reach a hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def set_thread_policy() -> bool:
    """Passive OpenMP waiting, before torch is imported. Returns whether it could still apply."""
    if "torch" in sys.modules:
        return False
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return True


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - torch missing is reported at load time
        return "cpu"


class SentenceTransformerEmbedder(BatchingEmbedder):
    """A sentence-transformers model (default: the bundled all-MiniLM-L6-v2) on torch."""

    backend = "torch"
    # sentence-transformers pads each batch to its longest text, so sorted batches waste little;
    # the bounds keep one batch (what a waiting query may wait for) short. Not tuned further.
    max_batch = 16
    max_tokens = 4096

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str | None = None,
        batch_size: int | None = None,
        threads: int | None = None,
        query_cache_size: int = 256,
    ) -> None:
        super().__init__(query_cache_size=query_cache_size)
        self._model_spec = model
        self._device = device
        self._threads = threads
        if batch_size:
            self.max_batch = batch_size

    @property
    def pad_ratio(self) -> float:
        # On a GPU a batch of a few texts leaves the device idle, and padding is nearly free
        # there: only a CPU is worth cutting batches by length for.
        model = self._model
        device = getattr(model, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            return 0.0
        return super().pad_ratio

    @property
    def name(self) -> str:
        from mdsearch_ls.engine.embedding import model_display_name

        return model_display_name(self._model_spec)

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None)
        getter = getter or model.get_sentence_embedding_dimension
        return int(getter())

    def _load_model(self) -> Any:
        from mdsearch_ls.engine.embedding import bundled_model_path

        _force_offline()
        set_thread_policy()
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelLoadError(
                f"the torch backend needs sentence-transformers and torch ({exc}): install "
                "them with mdsearch install torch (on Linux without an NVIDIA GPU it takes "
                "torch's CPU build), or set embedder.backend to onnx"
            ) from exc
        if self._threads or not os.environ.get("OMP_NUM_THREADS"):
            torch.set_num_threads(self._threads or physical_cores())
        spec = self._model_spec
        source = str(bundled_model_path()) if not spec else os.path.expanduser(spec)
        device = self._device or _default_device()
        log.info("loading embedding model %s on %s (torch %s, %d threads)", source, device,
                 torch.__version__, torch.get_num_threads())
        try:
            return SentenceTransformer(source, device=device, local_files_only=True)
        except Exception as exc:
            raise ModelLoadError(
                f"could not load the embedding model {source!r} offline: {exc}. "
                "The 'model' setting takes a local folder or a model already in the "
                "Hugging Face cache; leave it empty for the bundled all-MiniLM-L6-v2."
            ) from exc

    def _tokenize(self, texts: list[str]) -> tuple[list[Any], list[int]]:
        model = self._model
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None:  # pragma: no cover - a model without a text tokenizer
            return texts, [len(t) for t in texts]
        limit = getattr(model, "max_seq_length", None) or 512
        ids = tokenizer(texts, truncation=True, max_length=limit, add_special_tokens=True,
                        return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        return texts, [len(i) for i in ids]

    def _embed_batch(self, payloads: list[Any]) -> Any:
        import numpy as np

        vectors = self._model.encode(
            payloads, batch_size=len(payloads), normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
