"""The default backend: the bundled all-MiniLM-L6-v2 on ONNX Runtime, no torch anywhere.

The graphs (``graphs/minilm-l6-*.onnx``, built by ``scripts/build_onnx_graph.py``, 24-30 KB)
carry no weights: their initializers are ONNX external data at their offsets in the
``model.safetensors`` that the ``mdsearch-model-minilm`` package ships, and ONNX Runtime reads
them from that folder. Nothing is converted, and the repository holds no copy of the weights.
The int8 graph's weights are quantised here from the same tensors, symmetric per output channel
(per-tensor int8 lost too much: mean cosine 0.958 with the fp32 vectors), and handed to ONNX
Runtime as in-memory initializers.

Tokenisation is the bundled ``tokenizer.json`` through ``tokenizers`` (the Rust library that
transformers' fast tokenizer wraps), truncated at the model's ``max_seq_length`` of 256 as
sentence-transformers does; the graph does the mean pooling and normalisation. fp32 vectors agree
with the torch backend's to cosine >= 0.9999 (tests/integration/test_onnx_agreement.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.embedding.base import BatchingEmbedder, ModelLoadError, physical_cores
from mdsearch_ls.engine.heap import release_free_memory

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

GRAPHS = Path(__file__).resolve().parent / "graphs"
GRAPH_FILES = {"fp32": "minilm-l6-fp32.onnx", "int8": "minilm-l6-int8.onnx"}
DIMENSION = 384
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json; read from it when present


def read_header(path: Path) -> tuple[dict[str, Any], bytes]:
    """The safetensors header of ``path`` (JSON, data offsets from its end) and its raw bytes.

    safetensors is an 8-byte little-endian header length, a JSON header (dtype, shape and
    [begin, end) offsets from the start of the data per tensor), then the raw tensors.
    """
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100_000_000:
            raise ValueError("not a safetensors file")
        raw = f.read(n)
    header = json.loads(raw)
    header["__data_start__"] = 8 + n
    return header, struct.pack("<Q", n) + raw


def _expected_header_sha256() -> str:
    for line in (GRAPHS / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        if name == "model.safetensors:header":
            return digest
    raise ModelLoadError("graphs/SHA256SUMS has no model.safetensors:header line")


def check_weights(model_dir: Path) -> dict[str, Any]:
    """The weights' header, once checked to be the one the graphs were built against (they name
    each tensor by its offsets in this very file)."""
    import hashlib

    path = model_dir / "model.safetensors"
    try:
        header, raw = read_header(path)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not read the model weights {path}: {exc}") from exc
    if hashlib.sha256(raw).hexdigest() != _expected_header_sha256():
        raise ModelLoadError(
            f"{path} is not the all-MiniLM-L6-v2 checkpoint the ONNX graphs were built for "
            "(its tensor table differs); rebuild them with scripts/build_onnx_graph.py or "
            "set embedder.backend to torch"
        )
    return header


def tensor(mm: np.ndarray, header: dict[str, Any], key: str) -> np.ndarray:
    """One tensor of the memory-mapped file ``mm``, as a read-only view (no copy)."""
    import numpy as np

    info = header[key]
    begin, end = info["data_offsets"]
    start = header["__data_start__"]
    dtype = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
    return mm[start + begin : start + end].view(dtype).reshape(info["shape"])


def quantize_per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output channel of a torch Linear weight [out, in]: the weight as
    [in, out] int8 (what DynamicQuantizeMatMul multiplies by) and the per-channel scales.
    The scheme of ``onnxruntime.quantization.quantize_dynamic(per_channel=True)`` for int8."""
    import numpy as np

    w = np.asarray(w, dtype=np.float32)
    scale = np.abs(w).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(q.T), scale.astype(np.float32)


def derived_initializers(header: dict[str, Any]) -> list[str]:
    """Names of the int8 graph's quantised initializers (``.q8`` and ``.q8scale`` of every
    encoder Linear weight), derived from the tensor table as scripts/build_onnx_graph.py derives
    them (a session fails to load on any mismatch)."""
    names: list[str] = []
    for key, info in header.items():
        if (key.startswith("encoder.") and key.endswith(".weight") and isinstance(info, dict)
                and info.get("dtype") == "F32" and len(info["shape"]) == 2):
            names += [f"{key}.q8", f"{key}.q8scale"]
    return names


