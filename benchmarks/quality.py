"""Retrieval quality of every search mode on a labelled query set, with a plain BM25 baseline.

    python benchmarks/quality.py VAULT QUERIES.jsonl [--out FILE] [--modes hybrid,semantic,keyword]
    python benchmarks/quality.py vault|obsidian-help|tldr|nushell [...]    a labelled set by name
                                 [--index-dir DIR] [--cleaned] [--param NAME=VALUE ...]
                                 [--split tune|heldout]

QUERIES has one JSON object per line: ``{"query": ..., "relevant": [paths relative to VAULT]}``
and optionally ``"kind"`` and ``"split"`` (figures are also given per kind and per split).
``--split`` runs only the queries of one split: tune on ``tune``, and only report ``heldout``
(benchmarks/queries/obsidian-help.README.md). Every query runs through
the workspace's searcher with k=10 and per_file=1, so ranks are ranks of distinct notes. Per mode:
top-1/3/5/10 accuracy (a relevant note within the first k), MRR@10 and nDCG@10 (binary
relevance). The baseline is Okapi BM25 (k1=1.2, b=0.75) over whole files, lowercase
unicode61-like tokens, no stemming, no stopwords, computed in the same run.

Queries are scored exactly as typed: quotes are phrases (a requirement where some section holds
them, else a preference), ``word:value`` is text unless ``word`` is a filter's name. A query the
parser rejects counts as a miss and is listed. ``--cleaned`` also scores a cleaned variant beside
(double quotes dropped, ``word:value`` without its colon; what the figures before December 2026
measured), labelled as such. Pass ``--index-dir`` to keep the index between runs (only changed
notes are embedded again).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.index import manifest_schema  # noqa: E402
from mdsearch_ls.engine.search.ranking import RankingParams  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

K = 10
# The labelled sets, by name (``quality.py obsidian-help``): the folder and its queries, relative
# to the repository (the corpora are in ../shared beside it).
SETS = {
    "vault": (ROOT / "examples" / "vault",
              ROOT / "benchmarks" / "queries" / "examples-vault.jsonl"),
    "obsidian-help": (ROOT.parent / "shared" / "corpora" / "obsidian-help",
                      ROOT / "benchmarks" / "queries" / "obsidian-help.jsonl"),
    "tldr": (ROOT.parent / "shared" / "corpora" / "tldr",
             ROOT.parent / "shared" / "eval" / "nl2bash-tldr.jsonl"),
    "nushell": (ROOT.parent / "shared" / "corpora" / "nushell",
                ROOT / "benchmarks" / "queries" / "nushell.jsonl"),
}
CUTS = (1, 3, 5, 10)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_FILTERISH = re.compile(r'([A-Za-z]):(?=\S)')


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def sanitize(query: str) -> str:
    """The cleaned variant of a query: no phrases, no ``word:value`` (for the figure beside the
    as-typed one, and for latency benchmarks that want plain words)."""
    return _FILTERISH.sub(r"\1 ", query.replace('"', " "))


class BM25:
    """Okapi BM25 over whole documents (k1=1.2, b=0.75), idf = ln(1 + (N-n+0.5)/(n+0.5))."""

    def __init__(self, docs: dict[str, str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.names = list(docs)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths: list[int] = []
        for i, name in enumerate(self.names):
            toks = tokens(docs[name])
            self.lengths.append(len(toks))
            for term, tf in Counter(toks).items():
                self.postings[term].append((i, tf))
        self.n = len(self.names)
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 0.0

    def scores(self, terms: Iterable[str]) -> dict[int, float]:
        """Each matching document's BM25 for ``terms`` (tokenised, each once), by position."""
        scores: dict[int, float] = defaultdict(float)
        for term in terms:
            plist = self.postings.get(term)
            if not plist:
                continue
            idf = math.log(1.0 + (self.n - len(plist) + 0.5) / (len(plist) + 0.5))
            for i, tf in plist:
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[i] / self.avgdl)
                scores[i] += idf * tf * (self.k1 + 1.0) / (tf + norm)
        return scores

    def search(self, query: str, k: int = K) -> list[str]:
        scores = self.scores(set(tokens(query)))
        best = sorted(scores.items(), key=lambda kv: (-kv[1], self.names[kv[0]]))[:k]
        return [self.names[i] for i, _ in best]


