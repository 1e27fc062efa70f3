"""Whether the first hits depend on how many were asked for: every query at several k, the
first ``--first`` hits of each compared with those of the smallest k.

    python benchmarks/k_order.py VAULT QUERIES.jsonl [--index-dir DIR] [--ks 5,10,50]
                                 [--first 5] [--per-file 1] [--mode hybrid] [--out FILE]
    python benchmarks/k_order.py vault|obsidian-help|tldr [...]      a labelled set by name

A person who asks for more results must see the same first results (issue 21, defect 1).
Reports, per k, on how many queries the first ``--first`` hits (path and start line) differ
from those at the smallest k, and on how many the first hit does. Queries as typed, caches
cleared before every search. Results: ``results/korder-<vault>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_contexts import SETS, shared_dir  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.search.query import QueryError  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

NAMED = {**SETS, "tldr": (shared_dir() / "corpora" / "tldr",
                          shared_dir() / "eval" / "nl2bash-tldr.jsonl")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("queries", type=Path, nargs="?")
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("--ks", default="5,10,50")
    ap.add_argument("--first", type=int, default=5)
    ap.add_argument("--per-file", type=int, default=1)
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.queries is None:
        if str(args.vault) not in NAMED:
            ap.error("QUERIES is needed unless VAULT is a set's name")
        args.vault, args.queries = NAMED[str(args.vault)]
    ks = sorted(int(k) for k in args.ks.split(","))
    if ks[0] < args.first:
        ap.error(f"the smallest k must be at least --first ({args.first})")
    vault = args.vault.resolve()
    tmp = None
    if args.index_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mdsearch-korder-")
        os.environ.setdefault("MDSEARCH_CACHE_DIR", tmp.name)
        index_dir = Path(tmp.name) / "index"
    else:
        index_dir = args.index_dir
    settings = Settings()
    ws = Workspace(vault, settings, create_embedder(settings), index_dir=index_dir)
    ws.index()
    queries = [json.loads(line)["query"] for line in args.queries.read_text().splitlines()
               if line.strip()]
    differ = {k: 0 for k in ks[1:]}
    first_differs = {k: 0 for k in ks[1:]}
    examples: list[dict[str, object]] = []
    for q in queries:
        heads: dict[int, list[str]] = {}
        for k in ks:
            ws.searcher._cache.clear()
            try:
                hits = ws.searcher.search(q, k, mode=args.mode, per_file=args.per_file).hits
            except QueryError:
                hits = []
            heads[k] = [f"{h.path}:{h.start_line}" for h in hits[: args.first]]
        base = heads[ks[0]]
        for k in ks[1:]:
            if heads[k] != base:
                differ[k] += 1
                if len(examples) < 5:
                    examples.append({"query": q, "k": k, f"k={ks[0]}": base, f"k={k}": heads[k]})
            if heads[k][:1] != base[:1]:
                first_differs[k] += 1
    chunks = ws.manifest.counts()[1]
    print(f"{vault.name}: {len(queries)} queries, {chunks} chunks, mode {args.mode}, "
          f"per_file {args.per_file}; first {args.first} hits compared with k={ks[0]}")
    for k in ks[1:]:
        print(f"  k={k}: first {args.first} differ on {differ[k]}, first hit on "
              f"{first_differs[k]}")
    result = {"vault": str(vault), "queries": len(queries), "chunks": chunks,
              "mode": args.mode, "per_file": args.per_file, "first": args.first, "ks": ks,
              "first_n_differ": {str(k): v for k, v in differ.items()},
              "first_hit_differs": {str(k): v for k, v in first_differs.items()},
              "examples": examples}
    ws.close()
    out = args.out or ROOT / "benchmarks" / "results" / f"korder-{vault.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
