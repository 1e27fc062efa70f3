"""Per-vault calibration of the fusion weights on the vault's own link contexts (issue 21's
"ranking that learns the vault"), judged on labelled queries the fit never saw.

    python benchmarks/calibrate.py vault|obsidian-help|tldr [--index-dir DIR] [-k 10]
                                   [--fit-on all|tune|labels] [--min-contexts 100]
                                   [--fit NAME,...] [--column-weights 1,2,4,8]
                                   [--variant "NAME=VALUE,..."] [--out FILE]

Why: the global defaults were chosen on two small labelled sets. A vault's links are labels it
carries itself (benchmarks/link_contexts.py), so the few fusion weights could be fitted per
vault at index time, with no model change. That is worth shipping only if weights fitted on a
vault's links beat the defaults on that vault's labelled queries, which were never used to fit.

How: every link context of the vault (``--fit-on all``: one fold, every resolvable link; the
labelled queries are the judge, so no link needs holding out for them) is searched once with
the defaults, and the candidate pool the engine ranks (both lists' first ``min_pool`` chunks,
with cosine, BM25, boilerplate weight, note size, phrase shares and the notes the query names)
is kept. The fit then re-fuses those pools in numpy for every point of a small grid over
``convex_alpha``, ``title_boost`` and ``long_note_penalty`` (weights that act after retrieval;
``title_column_weight`` changes the BM25 list itself, so ``--column-weights`` captures the pools
once per value and fits the rest at each), and takes the point of best MRR@k, the defaults on a
tie. A re-fused pool reproduces the engine's note ranks (agreement printed). The fitted and
the default weights are then run through the real searcher on the labelled queries, as typed,
k=10, one hit per note (both halves of a split set are out of sample for the fit; the
``heldout`` half is the one reported as the judge). Separately, the links are split in two
folds (link_contexts.py): the three weights fitted on the ``tune`` fold are scored on the
``test`` fold.
``--fit-on labels`` fits on the labelled ``tune`` half instead of any link (a control: how much
the same grid gains where the fitting queries are of the judge's kind).

A vault with fewer than ``--min-contexts`` link contexts is not calibrated (the fallback: the
defaults); its figures show the defaults, and ``--variant`` rows (e.g. another vault's fitted
weights) are scored beside for information. Results: ``results/calibrate-<set>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_contexts import LinkContext, derive, first_rank, fold_name, metrics  # noqa: E402
from quality import SETS, ranking_params  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.search import ranking  # noqa: E402
from mdsearch_ls.engine.search.query import Filters, QueryError  # noqa: E402
from mdsearch_ls.engine.search.ranking import RankingParams  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

GRID = {
    "convex_alpha": (0.5, 0.6, 0.7, 0.8, 0.9),
    "title_boost": (0.0, 0.1, 0.25, 0.4, 0.6),
    "long_note_penalty": (0.0, 0.03, 0.06, 0.1, 0.15),
}


@dataclasses.dataclass
class Pool:
    """One query's ranked pool as arrays, enough to re-fuse it under other weights."""

    dense: np.ndarray
    sparse: np.ndarray
    weight: np.ndarray
    long_log: np.ndarray
    """ln(chunks / free chunks) of the candidate's note, 0 for a short note."""
    phrase: np.ndarray
    required: np.ndarray
    cosine: np.ndarray
    note: np.ndarray
    """Index of the candidate's note in ``notes``."""
    named: np.ndarray
    """Whether the query names the candidate's note."""
    notes: list[str]
    exact: bool
    target: set[str]


def capture(ws: Workspace, items: list[tuple[str, set[str], Filters | None]], k: int
            ) -> tuple[list[Pool | None], list[int | None]]:
    """Search each query once with the searcher's weights, keeping the pool it ranked (the first
    ``ranking.rank`` call of the search) and the engine's rank of the first right note."""
    seen: list[tuple] = []
    real = ranking.rank

    def spy(cands, **kw):  # type: ignore[no-untyped-def]
        seen.append((list(cands), kw))
        return real(cands, **kw)

    pools: list[Pool | None] = []
    engine_ranks: list[int | None] = []
    ranking.rank = spy  # the searcher calls ranking.rank through the module
    try:
        for query, relevant, filters in items:
            seen.clear()
            engine_ranks.append(_rank(ws, query, relevant, filters, k))
            pools.append(to_pool(seen[0], ws.searcher.params, relevant) if seen else None)
    finally:
        ranking.rank = real
    return pools, engine_ranks


