"""The vector layer past exact search: IVF lists in the snapshot against an exact product.

For each size, synthetic vectors made from real ones (the ~8k vectors of an indexed tldr vault,
each drawn at random and perturbed as ``scale_bench.py --synthetic`` does: noise 0.03, then
normalised) go through the engine's own snapshot writer (``vector_snapshot.save``, which builds
the lists from ``ivf.MIN_ROWS`` rows), then fresh processes map the snapshot and answer real
queries (the NL2Bash queries of /work/shared/eval/nl2bash-tldr.jsonl, embedded by the engine's
embedder): one through the lists, one exactly over the same mapped rows. Reported per size:
exact and ANN p50/p95 at the searcher's pool depth (60), recall@10 and recall@60 against exact
(a hit counts when its cosine reaches the exact k-th one, so tied duplicates are not misses),
the same for a broad (30% of notes) and a narrow (3%) path filter, build seconds, peak RSS and
peak anonymous RSS of the build, resident memory of each query process, and the files' size.
``--real-index`` also measures an index's own vectors (a copy of its snapshot's rows; the index
is only read), with lists built whatever its size.

    python benchmarks/ann_bench.py [--sizes 100000,1000000] [--real-index DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path("/tmp/mdsearch-scale/cache/indexes")  # scale_bench.py --work default
QUERIES = ROOT.parent / "shared" / "eval" / "nl2bash-tldr.jsonl"
STEM = "bench"
POOL = 60
CHUNKS_PER_NOTE = 8


def _snapshot_rows(index_dir: Path) -> np.ndarray:
    """The vectors of an index's snapshot, copied (the index is only read)."""
    head_path = next(index_dir.glob("*.vectors.json"))
    head = json.loads(head_path.read_text(encoding="utf-8"))
    return np.array(np.load(index_dir / head["matrix"], mmap_mode="r")[:head["n"]])


