"""Build the ONNX graphs of the bundled all-MiniLM-L6-v2, without its weights.

    pip install onnx && python scripts/build_onnx_graph.py [--check]

Writes ``mdsearch_ls/engine/embedding/graphs/minilm-l6-{fp32,int8}.onnx`` (a few tens of KB each)
and ``SHA256SUMS`` beside them.

The graphs hold the network's structure only: every float weight is an initializer stored as
ONNX external data at its real offset in the ``model.safetensors`` that the
``mdsearch-model-minilm`` package ships (location ``model.safetensors``), and the embedder points
ONNX Runtime at that folder (``session.model_external_initializers_file_folder_path``). So the
repository never carries the 90 MB of weights, a fresh install needs no torch to get the graph,
and the fp32 graph computes exactly what sentence-transformers computes from the same file. The
same entries make the graph loadable by any ONNX tool given the bundled model folder.

The int8 graph's quantised weights (``*.q8`` int8 [in, out] and ``*.q8scale`` float [out]:
symmetric, per output channel) are computed by the embedder from the same fp32 tensors at load,
the way ``onnxruntime.quantization``'s dynamic per-channel quantisation does, and handed to ONNX
Runtime in memory (``SessionOptions.add_external_initializers``); their external-data location
is ``derived``, a placeholder.

What the graph computes (the modules of the model's ``modules.json``: Transformer, mean Pooling,
Normalize): BERT embeddings (word + absolute position + token type 0, LayerNorm eps 1e-12), six
encoder layers (12-head self-attention with a key padding mask, exact erf GELU, post-LayerNorm),
mean of the token vectors over the attention mask (the count clamped at 1e-9), then division by
the L2 norm clamped at 1e-12. Inputs ``input_ids`` and ``attention_mask`` (int64 [batch, seq],
right padded), output ``embedding`` (float [batch, 384]). ONNX Runtime contrib ops
(``com.microsoft``: MultiHeadAttention, SkipLayerNormalization, BiasGelu, DynamicQuantizeMatMul)
are used where they are ONNX Runtime's own fused kernels for these patterns.

``--check`` rebuilds in memory and fails if a committed file differs (reproducibility).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "mdsearch_ls" / "engine" / "embedding" / "graphs"

HIDDEN = 384
HEADS = 12
INTERMEDIATE = 1536
LAYERS = 6
VOCAB = 30522
MAX_POSITIONS = 512
LN_EPS = 1e-12
OPSET = 17
MS_OPSET = 1


def safetensors_header(path: Path) -> tuple[bytes, dict]:
    """The raw header (length prefix included) and its parsed JSON."""
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
    return struct.pack("<Q", n) + raw, json.loads(raw)


class Builder:
    """Accumulates nodes and external initializers of one graph."""

    def __init__(self, header: dict, data_start: int, *, int8: bool) -> None:
        self.header = header
        self.data_start = data_start
        self.int8 = int8
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, TensorProto] = {}
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def node(self, op: str, inputs: list[str], *, domain: str = "", hint: str = "",
             outputs: int = 1, **attrs: object) -> str | list[str]:
        outs = [self.name(hint or op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0], domain=domain,
                                           **attrs))
        return outs[0] if outputs == 1 else outs

    def _external(self, name: str, dtype: int, shape: list[int], location: str,
                  offset: int, length: int) -> str:
        if name not in self.inits:
            t = TensorProto(name=name, data_type=dtype, dims=shape)
            t.data_location = TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)),
                               ("length", str(length))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            self.inits[name] = t
        return name

    def weight(self, key: str) -> str:
        """A tensor of model.safetensors, by its name there (float32, at its real offset)."""
        info = self.header[key]
        assert info["dtype"] == "F32", (key, info["dtype"])
        start, end = info["data_offsets"]
        return self._external(key, TensorProto.FLOAT, list(info["shape"]), "model.safetensors",
                              self.data_start + start, end - start)

    def derived(self, name: str, dtype: int, shape: list[int]) -> str:
        size = {TensorProto.INT8: 1, TensorProto.FLOAT: 4}[dtype]
        n = 1
        for d in shape:
            n *= d
        return self._external(name, dtype, shape, "derived", 0, n * size)

    def const(self, name: str, value: list[int] | list[float], dtype: int) -> str:
        if name not in self.inits:
            self.inits[name] = helper.make_tensor(name, dtype, [len(value)], value)
        return name

    def linear(self, x: str, prefix: str, *, bias: bool = True) -> str:
        """``x @ W.T + b`` for a torch Linear stored [out, in]: Gemm(transB) reads it as is;
        the int8 graph multiplies by the derived [in, out] int8 weight and its scales."""
        w = self.header[f"{prefix}.weight"]["shape"]
        b = [self.weight(f"{prefix}.bias")] if bias else []
        if self.int8:
            q = self.derived(f"{prefix}.weight.q8", TensorProto.INT8, [w[1], w[0]])
            s = self.derived(f"{prefix}.weight.q8scale", TensorProto.FLOAT, [w[0]])
            return self.node("DynamicQuantizeMatMul", [x, q, s, "", *b],
                             domain="com.microsoft", hint="qmatmul")
        return self.node("Gemm", [x, self.weight(f"{prefix}.weight"), *b], transB=1,
                         hint="gemm")


def build(header: dict, data_start: int, *, int8: bool) -> onnx.ModelProto:
    g = Builder(header, data_start, int8=int8)
    ids, mask = "input_ids", "attention_mask"
    # Shapes: [B, S] of the input, [B, S, H] for attention, [-1, H] for the 2-D layers.
    shape_bs = g.node("Shape", [ids], hint="shape_bs")
    seq = g.node("Shape", [ids], start=1, end=2, hint="seq_len")
    shape_bsh = g.node("Concat", [shape_bs, g.const("hidden", [HIDDEN], TensorProto.INT64)],
                       axis=0, hint="shape_bsh")
    flat = g.const("flat", [-1, HIDDEN], TensorProto.INT64)
    zero = g.const("zero", [0], TensorProto.INT64)

    words = g.node("Gather", [g.weight("embeddings.word_embeddings.weight"), ids], axis=0)
    positions = g.node("Slice", [g.weight("embeddings.position_embeddings.weight"), zero, seq,
                                 zero])
    token_type = g.node("Gather", [g.weight("embeddings.token_type_embeddings.weight"), zero],
                        axis=0)  # [1, H]: every token is of type 0
    emb = g.node("Add", [g.node("Add", [words, positions]), token_type])
    emb = g.node("LayerNormalization", [emb, g.weight("embeddings.LayerNorm.weight"),
                                        g.weight("embeddings.LayerNorm.bias")],
                 axis=-1, epsilon=LN_EPS, hint="emb_ln")
    x = g.node("Reshape", [emb, flat])
    mask_i32 = g.node("Cast", [mask], to=TensorProto.INT32, hint="mask_i32")

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q, k, v = (g.node("Reshape", [g.linear(x, f"{p}.attention.self.{n}"), shape_bsh])
                   for n in ("query", "key", "value"))
        attn = g.node("MultiHeadAttention", [q, k, v, "", mask_i32], domain="com.microsoft",
                      num_heads=HEADS, hint="mha")
        attn = g.linear(g.node("Reshape", [attn, flat]), f"{p}.attention.output.dense",
                        bias=False)
        x = g.node("SkipLayerNormalization",
                   [attn, x, g.weight(f"{p}.attention.output.LayerNorm.weight"),
                    g.weight(f"{p}.attention.output.LayerNorm.bias"),
                    g.weight(f"{p}.attention.output.dense.bias")],
                   domain="com.microsoft", epsilon=LN_EPS, hint="attn_ln")
        h = g.linear(x, f"{p}.intermediate.dense", bias=False)
        h = g.node("BiasGelu", [h, g.weight(f"{p}.intermediate.dense.bias")],
                   domain="com.microsoft", hint="gelu")
        h = g.linear(h, f"{p}.output.dense", bias=False)
        x = g.node("SkipLayerNormalization",
                   [h, x, g.weight(f"{p}.output.LayerNorm.weight"),
                    g.weight(f"{p}.output.LayerNorm.bias"), g.weight(f"{p}.output.dense.bias")],
                   domain="com.microsoft", epsilon=LN_EPS, hint="out_ln")

    # Mean pooling over the attention mask, then L2 normalisation (sentence-transformers'
    # Pooling and Normalize modules, clamps included).
    tokens = g.node("Reshape", [x, shape_bsh])
    maskf = g.node("Unsqueeze", [g.node("Cast", [mask], to=TensorProto.FLOAT),
                                 g.const("last", [-1], TensorProto.INT64)])
    axis1 = g.const("axis1", [1], TensorProto.INT64)
    summed = g.node("ReduceSum", [g.node("Mul", [tokens, maskf]), axis1], keepdims=0)
    count = g.node("Max", [g.node("ReduceSum", [maskf, axis1], keepdims=0),
                           g.const("count_eps", [1e-9], TensorProto.FLOAT)])
    mean = g.node("Div", [summed, count], hint="mean")
    norm = g.node("Sqrt", [g.node("ReduceSum", [g.node("Mul", [mean, mean]), axis1],
                                  keepdims=1)])
    norm = g.node("Max", [norm, g.const("norm_eps", [1e-12], TensorProto.FLOAT)])
    out = g.node("Div", [mean, norm], hint="normalized")
    g.nodes.append(helper.make_node("Identity", [out], ["embedding"], name="embedding"))

    graph = helper.make_graph(
        g.nodes,
        f"all-MiniLM-L6-v2-{'int8' if int8 else 'fp32'}",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        initializer=list(g.inits.values()),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET),
                       helper.make_opsetid("com.microsoft", MS_OPSET)],
        producer_name="mdsearch scripts/build_onnx_graph.py",
        producer_version="1",
        ir_version=8,
    )
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="fail if the committed graphs differ from a fresh build")
    ap.add_argument("--weights", type=Path, default=None,
                    help="model.safetensors (default: the mdsearch-model-minilm package's)")
    args = ap.parse_args(argv)
    weights = args.weights
    if weights is None:
        from mdsearch_model_minilm import MODEL_DIR

        weights = MODEL_DIR / "model.safetensors"
    raw, header = safetensors_header(weights)
    files: dict[str, bytes] = {}
    for variant in ("fp32", "int8"):
        model = build(header, len(raw), int8=variant == "int8")
        # onnx.checker would look for the external data in the working directory; the test
        # suite loads both graphs in ONNX Runtime with the real weights instead.
        files[f"minilm-l6-{variant}.onnx"] = model.SerializeToString(deterministic=True)
    lines = [f"{hashlib.sha256(data).hexdigest()}  {name}" for name, data in sorted(files.items())]
    lines.append(f"{hashlib.sha256(raw).hexdigest()}  model.safetensors:header")
    sums = "\n".join(lines) + "\n"
    if args.check:
        bad = [name for name, data in files.items()
               if not (OUT / name).exists() or (OUT / name).read_bytes() != data]
        if (OUT / "SHA256SUMS").read_text() != sums:
            bad.append("SHA256SUMS")
        if bad:
            print(f"differs from a fresh build: {', '.join(bad)}", file=sys.stderr)
            return 1
        print("graphs reproduce byte for byte", file=sys.stderr)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT / name).write_bytes(data)
    (OUT / "SHA256SUMS").write_text(sums)
    print(sums, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
