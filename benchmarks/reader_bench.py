"""What searching an index read-only costs (the CLI beside an editor, a second window),
against searching it as its writer, on a real index.

    python benchmarks/reader_bench.py FOLDER --index-dir DIR [--queries Q.jsonl] [--n-queries 40]
                                      [--rounds 3] [--out FILE]

Opens (or builds) the index of FOLDER in DIR as the writer, then opens a second, read-only
workspace on the same index while the writer holds the lock: what another process gets. The
reader has no Chroma (not process-safe), so it answers every vector query exactly from the
manifest's vectors, which it loads once per index generation; that load is timed apart. The same
queries are then timed in every mode on both, interleaved (writer, reader) so load drifting on a
shared machine hits both alike; result caches are cleared before every timing, the query vector
is kept (embedding it is the same work on both sides). Also reports how often the two agree on
the top hit and on the top-5 set. Results: ``results/reader-<folder>.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from filter_bench import sample_queries  # noqa: E402  (benchmarks/ is on sys.path as a script)

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

MODES = ("hybrid", "semantic", "keyword")


def timed(ws: Workspace, query: str, mode: str) -> tuple[float, list[str]]:
    ws.searcher._cache.clear()
    t0 = time.perf_counter()
    hits = ws.hits(query, 10, mode=mode)
    return time.perf_counter() - t0, [f"{h.path}#{h.breadcrumb}" for h in hits]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--queries", type=Path, help="JSON Lines with a 'query' field")
    ap.add_argument("--n-queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    folder = args.folder.resolve()
    out = args.out or ROOT / "benchmarks" / "results" / f"reader-{folder.name}.json"

    embedder = create_embedder(Settings())
    embedder.load()
    settings = Settings()
    writer = Workspace(folder, settings, embedder, index_dir=args.index_dir)
    t0 = time.perf_counter()
    report = writer.index()
    files, chunks = writer.manifest.counts()
    print(f"index: {files} notes, {chunks} chunks ({report.chunks_embedded} embedded now, "
          f"{time.perf_counter() - t0:.0f} s)", flush=True)

    t0 = time.perf_counter()
    reader = Workspace(folder, settings, embedder, index_dir=args.index_dir, read_only=True)
    open_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    table = reader.searcher._vector_table()
    table_ms = (time.perf_counter() - t0) * 1000
    table_mb = table.matrix.nbytes / 2**20 if table is not None else 0.0
    print(f"reader: opened in {open_ms:.1f} ms, vector table {table_ms:.0f} ms / "
          f"{table_mb:.1f} MB", flush=True)

    queries = sample_queries(writer, args.queries, args.n_queries)

    for q in queries[:3]:  # warm both sides
        for mode in MODES:
            writer.hits(q, 10, mode=mode)
            reader.hits(q, 10, mode=mode)
    times = {side: {m: [] for m in MODES} for side in ("writer", "reader")}
    same_top = {m: 0 for m in MODES}
    same_top5 = {m: 0 for m in MODES}
    for q in queries:
        for mode in MODES:
            for _ in range(args.rounds):
                tw, hw = timed(writer, q, mode)
                tr, hr = timed(reader, q, mode)
                times["writer"][mode].append(tw)
                times["reader"][mode].append(tr)
            same_top[mode] += hw[:1] == hr[:1]
            same_top5[mode] += set(hw[:5]) == set(hr[:5])

    table_rows: dict[str, dict[str, float]] = {}
    print(f"{'mode':10} {'writer p50':>11} {'reader p50':>11} {'ratio':>6} "
          f"{'same top-1':>11} {'same top-5':>11}")
    for mode in MODES:
        w = statistics.median(times["writer"][mode]) * 1000
        r = statistics.median(times["reader"][mode]) * 1000
        row = {"writer_p50_ms": round(w, 2), "reader_p50_ms": round(r, 2),
               "ratio": round(r / w, 2) if w else float("nan"),
               "same_top1": round(same_top[mode] / len(queries), 3),
               "same_top5_set": round(same_top5[mode] / len(queries), 3)}
        table_rows[mode] = row
        print(f"{mode:10} {w:8.1f} ms {r:8.1f} ms {row['ratio']:6.2f} "
              f"{row['same_top1']:11.3f} {row['same_top5_set']:11.3f}")

    result = {
        "folder": str(folder),
        "python": platform.python_version(),
        "notes": files,
        "chunks": chunks,
        "queries": len(queries),
        "rounds": args.rounds,
        "reader_open_ms": round(open_ms, 1),
        "vector_table_ms": round(table_ms, 1),
        "vector_table_mb": round(table_mb, 1),
        "modes": table_rows,
    }
    reader.close()
    writer.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