class Peak:
    """Peak anonymous and total RSS of this process, sampled every 20 ms (ru_maxrss counts
    mapped file pages too; the issue's limit is on anonymous memory)."""

    def __init__(self) -> None:
        self.anon = 0
        self.marks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.anon = max(self.anon, _status()["RssAnon"])

    def mark(self, phase: str) -> None:
        """End a phase: its peak anonymous RSS is kept, the next one starts from now."""
        self.marks[phase] = max(self.anon, _status()["RssAnon"])
        self.anon = 0

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        now = _status()
        return {"peak_anon_mb": round(max(self.anon, now["RssAnon"], *self.marks.values()) / 1024),
                **{f"{k}_peak_anon_mb": round(v / 1024) for k, v in self.marks.items()},
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def _status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon", "RssFile", "VmRSS")):
            key, value = line.split(":")
            out[key] = int(value.split()[0])
    return out


def _synthetic(real: np.ndarray, n: int) -> Any:
    """``(id, path, vector)`` rows: perturbed real vectors, as scale_bench.py makes them."""
    rng = np.random.default_rng(0)
    for start in range(0, n, 20_000):
        stop = min(n, start + 20_000)
        block = real[rng.integers(0, len(real), stop - start)]
        block = block + np.float32(0.03) * rng.standard_normal(block.shape, dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        for i in range(stop - start):
            row = start + i
            yield f"c{row:012d}", f"notes/n{row // CHUNKS_PER_NOTE}.md", block[i]


def build(work: Path, source: Path, n: int) -> dict[str, Any]:
    """Child: write the snapshot of ``n`` rows (with its lists) through the engine's writer."""
    from mdsearch_ls.engine.index import ivf, vector_snapshot

    if os.environ.get("ANN_BENCH_MIN_ROWS"):
        ivf.MIN_ROWS = int(os.environ["ANN_BENCH_MIN_ROWS"])
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob(f"{STEM}.*"):
        old.unlink()
    real = np.load(source)
    rows = (_synthetic(real, n) if n else
            ((f"r{i:012d}", f"notes/n{i // CHUNKS_PER_NOTE}.md", v) for i, v in enumerate(real)))
    total = n or len(real)
    timing: dict[str, float] = {}
    grouped = vector_snapshot._grouped

    def timed_grouped(*args: Any, **kw: Any) -> Any:
        peak.mark("rows")
        t0 = time.perf_counter()
        try:
            return grouped(*args, **kw)
        finally:
            timing["ivf_s"] = time.perf_counter() - t0
            peak.mark("ivf")

    vector_snapshot._grouped = timed_grouped  # type: ignore[assignment]
    peak = Peak()
    t0 = time.perf_counter()
    ok = vector_snapshot.save(work / f"{STEM}.sqlite3", "bench:1", total, rows)
    took = time.perf_counter() - t0
    mem = peak.stop()
    assert ok, "the snapshot was not written"
    head = json.loads((work / f"{STEM}.vectors.json").read_text())
    size = sum(p.stat().st_size for p in work.glob(f"{STEM}.*"))
    lists = head.get("ivf")
    return {"rows": total, "save_s": round(took, 1),
            "ivf_build_s": round(timing.get("ivf_s", 0), 1),
            **mem, "files_mb": round(size / 2**20),
            "nlist": len(lists["offsets"]) - 1 if lists else 0,
            "nprobe": lists["nprobe"] if lists else 0, "min_rows": ivf.MIN_ROWS}


def query(work: Path, qfile: Path, mode: str, out: Path) -> dict[str, Any]:
    """Child: map the snapshot in a fresh process and answer every query, through the lists
    (``ann``) or exactly over the same rows (``exact``); unfiltered, and with a broad and a
    narrow path filter."""
    from mdsearch_ls.engine.index import vector_snapshot
    from mdsearch_ls.engine.search.vectors import VectorTable

    qvecs = np.load(qfile)
    t0 = time.perf_counter()
    mapped = vector_snapshot.load(work / f"{STEM}.sqlite3", "bench:1")
    assert mapped is not None
    ids, paths, matrix, lists = mapped
    table = VectorTable(1, ids, paths, matrix, lists if mode == "ann" else None)
    load_ms = (time.perf_counter() - t0) * 1000
    notes = sorted(paths[1])
    rng = np.random.default_rng(1)
    filters: dict[str, set[str] | None] = {
        "none": None,
        "broad": set(rng.choice(notes, size=max(1, int(len(notes) * 0.3)), replace=False)),
        "narrow": set(rng.choice(notes, size=max(1, int(len(notes) * 0.03)), replace=False))}
    result: dict[str, Any] = {"load_ms": round(load_ms, 1)}
    answers: dict[str, list[list[tuple[str, float]]]] = {}
    for name, allowed in filters.items():
        ms = []
        got = []
        if allowed is not None:
            table.nearest(qvecs[0], POOL, allowed, None)  # rows per filter are memoised
        for q in qvecs:
            t0 = time.perf_counter()
            got.append(table.nearest(q, POOL, allowed, None))
            ms.append((time.perf_counter() - t0) * 1000)
        ms.sort()
        result[name] = {"p50_ms": round(statistics.median(ms), 2),
                        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2)}
        answers[name] = got
    status = _status()
    result["rss_anon_mb"] = round(status["RssAnon"] / 1024)
    result["rss_file_mb"] = round(status["RssFile"] / 1024)
    out.write_text(json.dumps(answers))
    return result


def recall(ann: list[list[Any]], exact: list[list[Any]], k: int) -> float:
    """Share of the exact top-k found, a hit counting when its cosine reaches the exact k-th
    (duplicated vectors tie: any of them is a right answer)."""
    scores = []
    for a, e in zip(ann, exact, strict=True):
        if not e:
            continue
        kth = e[min(k, len(e)) - 1][1]
        scores.append(sum(1 for _, s in a[:k] if s >= kth - 1e-6) / min(k, len(e)))
    return round(float(np.mean(scores)), 4)


def _child(args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, __file__, *args], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(work: Path, source: Path, qfile: Path, n: int) -> dict[str, Any]:
    row = _child(["--child-build", str(work), str(source), str(n)])
    print(f"{row['rows']}: built in {row['save_s']} s (lists {row['ivf_build_s']} s), "
          f"peak anon {row['peak_anon_mb']} MB", file=sys.stderr)
    for mode in ("ann", "exact"):
        row[mode] = _child(["--child-query", str(work), str(qfile), mode,
                            str(work / f"answers-{mode}.json")])
    ann = json.loads((work / "answers-ann.json").read_text())
    exact = json.loads((work / "answers-exact.json").read_text())
    for name in ann:
        row["ann"][name]["recall@10"] = recall(ann[name], exact[name], 10)
        row["ann"][name]["recall@60"] = recall(ann[name], exact[name], POOL)
    print(f"{row['rows']}: exact p50 {row['exact']['none']['p50_ms']} ms, "
          f"ann p50 {row['ann']['none']['p50_ms']} ms, "
          f"recall@10 {row['ann']['none']['recall@10']}", file=sys.stderr)
    for old in work.glob(f"{STEM}.*"):
        old.unlink()
    return row


def _query_vectors(work: Path, limit: int) -> Path:
    out = work / "queries.npy"
    if out.exists():
        return out
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import create_embedder

    qs = [json.loads(line)["query"] for line in QUERIES.read_text("utf-8").splitlines()
          if line.strip()][:limit]
    embedder = create_embedder(Settings())
    np.save(out, np.stack([embedder.embed_query(q) for q in qs]).astype(np.float32))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-build":
        print(json.dumps(build(Path(argv[1]), Path(argv[2]), int(argv[3]))))
        return 0
    if argv and argv[0] == "--child-query":
        print(json.dumps(query(Path(argv[1]), Path(argv[2]), argv[3], Path(argv[4]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-ann"))
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--vectors-from", type=Path, default=None,
                    help="an index folder whose snapshot's vectors seed the synthetic ones "
                    "(default: scale_bench.py's v8 index)")
    ap.add_argument("--real-index", type=Path, default=None,
                    help="also measure this index's own vectors (read, never written)")
    ap.add_argument("--queries", type=int, default=365)
    ap.add_argument("--min-rows", type=int, default=None,
                    help="build the lists from this many rows (default: the engine's threshold)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ann.json")
    args = ap.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.min_rows is not None:
        os.environ["ANN_BENCH_MIN_ROWS"] = str(args.min_rows)
    seed = work / "real.npy"
    source = args.vectors_from or next(iter(sorted(SOURCE.glob("v8-*"))), None)
    if source is None:
        raise SystemExit(f"no v8 index under {SOURCE}: run benchmarks/scale_bench.py first, or "
                         "give --vectors-from")
    np.save(seed, _snapshot_rows(source))
    qfile = _query_vectors(work, args.queries)
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "blas_threads": 1},
                              "queries": len(np.load(qfile)), "pool": POOL,
                              "min_rows_forced": args.min_rows, "sizes": {}}
    for n in [int(s) for s in args.sizes.split(",") if s]:
        result["sizes"][str(n)] = measure(work / "snap", seed, qfile, n)
    if args.real_index is not None:
        own = work / "own.npy"
        np.save(own, _snapshot_rows(args.real_index))
        os.environ["ANN_BENCH_MIN_ROWS"] = "1"  # lists at any size: their recall on real rows
        from mdsearch_ls.engine.index.ivf import MIN_ROWS

        result["real_index"] = {"index": args.real_index.name,
                                "lists_forced": len(np.load(own, mmap_mode="r")) < MIN_ROWS,
                                **measure(work / "snap", own, qfile, 0)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
