"""Several ranking variants on one vault in one process: labelled queries of one split and link
contexts of one fold, each variant's figures side by side, and the queries whose first right
note moved against the first variant.

    python benchmarks/sweep.py vault|obsidian-help|tldr|nushell --index-dir DIR
           [--split tune] [--fold tune] [--no-links] [-k 10] [--changed]
           --variant "" --variant "term_centrality=loo" --variant "term_centrality=word,..."

Why: choosing a ranking rule means trying a dozen settings on the tune halves; a process per
setting loads the model and embeds every query again. Here the index is opened once, query
vectors stay cached, and only ``RankingParams`` changes between variants. The labelled queries
are filtered to ``--split`` (default tune, so the held-out half is never looked at while
choosing; ``--split all`` for sets without one, ``--split none`` for the links alone) and the
link contexts to ``--fold`` (default tune). Figures: top-1/3/5 and MRR@k over distinct notes,
hybrid mode, queries as typed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_contexts import derive, first_rank, fold_name, metrics  # noqa: E402
from quality import SETS, ranking_params  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.search.query import Filters, QueryError  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402


def ranks(ws: Workspace, items: list[tuple[str, set[str], Filters | None]], k: int
          ) -> tuple[list[int | None], float]:
    """The rank of each query's first right note, and the p50 search time in ms."""
    out: list[int | None] = []
    times: list[float] = []
    for query, relevant, filters in items:
        ws.searcher._cache.clear()
        t0 = time.perf_counter()
        try:
            hits = ws.searcher.search(query, k, mode="hybrid", filters=filters,
                                      per_file=1).hits
        except QueryError:
            hits = []
        times.append(time.perf_counter() - t0)
        out.append(first_rank([h.path for h in hits], relevant))
    times.sort()
    return out, times[len(times) // 2] * 1000 if times else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vault", help=f"a labelled set's name ({', '.join(SETS)}) or a folder")
    ap.add_argument("--queries", type=Path)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--split", default="tune", help="labelled split to score (all: every query)")
    ap.add_argument("--fold", default="tune", help="link-context fold to score")
    ap.add_argument("--no-links", action="store_true")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--variant", action="append", default=[],
                    help="comma-separated NAME=VALUE ranking parameters ('' = the defaults)")
    ap.add_argument("--changed", action="store_true", help="list the queries that moved")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.vault in SETS:
        vault, queries_file = SETS[args.vault]
    else:
        vault, queries_file = Path(args.vault), None
    queries_file = args.queries or queries_file
    os.environ.setdefault("MDSEARCH_CACHE_DIR", str(args.index_dir.parent / "cache"))
    settings = Settings(per_file=1)
    ws = Workspace(vault.resolve(), settings, create_embedder(settings), index_dir=args.index_dir)
    ws.index()
    sets: dict[str, list[tuple[str, set[str], Filters | None]]] = {}
    if queries_file:
        qs = [json.loads(line) for line in queries_file.read_text(encoding="utf-8").splitlines()
              if line.strip()]
        if args.split != "all":
            qs = [q for q in qs if q.get("split") == args.split]
        if qs:
            sets[f"labels/{args.split}"] = [(q["query"], set(q["relevant"]), None) for q in qs]
    if not args.no_links:
        contexts, _ = derive(ws, 2)
        every = sorted(ws.manifest.all_paths())
        sets[f"links/{args.fold}"] = [
            (c.query, {c.target}, Filters(paths=tuple(p for p in every if p != c.source)))
            for c in contexts if fold_name(c.fold) == args.fold]
    variants = args.variant or [""]
    base: dict[str, list[int | None]] = {}
    report = []
    for v in variants:
        params, _ = ranking_params([x for x in v.split(",") if x], settings.fusion)
        ws.searcher.params = params
        row = {"variant": v or "defaults"}
        for name, items in sets.items():
            r, p50 = ranks(ws, items, args.k)
            m = metrics(r, args.k)
            row[name] = m | {"p50_ms": round(p50, 1)}
            print(f"{v or 'defaults':<60} {name:<14} n={m['n']:<4} top1 {m['top1']:.3f} "
                  f"top3 {m['top3']:.3f} top5 {m['top5']:.3f} mrr {m[f'mrr{args.k}']:.3f} "
                  f"p50 {p50:.1f} ms", flush=True)
            if name not in base:
                base[name] = r
            elif args.changed:
                for (q, _, _), a, b in zip(items, base[name], r, strict=True):
                    if a != b:
                        print(f"    {a} -> {b}  {q[:100]}")
        report.append(row)
    if args.out:
        args.out.write_text(json.dumps({"vault": str(vault), "k": args.k, "split": args.split,
                                        "fold": args.fold, "rows": report}, indent=2) + "\n")
    ws.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
