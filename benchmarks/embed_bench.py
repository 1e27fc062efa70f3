"""Embedding backends side by side: start-up, throughput, query latency, memory, agreement.

    python benchmarks/embed_bench.py [--corpus DIR] [--n 290] [--rounds 3]
                                     [--pipeline DIR] [--out FILE]

Each measurement runs in a fresh process (so import + load and RSS are a process's own), the
configurations interleaved round by round, medians reported, ratios first:

* ``torch-default``: the torch backend as it ran before this benchmark's issue: torch imported
  before the embedder (so its OpenMP threads wait actively, the default), default thread count.
* ``torch``: the torch backend as shipped (``OMP_WAIT_POLICY=PASSIVE`` set before torch is
  imported, intra-op threads = physical cores).
* ``onnx``: the default backend, ONNX Runtime fp32.  ``onnx-int8``: int8 weights per channel.

Per configuration: import + model load (s), throughput over the ``--n`` longest chunks of the
corpus (one ``embed_documents`` call: the backend's own sort-then-batch), one query embedding p50
(40 distinct short queries, one at a time), RSS after load and peak (VmRSS / VmHWM), and the
cosine of its vectors with the shipped torch backend's (mean, min; nearest neighbour agreement).

``--pipeline DIR`` (default: the corpus) also measures the indexing pipeline against the model
alone, per backend (onnx, torch): a cold ``Workspace.index()`` of a copy of DIR with the model
already loaded, against one ``embed_documents`` call on exactly the texts the index embedded,
with the same embedder in the same process (raw before and after, the mean of the two).
Target: the pipeline at >= 90 % of the raw encode's throughput.

Results: ``benchmarks/results/embed-<corpus>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ("torch-default", "torch", "onnx", "onnx-int8")
QUERIES = [
    "how do I embed a file", "sync settings between devices", "keyboard shortcut for search",
    "publish a site with a custom domain", "daily notes template", "link to a heading",
    "graph view filters", "canvas cards", "install a community plugin", "backlinks pane",
    "change the font size", "export to pdf", "vault in icloud", "undo a change", "tags in yaml",
    "math formulas", "callout types", "table of contents", "rename a note", "move files",
    "dataview alternatives", "attachments folder", "command palette", "split panes",
    "mobile app gestures", "bookmarks", "properties types", "file recovery snapshots",
    "web clipper", "search operators", "workspaces layout", "spell check language",
    "themes and css snippets", "sync conflict", "local graph depth", "outgoing links",
    "format a code block", "footnotes", "embed a pdf page", "random note",
]


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def make_embedder(config: str):  # type: ignore[no-untyped-def]
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder

    backend = "torch" if config.startswith("torch") else config
    return create_embedder(Settings(embedder_backend=backend))


def child(config: str, texts_file: Path, out: Path) -> None:
    """One configuration in this fresh process."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    if config == "torch-default":
        import torch  # noqa: F401  (first: the backend can no longer set its thread policy)
    embedder = make_embedder(config)
    embedder.load()
    load_s = time.perf_counter() - t0
    rss_load, _ = rss_mb()
    import numpy as np

    texts = json.loads(texts_file.read_text())
    embedder.embed_documents(texts[-8:])  # warm-up (the shortest of the set)
    t = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    embed_s = time.perf_counter() - t
    latencies = []
    for q in QUERIES:
        t = time.perf_counter()
        embedder.embed_query(q)
        latencies.append(time.perf_counter() - t)
    _, peak = rss_mb()
    np.save(out.with_suffix(".npy"), vectors)
    out.write_text(json.dumps({
        "config": config, "load_s": load_s, "embed_s": embed_s,
        "chunks_per_s": len(texts) / embed_s, "query_p50_ms": statistics.median(latencies) * 1e3,
        "rss_after_load_mb": rss_load, "rss_peak_mb": peak,
    }))


