"""Labels from a vault's own links: each link is a query (the sentence around it, the link
removed) whose answer is the note (and section) it links to; a ranking is scored on them.

    python benchmarks/link_contexts.py VAULT [--labels QUERIES.jsonl] [--index-dir DIR] [-k 10]
                                       [--folds 2] [--fold tune|test] [--param NAME=VALUE ...]
                                       [--dump FILE.jsonl] [--out FILE] [--label TEXT]
    python benchmarks/link_contexts.py vault|obsidian-help [...]   a labelled set by name

Why: the labelled sets are small (the obsidian-help tune half has 93 queries, so one query is
a point of top-1), and ranking changes chosen on them did not hold out of sample. Every
wikilink and markdown link is a person saying "this sentence is about that note": a vault
with a thousand links is a tuning set ten times larger, and every user's vault has one.

How a link becomes a query (the engine's own link parser and resolver, so a link counts
exactly when the editor would follow it): the link is read by ``links.read_links`` (nothing
in code, comments or front matter), resolved by the index's ``Resolver``; embeds, links to
the note itself and links to no indexed note are left out. The query is the sentence holding
the link, with the link removed and every other link replaced by the words it shows, markup
dropped; when that leaves fewer than ``--min-words`` content words (stopwords aside) the
whole paragraph (list item, table row) is taken, and when it still does the link is left out
(a list of bare links says nothing). Queries longer than ``--max-words`` keep the words
nearest the link. Duplicates (same query, same answer) count once.

The answer is the linked note; for a link with a ``#heading`` also that section (reported
apart: whether the note's hit is that section). The query's own note is excluded from the
search (a file filter of every other note): it holds the query verbatim.

Folds: notes are split into ``--folds`` folds by a hash of their path; a link belongs to fold
f only when its source and target are both in f (links between folds are left out), so a
rule tuned on the ``tune`` fold has seen neither end of a ``test`` link. Fold 0 is ``tune``,
fold 1 ``test``, any others ``fold2``... Tune on ``tune``, report ``test`` and the labelled
held-out queries.

Beside the link contexts the labelled queries of the vault (``--labels``, or the set's own
when VAULT names one) are scored in the same process with the same ranking and k, per
``split``. Metrics: top-1/3/5 and MRR@k over distinct notes (``per_file`` 1), hybrid mode
unless ``--mode``. Results: ``results/linkctx-<vault>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import ranking_params  # noqa: E402  (benchmarks/ is on sys.path as a script)

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import create_embedder  # noqa: E402
from mdsearch_ls.engine.notes import links as links_mod  # noqa: E402
from mdsearch_ls.engine.search.keyword import STOPWORDS  # noqa: E402
from mdsearch_ls.engine.search.query import Filters, QueryError  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402
from mdsearch_ls.engine.writing.vault_view import VaultView  # noqa: E402


def shared_dir() -> Path:
    """The project's ../shared: beside the repository, or beside the main checkout (worktrees)."""
    for cand in (ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if cand.is_dir():
            return cand
    return ROOT.parent / "shared"


SETS = {
    "vault": (ROOT / "examples" / "vault",
              ROOT / "benchmarks" / "queries" / "examples-vault.jsonl"),
    "obsidian-help": (shared_dir() / "corpora" / "obsidian-help",
                      ROOT / "benchmarks" / "queries" / "obsidian-help.jsonl"),
}
CUTS = (1, 3, 5)
MARK = "\x00"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[*_`]*[A-Z0-9\x00])")
_LINE_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>\s*)*(?:[-*+]\s+(?:\[.\]\s+)?|\d+[.)]\s+)?")
_CALLOUT = re.compile(r"\[![\w-]+\][+-]?")
_INLINE_MARKUP = re.compile(r"\*\*|__|==|~~|`|<[^>\n]+>|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE = re.compile(r"\s+([.,;:!?)])(?=\s|$)")
_EMPTY_PARENS = re.compile(r"\(\s*\)\s?")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclasses.dataclass(frozen=True)
class LinkContext:
    """One link as a labelled query."""

    query: str
    source: str
    target: str
    anchor: str
    """The heading the link names ('' for a link to the note, or to a ``^block``)."""
    line: int
    fold: int


def fold_of(path: str, folds: int) -> int:
    """A stable fold for a note (the same on every machine and run)."""
    return int(hashlib.sha1(path.encode("utf-8")).hexdigest(), 16) % folds


def fold_name(fold: int) -> str:
    return {0: "tune", 1: "test"}.get(fold, f"fold{fold}")


def shown_text(link: links_mod.Link) -> str:
    """The words a link shows when rendered (its alias, else the note and heading it names)."""
    if link.text:
        return link.text
    name = links_mod.strip_suffix(link.target).rsplit("/", 1)[-1]
    anchor = link.anchor.lstrip("^") if not link.anchor.startswith("^") else ""
    return " ".join(p for p in (name, anchor) if p)


def block_range(note: links_mod.NoteText, line: int) -> tuple[int, int]:
    """Offsets of the smallest block holding ``line``: a paragraph, list item, heading; a table
    row alone (the block parser reads a table as one paragraph)."""
    doc = note.doc
    if doc.lines[line].lstrip().startswith("|"):
        a, b = line, line + 1
    else:
        best: tuple[int, int] | None = None
        for tok in doc.tokens:
            if tok.map and tok.map[0] <= line < tok.map[1]:
                span = (tok.map[0], tok.map[1])
                if best is None or span[1] - span[0] < best[1] - best[0]:
                    best = span
        a, b = best or (line, line + 1)
    starts = doc.starts
    end = starts[b] if b < len(starts) else len(doc.text)
    return starts[a], end


def clean(text: str) -> str:
    """Prose as a person reads it: block markers, callout tags, emphasis, html, pipes dropped."""
    lines = [_LINE_MARKUP.sub("", ln) for ln in text.split("\n")]
    out = _CALLOUT.sub(" ", " ".join(lines)).replace("|", " ")
    out = _INLINE_MARKUP.sub("", out)
    return _SPACES.sub(" ", out).strip()


def words_of(text: str) -> int:
    """Content words (stopwords aside): "You can learn more about this in" says nothing."""
    return sum(w.lower() not in STOPWORDS for w in _WORD.findall(text.replace(MARK, " ")))


def link_block(note: links_mod.NoteText, index: int, shown: str = "") -> str:
    """The cleaned block holding link ``index``: the link as :data:`MARK` (followed by
    ``shown``), every other link as the words it shows."""
    link = note.links[index][0]
    text = note.doc.text
    start, end = block_range(note, link.line)
    pieces: list[str] = []
    pos = start
    for j, (other, oa, ob) in enumerate(note.links):
        if ob <= start or oa >= end or oa < pos:
            continue
        pieces.append(text[pos:oa])
        pieces.append(f" {MARK} {shown} " if j == index else shown_text(other))
        pos = ob
    pieces.append(text[pos:end])
    return clean("".join(pieces))


def marked_sentence(block: str) -> str:
    """The sentence of ``block`` holding :data:`MARK` (the block when none does)."""
    return next((s for s in _SENTENCE_END.split(block) if MARK in s), block)


def window(words: list[str], max_words: int) -> list[str]:
    """At most ``max_words`` of ``words``, centred on the one holding :data:`MARK`."""
    if len(words) <= max_words:
        return words
    at = next(i for i, w in enumerate(words) if MARK in w)
    lo = max(0, min(at - max_words // 2, len(words) - max_words))
    return words[lo: lo + max_words]


def context_of(note: links_mod.NoteText, index: int, min_words: int, max_words: int
               ) -> str | None:
    """The query a link makes: its sentence (else its block) without it, other links as the
    words they show; None when too few words are left."""
    block = link_block(note, index)
    chosen = marked_sentence(block)
    if words_of(chosen) < min_words:
        chosen = block
    if words_of(chosen) < min_words:
        return None
    words = window(chosen.split(), max_words)
    query = _SPACES.sub(" ", " ".join(words).replace(MARK, " "))
    query = _EMPTY_PARENS.sub("", _SPACE_BEFORE.sub(r"\1", query)).strip(" ,;:-\u2013\u2014")
    return query if words_of(query) >= min_words else None


def resolved_links(ws: Workspace, counts: dict[str, int]
                   ) -> Iterator[tuple[str, links_mod.NoteText, int, links_mod.Link, str]]:
    """``(source, its scanned text, the link's index, the link, target)`` for every link of the
    indexed notes to another indexed note; what is left out is counted in ``counts`` (links,
    embed, unresolved, same_note)."""
    view = VaultView(ws.manifest, ws.manifest.generation)
    for rel in sorted(ws.manifest.all_paths()):
        try:
            text = (ws.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        note = links_mod.scan(text)
        for i, (link, _, _) in enumerate(note.links):
            counts["links"] += 1
            if link.kind == "embed":
                counts["embed"] += 1
                continue
            dest = view.resolver.resolve(link, rel)
            if dest is None or dest == rel:
                counts["unresolved" if dest is None else "same_note"] += 1
                continue
            yield rel, note, i, link, dest


def derive(ws: Workspace, folds: int, min_words: int = 4, max_words: int = 40
           ) -> tuple[list[LinkContext], dict[str, int]]:
    """Every usable link of the indexed notes as a labelled query, and counts of what was left
    out and why."""
    seen: set[tuple[str, str]] = set()
    out: list[LinkContext] = []
    counts: dict[str, int] = defaultdict(int)
    for rel, note, i, link, dest in resolved_links(ws, counts):
        fs, ft = fold_of(rel, folds), fold_of(dest, folds)
        if fs != ft:
            counts["across_folds"] += 1
            continue
        query = context_of(note, i, min_words, max_words)
        if query is None:
            counts["too_few_words"] += 1
            continue
        if (query, dest) in seen:
            counts["duplicate"] += 1
            continue
        seen.add((query, dest))
        anchor = "" if link.anchor.startswith("^") else link.anchor
        out.append(LinkContext(query, rel, dest, anchor, link.line, fs))
    counts["kept"] = len(out)
    return out, dict(counts)


def metrics(first: list[int | None], k: int) -> dict[str, float]:
    """top-1/3/5 and MRR@k from the rank of each query's first right note (None: not in k)."""
    n = len(first) or 1
    out = {f"top{c}": round(sum(r is not None and r <= c for r in first) / n, 4)
           for c in CUTS if c <= k}
    out[f"mrr{k}"] = round(sum(1.0 / r for r in first if r) / n, 4)
    out["n"] = len(first)
    return out


def first_rank(paths: list[str], relevant: set[str]) -> int | None:
    return next((i for i, p in enumerate(paths, start=1) if p in relevant), None)


def run_contexts(ws: Workspace, contexts: list[LinkContext], k: int, mode: str
                 ) -> dict[str, object]:
    """Score the link contexts per fold: note rank, and for links to a heading whether the
    note's hit is that section."""
    every = sorted(ws.manifest.all_paths())
    ranks: dict[int, list[int | None]] = defaultdict(list)
    sections: dict[int, list[bool]] = defaultdict(list)
    times: list[float] = []
    for c in contexts:
        others = Filters(paths=tuple(p for p in every if p != c.source))
        t0 = time.perf_counter()
        try:
            hits = ws.searcher.search(c.query, k, mode=mode, filters=others, per_file=1).hits
        except QueryError:
            hits = []
        times.append(time.perf_counter() - t0)
        paths = [h.path for h in hits]
        r = first_rank(paths, {c.target})
        ranks[c.fold].append(r)
        if c.anchor:
            hit = hits[r - 1] if r else None
            sections[c.fold].append(hit is not None and links_mod.find_heading(
                [(hit.title, 0)], c.anchor) is not None)
    out: dict[str, object] = {}
    for fold in sorted(ranks):
        m = metrics(ranks[fold], k)
        sec = sections[fold]
        m["heading_links"] = len(sec)
        m["section_right_when_note_found"] = round(sum(sec) / len(sec), 4) if sec else None
        out[fold_name(fold)] = m
    times.sort()
    out["p50_ms"] = round(times[len(times) // 2] * 1000, 2) if times else None
    return out


def run_labels(ws: Workspace, queries: list[dict], k: int, mode: str) -> dict[str, object]:
    """The labelled queries, as typed, per split and all together."""
    by_split: dict[str, list[int | None]] = defaultdict(list)
    for q in queries:
        try:
            hits = ws.searcher.search(q["query"], k, mode=mode, per_file=1).hits
        except QueryError:
            hits = []
        r = first_rank([h.path for h in hits], set(q["relevant"]))
        by_split[str(q.get("split") or "all")].append(r)
        if q.get("split"):
            by_split["all"].append(r)
    return {s: metrics(v, k) for s, v in sorted(by_split.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path, help=f"the folder, or a set's name ({', '.join(SETS)})")
    ap.add_argument("--labels", type=Path, help="labelled queries to score beside (JSON Lines)")
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("-k", type=int, default=10, help="hits asked for (default 10)")
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--fold", help="score only this fold (tune, test, fold2...)")
    ap.add_argument("--min-words", type=int, default=4)
    ap.add_argument("--max-words", type=int, default=40)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a ranking parameter for this run (engine RankingParams); repeatable")
    ap.add_argument("--dump", type=Path, help="write the derived link contexts (JSON Lines)")
    ap.add_argument("--derive-only", action="store_true",
                    help="derive (and --dump) the link contexts, score nothing")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--label", default="", help="free text stored in the JSON (what was tried)")
    args = ap.parse_args(argv)
    labels = args.labels
    if str(args.vault) in SETS:
        args.vault, own = SETS[str(args.vault)]
        labels = labels or own
    if args.folds < 2:
        ap.error("--folds must be at least 2 (one to tune on, one to score)")

    params, overrides = ranking_params(args.param, Settings.fusion)
    vault = args.vault.resolve()
    out = args.out or ROOT / "benchmarks" / "results" / f"linkctx-{vault.name}.json"
    tmp = None
    if args.index_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mdsearch-linkctx-")
        os.environ.setdefault("MDSEARCH_CACHE_DIR", tmp.name)
        index_dir = Path(tmp.name) / "index"
    else:
        index_dir = args.index_dir
    settings = Settings(per_file=1, fusion=params.fusion)
    ws = Workspace(vault, settings, create_embedder(settings), index_dir=index_dir)
    ws.searcher.params = params
    t0 = time.perf_counter()
    report = ws.index()
    print(f"index: {report.summary()} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)

    contexts, counts = derive(ws, args.folds, args.min_words, args.max_words)
    if args.dump:
        args.dump.write_text("".join(json.dumps(dataclasses.asdict(c) | {
            "fold": fold_name(c.fold)}) + "\n" for c in contexts), encoding="utf-8")
    if args.derive_only:
        print(f"{len(contexts)} link contexts: {counts}")
        ws.close()
        return 0
    scored = contexts
    if args.fold:
        scored = [c for c in contexts if fold_name(c.fold) == args.fold]
    ws.searcher.search("warm up", args.k, mode=args.mode)
    ctx = run_contexts(ws, scored, args.k, args.mode)
    queries = ([json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()
                if line.strip()] if labels else [])
    lab = run_labels(ws, queries, args.k, args.mode) if queries else {}

    k = args.k
    cols = [f"top{c}" for c in CUTS if c <= k] + [f"mrr{k}"]
    files, chunks = ws.manifest.counts()
    print(f"\n{vault.name}: {files} notes, {chunks} chunks; {counts.get('links', 0)} links, "
          f"{len(contexts)} link contexts ({', '.join(f'{n} {w}' for w, n in counts.items())}); "
          f"mode {args.mode}, k={k}, one hit per note")
    print(f"{'set':<28}{'n':>6}" + "".join(f"{c:>8}" for c in cols))
    for name, m in ctx.items():
        if isinstance(m, dict):
            print(f"{'links/' + name:<28}{m['n']:>6}" + "".join(f"{m[c]:>8.3f}" for c in cols)
                  + (f"   section right {m['section_right_when_note_found']:.3f} of "
                     f"{m['heading_links']} heading links"
                     if m["section_right_when_note_found"] is not None else ""))
    for name, m in lab.items():
        print(f"{'labels/' + name:<28}{m['n']:>6}" + "".join(f"{m[c]:>8.3f}" for c in cols))
    print(f"link-context search p50 {ctx.get('p50_ms')} ms")

    result = {
        "vault": str(vault),
        "notes": files,
        "chunks": chunks,
        "k": k,
        "per_file": 1,
        "mode": args.mode,
        "folds": args.folds,
        "min_words": args.min_words,
        "max_words": args.max_words,
        "derivation": counts,
        "label": args.label,
        "overrides": overrides,
        "ranking": dataclasses.asdict(params),
        "link_contexts": ctx,
        "labels_file": str(labels) if labels else None,
        "labels": lab,
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
