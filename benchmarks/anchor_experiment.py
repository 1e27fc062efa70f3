"""Issue 21 experiment: does the text of a vault's incoming links (anchor text) rank notes better?

    python benchmarks/anchor_experiment.py [--index-dir /tmp/anchor-idx] [-k 10]
                                           [--heldout VARIANT] [--out FILE]

Why: every ``[[Sync your notes across devices#Obsidian Sync|sync]]`` is a person describing
the linked note in their own words, the signal web search calls anchor text. A question that
paraphrases a page may be closer to how other pages talk about it than to the page itself.
This is an experiment only: nothing under ``mdsearch_ls/`` changes.

How: every resolvable link of obsidian-help and of the examples vault (the engine's link reader
and ``Resolver``, the same choices as ``link_contexts.derive``: no embeds, no link to its own
note) gives its target note two anchor texts: the sentence around the link *with* the words
the link shows (``link_contexts``' cleaning; the paragraph when the sentence is short), and
the shown words alone (the alias, else the note and heading named). Each labelled query is
searched once through the real searcher (hybrid, k, one hit per note) and the pool it ranked
is kept (the ``ranking.rank`` call: every candidate's fused score); the pool is then re-ranked
offline with an anchor signal added to each note's best fused score. With no signal the
replay must give the engine's ranks exactly (checked, printed). Variants are chosen on the
obsidian-help ``tune`` half and the examples vault only; ``--heldout NAME`` (at most twice in
all, for a variant that passed) scores the held-out half. The link contexts are never a judge:
their queries are the anchors. Results: ``results/anchor-experiment.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_contexts import (  # noqa: E402
    _SPACE_BEFORE,
    _SPACES,
    MARK,
    derive,
    first_rank,
    link_block,
    marked_sentence,
    metrics,
    resolved_links,
    shown_text,
    window,
    words_of,
)
from quality import BM25, SETS, tokens  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.notes import links as links_mod  # noqa: E402
from mdsearch_ls.engine.search import ranking  # noqa: E402
from mdsearch_ls.engine.search.keyword import STOPWORDS  # noqa: E402
from mdsearch_ls.engine.search.query import QueryError  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

SPAN_FLOOR = 0.25  # the engine's convex_min_span: min-max never stretches a smaller gap
WEIGHTS = (0.05, 0.1, 0.2, 0.3)


# -- anchors ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Anchor:
    source: str
    target: str
    section: str
    shown: str
    context: str


def anchor_context(note: links_mod.NoteText, index: int, min_words: int = 4,
                   max_words: int = 40) -> str:
    """The sentence holding a link, the link as the words it shows (``link_contexts.context_of``
    with the link kept): the paragraph when the sentence has fewer than ``min_words`` content
    words besides it, and that paragraph whatever it holds (a list of bare links still names
    the note)."""
    shown = shown_text(note.links[index][0])
    block = link_block(note, index, shown)
    chosen = marked_sentence(block)
    if words_of(chosen) - words_of(shown) < min_words:
        chosen = block
    words = window(chosen.split(), max_words)
    out = _SPACES.sub(" ", " ".join(w for w in words if w != MARK).replace(MARK, ""))
    return _SPACE_BEFORE.sub(r"\1", out).strip()


def collect(ws: Workspace) -> tuple[list[Anchor], dict[str, int]]:
    """Every resolvable link of the indexed notes as an anchor of its target (duplicates of the
    same source, target, context and shown words once)."""
    out: list[Anchor] = []
    seen: set[tuple[str, str, str, str]] = set()
    counts: dict[str, int] = defaultdict(int)
    for rel, note, i, link, dest in resolved_links(ws, counts):
        ctx, shown = anchor_context(note, i), shown_text(link)
        if (rel, dest, ctx, shown) in seen:
            counts["duplicate"] += 1
            continue
        seen.add((rel, dest, ctx, shown))
        section = "" if link.anchor.startswith("^") else link.anchor
        out.append(Anchor(rel, dest, section, shown, ctx))
    counts["kept"] = len(out)
    counts["target_notes"] = len({a.target for a in out})
    return out, dict(counts)


class AnchorSpace:
    """One embedded text per anchor, grouped by target note: the cosine of a query to a note's
    anchors is one matrix product per query."""

    def __init__(self, texts: dict[str, list[str]], embed: Callable[[list[str]], np.ndarray]
                 ) -> None:
        unique = sorted({t for ts in texts.values() for t in ts})
        t0 = time.perf_counter()
        self.matrix = embed(unique) if unique else np.zeros((0, 384), dtype=np.float32)
        self.embed_s = time.perf_counter() - t0
        self.texts = len(unique)
        at = {t: i for i, t in enumerate(unique)}
        self.groups = {note: np.array(sorted({at[t] for t in ts})) for note, ts in texts.items()}
        notes = sorted(self.groups)
        cent = np.vstack([self.matrix[self.groups[n]].mean(axis=0) for n in notes]) if notes \
            else np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        cent /= np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-9)
        self.centroid_notes, self.centroids = notes, cent

    def centroid_scores(self, qvec: np.ndarray) -> dict[str, float]:
        """Per note with anchors: the cosine to the mean of its anchor vectors (one vector per
        note, so a note linked from 30 places is not 30 chances of a close match)."""
        return dict(zip(self.centroid_notes, (self.centroids @ qvec).tolist(), strict=True))

    def scores(self, qvec: np.ndarray, top: int) -> dict[str, float]:
        """Per note with anchors: the mean of its ``top`` best anchor cosines (1: the max)."""
        sims = self.matrix @ qvec
        out = {}
        for note, idx in self.groups.items():
            s = np.sort(sims[idx])[::-1][:top]
            out[note] = float(s.mean())
        return out


def anchor_bm25(docs: dict[str, str]) -> Callable[[str], dict[str, float]]:
    """BM25 (k1 1.2, b 0.75, quality.py's tokens) of a query's content words over one anchor
    document per note: what an extra FTS field of anchor words would score."""
    index = BM25(docs)

    def score(query: str) -> dict[str, float]:
        typed = set(tokens(query))
        words = [t for t in typed if t not in STOPWORDS] or typed
        return {index.names[i]: s for i, s in index.scores(words).items()}

    return score


# -- the engine's pools ----------------------------------------------------------------------

@dataclasses.dataclass
class Pool:
    """One query's ranked pool reduced to notes: each note's best candidate's sort key."""

    query: str
    qvec: np.ndarray
    keys: dict[str, tuple[float, float, float, str]]
    """note -> (required share, fused, cosine, chunk id) of its best candidate."""
    extra: list[str]
    """Notes a deeper pool adds after the first pool's (when it held fewer than k)."""
    lo: float
    hi: float
    alpha: float
    relevant: set[str]
    engine_rank: int | None


def capture(ws: Workspace, queries: list[dict], k: int) -> list[Pool | None]:
    """Search each query once through the real searcher, keeping what ``ranking.rank`` ranked."""
    calls: list[tuple[list, dict]] = []
    real = ranking.rank

    def spy(cands, **kw):  # type: ignore[no-untyped-def]
        out = real(cands, **kw)
        calls.append((out, kw))
        return out

    params = ws.searcher.params
    pools: list[Pool | None] = []
    ranking.rank = spy  # the searcher calls ranking.rank through the module
    try:
        for q in queries:
            calls.clear()
            ws.searcher._cache.clear()
            relevant = set(q["relevant"])
            try:
                hits = ws.searcher.search(q["query"], k, mode="hybrid", per_file=1).hits
            except QueryError:
                hits = []
            eng = first_rank([h.path for h in hits], relevant)
            if not calls:
                if eng is not None:
                    raise SystemExit(f"no pool captured for a query the engine answered: "
                                     f"{q['query']!r}")
                pools.append(None)
                continue
            first, kw = calls[0]
            keys: dict[str, tuple[float, float, float, str]] = {}
            for c in first:
                keys.setdefault(c.chunk.path, (c.required_share, c.fused, c.cosine or 0.0,
                                               c.chunk.id))
            extra = [p for out, _ in calls[1:] for c in out for p in [c.chunk.path]
                     if p not in keys]
            scale = kw["scale"]
            text = kw["query"]
            pools.append(Pool(text, ws.embedder.embed_query(text), keys,
                              list(dict.fromkeys(extra)), scale.lo, scale.hi,
                              params.exact_alpha if ranking.looks_exact(text)
                              else params.convex_alpha, relevant, eng))
    finally:
        ranking.rank = real
    return pools


def scaled(raw: dict[str, float], notes: list[str]) -> dict[str, float]:
    """Min-max over the candidate notes that have a value (never over a span under the
    engine's 0.25 floor); a note without one gets 0."""
    vals = [raw[n] for n in notes if n in raw]
    if not vals:
        return {}
    lo, hi = min(vals), max(vals)
    span = max(hi - lo, SPAN_FLOOR)
    return {n: (raw[n] - lo) / span for n in notes if n in raw}


def ordered(pool: Pool, bonus: dict[str, float], entering: dict[str, tuple] | None = None
            ) -> list[str]:
    """The pool's notes (and any entering ones) by best fused score + bonus, as ranking.rank
    sorts, then the deeper pool's."""
    keys = dict(pool.keys) | (entering or {})
    order = sorted(keys, key=lambda n: (-keys[n][0], -(keys[n][1] + bonus.get(n, 0.0)),
                                        -keys[n][2], keys[n][3]))
    return order + [n for n in pool.extra if n not in keys]


# -- variants --------------------------------------------------------------------------------

class Signals:
    """What the variants need per vault: the anchor spaces, BM25 over anchors, chunk vectors."""

    def __init__(self, ws: Workspace, anchors: list[Anchor]) -> None:
        self.ws = ws
        ctx: dict[str, list[str]] = defaultdict(list)
        short: dict[str, list[str]] = defaultdict(list)
        for a in anchors:
            ctx[a.target].append(a.context)
            short[a.target].append(a.shown)
        embed = ws.embedder.embed_documents
        self.ctx = AnchorSpace(ctx, lambda t: np.asarray(embed(t)))
        self.short = AnchorSpace(short, lambda t: np.asarray(embed(t)))
        self.bm25_ctx = anchor_bm25({n: " ".join(ts) for n, ts in ctx.items()})
        self.bm25_short = anchor_bm25({n: " ".join(ts) for n, ts in short.items()})
        # every note's chunk vectors, for a note the anchor list brings into the pool
        self.paths = sorted(ws.manifest.all_paths())
        rows, owner, self.sizes = [], [], {}
        for i, p in enumerate(self.paths):
            recs = ws.manifest.chunks_for(p)
            self.sizes[p] = len(recs)
            vecs = ws.manifest.vectors(r.embed_hash for r in recs)
            for r in recs:
                if r.embed_hash in vecs:
                    rows.append(vecs[r.embed_hash])
                    owner.append(i)
        self.chunks = np.vstack(rows)
        self.owner = np.array(owner)
        self._memo: dict[tuple[str, str], dict[str, float]] = {}
        self.cost: dict[str, list[float]] = defaultdict(list)
        """Per signal kind, the seconds each query's computation took (the per-query cost)."""

    def raw(self, kind: str, pool: Pool) -> dict[str, float]:
        key = (kind, pool.query)
        if key not in self._memo:
            t0 = time.perf_counter()
            if kind.startswith("bm25"):
                fn = self.bm25_ctx if kind == "bm25-ctx" else self.bm25_short
                self._memo[key] = fn(pool.query)
            else:
                space = self.ctx if kind.startswith("ctx") else self.short
                self._memo[key] = (space.centroid_scores(pool.qvec) if kind.endswith("centroid")
                                   else space.scores(pool.qvec, 2 if kind.endswith("top2")
                                                     else 1))
            self.cost[kind].append(time.perf_counter() - t0)
        return self._memo[key]

    def entering(self, pool: Pool, raw: dict[str, float], m: int,
                 params: ranking.RankingParams) -> dict[str, tuple]:
        """The ``m`` notes of best anchor score outside the pool, scored by the engine's convex
        rule from their best chunk's cosine (no BM25: the keyword list did not reach them)."""
        outside = sorted((n for n in raw if n not in pool.keys), key=lambda n: -raw[n])[:m]
        if not outside:
            return {}
        sims = self.chunks @ pool.qvec
        named = self.ws.searcher.notes.named_notes(pool.query, outside, (),
                                                   params.name_rare_share)
        out = {}
        for n in outside:
            cos = float(sims[self.owner == self.paths.index(n)].max())
            dense = (cos - pool.lo) / (pool.hi - pool.lo) if pool.hi > pool.lo else 0.0
            fused = pool.alpha * dense - ranking.long_note_penalty(self.sizes[n], params)
            fused += params.title_boost if n in named else 0.0
            out[n] = (0.0, fused, cos, "~")
        return out


def variants() -> dict[str, Callable[[Signals, Pool, ranking.RankingParams], list[str]]]:
    """Name -> the re-ranked note order of a pool."""
    out: dict[str, Callable[[Signals, Pool, ranking.RankingParams], list[str]]] = {
        "main (replay)": lambda s, p, params: ordered(p, {})}

    def additive(kind: str, w: float, m: int = 0):  # type: ignore[no-untyped-def]
        def run(s: Signals, p: Pool, params: ranking.RankingParams) -> list[str]:
            raw = s.raw("ctx-centroid" if kind == "hybrid" else kind, p)
            enter = s.entering(p, raw, m, params) if m else {}
            notes = list(p.keys) + list(enter)
            if kind.startswith("bm25"):
                best = max((raw.get(n, 0.0) for n in notes), default=0.0) or 1.0
                bonus = {n: w * raw[n] / best for n in notes if n in raw}
            elif kind == "hybrid":  # both anchor fields, weighed as the engine weighs its lists
                dense = scaled(s.raw("ctx-centroid", p), notes)
                words = s.raw("bm25-ctx", p)
                best = max((words.get(n, 0.0) for n in notes), default=0.0) or 1.0
                bonus = {n: w * (p.alpha * dense.get(n, 0.0)
                                 + (1 - p.alpha) * words.get(n, 0.0) / best) for n in notes}
            else:
                bonus = {n: w * v for n, v in scaled(raw, notes).items()}
            return ordered(p, bonus, enter)
        return run

    def rrf(kind: str, w: float, depth: int = 60):  # type: ignore[no-untyped-def]
        def run(s: Signals, p: Pool, params: ranking.RankingParams) -> list[str]:
            engine = ordered(p, {})
            raw = s.raw(kind, p)
            alist = sorted(raw, key=lambda n: -raw[n])[:depth]
            score: dict[str, float] = defaultdict(float)
            for r, n in enumerate(engine, start=1):
                score[n] += 1.0 / (params.rrf_k + r)
            for r, n in enumerate(alist, start=1):
                score[n] += w / (params.rrf_k + r)
            return sorted(score, key=lambda n: (-score[n], n))
        return run

    kinds = ("ctx-max", "ctx-top2", "ctx-centroid", "short-max", "short-top2",
             "short-centroid", "bm25-ctx", "bm25-short")
    for kind in (*kinds, "hybrid"):
        for w in WEIGHTS:
            out[f"{kind} w={w}"] = additive(kind, w)
    for kind in kinds:  # for information: the pool ordered by the anchor signal alone
        out[f"{kind} alone (w=100)"] = additive(kind, 100.0)
    for m in (3, 10):
        for w in (0.1, 0.2, 0.3):
            out[f"ctx-max list+convex m={m} w={w}"] = additive("ctx-max", w, m)
    for w in (0.25, 0.5, 1.0):
        out[f"ctx-max list+rrf w={w}"] = rrf("ctx-max", w)
    return out


def score(sig: Signals, pools: list[Pool | None], fn: Callable, params: ranking.RankingParams,
          k: int) -> tuple[list[int | None], float]:
    """Ranks of the first right note under one variant, and the mean ms per query."""
    ranks: list[int | None] = []
    t0 = time.perf_counter()
    for p in pools:
        if p is None:
            ranks.append(None)
            continue
        r = first_rank(fn(sig, p, params)[:k], p.relevant)
        ranks.append(r)
    return ranks, (time.perf_counter() - t0) * 1000 / max(1, len(pools))


def paired(a: list[int | None], b: list[int | None]) -> dict[str, int]:
    inv = [(1.0 / x if x else 0.0, 1.0 / y if y else 0.0) for x, y in zip(a, b, strict=True)]
    return {"better": sum(y > x for x, y in inv), "worse": sum(y < x for x, y in inv)}


def passes(row: dict, base: dict, vault_row: dict, vault_base: dict) -> bool:
    """The brief's bar for the held-out half: +3 queries at top-1 or top-3 on tune without a
    loss at the other, and no loss on the examples vault."""
    n = base["n"]
    d1 = round((row["top1"] - base["top1"]) * n)
    d3 = round((row["top3"] - base["top3"]) * n)
    gain = (d1 >= 3 and d3 >= 0) or (d3 >= 3 and d1 >= 0)
    keys = ("top1", "top3", "top5", f"mrr{k_of(base)}")
    return gain and all(vault_row[c] >= vault_base[c] - 1e-9 for c in keys)


def k_of(m: dict) -> int:
    return int(next(c for c in m if c.startswith("mrr"))[3:])


# -- main ------------------------------------------------------------------------------------

def open_set(name: str, index_root: Path) -> tuple[Workspace, list[dict]]:
    vault, queries_file = SETS[name]
    settings = Settings(per_file=1)
    embedder = create_embedder(settings)
    embedder._threads = 1  # type: ignore[attr-defined]  # a shared 2-core machine
    ws = Workspace(vault.resolve(), settings, embedder, index_dir=index_root / name)
    ws.index()
    queries = [json.loads(line) for line in queries_file.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    return ws, queries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-dir", type=Path, default=Path("/tmp/anchor-idx"))
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--heldout", action="append", default=[],
                    help="score this variant on the held-out half (a variant that passed tune)")
    ap.add_argument("--changed", action="append", default=[],
                    help="list the tune and vault queries this variant moves")
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "anchor-experiment.json")
    ap.add_argument("--sets", default="obsidian-help,vault",
                    help="labelled sets to score (their tune half, or all of a set without "
                         "one; nushell was added for issue 57)")
    args = ap.parse_args(argv)
    os.environ.setdefault("MDSEARCH_CACHE_DIR", str(args.index_dir / "cache"))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    k = args.k
    table = variants()
    for v in args.heldout:
        if v not in table:
            ap.error(f"--heldout {v!r}: not a variant; one of {', '.join(table)}")
    result: dict[str, object] = {"k": k, "per_file": 1, "mode": "hybrid",
                                 "queries": "as typed", "sets": {}, "vaults": {}}
    rows_by_set: dict[str, dict[str, dict]] = {}
    plan = {"obsidian-help": ["tune"] + (["heldout"] if args.heldout else []),
            "nushell": ["tune"], "vault": ["all"]}
    for name, splits in ((n, plan[n]) for n in args.sets.split(",")):
        ws, queries = open_set(name, args.index_dir)
        params = ws.searcher.params
        anchors, counts = collect(ws)
        _, ctx_counts = derive(ws, 1)
        t0 = time.perf_counter()
        sig = Signals(ws, anchors)
        build_s = time.perf_counter() - t0
        files, chunks = ws.manifest.counts()
        info = {"notes": files, "chunks": chunks, "anchors": counts,
                "link_contexts_derive_one_fold": ctx_counts,
                "embedded_context_texts": sig.ctx.texts,
                "embedded_short_texts": sig.short.texts,
                "embed_contexts_s": round(sig.ctx.embed_s, 2),
                "embed_short_s": round(sig.short.embed_s, 2),
                "signals_build_s": round(build_s, 2), "onnx_threads": 1}
        print(f"{name}: {files} notes, {chunks} chunks; anchors {counts}; embedded "
              f"{sig.ctx.texts} contexts in {sig.ctx.embed_s:.1f} s and {sig.short.texts} "
              f"short texts in {sig.short.embed_s:.1f} s (1 thread)", flush=True)
        result["vaults"][name] = info  # type: ignore[index]
        for split in splits:
            qs = queries if split == "all" else [q for q in queries if q.get("split") == split]
            t0 = time.perf_counter()
            pools = capture(ws, qs, k)
            cap_ms = (time.perf_counter() - t0) * 1000 / len(qs)
            engine = [p.engine_rank if p else None for p in pools]
            names = list(table) if split != "heldout" else ["main (replay)", *args.heldout]
            if split != "heldout":  # recall: what a third list could bring in at best
                missing = [p for p in pools if p is not None and not p.relevant & set(p.keys)]
                reach = {m: sum(bool(p.relevant & set(sorted(
                    (n for n in sig.raw("ctx-max", p) if n not in p.keys),
                    key=lambda n, p=p: -sig.raw("ctx-max", p)[n])[:m])) for p in missing)
                    for m in (3, 10)}
                info[f"{split}_relevant_outside_pool"] = {"queries": len(missing), "in_anchor_"
                                                          "list_top3": reach[3],
                                                          "in_anchor_list_top10": reach[10]}
                print(f"  {name}/{split}: right note outside the engine's pool in "
                      f"{len(missing)} queries; the anchor list's first 3 / 10 outside it hold "
                      f"it in {reach[3]} / {reach[10]}", flush=True)
            rows: dict[str, dict] = {}
            base: list[int | None] = []
            for v in names:
                ranks, ms = score(sig, pools, table[v], params, k)
                if v == "main (replay)":
                    base = ranks
                    agree = sum(a == b for a, b in zip(ranks, engine, strict=True))
                    rows["engine"] = metrics(engine, k) | {"search_ms": round(cap_ms, 1)}
                    print(f"  {name}/{split}: replay agrees with the engine on {agree} of "
                          f"{len(qs)} queries", flush=True)
                    rows["engine"]["replay_agreement"] = f"{agree}/{len(qs)}"
                rows[v] = metrics(ranks, k) | paired(base, ranks) | {"rerank_ms": round(ms, 3)}
                if v in args.changed and split != "heldout":
                    for q, a, b in zip(qs, base, ranks, strict=True):
                        if a != b:
                            print(f"      {a} -> {b}  {q['query'][:90]}")
                m = rows[v]
                print(f"  {name}/{split:<7} {v:<36} top1 {m['top1']:.3f} top3 {m['top3']:.3f} "
                      f"top5 {m['top5']:.3f} mrr {m[f'mrr{k}']:.3f}  +{m['better']} "
                      f"-{m['worse']}  {ms:.2f} ms", flush=True)
            rows_by_set[f"{name}/{split}"] = rows
        info["signal_ms_per_query"] = {kind: round(1000 * sum(v) / len(v), 3)
                                       for kind, v in sig.cost.items() if v}
        ws.close()
    tune, vault = rows_by_set.get("obsidian-help/tune"), rows_by_set.get("vault/all")
    passed = [v for v in table if tune and vault and v != "main (replay)" and "alone" not in v
              and passes(tune[v], tune["main (replay)"], vault[v], vault["main (replay)"])]
    print(f"variants that pass the bar for the held-out half: {passed or 'none'}")
    result["sets"] = rows_by_set
    result["passed_tune_and_vault"] = passed
    result["heldout_run_for"] = args.heldout
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
