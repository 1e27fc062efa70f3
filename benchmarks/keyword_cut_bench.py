"""Would a MaxScore cut make the keyword list's cost follow the candidates? Rows read, not time.

    PYTHONPATH=. python benchmarks/keyword_cut_bench.py INDEX_DIR [INDEX_DIR ...]
                                                       [--pool 80] [--queries 40] [--out FILE]

The keyword list is exact BM25 (FTS5's ``bm25()``), and FTS5 scores every row any word of a
question matches: at a million chunks a typical question's phrases match 280k rows (the keyword
list alone 320-370 ms p50, ``million_bench.py --steps queries``). MaxScore (Turtle and Flood,
1995) would read the rarest phrases first and stop once no row matching only the others can
reach the list: a phrase adds less than ``idf * (k1 + 1)`` to any row, so when the ``pool``-th
best partial score exceeds the sum of that bound over the unread phrases, every row in the list
is among the rows read. The list's exact scores then need the unread phrases' counts for the
rows that could still reach it (``partial + bound >= pool-th``: the *refine* set).

This reads each phrase of 40 nl2bash questions as typed (the hybrid mode's phrases: words and
adjacent pairs, ``keyword.or_terms``) rarest first from a real index, read-only, and reports per
question the rows all phrases match, the rows read when the cut is first possible and its refine
set, and the rows read when reading on until the refine set is at most 600 and 2,000 rows (what
an exact completion of each could afford). Nothing here is timed: the cost of a keyword list is
about proportional to the rows FTS5 scores. The pool is the searcher's (``max(30, 8 k)``, 80 for
k=10). Results: ``results/keyword-cut.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale_bench  # noqa: E402

from mdsearch_ls.engine.index import bm25_rows  # noqa: E402
from mdsearch_ls.engine.search import keyword  # noqa: E402

REFINE_LIMITS = (600, 2000)


def one_question(conn: sqlite3.Connection, rows: int, question: str, pool: int
                 ) -> dict[str, Any] | None:
    """The cut's rows read for one question (None: it has no phrase)."""
    phrases = keyword.or_terms(question, pairs=True)
    if not phrases:
        return None
    counts = [int(conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                               (p,)).fetchone()[0]) for p in phrases]
    bound = [bm25_rows.idf(rows, n) * (bm25_rows.K1 + 1.0) if n else 0.0 for n in counts]
    order = sorted(range(len(phrases)), key=lambda i: counts[i])
    partial: dict[int, float] = {}
    read = 0
    out: dict[str, Any] = {"question": question, "phrases": len(phrases),
                           "rows_matched": sum(counts)}
    for step, i in enumerate(order):
        if counts[i]:
            for rowid, score in conn.execute(
                    "SELECT rowid, bm25(chunks_fts, 4.0, 1.0) FROM chunks_fts "
                    "WHERE chunks_fts MATCH ?", (phrases[i],)):
                partial[rowid] = partial.get(rowid, 0.0) - score
            read += counts[i]
        rest = sum(bound[j] for j in order[step + 1:])
        best = sorted(partial.values(), reverse=True)
        pth = best[pool - 1] if len(best) >= pool else 0.0
        if pth <= rest:
            continue
        refine = sum(1 for v in best if v + rest >= pth)
        if "first_cut" not in out:
            out["first_cut"] = {"rows_read": read, "refine": refine}
        for limit in REFINE_LIMITS:
            if refine <= limit and f"refine_{limit}" not in out:
                out[f"refine_{limit}"] = {"rows_read": read, "refine": refine}
    for name in ("first_cut", *(f"refine_{limit}" for limit in REFINE_LIMITS)):
        out.setdefault(name, {"rows_read": read, "refine": 0, "no_cut": True})
    return out


def summary(found: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(found),
                           "rows_matched_p50": statistics.median(f["rows_matched"]
                                                                 for f in found)}
    for name in ("first_cut", *(f"refine_{limit}" for limit in REFINE_LIMITS)):
        share = [f[name]["rows_read"] / max(1, f["rows_matched"]) for f in found]
        out[name] = {"share_read_p50": round(statistics.median(share), 3),
                     "share_read_mean": round(sum(share) / len(share), 3),
                     "refine_p50": statistics.median(f[name]["refine"] for f in found),
                     "no_cut": sum(1 for f in found if f[name].get("no_cut"))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("indexes", nargs="+", type=Path, help="index folders (the manifest inside)")
    ap.add_argument("--pool", type=int, default=80)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/keyword-cut.json")
    args = ap.parse_args(argv)
    questions = scale_bench.queries()[100: 100 + args.queries]
    result: dict[str, Any] = {"pool": args.pool, "refine_limits": list(REFINE_LIMITS)}
    for index in args.indexes:
        manifest = sorted(glob.glob(str(index / "*.sqlite3")))[0]
        conn = sqlite3.connect(f"file:{manifest}?mode=ro", uri=True)
        totals = bm25_rows.table_totals(conn)
        assert totals is not None
        found = [f for q in questions if (f := one_question(conn, totals[0], q, args.pool))]
        conn.close()
        result[str(totals[0])] = {"index": index.name, **summary(found), "per_question": found}
        print(json.dumps({"rows": totals[0], **summary(found)}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
