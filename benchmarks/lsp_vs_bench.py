"""A second language server beside a first (a second editor window on the same vault): how
soon it answers and what a hover costs it, this checkout's servers against another's, in turn.

    python benchmarks/lsp_vs_bench.py VAULT [--vs OTHER_CHECKOUT --vs-cache DIR]
                                      [--rounds 3] [--hovers 20] [--out FILE]

Set ``MDSEARCH_CACHE_DIR`` where the vault's index lives (``--vs-cache``: where the other
checkout's index of it lives; each checkout reads its own). Per round and checkout (the order
alternates): a first ``mdsearch serve`` on VAULT, which holds the index, until it is idle; then a
second one on the same folder, which asks the first: the seconds from its ``initialized`` to its
first non-empty ``workspace/symbol`` answer, then ``--hovers`` hovers on notes of the vault (a
fixed sample; each hover the sections related to the third line, what the second server gets
from the first through the channel), p50/p95 and how many had an answer; the RSS of both servers
at the end. Medians over the rounds. The other checkout runs with its own ``.venv`` when it has
one, with ``PYTHONPATH`` at it; compile both checkouts' bytecode first (``python -m compileall
-q mdsearch_ls``) if ``PYTHONDONTWRITEBYTECODE`` is set. Results: ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from cli_bench import start_server, wait_idle  # noqa: E402  (one copy of each)


def hover_sample(vault: Path, n: int) -> list[Path]:
    """``n`` notes of the vault, the same ones every run."""
    notes = sorted(vault.rglob("*.md"))
    return random.Random(0).sample(notes, min(n, len(notes)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def pair_round(vault: Path, env: dict[str, str], notes: list[Path], query: str = "tar",
               python: str = sys.executable) -> dict[str, float]:
    """One first server (the holder) and a second beside it; see the module docstring."""
    first, first_s = start_server(vault, env, query, python)
    try:
        wait_idle(first)
        second, second_s = start_server(vault, env, query, python)
        try:
            wait_idle(second)
            ms, answered = [], 0
            for note in notes:
                t = time.perf_counter()
                got = second.request("textDocument/hover", {
                    "textDocument": {"uri": note.as_uri()},
                    "position": {"line": 2, "character": 0}})
                ms.append((time.perf_counter() - t) * 1000)
                answered += got is not None
            return {"first_server_first_symbols_s": first_s,
                    "second_server_first_symbols_s": second_s,
                    "hover_p50_ms": statistics.median(ms), "hover_p95_ms": pct(ms, 0.95),
                    "hovers_answered": answered, "hovers": len(ms),
                    "first_server_rss_mb": first.rss_mb(),
                    "second_server_rss_mb": second.rss_mb()}
        finally:
            second.stop()
    finally:
        first.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--vs", type=Path, help="another checkout of mdsearch")
    ap.add_argument("--vs-cache", type=Path, help="MDSEARCH_CACHE_DIR of the other checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hovers", type=int, default=20)
    ap.add_argument("--query", default="tar", help="the workspace/symbol query")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    vault = args.vault.resolve()
    env = {**os.environ, "MDSEARCH_BACKGROUND": "off", "PYTHONPATH": str(ROOT)}
    sides: dict[str, tuple[str, dict[str, str]]] = {"this": (sys.executable, env)}
    if args.vs is not None:
        other = args.vs.resolve()
        python = other / ".venv" / "bin" / "python"
        sides["other"] = (str(python) if python.exists() else sys.executable,
                          {**env, "PYTHONPATH": str(other),
                           **({"MDSEARCH_CACHE_DIR": str(args.vs_cache.resolve())}
                              if args.vs_cache else {})})
    notes = hover_sample(vault, args.hovers)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            python, side_env = sides[name]
            runs[name].append(pair_round(vault, side_env, notes, args.query, python))
            print(name, {k: round(v, 3) for k, v in runs[name][-1].items()}, file=sys.stderr)
    result = {"vault": vault.name, "rounds": args.rounds, "query": args.query,
              "checkouts": {name: side[1]["PYTHONPATH"] for name, side in sides.items()},
              "load": os.getloadavg(),
              **{name: {k: round(statistics.median(x[k] for x in xs), 3) for k in xs[0]}
                 for name, xs in runs.items()},
              "runs": runs}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
