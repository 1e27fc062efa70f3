"""The embedding API under its historical module name; it lives in :mod:`engine.embedding`.

Kept so ``from mdsearch_ls.engine.embedder import ...`` in front ends and benchmarks keeps
working; new code imports from :mod:`mdsearch_ls.engine.embedding`. Importing this module loads
no model library: the backends import theirs when a model loads.
"""

from __future__ import annotations

from mdsearch_ls.engine.embedding import (
    BACKENDS,
    BUNDLED_MODEL,
    DEFAULT_BACKEND,
    BatchingEmbedder,
    Embedder,
    ModelLoadError,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
    create_embedder,
    effective_backend,
    is_bundled,
    model_display_name,
    space_model_name,
)

__all__ = [
    "BACKENDS",
    "BUNDLED_MODEL",
    "DEFAULT_BACKEND",
    "BatchingEmbedder",
    "Embedder",
    "ModelLoadError",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_path",
    "create_embedder",
    "effective_backend",
    "is_bundled",
    "model_display_name",
    "space_model_name",
]
