"""The exact vector search's per-query cost: a product over the rows, without copying them.

    python benchmarks/nearest_bench.py [--sizes 8000,24000,100000] [--rounds 200]

Times ``VectorTable.nearest`` (k=10, 384 dimensions, random unit vectors) unfiltered and with a
filter passing 90 % / 5 % of the notes, beside the old form (``matrix[rows] @ q`` over every
row, which gathers a copy first) and a bare ``matrix @ q``; calls interleaved round by round,
medians in ms. Results: ``benchmarks/results/nearest.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mdsearch_ls.engine.search.vectors import VectorTable  # noqa: E402

K = 10


def old_nearest(table: VectorTable, q: np.ndarray, rows: np.ndarray) -> list[int]:
    sims = table.matrix[rows] @ q
    top = np.argpartition(-sims, K - 1)[:K]
    return [int(rows[i]) for i in top[np.argsort(-sims[top], kind="stable")]]


def run(n: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(n)
    matrix = rng.standard_normal((n, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(n)]
    paths = [f"n{i // 5}.md" for i in range(n)]
    table = VectorTable(1, ids, paths, matrix)
    notes = sorted(set(paths))
    wide = set(notes[: int(len(notes) * 0.9)])
    narrow = set(notes[: int(len(notes) * 0.05)])
    all_rows = np.arange(n, dtype=np.int64)
    cases = {
        "bare_matmul": lambda q: matrix @ q,
        "old_unfiltered": lambda q: old_nearest(table, q, all_rows),
        "unfiltered": lambda q: table.nearest(q, K, None, None),
        "filter_90pct": lambda q: table.nearest(q, K, wide, None),
        "filter_5pct": lambda q: table.nearest(q, K, narrow, None),
    }
    times: dict[str, list[float]] = {c: [] for c in cases}
    for r in range(rounds):
        q = matrix[r % n] + 0.01
        for name, fn in cases.items():
            t = time.perf_counter()
            fn(q)
            times[name].append(time.perf_counter() - t)
    return {name: round(statistics.median(v) * 1000, 3) for name, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8000,24000,100000")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "nearest.json")
    args = ap.parse_args()
    out = {"k": K, "dims": 384, "rounds": args.rounds,
           "p50_ms": {n: run(int(n), args.rounds) for n in args.sizes.split(",")}}
    text = json.dumps(out, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
