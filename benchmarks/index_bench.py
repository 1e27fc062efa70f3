"""Index a folder from scratch with the real model and measure what a user waits for.

    python benchmarks/index_bench.py FOLDER [--out FILE] [--queries Q.jsonl] [--keep-index DIR]

The folder is copied to a temporary directory first (the benchmark edits notes, and corpora are
read-only), then indexed cold into a fresh index dir. Printed and written as JSON (default
``benchmarks/results/index-<folder name>.json``):

* files, chunks, index seconds (cold: model load + scan + chunk + embed + store), the embedding
  part of it, chunks/s;
* search latency p50/p95 per mode over ~50 queries (warm: the model is loaded and one warm-up
  query ran; the result and query-vector caches are cleared before every timed query, so each
  one pays for its embedding and both index lookups);
* ``update([one file])`` for a ~10-chunk note after editing one section (median of 5 edits);
* chunks re-embedded after editing one section of a ~60-chunk note;
* the cost of ``path:``/``tag:``/``modified:`` filters against the same query unfiltered;
* peak RSS of the process.

Notes without tags get synthetic tags (their first folder, inserted into the index's tag table
only) so the tag filter is measured against a realistic share of notes rather than answering an
empty set at once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

MODES = ("hybrid", "semantic", "keyword")


class TimedEmbedder:
    """The real embedder (the settings' backend), keeping the time spent embedding documents."""

    def __init__(self, settings: Settings) -> None:
        self._inner = create_embedder(settings)
        self.doc_seconds = 0.0
        self.doc_texts = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._inner, name)

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def loaded(self) -> bool:
        return self._inner.loaded

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = self._inner.embed_documents(texts)
        self.doc_seconds += time.perf_counter() - t0
        self.doc_texts += len(texts)
        return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    i = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[i]


def ms(x: float) -> float:
    return round(x * 1000, 2)


def load_queries(path: Path | None, ws: Workspace, n: int) -> list[str]:
    """Queries from a JSONL file, else the headings of evenly spaced chunks."""
    if path is not None:
        qs = [json.loads(line)["query"] for line in path.read_text().splitlines() if line.strip()]
    else:
        rows = ws.manifest._conn().execute(
            "SELECT DISTINCT title FROM chunks ORDER BY id"
        ).fetchall()
        qs = [r[0] for r in rows if r[0].strip()]
    # Plain words: a heading such as "daily: notes" must not read as an unknown filter.
    qs = [re.sub(r"([A-Za-z]):(?=\S)", r"\1 ", q.replace('"', " ")) for q in qs]
    if len(qs) > n:
        step = len(qs) / n
        qs = [qs[int(i * step)] for i in range(n)]
    return qs


def timed_search(ws: Workspace, query: str, mode: str) -> float:
    ws.searcher._cache.clear()
    ws.embedder._cache.clear()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    ws.hits(query, 10, mode=mode)
    return time.perf_counter() - t0


VOCAB = (
    "index update vector keyword search note section heading chunk embed model query "
    "latency editor server cache manifest store fusion rank token filter folder"
)


def synth_note(n_sections: int, words: int = 90, tag: str = "") -> str:
    """A note of ``n_sections`` sections of about one chunk each."""
    vocab = VOCAB.split()
    parts = ["---", f"tags: [{tag or 'bench'}]", "---", "", "# Benchmark note", ""]
    for s in range(n_sections):
        body = " ".join(vocab[(s * 7 + i * 3) % len(vocab)] for i in range(words))
        parts += [f"## Section {s}", "", f"Section {s} says: {body}.", ""]
    return "\n".join(parts)