def pipeline_child(backend: str, folder: Path, out: Path) -> None:
    """Cold index of a copy of ``folder`` against a raw encode of the same texts."""
    sys.path.insert(0, str(ROOT))
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    embedder = create_embedder(Settings(embedder_backend=backend))
    embedder.load()
    seen: list[str] = []
    original = embedder.embed_documents

    def recording(texts):  # type: ignore[no-untyped-def]
        seen.extend(texts)
        return original(texts)

    with tempfile.TemporaryDirectory(prefix="mdsearch-pipe-") as tmp:
        root = Path(tmp) / folder.name
        shutil.copytree(folder, root)
        os.environ["MDSEARCH_CACHE_DIR"] = str(Path(tmp) / "cache")
        embedder.embed_documents(["warm up the model"])
        ws = Workspace(root, Settings(embedder_backend=backend), embedder,
                       index_dir=Path(tmp) / "index")
        embedder.embed_documents = recording  # type: ignore[method-assign]
        t, c = time.perf_counter(), time.process_time()
        report = ws.index()
        index_s, index_cpu = time.perf_counter() - t, time.process_time() - c
        ws.close()
        embedder.embed_documents = original  # type: ignore[method-assign]
        raws, raw_cpus = [], []
        for _ in range(2):
            t, c = time.perf_counter(), time.process_time()
            original(list(seen))
            raws.append(time.perf_counter() - t)
            raw_cpus.append(time.process_time() - c)
    raw_s = statistics.mean(raws)
    out.write_text(json.dumps({
        "backend": backend, "chunks_embedded": len(seen), "chunks_written": report.chunks_written,
        "index_s": index_s, "raw_encode_s": raw_s, "raw_encode_runs_s": raws,
        "index_chunks_per_s": len(seen) / index_s, "raw_chunks_per_s": len(seen) / raw_s,
        "pipeline_efficiency": raw_s / index_s,
        # CPU seconds of the whole process: the same ratio, less at the mercy of other load
        "index_cpu_s": index_cpu, "raw_encode_cpu_s": statistics.mean(raw_cpus),
        "pipeline_efficiency_cpu": statistics.mean(raw_cpus) / index_cpu,
    }))


