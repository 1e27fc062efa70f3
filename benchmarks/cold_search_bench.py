"""Whole ``mdsearch search`` processes with nothing holding the index, two setups in turn: wall,
peak RSS and whether they printed the same.

    python benchmarks/cold_search_bench.py --vault DIR --a-cache DIR [--a-code DIR]
                                           --b-cache DIR [--b-code DIR] [--rounds 2] [--out FILE]

Each side is an index cache folder (``MDSEARCH_CACHE_DIR``) and, optionally, another checkout's
package (first on ``PYTHONPATH``, its bytecode compiled). Made to compare two states of one
vault's index, for example its vector snapshot with and without IVF lists (copy the cache
folder, and open a writer on the copy with the other threshold): the vault is only searched
(``--no-update`` is not given, so each search also does the freshness check a user's does; a
changed note would make it a writer, so keep the vault as it is while this runs).

Queries: the first NL2Bash questions exactly as typed, ``--rounds`` times over, A and B
alternating which goes first; k 5 (the CLI's default), ``--format paths`` to a pipe,
``MDSEARCH_BACKGROUND=off``. Per side: median wall and median peak RSS (``wait4``); and how
many of the queries printed the same paths on both sides. Results: ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def questions(n: int) -> list[str]:
    path = SHARED / "eval" / "nl2bash-tldr.jsonl"
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [json.loads(ln)["query"] for ln in lines[:n]]


def run(query: str, env: dict[str, str], vault: Path) -> tuple[float, float, str, int]:
    """(wall s, peak RSS MB, stdout, exit code) of one search process."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", "search", query, "-k", "5",
                             "--format", "paths"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=vault)
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - t, usage.ru_maxrss / 1024, out,
            os.waitstatus_to_exitcode(status))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--a-cache", type=Path, required=True)
    ap.add_argument("--a-code", type=Path, default=ROOT)
    ap.add_argument("--b-cache", type=Path, required=True)
    ap.add_argument("--b-code", type=Path, default=ROOT)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "cold-search.json")
    args = ap.parse_args(argv)
    sides: dict[str, dict[str, str]] = {}
    for name, cache, code in (("a", args.a_cache, args.a_code), ("b", args.b_cache, args.b_code)):
        compileall.compile_dir(str(code.resolve() / "mdsearch_ls"), quiet=1)
        sides[name] = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache.resolve()),
                       "MDSEARCH_BACKGROUND": "off", "PYTHONPATH": str(code.resolve())}
    qs = questions(args.queries)
    runs: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    printed: dict[str, dict[str, str]] = {"a": {}, "b": {}}
    failed = 0
    n = 0
    for _ in range(args.rounds):
        for q in qs:
            order = ["a", "b"] if n % 2 == 0 else ["b", "a"]
            n += 1
            for side in order:
                wall, rss, out, code = run(q, sides[side], args.vault.resolve())
                failed += code != 0
                runs[side].append((wall, rss))
                printed[side][q] = out
                print(f"{side} {wall:.2f} s {rss:.0f} MB  {q[:50]}", file=sys.stderr)
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load": os.getloadavg()},
        "vault": str(args.vault), "k": 5, "queries": len(qs), "rounds": args.rounds,
        "failed": failed,
        "sides": {name: {"cache": env["MDSEARCH_CACHE_DIR"], "code": env["PYTHONPATH"]}
                  for name, env in sides.items()},
        "same_paths": sum(printed["a"][q] == printed["b"][q] for q in qs),
    }
    for side, xs in runs.items():
        result[side] = {"wall_s": round(statistics.median(w for w, _ in xs), 3),
                        "peak_rss_mb": round(statistics.median(r for _, r in xs), 1)}
    result["ratio_wall_b_over_a"] = round(statistics.median(
        b[0] / a[0] for a, b in zip(runs["a"], runs["b"], strict=True)), 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