def evaluate(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    """Metrics of one ranked list of distinct notes against the relevant set."""
    ranked = list(dict.fromkeys(ranked))[:K]
    first = next((i for i, p in enumerate(ranked, start=1) if p in relevant), None)
    out = {f"top{c}": float(first is not None and first <= c) for c in CUTS}
    out["mrr10"] = 1.0 / first if first else 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, p in enumerate(ranked, start=1) if p in relevant)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), K) + 1))
    out["ndcg10"] = dcg / idcg if idcg else 0.0
    return out


def mean_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    keys = rows[0].keys()
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys}


def ranking_params(items: list[str], fusion: str) -> tuple[RankingParams, dict[str, object]]:
    """``convex_alpha=0.6`` -> RankingParams with that value (the rest the engine defaults)."""
    import ast

    given: dict[str, object] = {"fusion": fusion}
    for item in items:
        name, _, value = item.partition("=")
        if name not in RankingParams.names():
            raise SystemExit(f"--param {name}: not a ranking parameter; one of "
                             + ", ".join(RankingParams.names()))
        try:
            given[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            given[name] = value  # a bare word such as rrf
    try:
        params = RankingParams(**given)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"--param: {exc}") from None
    return params, {k: v for k, v in given.items() if getattr(RankingParams(), k) != v}


@dataclasses.dataclass
class Scores:
    """Per-query metrics of one pass over the queries, per mode and for the BM25 baseline."""

    rows: dict[str, list[dict[str, float]]]
    times: dict[str, list[float]]
    with_notes: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)
    errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    misses: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> dict[str, dict[str, float]]:
        return {m: mean_metrics(rows) for m, rows in self.rows.items()}

    def by_kind(self, kinds: list[str], modes: list[str]) -> dict[str, dict[str, dict]]:
        """Metrics per value of a query field (``kinds``: that field per query, "" for none)."""
        out: dict[str, dict[str, dict]] = {}
        for kind in sorted({k for k in kinds if k}):
            idx = [i for i, k in enumerate(kinds) if k == kind]
            out[kind] = {m: {"n": len(idx), **mean_metrics([rows[i] for i in idx])}
                         for m, rows in self.rows.items()}
        return out

    def latency(self) -> dict[str, dict[str, float]]:
        return {m: {"p50_ms": round(statistics.median(v) * 1000, 2),
                    "p95_ms": round(sorted(v)[int(0.95 * (len(v) - 1))] * 1000, 2)}
                for m, v in self.times.items() if v}

    def note_kinds(self) -> dict[str, int]:
        """How many notes of each kind the hybrid pass produced (the text up to ';' or '?')."""
        kinds: Counter[str] = Counter()
        for n in self.notes:
            kinds[re.sub(r'"[^"]*"|`[^`]*`', "X", n).split(";")[0]] += 1
        return dict(kinds)


def score(ws: Workspace, bm25: BM25, queries: list[dict], modes: list[str],
          transform: Callable[[str], str], want_misses: int) -> Scores:
    """Run every query (as ``transform`` makes it) in every mode; a refused query is a miss."""
    from mdsearch_ls.engine.search.query import QueryError

    out = Scores({m: [] for m in [*modes, "bm25"]}, {m: [] for m in modes})
    for q in queries:
        relevant = set(q["relevant"])
        text = transform(q["query"])
        noted = False
        for mode in modes:
            ws.searcher._cache.clear()  # every mode pays for its own query embedding
            ws.embedder._cache.clear()  # type: ignore[attr-defined]
            ts = time.perf_counter()
            try:
                result = ws.searcher.search(text, K, mode=mode)
            except QueryError as exc:
                if mode == modes[0]:
                    out.errors.append((text, str(exc)))
                out.rows[mode].append(evaluate([], relevant))
                continue
            out.times[mode].append(time.perf_counter() - ts)
            if result.notes and mode == "hybrid":
                out.notes.extend(result.notes)
            noted = noted or bool(result.notes)
            ranked = [h.path for h in result.hits]
            m = evaluate(ranked, relevant)
            out.rows[mode].append(m)
            if mode == "hybrid" and not m["top5"] and len(out.misses) < want_misses:
                out.misses.append(f"  {text!r} want {sorted(relevant)[:2]} got {ranked[:3]}")
        out.with_notes += noted
        out.rows["bm25"].append(evaluate(bm25.search(text), relevant))
    return out