def to_pool(call: tuple, params: RankingParams, relevant: set[str]) -> Pool:
    cands, kw = call
    scale = kw.get("scale") or ranking.convex_scale(cands, params)
    lo, hi, best = scale.lo, scale.hi, scale.best
    notes: dict[str, int] = {}
    for c in cands:
        notes.setdefault(c.chunk.path, len(notes))
    named = ranking.names_not_words(cands, kw.get("named") or {}, kw.get("query", ""), params)
    free = params.long_note_free_chunks
    lengths = sorted(len(c.chunk.text.split()) for c in cands if c.bm25)
    floor = params.short_floor * lengths[len(lengths) // 2] if lengths else 0.0
    return Pool(
        dense=np.array([((c.cosine if c.cosine is not None else lo) - lo) / (hi - lo)
                        if hi > lo else 0.0 for c in cands]),
        sparse=np.array([(c.bm25 or 0.0) / best * (ranking.short_section_factor(
            len(c.chunk.text.split()), floor) if c.bm25 and floor else 1.0) for c in cands]),
        weight=np.array([c.weight for c in cands]),
        long_log=np.array([math.log(c.note_chunks / free) if c.note_chunks > free else 0.0
                           for c in cands]),
        phrase=np.array([c.phrase_share for c in cands]),
        required=np.array([c.required_share for c in cands]),
        cosine=np.array([c.cosine or 0.0 for c in cands]),
        note=np.array([notes[c.chunk.path] for c in cands]),
        named=np.array([c.chunk.path in named for c in cands]),
        notes=list(notes),
        exact=ranking.looks_exact(kw.get("query", "")),
        target=relevant,
    )


def fused_rank(pool: Pool, params: RankingParams, k: int) -> int | None:
    """The rank of the first right note when ``pool`` is fused with ``params`` (convex fusion,
    as ``ranking.rank`` does it, notes ordered by their best chunk)."""
    alpha = params.exact_alpha if pool.exact else params.convex_alpha
    fused = (alpha * pool.dense + (1.0 - alpha) * pool.sparse) * pool.weight
    fused = fused - params.long_note_penalty * pool.long_log
    fused = fused + params.phrase_boost * pool.phrase * pool.weight
    if params.title_boost and pool.named.any():
        for n in np.unique(pool.note[pool.named]):
            idx = np.flatnonzero(pool.note == n)
            best = idx[np.lexsort((-pool.cosine[idx], -fused[idx]))[0]]
            fused[best] += params.title_boost * pool.weight[best]
    order = np.lexsort((-pool.cosine, -fused, -pool.required))
    seen: list[int] = []
    for i in order:
        n = int(pool.note[i])
        if n not in seen:
            seen.append(n)
            if pool.notes[n] in pool.target:
                return len(seen) if len(seen) <= k else None
            if len(seen) >= k:
                return None
    return None


def mrr(ranks: list[int | None]) -> float:
    return sum(1.0 / r for r in ranks if r) / (len(ranks) or 1)


def fit(pools: list[Pool | None], base: RankingParams, k: int,
        names: tuple[str, ...] = tuple(GRID)) -> tuple[RankingParams, float, float, int]:
    """The grid point of best MRR@k on the pools over the weights ``names`` (the defaults on a
    tie, then the nearest to them), its MRR, the defaults' MRR, and how many points were
    tried."""
    usable = [p for p in pools if p is not None]
    default_mrr = mrr([fused_rank(p, base, k) for p in usable])
    best, best_mrr, best_dist = base, default_mrr, 0.0
    tried = 0
    for values in itertools.product(*(GRID[n] for n in names)):
        params = dataclasses.replace(base, **dict(zip(names, values, strict=True)))
        tried += 1
        score = mrr([fused_rank(p, params, k) for p in usable])
        dist = sum(abs(getattr(params, n) - getattr(base, n)) for n in names)
        if score > best_mrr + 1e-9 or (abs(score - best_mrr) <= 1e-9 and dist < best_dist):
            best, best_mrr, best_dist = params, score, dist
    return best, best_mrr, default_mrr, tried


def engine_ranks(ws: Workspace, items: list[tuple[str, set[str], Filters | None]],
                 params: RankingParams, k: int) -> list[int | None]:
    """The real searcher's rank of each query's first right note under ``params``."""
    ws.searcher.params = params
    return [_rank(ws, query, relevant, filters, k) for query, relevant, filters in items]


def _rank(ws: Workspace, query: str, relevant: set[str], filters: Filters | None,
          k: int) -> int | None:
    """The real searcher's rank of the query's first right note (result cache cleared)."""
    ws.searcher._cache.clear()
    try:
        hits = ws.searcher.search(query, k, mode="hybrid", filters=filters, per_file=1).hits
    except QueryError:
        hits = []
    return first_rank([h.path for h in hits], relevant)


def link_items(ws: Workspace, contexts: list[LinkContext]
               ) -> list[tuple[str, set[str], Filters | None]]:
    every = sorted(ws.manifest.all_paths())
    return [(c.query, {c.target}, Filters(paths=tuple(p for p in every if p != c.source)))
            for c in contexts]


def paired(a: list[int | None], b: list[int | None]) -> dict[str, int]:
    """Queries whose first right note ranks better / worse under b than under a."""
    inv = [(1.0 / x if x else 0.0, 1.0 / y if y else 0.0) for x, y in zip(a, b, strict=True)]
    return {"better": sum(y > x for x, y in inv), "worse": sum(y < x for x, y in inv)}


def changed(params: RankingParams, base: RankingParams) -> dict[str, object]:
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)
            if getattr(params, f.name) != getattr(base, f.name)}


