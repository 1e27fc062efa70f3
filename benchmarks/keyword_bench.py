"""The keyword list's cost per query: FTS5 ranking cut to the pool before the join to chunks.

    python benchmarks/keyword_bench.py ROOT [--queries FILE] [--pool 60] [--rounds 3]

Opens the index of ROOT read-only (build it first with ``mdsearch index ROOT``), builds each
query's FTS5 match exactly as hybrid search does (``keyword.build_match(text, pairs=True)``, the
queries as typed) and times, interleaved query by query, the ranked query joined before the cut
(the form before issue 20) and ``Manifest.keyword_search`` (ranked and cut inside FTS5, then
joined); both return the same ids in the same order, which is checked. Medians and p95 in ms;
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

OLD_SQL = (
    "SELECT c.id, bm25(chunks_fts, ?, ?) AS rank FROM chunks_fts "
    "JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? "
    "ORDER BY rank, chunks_fts.rowid LIMIT ?"
)


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
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    queries = [json.loads(line)["query"] for line in args.queries.open(encoding="utf-8")]
    from mdsearch_ls.engine.embedding import create_embedder

    settings = Settings()
    ws = Workspace(args.root, settings, create_embedder(settings), read_only=True)
    conn = ws.manifest._conn()
    weights = (4.0, 1.0)
    old: list[float] = []
    new: list[float] = []
    matches = [m for m in (keyword.build_match(q, pairs=True) for q in queries) if m]
    for _ in range(args.rounds):
        for m in matches:
            t = time.perf_counter()
            a = conn.execute(OLD_SQL, (*weights, m, args.pool)).fetchall()
            old.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            b = ws.manifest.keyword_search(m, args.pool, None, weights)
            new.append((time.perf_counter() - t) * 1000)
            assert [cid for cid, _ in a] == [cid for cid, _ in b], m
    chunks = ws.manifest.counts()[1]
    ws.close()
    out = {"root": args.root.name, "chunks": chunks, "queries": len(matches), "pool": args.pool,
           "rounds": args.rounds, "join_then_cut": pct(old), "cut_then_join": pct(new),
           "ratio_p50": round(statistics.median(new) / statistics.median(old), 3)}
    text = json.dumps(out, indent=2)
    print(text)
    path = args.out or ROOT / "benchmarks" / "results" / f"keyword-{args.root.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
