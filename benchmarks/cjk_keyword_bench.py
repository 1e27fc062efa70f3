"""Chinese keyword search on tldr-zh: the 95 public queries of ``eval/tldr-zh.jsonl`` (75
descriptions, 20 two-to-four-character keywords) and 60 two-character strings that sit only
inside longer runs (``inside_run_queries``), as typed, through the engine's Workspace with
the default model (k=10, per_file=1, so ranks are ranks of distinct pages), in keyword, semantic
and hybrid mode; and the keyword query latency (p50/p95 of each query once, after a warm-up).

    python benchmarks/cjk_keyword_bench.py [--index-dir DIR] [--out FILE] [--label NAME]

Run it from two trees (before and after a change, ``PYTHONPATH`` of each) to compare; the index
is built in ``--index-dir`` (a temporary folder by default) on the first run.
Results: ``benchmarks/results/cjk-keyword-<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from multilingual_bench import grouped, load_queries, metrics  # noqa: E402

K = 10
CJK_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]{3,}")


def inside_run_queries(corpus: Path, n: int = 60, seed: int = 7) -> list[dict]:
    """Two-character strings that occur only inside longer runs of Han characters, in at most
    three pages, as keyword queries answered by those pages: the case FTS5's unicode61 misses
    (it keeps a run whole). Drawn at random with a fixed seed from the corpus itself, before any
    result was seen and with nothing tuned on them; the pages holding the pair are relevant."""
    pages: dict[str, list[str]] = {}
    for path in sorted((corpus / "pages").rglob("*.md")):
        text = path.read_text("utf-8", errors="replace")
        pages[path.relative_to(corpus).as_posix()] = CJK_RUN.findall(text)
    where: dict[str, set[str]] = {}
    alone: set[str] = set()
    for rel, runs in pages.items():
        for run in runs:
            for i in range(len(run) - 1):
                where.setdefault(run[i:i + 2], set()).add(rel)
    for path in (corpus / "pages").rglob("*.md"):  # pairs also standing alone are easy: out
        for m in re.finditer("(?<![\u3400-\u9fff])[\u3400-\u9fff]{2}(?![\u3400-\u9fff])",
                             path.read_text("utf-8", errors="replace")):
            alone.add(m.group(0))
    pool = sorted(g for g, rels in where.items() if len(rels) <= 3 and g not in alone)
    picked = random.Random(seed).sample(pool, min(n, len(pool)))
    return [{"id": f"inside-{i:03d}", "kind": "inside-run", "query": g,
             "relevant": sorted(where[g])} for i, g in enumerate(picked)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    corpus = args.shared / "corpora" / "tldr-zh"
    queries = [*load_queries(args.shared / "eval" / "tldr-zh.jsonl"), *inside_run_queries(corpus)]
    tmp = tempfile.TemporaryDirectory(prefix="mdsearch-cjk-") if args.index_dir is None else None
    index = Path(tmp.name) if tmp else args.index_dir
    settings = Settings(per_file=1)
    ws = Workspace(corpus, settings, create_embedder(settings), index_dir=index)
    t0 = time.perf_counter()
    report = ws.index()
    print(f"index: {report.summary()} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
    ws.searcher.search("warm up", K, mode="hybrid")
    out: dict = {"what": "tldr-zh public queries as typed, Workspace, default model",
                 "k": K, "per_file": 1, "label": args.label, "quality": {}, "latency_ms": {}}
    for mode in ("keyword", "semantic", "hybrid"):
        rows, times = [], []
        for q in queries:
            t = time.perf_counter()
            result = ws.searcher.search(q["query"], K, mode=mode)
            times.append(1000 * (time.perf_counter() - t))
            rows.append(metrics([h.path for h in result.hits], set(q["relevant"])))
        out["quality"][mode] = grouped(queries, rows, "kind")
        times.sort()
        out["latency_ms"][mode] = {"p50": round(statistics.median(times), 2),
                                   "p95": round(times[int(0.95 * (len(times) - 1))], 2)}
    ws.close()
    for mode, groups in out["quality"].items():
        cells = "  ".join(f"{g}: top-1 {r['top1']:.3f} top-5 {r['top5']:.3f} MRR {r['mrr10']:.3f}"
                          f" (n={r['n']})" for g, r in groups.items())
        print(f"{args.label} {mode:8} k={K}  {cells}  p50 {out['latency_ms'][mode]['p50']} ms")
    dest = args.out or HERE / "results" / f"cjk-keyword-{args.label}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {dest}")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
