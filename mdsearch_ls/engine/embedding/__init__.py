"""Embeddings: the Embedder protocol, the backends, and the one factory front ends call.

Backends (the ``embedder_backend`` setting, client key ``embedder.backend``):

* ``onnx`` (default): the bundled all-MiniLM-L6-v2 on ONNX Runtime, fp32. No torch, no
  transformers: it starts in well under a second and its vectors are torch's (cosine >= 0.9999).
* ``onnx-int8``: the same graph with weights quantised to int8 per output channel at load.
  Faster and smaller, slightly different vectors (mean cosine ~0.994), so its own index.
* ``torch``: sentence-transformers (extra ``mdsearch-ls[torch]``), for a GPU or any other
  sentence-transformers model given by the ``model`` setting.

``model = "multilingual"`` is another bundled model rather than a backend: Google's Universal
Sentence Encoder multilingual v3 in numpy (extra ``mdsearch-ls[multilingual]``,
``multilingual_backend.py``), whatever ``embedder.backend`` says, in an embedding space of its own.

The ONNX backends run the bundled model only. A ``model`` setting naming another model is served
by the torch backend whatever ``embedder.backend`` says (logged once), because that is the only
backend that can run it; without torch installed, loading fails with a message saying what to
install. Every load is offline: the weights come from the ``mdsearch-model-minilm`` package (a
dependency: the model's files and nothing else, ``scripts/build_model_wheel.py``), and any other
model must already be on disk.

Nothing here imports numpy, onnxruntime, tokenizers or torch until a model is loaded.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mdsearch_ls.engine.embedding.base import ModelLoadError
from mdsearch_ls.engine.embedding.multilingual_backend import MODEL_NAME as MULTILINGUAL_MODEL
from mdsearch_ls.engine.embedding.multilingual_backend import SETTING as MULTILINGUAL_SETTING
from mdsearch_ls.engine.embedding.multilingual_backend import MultilingualEmbedder

if TYPE_CHECKING:
    import numpy as np

    from mdsearch_ls.config import Settings

log = logging.getLogger(__name__)

BUNDLED_MODEL = "all-MiniLM-L6-v2"
DEFAULT_BACKEND = "onnx"
_BUNDLED_NAMES = {BUNDLED_MODEL.lower(), f"sentence-transformers/{BUNDLED_MODEL}".lower()}


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and search need from a model: unit vectors for documents and queries."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory: a long-running front end loads them on a thread
        of its own and answers by keywords, or says "loading", until then."""
        ...

    def load(self) -> None:
        """Load the weights now (seconds; idempotent). Embedding loads them too, on first use,
        so only a process that wants to load ahead of the first search calls this."""
        ...


def bundled_model_path() -> Path:
    """Path of the all-MiniLM-L6-v2 files shipped as a Python package (a sentence-transformers
    model folder, so the torch backend loads the same files)."""
    try:
        from mdsearch_model_minilm import MODEL_DIR
    except ImportError as exc:
        raise ModelLoadError(
            "the bundled model's package mdsearch-model-minilm is missing from mdsearch's "
            "environment (mdsearch-ls depends on it): reinstall mdsearch-ls, or set the "
            "'model' setting to a local model folder"
        ) from exc
    return MODEL_DIR


def model_display_name(model: str | None) -> str:
    """A short, stable name for the collection and status: the folder name for a local path."""
    if not model:
        return BUNDLED_MODEL
    return Path(model).name if os.sep in model or Path(model).exists() else model


def is_multilingual(model: str | None) -> bool:
    """Whether the ``model`` setting asks for the bundled multilingual model."""
    return bool(model) and model.strip().lower() in (MULTILINGUAL_SETTING, MULTILINGUAL_MODEL)


def is_bundled(model: str | None) -> bool:
    """Whether the ``model`` setting means the bundled all-MiniLM-L6-v2 (unset, its name, or
    the package's own folder)."""
    if not model or model.strip().lower() in _BUNDLED_NAMES:
        return True
    try:
        bundled = bundled_model_path()
    except ModelLoadError:
        return False
    try:
        return Path(model).expanduser().resolve() == bundled.resolve()
    except OSError:
        return False


def effective_backend(settings: Settings) -> str:
    """The backend that will embed: ``embedder_backend``, unless the model needs torch (or is
    the multilingual one, which has a backend of its own)."""
    if is_multilingual(settings.model):
        return MULTILINGUAL_SETTING
    backend = settings.embedder_backend
    if backend != "torch" and not is_bundled(settings.model):
        return "torch"
    return backend


def space_model_name(settings: Settings) -> str:
    """The model part of an embedding space's name. fp32 ONNX and torch vectors of the same
    weights agree to cosine >= 0.9999, so they share a space (switching between them re-embeds
    nothing); int8 vectors differ (mean cosine ~0.994) and get their own; the multilingual
    model's vectors are another space altogether, named after its weights."""
    if is_multilingual(settings.model):
        return MULTILINGUAL_MODEL
    name = BUNDLED_MODEL if is_bundled(settings.model) else model_display_name(settings.model)
    return f"{name}-int8" if effective_backend(settings) == "onnx-int8" else name


def create_embedder(settings: Settings) -> Embedder:
    """The embedder the settings ask for; the one way front ends make one. Nothing loads yet."""
    backend = effective_backend(settings)
    if backend == MULTILINGUAL_SETTING:
        if settings.embedder_backend != DEFAULT_BACKEND:
            log.warning("embedder.backend %r does not apply to the multilingual model, which "
                        "runs on numpy", settings.embedder_backend)
        return MultilingualEmbedder()
    if backend == "torch":
        if settings.embedder_backend != "torch":
            log.warning(
                "the model setting %r is not the bundled %s, which is all the %s backend runs: "
                "embedding with the torch backend (sentence-transformers) instead",
                settings.model, BUNDLED_MODEL, settings.embedder_backend,
            )
        from mdsearch_ls.engine.embedding.torch_backend import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(None if is_bundled(settings.model) else settings.model)
    from mdsearch_ls.engine.embedding.onnx_backend import OnnxEmbedder

    return OnnxEmbedder("int8" if backend == "onnx-int8" else "fp32")