def edit_section(text: str, section: int, stamp: str) -> str:
    marker = f"Section {section} says:"
    return text.replace(marker, f"{marker} edited {stamp}", 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--queries", type=Path, help="JSONL with a 'query' field per line")
    ap.add_argument("--n-queries", type=int, default=50)
    ap.add_argument("--backend", default=None,
                    help="embedder.backend (onnx, onnx-int8, torch); default: the default")
    ap.add_argument("--keep-index", type=Path,
                    help="leave the index here (for quality.py --index-dir)")
    args = ap.parse_args(argv)

    folder = args.folder.resolve()
    name = folder.name
    suffix = f"-{args.backend}" if args.backend else ""
    out = args.out or ROOT / "benchmarks" / "results" / f"index-{name}{suffix}.json"
    tmp = Path(tempfile.mkdtemp(prefix="mdsearch-bench-"))
    os.environ["MDSEARCH_CACHE_DIR"] = str(tmp / "cache")
    work = tmp / name
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns(".git", ".obsidian"))
    index_dir = args.keep_index.resolve() if args.keep_index else tmp / "index"
    if index_dir.exists():
        shutil.rmtree(index_dir)

    result: dict[str, object] = {
        "folder": str(folder),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    t_start = time.perf_counter()
    settings = Settings(embedder_backend=args.backend) if args.backend else Settings()
    result["backend"] = settings.embedder_backend
    embedder = TimedEmbedder(settings)
    ws = Workspace(work, settings, embedder, index_dir=index_dir)
    t_load = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - t_load
    report = ws.index()
    cold_s = time.perf_counter() - t_start
    files, chunks = ws.manifest.counts()
    result["index"] = {
        "files": files,
        "chunks": chunks,
        "cold_seconds": round(cold_s, 2),
        "model_load_seconds": round(load_s, 2),
        "index_seconds": round(report.seconds, 2),
        "embed_seconds": round(embedder.doc_seconds, 2),
        "chunks_embedded": report.chunks_embedded,
        "chunks_per_second": round(chunks / report.seconds, 1) if report.seconds else None,
        "embed_chunks_per_second": (
            round(embedder.doc_texts / embedder.doc_seconds, 1) if embedder.doc_seconds else None
        ),
        "warnings": len(report.warnings),
    }
    print(f"indexed {files} files, {chunks} chunks in {cold_s:.1f}s cold "
          f"(model {load_s:.1f}s, embedding {embedder.doc_seconds:.1f}s)", flush=True)

    # ---- search latency ---------------------------------------------------------------------
    queries = load_queries(args.queries, ws, args.n_queries)
    ws.hits("warm up the model and sqlite", 10, mode="hybrid")
    latency: dict[str, dict[str, float]] = {}
    for mode in MODES:
        times = [timed_search(ws, q, mode) for q in queries]
        latency[mode] = {
            "p50_ms": ms(statistics.median(times)),
            "p95_ms": ms(pct(times, 95)),
            "max_ms": ms(max(times)),
        }
    result["search_latency"] = {"queries": len(queries), **latency}
    print("latency ms (p50/p95): " + ", ".join(
        f"{m} {v['p50_ms']}/{v['p95_ms']}" for m, v in latency.items()), flush=True)

    # ---- update after an edit of a ~10-chunk note --------------------------------------------
    note = work / "bench-10-sections.md"
    text = synth_note(10)
    note.write_text(text, encoding="utf-8")
    first = ws.update([note])
    n_chunks = len(ws.manifest.chunks_for("bench-10-sections.md"))
    times, embedded = [], []
    for i in range(5):
        text = edit_section(text, i * 2, f"e{i}")
        note.write_text(text, encoding="utf-8")
        t0 = time.perf_counter()
        rep = ws.update([note])
        times.append(time.perf_counter() - t0)
        embedded.append(rep.chunks_embedded)
    result["update_one_note"] = {
        "note_chunks": n_chunks,
        "first_index_seconds": round(first.seconds, 3),
        "median_seconds": round(statistics.median(times), 3),
        "max_seconds": round(max(times), 3),
        "chunks_embedded_per_edit": embedded,
        "goal_seconds": 1.0,
    }
    print(f"update([one {n_chunks}-chunk note]) median {statistics.median(times):.3f}s, "
          f"embedded {embedded}", flush=True)

    # ---- re-embed count for one section of a long note ---------------------------------------
    long_note = work / "bench-60-sections.md"
    text = synth_note(60)
    long_note.write_text(text, encoding="utf-8")
    ws.update([long_note])
    long_chunks = len(ws.manifest.chunks_for("bench-60-sections.md"))
    long_note.write_text(edit_section(text, 30, "long"), encoding="utf-8")
    rep = ws.update([long_note])
    result["long_note_edit"] = {
        "note_chunks": long_chunks,
        "chunks_embedded": rep.chunks_embedded,
        "vector_cache_hits": rep.vector_cache_hits,
        "seconds": round(rep.seconds, 3),
    }
    print(f"edit 1 section of a {long_chunks}-chunk note: {rep.chunks_embedded} embedded, "
          f"{rep.vector_cache_hits} reused", flush=True)
    ws.delete([note, long_note])
    note.unlink()
    long_note.unlink()

    # ---- filter cost --------------------------------------------------------------------------
    conn = ws.manifest._conn()
    paths = ws.manifest.all_paths()
    folders = sorted({p.split("/")[1] if p.startswith("pages/") and p.count("/") >= 2
                      else p.split("/")[0] if "/" in p else "" for p in paths})
    # Real tags when some tag is on at least 5 % of notes, else synthetic ones (first folder).
    top_tag = conn.execute(
        "SELECT COUNT(*) AS n FROM file_tags GROUP BY tag ORDER BY n DESC LIMIT 1"
    ).fetchone()
    synthetic_tags = top_tag is None or top_tag[0] < 0.05 * len(paths)
    synth = {"bench-" + (_folder_of(p) or "root").lower() for p in paths}
    if synthetic_tags:
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO file_tags (path, tag) VALUES (?, ?)",
                [(p, "bench-" + (_folder_of(p) or "root").lower()) for p in paths],
            )
    tag_counts = conn.execute(
        "SELECT tag, COUNT(*) AS n FROM file_tags GROUP BY tag ORDER BY n DESC"
    ).fetchall()
    # A tag held by a minority of notes (about 10-30 % when there is one).
    tag = next((t for t, n in tag_counts if n <= 0.3 * len(paths)), tag_counts[0][0])
    # The folder holding the most notes without holding all of them.
    by_folder: dict[str, int] = {}
    for p in paths:
        by_folder[_folder_prefix(p)] = by_folder.get(_folder_prefix(p), 0) + 1
    prefix = max((f for f in by_folder if f and by_folder[f] < len(paths)),
                 key=lambda f: by_folder[f], default="")
    filter_queries = {
        "none": "",
        f"path:{prefix}": f"path:{prefix}" if prefix else "",
        f"tag:{tag}": f"tag:{tag}",
        "modified:>2000-01-01 (all notes pass)": "modified:>2000-01-01",
        f"path:{prefix} tag:{tag}": f"path:{prefix} tag:{tag}" if prefix else f"tag:{tag}",
    }
    fq = queries[: min(20, len(queries))]
    cost: dict[str, dict[str, float]] = {}
    for label, flt in filter_queries.items():
        row: dict[str, float] = {}
        for mode in MODES:
            times = [timed_search(ws, f"{q} {flt}".strip(), mode) for q in fq]
            row[f"{mode}_p50_ms"] = ms(statistics.median(times))
        cost[label] = row
    base = cost["none"]
    for row in cost.values():
        for mode in MODES:
            row[f"{mode}_ratio"] = round(row[f"{mode}_p50_ms"] / base[f"{mode}_p50_ms"], 2)
    allowed = {label: len(ws.searcher.allowed_paths(_filters(flt)) or paths)
               for label, flt in filter_queries.items()}
    result["filter_cost"] = {
        "chunks": chunks,
        "queries": len(fq),
        "synthetic_tags": synthetic_tags,
        "notes_passing": allowed,
        "by_filter": cost,
    }
    if synthetic_tags:
        with conn:
            marks = ",".join("?" * len(synth))
            conn.execute(f"DELETE FROM file_tags WHERE tag IN ({marks})", sorted(synth))
    print("filter cost p50 ms (hybrid): " + ", ".join(
        f"{label} {row['hybrid_p50_ms']}" for label, row in cost.items()), flush=True)
    del folders

    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(f"peak RSS {result['peak_rss_mb']} MB")
    ws.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if not args.keep_index:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _folder_of(path: str) -> str:
    parts = path.split("/")
    if parts[0] == "pages" and len(parts) > 2:
        return parts[1]
    return parts[0] if len(parts) > 1 else ""


def _folder_prefix(path: str) -> str:
    parts = path.split("/")
    if parts[0] == "pages" and len(parts) > 2:
        return f"pages/{parts[1]}/"
    return parts[0] + "/" if len(parts) > 1 else ""


def _filters(flt: str):  # type: ignore[no-untyped-def]
    from mdsearch_ls.engine.search.query import parse_query

    return parse_query(flt).filters


if __name__ == "__main__":
    raise SystemExit(main())
