"""What a ranking rule costs per query: hybrid search with the engine's ranking parameters
against another set of them, interleaved, on a real index.

    python benchmarks/ranking_bench.py FOLDER --index-dir DIR --before NAME=VALUE [...]
                                       [--queries Q.jsonl] [--n-queries 100] [--rounds 3]

Opens (or builds) the index of FOLDER, then times every query once with ``--before``'s
parameters (e.g. ``--before long_note_penalty=0 --before exact_alpha=0.7``: the rules switched
off) and once with the engine's defaults, alternately, so load drifting on a shared machine hits
both alike. Result caches are cleared before every timing and the query vector is kept
(embedding the query is the same work either way). Queries are taken as typed (a long-note
penalty or an exact-term weight depends on what was typed). Also reports how often the two
orders agree on the first hit. Results: ``results/ranking-<folder>.json``.
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

from quality import ranking_params  # noqa: E402  (benchmarks/ is on sys.path as a script)

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.search.ranking import RankingParams  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402


def timed(ws: Workspace, query: str, params: RankingParams) -> tuple[float, list[str]]:
    ws.searcher.params = params
    ws.searcher._cache.clear()
    t0 = time.perf_counter()
    hits = ws.searcher.search(query, 10, mode="hybrid").hits
    return time.perf_counter() - t0, [f"{h.path}#{h.start_line}" for h in hits]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--before", action="append", default=[], metavar="NAME=VALUE",
                    help="a ranking parameter of the 'before' side (repeatable)")
    ap.add_argument("--queries", type=Path, help="JSON Lines with a 'query' field")
    ap.add_argument("--n-queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    folder = args.folder.resolve()
    out = args.out or ROOT / "benchmarks" / "results" / f"ranking-{folder.name}.json"
    before, overrides = ranking_params(args.before, Settings.fusion)
    after = RankingParams()

    embedder = create_embedder(Settings())
    embedder.load()
    ws = Workspace(folder, Settings(), embedder, index_dir=args.index_dir)
    t0 = time.perf_counter()
    report = ws.index()
    files, chunks = ws.manifest.counts()
    print(f"index: {files} notes, {chunks} chunks ({report.chunks_embedded} embedded now, "
          f"{time.perf_counter() - t0:.0f} s)", flush=True)

    if args.queries:
        lines = args.queries.read_text(encoding="utf-8").splitlines()
        queries = [json.loads(line)["query"] for line in lines if line.strip()]
    else:
        rows = ws.manifest._conn().execute("SELECT DISTINCT title FROM chunks ORDER BY id")
        queries = [r[0] for r in rows if r[0].strip()]
    queries = queries[:: max(1, len(queries) // args.n_queries)][: args.n_queries]
    for q in queries:  # embed every query once, and warm both sides
        timed(ws, q, before)
        timed(ws, q, after)

    times: dict[str, list[float]] = {"before": [], "after": []}
    same_top = 0
    for _ in range(args.rounds):
        for q in queries:
            tb, hb = timed(ws, q, before)
            ta, ha = timed(ws, q, after)
            times["before"].append(tb)
            times["after"].append(ta)
            same_top += hb[:1] == ha[:1]
    p50 = {side: statistics.median(v) * 1000 for side, v in times.items()}
    p95 = {side: sorted(v)[int(0.95 * (len(v) - 1))] * 1000 for side, v in times.items()}
    print(f"hybrid p50 before {p50['before']:.1f} ms, after {p50['after']:.1f} ms "
          f"(ratio {p50['after'] / p50['before']:.2f}); p95 {p95['before']:.1f} / "
          f"{p95['after']:.1f} ms; same first hit {same_top / len(times['after']):.1%}")
    result = {
        "folder": str(folder),
        "notes": files,
        "chunks": chunks,
        "queries": len(queries),
        "rounds": args.rounds,
        "before": overrides,
        "p50_ms": {k: round(v, 2) for k, v in p50.items()},
        "p95_ms": {k: round(v, 2) for k, v in p95.items()},
        "ratio": round(p50["after"] / p50["before"], 3),
        "same_first_hit": round(same_top / len(times["after"]), 3),
    }
    ws.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
