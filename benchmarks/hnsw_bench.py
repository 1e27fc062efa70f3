"""The vector leg against exact search: how many of the true nearest sections Chroma's HNSW
graph finds, as the engine asks it, and which collection configuration it takes for the rest.

    python benchmarks/hnsw_bench.py [--work DIR] [--vault v96] [--queries 365]
                                    [--configs 16:100,16:200,32:100,...] [--out FILE]

The vault is one of ``scale_bench.py``'s (``--work``, default ``/tmp/mdsearch-scale``: run it
once first; ``v96``: twelve copies of tldr, about 96k chunks). Every chunk's vector is read from
the index's manifest (the truth the collection is filled from) into a matrix; the questions are
nl2bash questions as typed (``../shared/eval/nl2bash-tldr.jsonl``), embedded by the real model.
**Exact** is a matrix product over those vectors and a sort, here only. A found chunk counts
when its exact cosine reaches the exact k-th one (less 1e-6): the twelve copies hold twelve
identical vectors of every section, and any of them is as near as another.

* **The index**: the engine's own ``ChromaStore.query`` on the index's collection, as the
  engine opens it (``vector_store.EF_SEARCH`` set on it), with the searcher's pool (60,
  ``RankingParams.min_pool``): recall@10 and recall@50 (the first 10 and 50 of the 60 against
  the exact first 10 and 50), the store's query p50/p95 (a ``count`` and Chroma's query), the
  collection's configuration as Chroma reports it.
* **Configurations** (``--configs``, ``MAX_NEIGHBORS:EF_SEARCH``, ``ef_construction`` 100 as
  Chroma's default): a collection of the same vectors in a temporary folder, built once per
  ``max_neighbors`` (its build seconds and size on disk), and searched at each ``ef_search``
  (set by ``collection.modify`` before a new client loads the graph, which is when Chroma reads
  it): the same recalls, and Chroma's query p50/p95.

Prints a table and writes JSON (default ``benchmarks/results/hnsw-<vault>.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from scale_bench import cache_of, index_dir, manifest_of, pct, queries  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.api import create_embedder  # noqa: E402
from mdsearch_ls.engine.index.layout import space_name  # noqa: E402
from mdsearch_ls.engine.index.vector_store import ChromaStore  # noqa: E402
from mdsearch_ls.engine.search.ranking import RankingParams  # noqa: E402

POOL = RankingParams().min_pool
CHROMA = ChromaSettings(anonymized_telemetry=False)
KS = (10, 50)
EPS = 1e-6


def manifest_vectors(vault: Path) -> tuple[list[str], np.ndarray]:
    """Every chunk's id and vector, as the manifest keeps them."""
    with sqlite3.connect(f"file:{manifest_of(vault)}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT c.id, v.vector FROM chunks c JOIN vectors v "
                          "ON v.embed_hash = c.embed_hash ORDER BY c.rowid").fetchall()
    ids = [r[0] for r in rows]
    return ids, np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])


def exact_kth(matrix: np.ndarray, qvecs: np.ndarray) -> dict[int, np.ndarray]:
    """Per k, every question's exact k-th cosine."""
    out = {k: np.empty(len(qvecs), dtype=np.float32) for k in KS}
    for i, q in enumerate(qvecs):
        sims = matrix @ q
        top = np.sort(np.partition(-sims, max(KS))[: max(KS)])
        for k in KS:
            out[k][i] = -top[k - 1]
    return out


def score(found: list[list[str]], ms: list[float], qvecs: np.ndarray, kth: dict[int, np.ndarray],
          row: dict[str, int], matrix: np.ndarray) -> dict[str, Any]:
    """Recall@k of each question's found ids (tie-aware, see the module docstring), and the
    query times."""
    out: dict[str, Any] = {}
    for k in KS:
        got = []
        for i, ids in enumerate(found):
            first = [row[c] for c in ids[:k] if c in row]
            sims = matrix[first] @ qvecs[i] if first else np.empty(0)
            got.append(float(np.sum(sims >= kth[k][i] - EPS)) / k)
        out[f"recall@{k}"] = round(statistics.fmean(got), 4)
        out[f"questions_below_0.9_at_{k}"] = sum(g < 0.9 for g in got)
    out["query_p50_ms"] = round(statistics.median(ms), 2)
    out["query_p95_ms"] = round(pct(ms, 0.95), 2)
    return out