def set_fts_tokenizer(ws: Workspace, tokenizer: str | None) -> str:
    """Give the index's FTS table ``tokenizer`` (None: the engine's), refilled from the notes."""
    conn = ws.manifest._conn()
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    current = re.search(r"tokenize\s*=\s*'([^']*)'", row[0]).group(1)
    engine = re.search(r"tokenize\s*=\s*'([^']*)'", manifest_schema._SCHEMA).group(1)
    want = tokenizer or engine
    if want == current:
        return current
    from mdsearch_ls.engine.notes import chunking
    from mdsearch_ls.engine.notes import files as sources
    from mdsearch_ls.engine.notes.decoding import read_source

    with conn:
        conn.execute("DROP TABLE chunks_fts")
        conn.execute(
            f"CREATE VIRTUAL TABLE chunks_fts USING fts5(title, body, tokenize = '{want}')"
        )
        for rel in ws.manifest.all_paths():
            read = read_source(ws.root / rel, rel,
                                       max_file_bytes=ws.settings.max_file_bytes)
            if read.text is None:
                continue
            note = chunking.parse_note(
                read.text, fallback_title=Path(rel).stem, path=rel,
                chunk_size=ws.settings.chunk_size, chunk_overlap=ws.settings.chunk_overlap,
            )
            src = sources.SourceFile(ws.root / rel, rel, 0, 0.0)
            pending = ws.indexer._pending(src, note, read.content_hash, None)
            rowids = dict(conn.execute(
                "SELECT ordinal, rowid FROM chunks WHERE path = ?", (rel,)).fetchall())
            conn.executemany(
                "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                [(rowids[rec.ordinal], t, b)
                 for rec, (t, b) in zip(pending.records, pending.keyword_rows, strict=True)
                 if rec.ordinal in rowids],
            )
    ws.manifest._bump(conn)
    print(f"FTS tokenizer: {current!r} -> {want!r}", file=sys.stderr)
    return want


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path,
                    help=f"the folder, or a labelled set's name ({', '.join(SETS)})")
    ap.add_argument("queries", type=Path, nargs="?",
                    help="the labelled queries (a set's own when VAULT names a set)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--modes", default="hybrid,semantic,keyword")
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("--cleaned", action="store_true",
                    help="also score the cleaned queries (no quotes, no word:value), beside")
    ap.add_argument("--label", default="", help="free text stored in the JSON (what was tried)")
    ap.add_argument("--fts-tokenizer", default=None,
                    help="rebuild the index's FTS table with this tokenizer (an experiment)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a ranking parameter for this run (engine.ranking.RankingParams), "
                         "e.g. convex_alpha=0.6; repeatable")
    ap.add_argument("--fusion", default=Settings.fusion, help="hybrid fusion: convex or rrf")
    ap.add_argument("--chunk-size", type=int, default=Settings.chunk_size)
    ap.add_argument("--chunk-overlap", type=int, default=Settings.chunk_overlap)
    ap.add_argument("--split", choices=("tune", "heldout"),
                    help="only the queries of this split (tune on 'tune'; 'heldout' is reported, "
                         "never tuned on)")
    ap.add_argument("--misses", type=int, default=0,
                    help="print up to N queries hybrid got wrong at top-5")
    args = ap.parse_args(argv)
    if args.queries is None:
        if str(args.vault) not in SETS:
            ap.error(f"QUERIES is needed unless VAULT is a set's name ({', '.join(SETS)})")
        args.vault, args.queries = SETS[str(args.vault)]

    params, overrides = ranking_params(args.param, args.fusion)
    vault = args.vault.resolve()
    out = args.out or ROOT / "benchmarks" / "results" / f"quality-{vault.name}.json"
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    queries = [json.loads(line) for line in args.queries.read_text().splitlines()
               if line.strip()]
    if args.split:
        queries = [q for q in queries if q.get("split") == args.split]
        if not queries:
            raise SystemExit(f"--split {args.split}: no query of {args.queries} has that split")
    tmp = None
    if args.index_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mdsearch-quality-")
        os.environ.setdefault("MDSEARCH_CACHE_DIR", tmp.name)
        index_dir = Path(tmp.name) / "index"
    else:
        index_dir = args.index_dir

    settings = Settings(per_file=1, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap,
                        fusion=params.fusion)
    ws = Workspace(vault, settings, create_embedder(settings),
                   index_dir=index_dir)
    ws.searcher.params = params
    t0 = time.perf_counter()
    report = ws.index()
    print(f"index: {report.summary()} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
    tokenizer = set_fts_tokenizer(ws, args.fts_tokenizer)

    docs = {}
    for rel in ws.manifest.all_paths():
        try:
            docs[rel] = (vault / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    bm25 = BM25(docs)
    ws.searcher.search("warm up", K, mode="hybrid")

    typed = score(ws, bm25, queries, modes, lambda q: q, args.misses)
    cleaned = score(ws, bm25, queries, modes, sanitize, 0) if args.cleaned else None
    kinds = [str(q.get("kind", "")) for q in queries]
    summary = typed.summary()
    by_kind = typed.by_kind(kinds, modes)
    by_split = typed.by_kind([str(q.get("split", "")) for q in queries], modes)

    cols = ["top1", "top3", "top5", "top10", "mrr10", "ndcg10"]
    print(f"\n{vault.name}: {len(queries)} queries as typed ({typed.with_notes} with a note, "
          f"{len(typed.errors)} refused), {report.files_total} notes, "
          f"{ws.manifest.counts()[1]} chunks")
    print(f"{'mode':<10}" + "".join(f"{c:>8}" for c in cols) + f"{'p50 ms':>9}")
    lat = typed.latency()
    for m, s in summary.items():
        p50 = lat.get(m, {}).get("p50_ms", "")
        print(f"{m:<10}" + "".join(f"{s[c]:>8.3f}" for c in cols) + f"{p50:>9}")
    for field, groups in (("kind", by_kind), ("split", by_split)):
        for kind, table in groups.items():
            print(f"  {field}={kind} (n={table[modes[0] if modes else 'bm25']['n']}): "
                  + ", ".join(f"{m} top1 {s['top1']:.3f} top3 {s['top3']:.3f} "
                              f"mrr {s['mrr10']:.3f}" for m, s in table.items()))
    if cleaned is not None:
        changed = sum(sanitize(q["query"]) != q["query"] for q in queries)
        print(f"cleaned ({changed} queries changed by cleaning; for comparison only):")
        for m, s in cleaned.summary().items():
            print(f"{m:<10}" + "".join(f"{s[c]:>8.3f}" for c in cols))
    for text, error in typed.errors:
        print(f"  refused: {text!r}: {error}")
    if typed.misses:
        print("hybrid misses at top-5:")
        print("\n".join(typed.misses))

    result = {
        "vault": str(vault),
        "queries_file": str(args.queries),
        "queries": len(queries),
        "split": args.split,
        "as_typed": True,
        "queries_with_notes": typed.with_notes,
        "query_notes_by_kind": typed.note_kinds(),
        "refused_queries": [{"query": t, "error": e} for t, e in typed.errors],
        "notes": report.files_total,
        "chunks": ws.manifest.counts()[1],
        "k": K,
        "per_file": 1,
        "label": args.label,
        "fts_tokenizer": tokenizer,
        "overrides": overrides,
        "ranking": dataclasses.asdict(params),
        "metrics": summary,
        "by_kind": by_kind,
        "by_split": by_split,
        "latency": lat,
    }
    if cleaned is not None:
        result["cleaned"] = {
            "note": "queries with double quotes dropped and word:value without its colon",
            "changed_queries": sum(sanitize(q["query"]) != q["query"] for q in queries),
            "metrics": cleaned.summary(),
            "latency": cleaned.latency(),
        }
    ws.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