class OnnxEmbedder(BatchingEmbedder):
    """all-MiniLM-L6-v2 on ONNX Runtime's CPU provider: ``variant`` fp32 (default) or int8."""

    # Activations cost ~75 KB per padded token here (12 heads of attention scores over up to
    # 256 keys, and the 1,536-wide feed-forward): 2,048 tokens a batch peak at ~280 MB RSS for
    # the process, 8,192 at ~560 MB, for no more chunks/s (benchmarks/embed_bench.py).
    max_batch = 16
    max_tokens = 2048
    concurrent_queries = True

    def __init__(self, variant: str = "fp32", *, model_dir: Path | None = None,
                 threads: int | None = None, query_cache_size: int = 256) -> None:
        if variant not in GRAPH_FILES:
            raise ValueError(f"unknown ONNX variant {variant!r}")
        super().__init__(query_cache_size=query_cache_size)
        self.variant = variant
        self.backend = "onnx" if variant == "fp32" else "onnx-int8"
        self._model_dir = model_dir
        self._threads = threads
        self._tokenizer: Any = None
        self._keep: list[Any] = []  # int8 arrays ONNX Runtime may read in place

    @property
    def name(self) -> str:
        from mdsearch_ls.engine.embedding import BUNDLED_MODEL

        return BUNDLED_MODEL

    @property
    def dimension(self) -> int:
        return DIMENSION

    def _load_model(self) -> Any:
        from mdsearch_ls.engine.embedding import bundled_model_path

        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelLoadError(f"the onnx backend needs onnxruntime and tokenizers: {exc}") \
                from exc
        model_dir = self._model_dir or bundled_model_path()
        header = check_weights(model_dir)
        max_len = MAX_SEQ_LENGTH
        with contextlib.suppress(OSError, ValueError, KeyError):
            max_len = int(json.loads((model_dir / "sentence_bert_config.json").read_text())
                          ["max_seq_length"])
        try:
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:
            raise ModelLoadError(f"could not read {model_dir / 'tokenizer.json'}: {exc}") from exc
        tokenizer.no_padding()  # batches are padded here, after sorting
        tokenizer.enable_truncation(max_length=max_len)

        options = ort.SessionOptions()
        # The graphs' float weights are external data at their offsets in model.safetensors:
        # ONNX Runtime reads them from the model folder itself. (Handing it memory-mapped numpy
        # views instead cost 150 MB more RSS: it copies them, and the mapping stays resident.)
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", str(model_dir))
        if self.variant == "int8":
            names, values = [], []
            mm = np.memmap(model_dir / "model.safetensors", dtype=np.uint8, mode="r")
            for name in derived_initializers(header):
                base, kind = name.rsplit(".", 1)
                q, scale = quantize_per_channel(tensor(mm, header, base))
                array = q if kind == "q8" else scale
                self._keep.append(array)  # ONNX Runtime may read it in place: keep it alive
                names.append(name)
                values.append(ort.OrtValue.ortvalue_from_numpy(array))
            del mm  # unmapped: only the quantised copies are needed
            options.add_external_initializers(names, values)
            self._keep.append(values)
        options.intra_op_num_threads = self._threads or physical_cores()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Threads that spin between ops steal the CPU from everything else on a busy machine
        # (the language server's other threads, an editor).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Bounded memory: no arena (freed buffers go back to the allocator at once) and no
        # memory pattern planning (shapes change with every batch anyway); batches are bounded
        # in padded tokens (max_tokens).
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        if self.variant == "fp32":
            # No pre-packed copy of the weights: ONNX Runtime then reads them in place from the
            # mapped model.safetensors (pages shared by every mdsearch process) instead of
            # building a 40 MB private packed copy at load. That is 25-40 ms off every cold
            # start (a CLI search embeds one question); a batch of documents embeds as fast; a
            # new question costs ~3 ms more. The int8 graph gains nothing from it.
            options.add_session_config_entry("session.disable_prepacking", "1")
        options.log_severity_level = 3
        graph = GRAPHS / GRAPH_FILES[self.variant]
        log.info("loading %s (%s) on ONNX Runtime %s, %d threads", graph.name, model_dir,
                 ort.__version__, options.intra_op_num_threads)
        try:
            session = ort.InferenceSession(graph.read_bytes(), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelLoadError(f"ONNX Runtime could not load {graph.name}: {exc}") from exc
        self._tokenizer = tokenizer
        self._np = np
        return session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        vectors = super().embed_documents(texts)
        if len(texts) > self.max_batch:
            # a process that indexed once stayed ~70 MB larger for good without it
            release_free_memory()
        return vectors

    def _tokenize(self, texts: list[str]) -> tuple[list[Any], list[int]]:
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        ids = [e.ids for e in encodings]
        return ids, [len(i) for i in ids]

    def _embed_batch(self, payloads: list[Any]) -> np.ndarray:
        np = self._np
        longest = max(len(p) for p in payloads)
        input_ids = np.zeros((len(payloads), longest), dtype=np.int64)
        mask = np.zeros((len(payloads), longest), dtype=np.int64)
        for row, ids in enumerate(payloads):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        (out,) = self._model.run(None, {"input_ids": input_ids, "attention_mask": mask})
        return np.asarray(out, dtype=np.float32)
