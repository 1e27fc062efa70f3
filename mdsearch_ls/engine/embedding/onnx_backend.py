"""The default backend: the bundled all-MiniLM-L6-v2 on ONNX Runtime, no torch anywhere.

The graph (``graphs/minilm-l6-*.onnx``, built by ``scripts/build_onnx_graph.py``) carries no
weights. At load the bundled ``model.safetensors`` is memory-mapped and each tensor handed to ONNX
Runtime as an external initializer, in place: nothing is copied or converted for the fp32 graph,
and pages of the 47 MB word-embedding table that no token uses are never read. The int8 graph's
weights are quantised from the same tensors here, symmetric per output channel (per-tensor int8
lost too much: mean cosine 0.958 with the fp32 vectors).

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
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.embedding.base import BatchingEmbedder, ModelLoadError, physical_cores

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

GRAPHS = Path(__file__).resolve().parent / "graphs"
GRAPH_FILES = {"fp32": "minilm-l6-fp32.onnx", "int8": "minilm-l6-int8.onnx"}
DIMENSION = 384
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json; read from it when present

# The same model directory can serve several embedders (a language server that switches the
# backend back and forth): the mapping is shared, read-only.
_weights_lock = threading.Lock()
_weights: dict[Path, tuple[Any, dict[str, Any], int]] = {}


def _safetensors(path: Path) -> tuple[Any, dict[str, Any], int, bytes]:
    """Memory map of the file, its header, where the data starts, and the raw header bytes.

    safetensors is an 8-byte little-endian header length, a JSON header (dtype, shape and
    [begin, end) offsets from the start of the data per tensor), then the raw tensors.
    """
    import numpy as np

    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100_000_000:
            raise ModelLoadError(f"{path} is not a safetensors file")
        raw = f.read(n)
    header = json.loads(raw)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    return mm, header, 8 + n, struct.pack("<Q", n) + raw


def _expected_header_sha256() -> str:
    for line in (GRAPHS / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        if name == "model.safetensors:header":
            return digest
    raise ModelLoadError("graphs/SHA256SUMS has no model.safetensors:header line")


def load_weights(model_dir: Path) -> tuple[Any, dict[str, Any], int]:
    """The bundled weights, mapped once per process and checked against the graphs' build."""
    import hashlib

    path = model_dir / "model.safetensors"
    with _weights_lock:
        if path in _weights:
            return _weights[path]
        try:
            mm, header, start, raw = _safetensors(path)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"could not read the model weights {path}: {exc}") from exc
        if hashlib.sha256(raw).hexdigest() != _expected_header_sha256():
            raise ModelLoadError(
                f"{path} is not the all-MiniLM-L6-v2 checkpoint the ONNX graphs were built for "
                "(its tensor table differs); rebuild them with scripts/build_onnx_graph.py or "
                "set embedder.backend to torch"
            )
        _weights[path] = (mm, header, start)
        return _weights[path]


def tensor(weights: tuple[Any, dict[str, Any], int], key: str) -> np.ndarray:
    """One tensor of the mapped file, as a read-only view (no copy)."""
    import numpy as np

    mm, header, start = weights
    info = header[key]
    begin, end = info["data_offsets"]
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


def graph_initializers(variant: str, header: dict[str, Any]) -> list[str]:
    """Names of the graph's external initializers, derived from the weights' tensor table the
    way scripts/build_onnx_graph.py derives them (a session fails to load on any mismatch)."""
    names: list[str] = []
    for key, info in header.items():
        if key == "__metadata__" or not key.startswith(("embeddings.", "encoder.")):
            continue
        if info["dtype"] != "F32":
            continue  # embeddings.position_ids: the graph slices positions itself
        linear = key.startswith("encoder.") and key.endswith(".weight") and len(info["shape"]) == 2
        if variant == "int8" and linear:
            names += [f"{key}.q8", f"{key}.q8scale"]
        else:
            names.append(key)
    return names


class OnnxEmbedder(BatchingEmbedder):
    """all-MiniLM-L6-v2 on ONNX Runtime's CPU provider: ``variant`` fp32 (default) or int8."""

    # Measured (benchmarks/embed_bench.py): batches up to 32 texts and 8,192 padded tokens were
    # the fastest per chunk once sorted; the token bound keeps a batch's activations near 150 MB.
    max_batch = 32
    max_tokens = 8192

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
        self._keep: list[Any] = []  # arrays ONNX Runtime reads in place: alive as long as it is

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
        weights = load_weights(model_dir)
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

        names, values = [], []
        for name in graph_initializers(self.variant, weights[1]):
            if name.endswith(".q8"):
                q, _ = quantize_per_channel(tensor(weights, name[: -len(".q8")]))
                array = q
            elif name.endswith(".q8scale"):
                _, array = quantize_per_channel(tensor(weights, name[: -len(".q8scale")]))
            else:
                array = tensor(weights, name)
            self._keep.append(array)
            names.append(name)
            values.append(ort.OrtValue.ortvalue_from_numpy(array))
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads or physical_cores()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Threads that spin between ops steal the CPU from everything else on a busy machine
        # (the language server's other threads, an editor); measured no slower without.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Bounded memory: no arena (freed buffers go back to the allocator at once) and no
        # memory pattern planning (shapes change with every batch anyway).
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        options.add_external_initializers(names, values)
        self._keep.append(values)
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