def corpus_chunks(folder: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.notes import chunking

    s = Settings()
    texts = []
    for path in sorted(folder.rglob("*.md")):
        rel = path.relative_to(folder).as_posix()
        note = chunking.parse_note(path.read_text(encoding="utf-8", errors="replace"),
                                   fallback_title=PurePosixPath(rel).stem,
                                   chunk_size=s.chunk_size, chunk_overlap=s.chunk_overlap)
        texts.extend(c.embed_text for c in note.chunks)
    return texts


def run(args: list[str]) -> None:
    subprocess.run([sys.executable, __file__, *args], check=True, env={
        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")})


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpora" /
                    "obsidian-help")
    ap.add_argument("--n", type=int, default=290, help="the N longest chunks (default 290)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--pipeline", type=Path, default=None,
                    help="folder to index for the pipeline measurement (default: --corpus)")
    ap.add_argument("--no-pipeline", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--pipeline-child", help=argparse.SUPPRESS)
    ap.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.texts, args.result)
        return 0
    if args.pipeline_child:
        pipeline_child(args.pipeline_child, args.pipeline, args.result)
        return 0

    import numpy as np

    corpus = args.corpus.resolve()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    texts = sorted(corpus_chunks(corpus), key=len, reverse=True)[: args.n]
    out = args.out or ROOT / "benchmarks" / "results" / f"embed-{corpus.name}.json"
    rows: dict[str, list[dict]] = {c: [] for c in configs}
    agreement: dict[str, list[dict]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="mdsearch-embed-bench-") as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        for r in range(args.rounds):
            order = configs[r % len(configs):] + configs[: r % len(configs)]
            for config in order:
                result = Path(tmp) / f"{config}-{r}.json"
                run(["--child", config, "--texts", str(texts_file), "--result", str(result)])
                row = json.loads(result.read_text())
                rows[config].append(row)
                print(f"round {r + 1} {config:<14} load {row['load_s']:.2f} s, "
                      f"{row['chunks_per_s']:.1f} chunks/s, query p50 "
                      f"{row['query_p50_ms']:.1f} ms, RSS {row['rss_after_load_mb']:.0f} / "
                      f"{row['rss_peak_mb']:.0f} MB", file=sys.stderr)
            if "torch" in configs:
                ref = np.load(Path(tmp) / f"torch-{r}.npy")
                for config in configs:
                    v = np.load(Path(tmp) / f"{config}-{r}.npy")
                    cos = np.sum(v * ref, axis=1)
                    sim_v, sim_ref = v @ v.T, ref @ ref.T
                    np.fill_diagonal(sim_v, -2)
                    np.fill_diagonal(sim_ref, -2)
                    agreement[config].append({
                        "cos_mean": float(cos.mean()), "cos_min": float(cos.min()),
                        "same_nn": float(np.mean(sim_v.argmax(1) == sim_ref.argmax(1)))})
        pipeline = {}
        if not args.no_pipeline:
            folder = (args.pipeline or corpus).resolve()
            for backend in ("onnx", "torch"):
                result = Path(tmp) / f"pipeline-{backend}.json"
                run(["--pipeline-child", backend, "--pipeline", str(folder),
                     "--result", str(result)])
                pipeline[backend] = json.loads(result.read_text())
                p = pipeline[backend]
                print(f"pipeline {backend}: index {p['index_chunks_per_s']:.1f} chunks/s, raw "
                      f"{p['raw_chunks_per_s']:.1f} chunks/s, efficiency "
                      f"{p['pipeline_efficiency']:.2f} (CPU time "
                      f"{p['pipeline_efficiency_cpu']:.2f})", file=sys.stderr)

    summary = {}
    for config in configs:
        rs = rows[config]
        summary[config] = {
            "load_s": round(med(rs, "load_s"), 3),
            "chunks_per_s": round(med(rs, "chunks_per_s"), 2),
            "query_p50_ms": round(med(rs, "query_p50_ms"), 2),
            "rss_after_load_mb": round(med(rs, "rss_after_load_mb")),
            "rss_peak_mb": round(med(rs, "rss_peak_mb")),
        }
        if agreement[config]:
            summary[config].update({
                "cos_mean": round(min(a["cos_mean"] for a in agreement[config]), 6),
                "cos_min": round(min(a["cos_min"] for a in agreement[config]), 6),
                "same_nn": round(min(a["same_nn"] for a in agreement[config]), 3),
            })
    ratios = {}
    if {"onnx", "torch"} <= set(summary):
        ratios["onnx_vs_torch_throughput"] = round(
            summary["onnx"]["chunks_per_s"] / summary["torch"]["chunks_per_s"], 2)
        ratios["torch_load_over_onnx_load"] = round(
            summary["torch"]["load_s"] / summary["onnx"]["load_s"], 1)
    if {"torch", "torch-default"} <= set(summary):
        ratios["torch_tuned_vs_default_throughput"] = round(
            summary["torch"]["chunks_per_s"] / summary["torch-default"]["chunks_per_s"], 2)
    if {"onnx-int8", "onnx"} <= set(summary):
        ratios["int8_vs_fp32_throughput"] = round(
            summary["onnx-int8"]["chunks_per_s"] / summary["onnx"]["chunks_per_s"], 2)
    for backend, p in pipeline.items():
        ratios[f"pipeline_efficiency_{backend}"] = round(p["pipeline_efficiency"], 3)

    print(f"\n{corpus.name}: the {len(texts)} longest chunks, {args.rounds} rounds interleaved, "
          f"medians; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for k, v in ratios.items():
        print(f"  {k}: {v}")
    cols = ["load_s", "chunks_per_s", "query_p50_ms", "rss_after_load_mb", "rss_peak_mb",
            "cos_mean", "cos_min", "same_nn"]
    print(f"{'config':<14}" + "".join(f"{c:>18}" for c in cols))
    for config, s in summary.items():
        print(f"{config:<14}" + "".join(f"{s.get(c, ''):>18}" for c in cols))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "corpus": corpus.name, "n_chunks": len(texts), "rounds": args.rounds,
        "ratios": ratios, "summary": summary, "pipeline": pipeline,
        "runs": rows, "agreement_per_round": agreement,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_end": os.getloadavg()},
    }, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