def show(label: str, m: dict[str, float], k: int) -> None:
    print(f"  {label:<44} n={m['n']:<5} top1 {m['top1']:.3f} top3 {m['top3']:.3f} "
          f"top5 {m['top5']:.3f} mrr@{k} {m[f'mrr{k}']:.3f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", help=f"a labelled set's name ({', '.join(SETS)})")
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--fit-on", choices=("all", "tune", "labels"), default="all",
                    help="what to fit on for the labelled judge: every link, the links' tune "
                         "fold, or (a control) the labelled tune half")
    ap.add_argument("--min-contexts", type=int, default=100,
                    help="fewer link contexts than this: no calibration (the defaults)")
    ap.add_argument("--variant", action="append", default=[],
                    help="extra weights to score on the labels (comma-separated NAME=VALUE)")
    ap.add_argument("--fit", default=",".join(GRID),
                    help=f"the weights to fit, comma-separated (of {', '.join(GRID)})")
    ap.add_argument("--column-weights", default="",
                    help="also fit title_column_weight over these values (comma-separated; a "
                         "search of every fitting query per value)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    names = tuple(n for n in args.fit.split(",") if n)
    col_weights = [float(x) for x in args.column_weights.split(",") if x]
    if not names or any(n not in GRID for n in names):
        ap.error(f"--fit: expected some of {', '.join(GRID)}")
    if args.vault not in SETS:
        ap.error(f"VAULT must be one of {', '.join(SETS)}")
    vault, queries_file = SETS[args.vault]
    index_dir = args.index_dir or Path(os.environ.get("MDSEARCH_CACHE_DIR", "/tmp")) / (
        f"calibrate-{args.vault}") / "index"
    k = args.k
    settings = Settings(per_file=1)
    base = RankingParams(fusion=settings.fusion)
    ws = Workspace(vault.resolve(), settings, create_embedder(settings), index_dir=index_dir)
    ws.index()
    ws.searcher.params = base
    files, chunks = ws.manifest.counts()

    queries = [json.loads(line) for line in queries_file.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    split = "heldout" if any(q.get("split") == "heldout" for q in queries) else "all"
    label_items = [(q["query"], set(q["relevant"]), None) for q in queries]

    every_link, counts_all = derive(ws, 1)
    two_fold, counts_two = derive(ws, 2)
    tune = [c for c in two_fold if fold_name(c.fold) == "tune"]
    test = [c for c in two_fold if fold_name(c.fold) == "test"]
    fit_items = link_items(ws, every_link if args.fit_on == "all" else tune)
    if args.fit_on == "labels":
        fit_items = [it for it, q in zip(label_items, queries, strict=True)
                     if q.get("split") == "tune"]
    print(f"{args.vault}: {files} notes, {chunks} chunks; {counts_all.get('links', 0)} links, "
          f"{len(every_link)} link contexts (all, {counts_all}); two folds: {len(tune)} tune, "
          f"{len(test)} test; k={k}, hybrid, one hit per note, queries as typed", flush=True)
    ws.searcher.search("warm up", k, mode="hybrid")

    result: dict[str, object] = {
        "vault": str(vault), "notes": files, "chunks": chunks, "k": k, "per_file": 1,
        "mode": "hybrid", "queries_file": str(queries_file),
        "has_heldout_split": split == "heldout",
        "fit_on": args.fit_on, "min_contexts": args.min_contexts,
        "grid": {n: list(GRID[n]) for n in names},
        "derivation_all": counts_all, "derivation_two_folds": counts_two,
        "link_contexts": {"all": len(every_link), "tune": len(tune), "test": len(test)},
        "defaults": dataclasses.asdict(base),
    }
    calibrated = args.fit_on == "labels" or len(fit_items) >= args.min_contexts
    fitted = base
    if calibrated:
        per_weight = []
        for w in dict.fromkeys([base.title_column_weight, *col_weights]):
            at = dataclasses.replace(base, title_column_weight=w)
            ws.searcher.params = at
            t0 = time.perf_counter()
            pools, eng = capture(ws, fit_items, k)
            t_capture = time.perf_counter() - t0
            re = [fused_rank(p, at, k) if p is not None else None for p in pools]
            agree = sum(a == b for a, b in zip(re, eng, strict=True)) / len(eng)
            t0 = time.perf_counter()
            got, fit_mrr, at_mrr, tried = fit(pools, at, k, names)
            t_fit = time.perf_counter() - t0
            print(f"fit on {len(fit_items)} queries ({args.fit_on}), title column weight {w}: "
                  f"re-fused ranks agree with the engine's on {agree:.3f}; {tried} grid points; "
                  f"MRR@{k} on them {at_mrr:.3f} -> {fit_mrr:.3f}; fitted "
                  f"{changed(got, base) or 'the defaults'} (capture {t_capture:.1f} s, fit "
                  f"{t_fit:.1f} s, shared machine)", flush=True)
            per_weight.append({"title_column_weight": w, "pool_agreement": round(agree, 4),
                               "grid_points": tried, "fit_mrr_at_weight": round(at_mrr, 4),
                               "fit_mrr_fitted": round(fit_mrr, 4),
                               "fitted": changed(got, base), "capture_s": round(t_capture, 1),
                               "fit_s": round(t_fit, 1), "params": got})
        best = max(per_weight, key=lambda r: (r["fit_mrr_fitted"], -abs(
            r["title_column_weight"] - base.title_column_weight)))
        fitted = best["params"]
        ws.searcher.params = base
        for r in per_weight:
            del r["params"]
        result["fit"] = {"queries": len(fit_items), "fit_mrr_defaults":
                         per_weight[0]["fit_mrr_at_weight"], "fitted": changed(fitted, base),
                         "per_title_column_weight": per_weight}
        print(f"fitted: {changed(fitted, base) or 'the defaults'}", flush=True)
    else:
        print(f"{len(fit_items)} link contexts < {args.min_contexts}: not calibrated, the "
              f"defaults stand (the fallback)", flush=True)
        result["fit"] = None

    print(f"labelled queries (as typed, k={k}"
          + ("; the tune half fitted the weights):" if args.fit_on == "labels"
             else "; none of them is used by the fit):"))
    groups = {"all": list(range(len(queries)))}
    if split == "heldout":
        groups = {s: [i for i, q in enumerate(queries) if q.get("split") == s]
                  for s in ("heldout", "tune")} | groups
    variants = [("defaults", base)] + ([("calibrated", fitted)] if calibrated else [])
    variants += [(v, ranking_params([x for x in v.split(",") if x], settings.fusion)[0])
                 for v in args.variant]
    ranked = {name: engine_ranks(ws, label_items, params, k) for name, params in variants}
    rows: dict[str, dict[str, object]] = {}
    for g, idx in groups.items():
        rows[g] = {}
        d = [ranked["defaults"][i] for i in idx]
        for name, _ in variants:
            r = [ranked[name][i] for i in idx]
            rows[g][name] = metrics(r, k) | ({} if name == "defaults" else paired(d, r))
            show(f"{g}: {name}", rows[g][name], k)
            if name != "defaults":
                print(f"    vs defaults: {rows[g][name]['better']} queries better, "
                      f"{rows[g][name]['worse']} worse")
    result["labels"] = rows

    ws.searcher.params = base
    if len(tune) >= args.min_contexts // 2 and test:
        pools, _ = capture(ws, link_items(ws, tune), k)
        fold_fit, fm, dm, _ = fit(pools, base, k, names)
        items = link_items(ws, test)
        dt = engine_ranks(ws, items, base, k)
        ct = engine_ranks(ws, items, fold_fit, k)
        print(f"links: fitted on the tune fold ({len(tune)}; MRR@{k} {dm:.3f} -> {fm:.3f}, "
              f"{changed(fold_fit, base) or 'the defaults'}), scored on the test fold:")
        show("links/test defaults", metrics(dt, k), k)
        show("links/test calibrated on links/tune", metrics(ct, k), k)
        result["links_test"] = {"fitted_on_tune": changed(fold_fit, base),
                                "defaults": metrics(dt, k),
                                "calibrated": metrics(ct, k) | paired(dt, ct)}
    ws.searcher.params = base
    ws.close()
    out = args.out or ROOT / "benchmarks" / "results" / f"calibrate-{args.vault}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
