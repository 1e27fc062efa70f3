"""Does fine-tuning the bundled model on the vault's own links gain on held-out queries?

    python benchmarks/tune_experiment.py [obsidian-help] [--variants tune-fold,all-links]
                                         [--epochs 2] [--lr 2e-5] [--batch 32] [--max-seq 256]
                                         [--max-pairs N] [--keep DIR] [--out FILE]

An experiment for issue 21 (``mdsearch tune``), not a feature: nothing under ``mdsearch_ls/``
changes. Why: every re-weighting of the ranking chosen on tuning halves lost out of sample; the
one lever left is the model itself, and the only labels a user's vault carries are its links.

Training pairs come only from links (``link_contexts.derive``: the sentence around a link, the
link removed, is the query), never from the labelled queries. The positive is the linked
section's text exactly as the index embeds it (``Chunk.embed_text``: heading path, blank line,
body): for a link to a ``#heading`` the first chunk of that section, for a link to a note the
note's first chunk with a body. all-MiniLM-L6-v2 is fine-tuned from the bundled weights with
MultipleNegativesRankingLoss (in-batch negatives; no two pairs of a batch share a positive, so
no positive is also a negative), AdamW, linear warm-up over a tenth of the steps then decay,
gradients clipped at 1. A plain torch loop: sentence-transformers' trainer needs ``datasets``
and ``accelerate``, which are not installed.

Variants, both fixed before any figure was seen (nothing is chosen on the held-out half):

* ``tune-fold``: pairs from the tune fold of a two-fold split of the notes (a link's source and
  target both in it), so the link-context **test** fold is out of sample, as are the labelled
  queries.
* ``all-links``: pairs from every link of the vault, what ``mdsearch tune`` would do; scored
  on the labelled queries only (it has seen both ends of every test-fold link).

Scoring goes through the engine's own searcher on a real index in a temp folder, built by the
engine's torch backend (``embedder_backend = "torch"``) for the bundled weights and, for a
tuned model, the ``model`` setting naming its saved folder (its own name, so its own embedding
space); same code, same index settings, k=10, one hit per note, queries as typed. Labelled
queries use ``quality.score`` (per split: ``heldout`` is the judge, ``tune`` is reported
beside), link contexts ``link_contexts.run_contexts`` (the query's own note filtered out).
Modes: hybrid and semantic. Results: ``results/tune.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_contexts import LinkContext, derive, fold_name, run_contexts  # noqa: E402
from quality import BM25, SETS, K, score  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.embedding import bundled_model_path, create_embedder  # noqa: E402
from mdsearch_ls.engine.embedding.torch_backend import (  # noqa: E402
    _force_offline,
    set_thread_policy,
)
from mdsearch_ls.engine.notes import chunking  # noqa: E402
from mdsearch_ls.engine.notes import links as links_mod  # noqa: E402
from mdsearch_ls.engine.notes.decoding import read_source  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

MODES = ("hybrid", "semantic")
VARIANTS = ("tune-fold", "all-links")


@dataclasses.dataclass(frozen=True)
class Pair:
    query: str
    positive: str
    target: str


def chunks_of(ws: Workspace, rel: str, memo: dict[str, chunking.ParsedNote | None]
              ) -> chunking.ParsedNote | None:
    """The note parsed exactly as the indexer parses it (same reader, same chunk settings)."""
    if rel not in memo:
        read = read_source(ws.root / rel, rel, max_file_bytes=ws.settings.max_file_bytes)
        memo[rel] = None if read.text is None else chunking.parse_note(
            read.text, fallback_title=Path(rel).stem, path=rel,
            chunk_size=ws.settings.chunk_size, chunk_overlap=ws.settings.chunk_overlap)
    return memo[rel]


def positive_text(note: chunking.ParsedNote, anchor: str) -> str | None:
    """What the index embeds for the place a link points at: the named section's first chunk,
    else the note's first chunk with a body (the heading-only chunk of a title says little)."""
    if not note.chunks:
        return None
    if anchor:
        sec = links_mod.find_heading([(s.title, i) for i, s in enumerate(note.sections)], anchor)
        if sec is not None:
            for ch in note.chunks:
                if ch.section == sec:
                    return ch.embed_text
    for ch in note.chunks:
        if ch.body:
            return ch.embed_text
    return note.chunks[0].embed_text