def run_queries(ask: Any, qvecs: np.ndarray) -> tuple[list[list[str]], list[float]]:
    found, ms = [], []
    for q in qvecs:
        t0 = time.perf_counter()
        found.append(ask(q))
        ms.append((time.perf_counter() - t0) * 1000)
    return found, ms


def the_index(vault: Path, qvecs: np.ndarray, kth: dict[int, np.ndarray], row: dict[str, int],
              matrix: np.ndarray) -> dict[str, Any]:
    """The index's own collection through the engine's store (nothing may hold the index)."""
    store = ChromaStore(index_dir(vault) / "chroma", space_name(Settings()))
    try:
        count = store.count()
        config = store._col.configuration_json.get("hnsw")
        store.query(qvecs[0], POOL)  # the graph loaded
        found, ms = run_queries(lambda q: [c for c, _ in store.query(q, POOL)], qvecs)
    finally:
        store.close()
    return {"count": count, "configuration": config, **score(found, ms, qvecs, kth, row, matrix)}


def configs(ids: list[str], matrix: np.ndarray, qvecs: np.ndarray, kth: dict[int, np.ndarray],
            row: dict[str, int], wanted: list[tuple[int, int]]) -> dict[str, Any]:
    """Collections of the same vectors, one per ``max_neighbors``, searched at each
    ``ef_search`` (see the module docstring)."""
    out: dict[str, Any] = {}
    by_m: dict[int, list[int]] = {}
    for m, ef in wanted:
        by_m.setdefault(m, []).append(ef)
    for m, efs in by_m.items():
        folder = Path(tempfile.mkdtemp(prefix="hnsw-bench-"))
        try:
            client = chromadb.PersistentClient(path=str(folder), settings=CHROMA)
            col = client.create_collection(
                "bench", embedding_function=None,
                configuration={"hnsw": {"space": "cosine", "max_neighbors": m,
                                        "ef_construction": 100}})
            t0 = time.perf_counter()
            step = int(client.get_max_batch_size())
            for start in range(0, len(ids), step):
                col.add(ids=ids[start: start + step], embeddings=matrix[start: start + step])
            built = time.perf_counter() - t0
            client.close()
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            for ef in efs:
                # Chroma reads ef_search when it loads the graph: a new client each time, the
                # setting changed before its first query
                client = chromadb.PersistentClient(path=str(folder), settings=CHROMA)
                col = client.get_collection("bench")
                col.modify(configuration={"hnsw": {"ef_search": ef}})
                reported = client.get_collection("bench").configuration_json["hnsw"]
                col.query(query_embeddings=[qvecs[0]], n_results=POOL)

                def ask(q: np.ndarray, col: Any = col) -> list[str]:
                    return col.query(query_embeddings=[q], n_results=POOL, include=[])["ids"][0]

                found, ms = run_queries(ask, qvecs)
                client.close()
                key = f"max_neighbors={m},ef_search={ef}"
                out[key] = {"build_s": round(built, 1), "disk_mb": round(size / 2**20),
                            "reported": reported, **score(found, ms, qvecs, kth, row, matrix)}
                print(f"{key}: {json.dumps(out[key])}", file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-scale"))
    ap.add_argument("--vault", default="v96")
    ap.add_argument("--queries", type=int, default=365)
    ap.add_argument("--configs", default="16:100,16:200,16:400,16:800,16:1600,32:100,32:400")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    vault = args.work.resolve() / args.vault
    os.environ["MDSEARCH_CACHE_DIR"] = str(cache_of(vault))
    ids, matrix = manifest_vectors(vault)
    row = {c: i for i, c in enumerate(ids)}
    embedder = create_embedder(Settings())
    qs = queries()[: args.queries]
    qvecs = np.stack([embedder.embed_query(q) for q in qs]).astype(np.float32)
    kth = exact_kth(matrix, qvecs)
    result: dict[str, Any] = {
        "vault": args.vault, "chunks": len(ids), "questions": len(qs), "pool": POOL,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "chromadb": chromadb.__version__, "load_at_start": os.getloadavg()}}
    result["index"] = the_index(vault, qvecs, kth, row, matrix)
    print(f"the index: {json.dumps(result['index'])}", file=sys.stderr, flush=True)
    wanted = [(int(m), int(ef)) for m, ef in (c.split(":") for c in args.configs.split(",") if c)]
    result["configs"] = configs(ids, matrix, qvecs, kth, row, wanted)
    result["load_at_end"] = os.getloadavg()
    out = args.out or ROOT / "benchmarks" / "results" / f"hnsw-{args.vault}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
