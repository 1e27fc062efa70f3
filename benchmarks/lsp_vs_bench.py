"""The language server of this checkout against another's, in turn, on one indexed vault: the
first ``workspace/symbol`` answer after ``initialized`` and the idle RSS (its own heap and mapped
files apart), so a change's cost in the server's memory is measured, not guessed.

    python benchmarks/lsp_vs_bench.py VAULT --vs OTHER_CHECKOUT [--rounds 3] [--out FILE]

Each round starts this checkout's server and the other's (``python -m mdsearch_ls serve`` with
``PYTHONPATH`` at each checkout; the order alternates), as ``cli_bench.server_round`` does;
medians. Set ``MDSEARCH_CACHE_DIR`` where the vault's index lives; compile both checkouts'
bytecode first (``python -m compileall -q mdsearch_ls``) if ``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from cli_bench import server_round  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--vs", type=Path, required=True, help="another checkout of mdsearch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--query", default="tar", help="the workspace/symbol query")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    sides = {"this": ROOT, "other": args.vs.resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            env = {**os.environ, "PYTHONPATH": str(sides[name]), "MDSEARCH_BACKGROUND": "off"}
            runs[name].append(server_round(args.vault, env, args.query))
            print(name, {k: round(v, 2) for k, v in runs[name][-1].items()}, file=sys.stderr)
    result = {"vault": args.vault.name, "rounds": args.rounds, "query": args.query,
              "checkouts": {name: str(path) for name, path in sides.items()},
              "load_at_end": os.getloadavg()[0],
              **{name: {k: round(statistics.median(x[k] for x in xs), 3) for k in xs[0]}
                 for name, xs in runs.items()}}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
