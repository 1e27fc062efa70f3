"""The local Chroma store against a Chroma server (``chroma_url``), on the same index.

    python benchmarks/chroma_server_bench.py [FOLDER] [--index-dir DIR] [--queries Q.jsonl]
                                             [--n-queries 100] [--rounds 3] [--out FILE]

FOLDER defaults to ../shared/corpora/tldr (about 8k chunks). The index is built once with the
bundled model in ``--index-dir`` (kept between runs, so the model is paid once); every number
below reuses its vectors from the manifest's vector cache, so the model is never the cost:

* **write all vectors**: the collection emptied and refilled from the vector cache (what healing
  a wiped store does, batches of the store's size), on the local store and on a ``chroma run``
  on a loopback port started here, ``--rounds`` times each, interleaved;
* **semantic search**: the holder's semantic search (Chroma answers every one), p50/p95 over
  ``--n-queries`` NL2Bash descriptions, local and server interleaved per query, query vectors
  cached (embedding is the same work on both sides), result caches cleared;
* the same queries on the two stores' raw ``query`` (k=60, the searcher's pool);
* the two stores' agreement on the top 10, and the Chroma server's RSS after the runs.

Results: ``results/chroma-server.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from filter_bench import sample_queries  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402
from tests.chroma_server import ChromaServer  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 95), 2),
            "mean_ms": round(statistics.fmean(ms), 2), "n": len(ms)}


def refill(ws: Workspace) -> float:
    """Empty the collection and write every vector back from the cache; seconds."""
    assert ws.store is not None and ws.indexer is not None
    t0 = time.perf_counter()
    ws.store.reset()
    ws.indexer.reconcile()
    took = time.perf_counter() - t0
    assert ws.store.count() == ws.manifest.counts()[1]
    return took


def search_ms(ws: Workspace, query: str) -> tuple[float, list[str]]:
    ws.searcher._cache.clear()
    t0 = time.perf_counter()
    hits = ws.hits(query, 10, mode="semantic")
    return (time.perf_counter() - t0) * 1000, [h.chunk_id for h in hits]


def raw_ms(ws: Workspace, vector: np.ndarray) -> float:
    assert ws.store is not None
    t0 = time.perf_counter()
    ws.store.query(vector, 60)
    return (time.perf_counter() - t0) * 1000


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, nargs="?",
                    default=ROOT.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--index-dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "mdsearch-bench" / "chroma-server")
    ap.add_argument("--queries", type=Path,
                    default=ROOT.parent / "shared" / "eval" / "nl2bash-tldr.jsonl")
    ap.add_argument("--n-queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                    "chroma-server.json")
    args = ap.parse_args()
    folder = args.folder.resolve()
    local_dir = args.index_dir / "local"
    server_dir = args.index_dir / "server"

    embedder = create_embedder(Settings())
    embedder.load()
    t0 = time.perf_counter()
    with Workspace.open(folder, Settings(), embedder=embedder, index_dir=local_dir) as ws:
        report = ws.index()
    print(f"local index: {report.summary()} ({time.perf_counter() - t0:.0f} s)", flush=True)

    # The server's index starts from a copy of the local manifest (no Chroma folder): its open
    # restores every vector from the cache, with nothing to embed.
    shutil.rmtree(server_dir, ignore_errors=True)
    server_dir.mkdir(parents=True)
    for f in local_dir.glob("*.sqlite3"):
        shutil.copy2(f, server_dir / f.name)
    db = Path(tempfile.mkdtemp(prefix="chroma-bench-"))
    server = ChromaServer(db / "db").start()
    try:
        settings = dataclasses.replace(Settings(), chroma_url=server.url)
        t0 = time.perf_counter()
        remote = Workspace.open(folder, settings, embedder=embedder, index_dir=server_dir)
        first_open = time.perf_counter() - t0
        local = Workspace.open(folder, Settings(), embedder=embedder, index_dir=local_dir)
        chunks = local.manifest.counts()[1]
        assert remote.manifest.counts()[1] == chunks and remote.store.count() == chunks
        print(f"{chunks} chunks; server open with every vector restored: {first_open:.1f} s",
              flush=True)

        writes: dict[str, list[float]] = {"local": [], "server": []}
        for _ in range(args.rounds):
            writes["local"].append(refill(local))
            writes["server"].append(refill(remote))
        print("write all vectors (s):", writes, flush=True)

        queries = sample_queries(local, args.queries, args.n_queries)
        for q in queries:  # warms the query vectors
            embedder.embed_query(q)
        for q in queries[:5]:
            search_ms(local, q), search_ms(remote, q)
        sem: dict[str, list[float]] = {"local": [], "server": []}
        raw: dict[str, list[float]] = {"local": [], "server": []}
        top_same = 0
        for q in queries:
            a_ms, a = search_ms(local, q)
            b_ms, b = search_ms(remote, q)
            sem["local"].append(a_ms)
            sem["server"].append(b_ms)
            top_same += a == b
            vec = embedder.embed_query(q)
            raw["local"].append(raw_ms(local, vec))
            raw["server"].append(raw_ms(remote, vec))
        server_rss = rss_mb(server.proc.pid) if server.proc else None
        local.close()
        remote.close()
    finally:
        server.kill()
        shutil.rmtree(db, ignore_errors=True)

    result = {
        "folder": folder.name,
        "chunks": chunks,
        "queries": len(queries),
        "rounds": args.rounds,
        "write_all_vectors_s": {k: {"median": round(statistics.median(v), 2),
                                    "runs": [round(x, 2) for x in v]}
                                for k, v in writes.items()},
        "server_first_open_s": round(first_open, 2),
        "semantic_search": {k: summary(v) for k, v in sem.items()},
        "store_query_k60": {k: summary(v) for k, v in raw.items()},
        "same_top10_local_vs_server": f"{top_same}/{len(queries)}",
        "chroma_server_rss_mb": server_rss,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load": [round(x, 2) for x in os.getloadavg()]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
