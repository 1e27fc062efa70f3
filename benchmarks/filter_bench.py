"""What a filter adds to a query's latency, at every selectivity, on a real index.

    python benchmarks/filter_bench.py FOLDER --index-dir DIR [--chunk-size N] [--queries Q.jsonl]
                                     [--rounds 3] [--out FILE]

Opens (or builds, incrementally) the index of FOLDER in DIR with the bundled model, then times
the same queries unfiltered and with each filter: a narrow, a middling and a broad folder
(``path:``), a tag held by a minority of notes (synthetic folder tags when the notes have too
few real ones; removed again afterwards), ``modified:`` that every note passes, and a required
phrase. Every timing clears the result cache but keeps the query vector (embedding the text is
the same work with or without a filter); the filters are run round-robin per query so load
drifting on a shared machine hits all of them alike. Prints and writes p50 per mode, the
milliseconds a filter adds to the unfiltered p50 of the same mode, and the ratio.
Results: ``results/filter-<folder>-c<chunk size>.json``.
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

from quality import sanitize  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.search.query import parse_query  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

MODES = ("hybrid", "semantic", "keyword")


def folder_prefix(path: str) -> str:
    """The folder a ``path:`` filter would name: ``pages/linux/`` for tldr, else the first."""
    parts = path.split("/")
    if parts[0] == "pages" and len(parts) > 2:
        return f"pages/{parts[1]}/"
    return parts[0] + "/" if len(parts) > 1 else ""


def pick_folders(paths: list[str]) -> dict[str, str]:
    """A narrow (closest to 3 %), a middling (closest to 25 %) and a broad (largest below all)
    folder, so the cost is seen at each selectivity."""
    counts: dict[str, int] = {}
    for p in paths:
        f = folder_prefix(p)
        if f:
            counts[f] = counts.get(f, 0) + 1
    n = len(paths)
    below_all = {f: c for f, c in counts.items() if c < n}
    if not below_all:
        return {}
    out = {
        "narrow": min(below_all, key=lambda f: abs(below_all[f] / n - 0.03)),
        "middling": min(below_all, key=lambda f: abs(below_all[f] / n - 0.25)),
        "broad": max(below_all, key=lambda f: below_all[f]),
    }
    return out


def sample_queries(ws: Workspace, path: Path | None, n: int) -> list[str]:
    """``n`` queries spread over the JSON Lines file ``path``, or over the index's section
    titles without one, read as plain words (see ``quality.sanitize``)."""
    if path:
        lines = path.read_text(encoding="utf-8").splitlines()
        queries = [json.loads(line)["query"] for line in lines if line.strip()]
    else:
        rows = ws.manifest._conn().execute("SELECT DISTINCT title FROM chunks ORDER BY id")
        queries = [r[0] for r in rows if r[0].strip()]
    queries = [sanitize(q) for q in queries]
    step = max(1, len(queries) // n)
    return queries[::step][:n]


def timed(ws: Workspace, query: str, mode: str) -> float:
    # The result cache is cleared, the query-vector cache is not: embedding the text costs the
    # same with or without a filter, and its 10-20 ms of jitter on a shared CPU would otherwise
    # swamp the few milliseconds being measured.
    ws.searcher._cache.clear()
    t0 = time.perf_counter()
    ws.hits(query, 10, mode=mode)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--chunk-size", type=int, default=Settings.chunk_size)
    ap.add_argument("--chunk-overlap", type=int, default=None)
    ap.add_argument("--queries", type=Path, help="JSONL with a 'query' field per line")
    ap.add_argument("--n-queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="timings per query and filter")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    folder = args.folder.resolve()
    overlap = args.chunk_overlap
    if overlap is None:
        overlap = min(Settings.chunk_overlap, args.chunk_size // 5)
    settings = Settings(chunk_size=args.chunk_size, chunk_overlap=overlap)
    out = args.out or (
        ROOT / "benchmarks" / "results" / f"filter-{folder.name}-c{args.chunk_size}.json"
    )
    embedder = create_embedder(settings)
    ws = Workspace(folder, settings, embedder, index_dir=args.index_dir.resolve())
    t0 = time.perf_counter()
    report = ws.index()
    files, chunks = ws.manifest.counts()
    print(f"index: {files} notes, {chunks} chunks ({report.chunks_embedded} embedded now, "
          f"{time.perf_counter() - t0:.0f} s)", flush=True)

    queries = sample_queries(ws, args.queries, args.n_queries)

    paths = ws.manifest.all_paths()
    folders = pick_folders(paths)
    conn = ws.manifest._conn()
    top = conn.execute(
        "SELECT COUNT(*) FROM file_tags GROUP BY tag ORDER BY COUNT(*) DESC LIMIT 1"
    ).fetchone()
    synthetic = top is None or top[0] < 0.05 * len(paths)
    if synthetic:
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO file_tags (path, tag) VALUES (?, ?)",
                [(p, "bench-" + (folder_prefix(p).strip("/").replace("/", "-") or "root"))
                 for p in paths],
            )
    tag_counts = conn.execute(
        "SELECT tag, COUNT(*) FROM file_tags GROUP BY tag ORDER BY COUNT(*) DESC"
    ).fetchall()
    tag = next((t for t, n in tag_counts if n <= 0.3 * len(paths)), tag_counts[0][0])
    # A phrase in many chunks: the most common two-word heading-free sequence is overkill;
    # "path to" is in most tldr pages, and any vault has some "of the".
    phrase = '"path to"' if "pages/common/" in {folder_prefix(p) for p in paths} else '"of the"'

    filters = {"none": ""}
    for label, f in folders.items():
        filters[f"path:{f} ({label})"] = f"path:{f}"
    filters[f"tag:{tag}"] = f"tag:{tag}"
    filters["modified:>2000-01-01 (all pass)"] = "modified:>2000-01-01"
    filters[f"phrase {phrase}"] = phrase

    passing = {}
    for label, f in filters.items():
        allowed = ws.searcher.allowed_paths(parse_query(f).filters)
        passing[label] = len(paths) if allowed is None else len(allowed)

    embedder.embed_query("warm up")
    for q in queries[:3]:
        for mode in MODES:
            ws.hits(q, 10, mode=mode)
    times: dict[str, dict[str, list[float]]] = {lab: {m: [] for m in MODES} for lab in filters}
    for q in queries:
        for _ in range(args.rounds):
            for mode in MODES:
                for label, f in filters.items():
                    times[label][mode].append(timed(ws, f"{q} {f}".strip(), mode))

    if synthetic:
        with conn:
            conn.execute("DELETE FROM file_tags WHERE tag LIKE 'bench-%'")

    table: dict[str, dict[str, float]] = {}
    for label in filters:
        row: dict[str, float] = {"notes_passing": passing[label]}
        for mode in MODES:
            p50 = statistics.median(times[label][mode]) * 1000
            base = statistics.median(times["none"][mode]) * 1000
            row[f"{mode}_p50_ms"] = round(p50, 2)
            row[f"{mode}_added_ms"] = round(p50 - base, 2)
            row[f"{mode}_ratio"] = round(p50 / base, 2) if base else float("nan")
        table[label] = row

    print(f"{'filter':44} {'notes':>6}  " + "  ".join(f"{m:>22}" for m in MODES))
    for label, row in table.items():
        cells = "  ".join(
            f"{row[f'{m}_p50_ms']:7.1f} ms {row[f'{m}_added_ms']:+6.1f} x{row[f'{m}_ratio']:<4}"
            for m in MODES
        )
        print(f"{label:44} {row['notes_passing']:>6}  {cells}")

    result = {
        "folder": str(folder),
        "python": platform.python_version(),
        "notes": files,
        "chunks": chunks,
        "chunk_size": args.chunk_size,
        "queries": len(queries),
        "rounds": args.rounds,
        "synthetic_tags": synthetic,
        "filters": table,
    }
    ws.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
