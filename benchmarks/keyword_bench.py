"""The keyword list's cost per query: FTS5's whole query against the scores a server keeps.

    python benchmarks/keyword_bench.py ROOT [--queries FILE] [--pool 60] [--rounds 3]

Opens the index of ROOT read-only (build it first with ``mdsearch index ROOT``; set
``MDSEARCH_CACHE_DIR`` if it lives elsewhere), builds each query's phrases exactly as hybrid
search does (``keyword.or_terms(text, pairs=True)``, the queries as typed) and times, query by
query in turn:

- ``fts5``: ``Manifest.keyword_search`` as a CLI search runs it (one FTS5 query, ranked and cut
  inside FTS5, then joined to the chunks);
- ``kept_cold``: the same through kept phrase scores emptied before each query (a server's first
  search after a start or a write: FTS5's whole query when most rows are in common phrases, which
  are then read on a thread of their own, not timed);
- ``kept``: the same through the scores a long-running server keeps, after it has answered
  every other query once (its budget, the least recently used phrase dropped first).

All three must return the same ids with the same float scores (checked: the sums are FTS5's to
the last bit). Medians and p95 in ms, the pool (the hybrid search's ``min_pool``) stated;
results: ``benchmarks/results/keyword-<root name>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.search import keyword  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402


def pct(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--queries", type=Path,
                    default=ROOT.parent / "shared" / "eval" / "nl2bash-tldr.jsonl")
    ap.add_argument("--pool", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=int, help="rows kept (default: the engine's)")
    ap.add_argument("--common-rows", type=int, help="fewest rows of a kept phrase (default: the "
                    "engine's)")
    ap.add_argument("--cold-share", type=int, help="phrase_scores.COLD_SHARE (default: the "
                    "engine's)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    queries = [json.loads(line)["query"] for line in args.queries.open(encoding="utf-8")]
    from mdsearch_ls.engine.embedding import create_embedder
    from mdsearch_ls.engine.index import phrase_scores
    from mdsearch_ls.engine.index.phrase_scores import PhraseScores

    if args.cold_share:
        phrase_scores.COLD_SHARE = args.cold_share

    settings = Settings()
    ws = Workspace(args.root, settings, create_embedder(settings), read_only=True)
    m = ws.manifest
    weights = (4.0, 1.0)
    terms = [t for t in (keyword.or_terms(q, pairs=True) for q in queries) if t]
    cold_scores, kept_scores = PhraseScores(), PhraseScores()
    for scores in (cold_scores, kept_scores):
        scores.budget = args.budget or scores.budget
        scores.common_rows = args.common_rows or scores.common_rows
    m.phrase_scores = kept_scores
    for t in terms:  # the server has answered every query once
        m.keyword_search(" OR ".join(t), args.pool, None, weights, t)
    kept_scores.settle()
    times: dict[str, list[float]] = {"fts5": [], "kept_cold": [], "kept": []}
    differ = 0
    for _ in range(args.rounds):
        for t in terms:
            match = " OR ".join(t)
            m.phrase_scores = None
            start = time.perf_counter()
            a = m.keyword_search(match, args.pool, None, weights)
            times["fts5"].append((time.perf_counter() - start) * 1000)
            m.phrase_scores = cold_scores
            cold_scores.forget()
            start = time.perf_counter()
            b = m.keyword_search(match, args.pool, None, weights, t)
            times["kept_cold"].append((time.perf_counter() - start) * 1000)
            cold_scores.settle()  # (its common phrases, read on their own thread: not timed)
            m.phrase_scores = kept_scores
            start = time.perf_counter()
            c = m.keyword_search(match, args.pool, None, weights, t)
            times["kept"].append((time.perf_counter() - start) * 1000)
            differ += int(not a == b == c)
    chunks = m.counts()[1]
    ws.close()
    out = {"root": args.root.name, "chunks": chunks, "queries": len(terms), "pool": args.pool,
           "rounds": args.rounds, "budget": kept_scores.budget,
           "common_rows": kept_scores.common_rows, "cold_share": phrase_scores.COLD_SHARE,
           **{name: pct(ms) for name, ms in times.items()},
           "kept_rows": kept_scores.held, "differing_lists": differ,
           "ratio_p50_kept": round(statistics.median(times["kept"])
                                   / statistics.median(times["fts5"]), 3),
           "ratio_p50_kept_cold": round(statistics.median(times["kept_cold"])
                                        / statistics.median(times["fts5"]), 3)}
    text = json.dumps(out, indent=2)
    print(text)
    path = args.out or ROOT / "benchmarks" / "results" / f"keyword-{args.root.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