def make_pairs(ws: Workspace, contexts: list[LinkContext]) -> list[Pair]:
    memo: dict[str, chunking.ParsedNote | None] = {}
    out = []
    for c in contexts:
        note = chunks_of(ws, c.target, memo)
        text = positive_text(note, c.anchor) if note is not None else None
        if text:
            out.append(Pair(c.query, text, c.target))
    return out


def batches(pairs: list[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Shuffled batches in which no positive appears twice (a duplicate would be its own
    negative); a pair that fits no open batch starts a new one."""
    order = pairs[:]
    rng.shuffle(order)
    out: list[list[Pair]] = []
    seen: list[set[str]] = []
    for p in order:
        for b, s in zip(out, seen, strict=True):
            if len(b) < size and p.positive not in s:
                b.append(p)
                s.add(p.positive)
                break
        else:
            out.append([p])
            seen.append({p.positive})
    return out


def train(pairs: list[Pair], dest: Path, *, epochs: int, lr: float, batch: int, max_seq: int,
          seed: int) -> dict[str, object]:
    """Fine-tune the bundled weights on ``pairs``; save a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    model = SentenceTransformer(str(bundled_model_path()), device="cpu", local_files_only=True)
    seq_at_index = model.max_seq_length
    model.max_seq_length = max_seq
    loss_fn = MultipleNegativesRankingLoss(model)
    plan = [batches(pairs, batch, rng) for _ in range(epochs)]
    steps = sum(len(p) for p in plan)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = get_linear_schedule_with_warmup(opt, max(1, steps // 10), steps)
    model.train()
    losses: list[float] = []
    for epoch, epoch_batches in enumerate(plan):
        for i, b in enumerate(epoch_batches):
            feats = [model.preprocess([p.query for p in b]),
                     model.preprocess([p.positive for p in b])]
            loss = loss_fn(feats, None)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            losses.append(round(float(loss), 4))
            print(f"  epoch {epoch + 1} batch {i + 1}/{len(epoch_batches)} loss {losses[-1]:.3f}"
                  f" ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    train_seconds = time.perf_counter() - t0
    model.eval()
    model.max_seq_length = seq_at_index  # the index embeds as the bundled model does
    model.save(str(dest))
    return {
        "pairs": len(pairs),
        "distinct_positives": len({p.positive for p in pairs}),
        "epochs": epochs,
        "lr": lr,
        "batch": batch,
        "steps": steps,
        "max_seq_length_training": max_seq,
        "max_seq_length_index": seq_at_index,
        "loss_first_epoch_mean": round(sum(losses[:len(plan[0])]) / len(plan[0]), 4),
        "loss_last_epoch_mean": round(sum(losses[-len(plan[-1]):]) / len(plan[-1]), 4),
        "train_seconds": round(train_seconds, 1),
        "threads": torch.get_num_threads(),
    }


def open_index(vault: Path, model: str | None, index_dir: Path) -> tuple[Workspace, float]:
    """A real index of ``vault`` by the torch backend: the bundled weights, or ``model``."""
    settings = Settings(per_file=1, embedder_backend="torch", model=model)
    ws = Workspace(vault, settings, create_embedder(settings), index_dir=index_dir)
    t0 = time.perf_counter()
    report = ws.index()
    seconds = time.perf_counter() - t0
    print(f"index ({ws.embedder.name}, space {ws.space}): {report.summary()} ({seconds:.1f}s)",
          file=sys.stderr)
    return ws, seconds


def evaluate_model(ws: Workspace, queries: list[dict], contexts: list[LinkContext] | None
                   ) -> dict[str, object]:
    """Labelled queries per split and mode, and link contexts per fold and mode; all k=10."""
    docs = {rel: (ws.root / rel).read_text(encoding="utf-8", errors="replace")
            for rel in ws.manifest.all_paths()}
    ws.searcher.search("warm up", K, mode="hybrid")
    typed = score(ws, BM25(docs), queries, list(MODES), lambda q: q, 0)
    splits = typed.by_kind([str(q.get("split", "")) for q in queries], list(MODES))
    labels = {split: {m: table[m] for m in MODES} for split, table in splits.items()}
    labels["all"] = {m: {"n": len(queries), **s} for m, s in typed.summary().items()
                     if m in MODES}
    # Each query's rank of its first relevant note (None: not in the first k), for the
    # queries-better / queries-worse counts against the bundled model.
    ranks = {m: [round(1 / r["mrr10"]) if r["mrr10"] else None for r in typed.rows[m]]
             for m in MODES}
    out: dict[str, object] = {"labels": labels, "query_ranks": ranks}
    if contexts is not None:
        out["link_contexts"] = {m: run_contexts(ws, contexts, K, m) for m in MODES}
    return out


def versus(model: dict, base: dict, queries: list[dict]) -> dict[str, dict[str, dict]]:
    """Per split and mode: queries whose first right note moved up / down (rank, k=10), and
    which moved into / out of first place."""
    out: dict[str, dict[str, dict]] = {}
    for mode in MODES:
        a, b = base["query_ranks"][mode], model["query_ranks"][mode]
        for split in sorted({str(q.get("split", "all")) for q in queries}):
            idx = [i for i, q in enumerate(queries) if str(q.get("split", "all")) == split]
            def r(x: int | None) -> int:
                return x or K + 1
            out.setdefault(split, {})[mode] = {
                "better": sum(r(b[i]) < r(a[i]) for i in idx),
                "worse": sum(r(b[i]) > r(a[i]) for i in idx),
                "top1_gained": sum(b[i] == 1 and a[i] != 1 for i in idx),
                "top1_lost": sum(a[i] == 1 and b[i] != 1 for i in idx),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", nargs="?", default="obsidian-help",
                    help="a labelled set's name (its folder and queries)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-seq", type=int, default=256,
                    help="tokens per text while training (the index embeds 256)")
    ap.add_argument("--max-pairs", type=int, default=0, help="cap the training pairs (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, help="save the tuned models here (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tune.json")
    ap.add_argument("--merge", action="store_true",
                    help="keep the variants of an existing --out that this run does not train")
    args = ap.parse_args(argv)
    if args.vault not in SETS:
        ap.error(f"VAULT must be a labelled set's name: {', '.join(SETS)}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if bad := [v for v in variants if v not in VARIANTS]:
        ap.error(f"unknown variant {bad}: {', '.join(VARIANTS)}")

    _force_offline()
    set_thread_policy()
    vault, qfile = SETS[args.vault]
    vault = vault.resolve()
    queries = [json.loads(line) for line in qfile.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    tmp = tempfile.TemporaryDirectory(prefix="mdsearch-tune-")
    os.environ["MDSEARCH_CACHE_DIR"] = tmp.name
    work = Path(tmp.name)
    keep = args.keep or work / "models"
    keep.mkdir(parents=True, exist_ok=True)

    base, base_index_s = open_index(vault, None, work / "index-bundled")
    files, chunks = base.manifest.counts()
    two_folds, counts2 = derive(base, 2)
    every_link, counts1 = derive(base, 1)
    test_fold = [c for c in two_folds if fold_name(c.fold) == "test"]
    tune_fold = [c for c in two_folds if fold_name(c.fold) == "tune"]
    scored_contexts = tune_fold + test_fold
    pair_sets = {"tune-fold": make_pairs(base, tune_fold),
                 "all-links": make_pairs(base, every_link)}

    result: dict[str, object] = {
        "vault": str(vault),
        "queries_file": str(qfile),
        "notes": files,
        "chunks": chunks,
        "k": K,
        "per_file": 1,
        "modes": list(MODES),
        "queries_as_typed": True,
        "backend": "torch (sentence-transformers), both models",
        "derivation": {"two_folds": counts2, "all_links": counts1},
        "link_contexts_scored": {"tune": len(tune_fold), "test": len(test_fold)},
        "models": {},
        "tldr": "skipped: tldr has no note link to tune on (the engine's link reader finds "
                "none in its 7,426 pages, calibrate-tldr.json; a grep for [[ finds only bash's "
                "[[ test), so a tldr-tuned model cannot be built",
    }
    models: dict[str, dict[str, object]] = result["models"]  # type: ignore[assignment]
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        models.update({n: m for n, m in old.get("models", {}).items()
                       if n != "bundled" and n not in variants})
    t0 = time.perf_counter()
    models["bundled"] = {"index_seconds": round(base_index_s, 1),
                         **evaluate_model(base, queries, scored_contexts)}
    print(f"bundled scored ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    base.close()
    _write(args.out, result)

    for variant in variants:
        pairs = pair_sets[variant]
        if args.max_pairs and len(pairs) > args.max_pairs:
            pairs = random.Random(args.seed).sample(pairs, args.max_pairs)
        dest = keep / f"all-MiniLM-L6-v2-links-{variant}"
        print(f"{variant}: training on {len(pairs)} pairs", file=sys.stderr)
        training = train(pairs, dest, epochs=args.epochs, lr=args.lr, batch=args.batch,
                         max_seq=args.max_seq, seed=args.seed)
        ws, index_s = open_index(vault, str(dest), work / f"index-{variant}")
        # The all-links model saw both ends of every test-fold link: only labels judge it.
        contexts = scored_contexts if variant == "tune-fold" else None
        models[variant] = {"model_name": ws.embedder.name, "space": ws.space,
                           "training": training, "index_seconds": round(index_s, 1),
                           **evaluate_model(ws, queries, contexts)}
        models[variant]["versus_bundled"] = versus(models[variant], models["bundled"], queries)
        ws.close()
        _write(args.out, result)
    _print(result)
    tmp.cleanup()
    return 0


def _write(out: Path, result: dict[str, object]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def _print(result: dict[str, object]) -> None:
    models: dict[str, dict] = result["models"]  # type: ignore[assignment]
    print(f"\nk={result['k']}, one hit per note, queries as typed; top-1 / top-3 / top-5 / MRR@10")
    for name, m in models.items():
        tr = m.get("training")
        if tr:
            print(f"{name}: {tr['pairs']} pairs, {tr['epochs']} epochs, {tr['steps']} steps, "
                  f"train {tr['train_seconds']} s, index {m['index_seconds']} s")
        for split, table in m["labels"].items():
            for mode, s in table.items():
                print(f"  {name:<10} labels/{split:<8} {mode:<9} n={s['n']:<4} "
                      f"{s['top1']:.3f} {s['top3']:.3f} {s['top5']:.3f} {s['mrr10']:.3f}")
        for split, table in (m.get("versus_bundled") or {}).items():
            for mode, v in table.items():
                print(f"  {name:<10} vs bundled {split:<8} {mode:<9} better {v['better']} worse "
                      f"{v['worse']}, top-1 gained {v['top1_gained']} lost {v['top1_lost']}")
        for mode, ctx in (m.get("link_contexts") or {}).items():
            for fold, s in ctx.items():
                if isinstance(s, dict):
                    print(f"  {name:<10} links/{fold:<9} {mode:<9} n={s['n']:<4} "
                          f"{s['top1']:.3f} {s['top3']:.3f} {s['top5']:.3f} {s['mrr10']:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
