"""The search right after a save, in a process that holds the index (a language or MCP server,
the background process): what it costs to take in the new manifest state.

    python benchmarks/after_save_bench.py VAULT [VAULT ...] [--rounds 30]
        [--compare carry|memo|no-save] [--out FILE]

Why: every save is a new manifest state. A server's first search after it reads the vectors
of that state (the writer's snapshot patched with the journal's changes) and scores the
keyword list in FTS5 whole (a save moves every word's weight, engine/index/phrase_scores.py).
This opens each vault as the background process does (writer, role ``server``, Chroma left
to the next writer), then per round appends a line to one note, ``update()``s it, and times
``_vector_table()`` (the new state's vectors) and one hybrid search (k=5, an nl2bash question
as typed, a different one each round). Rounds alternate, so the two sides run in turn on the
same machine state, what ``--compare`` names:

* ``memo``: the snapshot memo of ``vector_snapshot`` on and off (off: each new state parses the
  snapshot's JSON and sorts its ids again, as before December 6; results/after-save.json);
* ``carry`` (the default): the kept phrase scores carried across the save
  (engine/index/bm25_rows.py) or dropped by it, as before December 6 (the write not recorded).
  Before each round the server answers the same 20 other questions (nl2bash 200-219, none
  of the timed ones), as a server a person uses has answered some; so both sides start from
  the same kept phrases;
* ``no-save``: no side toggled, the code as it is (run it from two checkouts to compare them):
  :func:`after_saves`, through an ``IndexedFolder`` as the background process holds it, once
  it has read the index's common words (the warm) and answered 30 other questions; per round
  (12 by default here) the update of the saved note, the search right after it, and a search
  with no save before it, each a new question (nl2bash 150 on), k=5. ``million_bench.py
  --steps saves`` runs it on a million chunks (results/save-search/, million-saves/).

Medians in ms. The note edited is the benchmark's own copy (``scale_bench.py`` builds the
vaults); nothing else is written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ.setdefault("MDSEARCH_BACKGROUND", "off")

from scale_bench import anon_mb, queries, save  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.api import SearchRequest, create_embedder
from mdsearch_ls.engine.index import vector_snapshot  # noqa: E402
from mdsearch_ls.engine.index.phrase_scores import PhraseScores  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402

NOTE = "c01/common/tar.md"
"""A note of every vault scale_bench.py builds (the twelve copies' first)."""


SIDES = {"memo": ("memo", "no_memo"), "carry": ("carry", "no_carry")}


def run(vault: Path, rounds: int, compare: str = "carry") -> dict[str, object]:
    memo, wrote = vector_snapshot._memo, PhraseScores.wrote
    qs = queries()
    settings = Settings()
    ws = Workspace.open(vault, settings, embedder=create_embedder(settings),
                        role="server", defer_vectors=True)
    on, off = SIDES[compare]
    times: dict[str, dict[str, list[float]]] = {on: {}, off: {}}
    counts = {on: [0, 0], off: [0, 0]}
    try:
        ws.search(SearchRequest.build("warm up: load the model and the tables", k=5))
        chunks = ws.status()["chunks"]
        kept = ws.manifest.phrase_scores
        for r in range(rounds):
            side = on if r % 2 == 0 else off
            vector_snapshot._memo = memo if side != "no_memo" else (lambda key, make: make())
            PhraseScores.wrote = (wrote if side != "no_carry"  # type: ignore[method-assign]
                                  else lambda *a, **k: None)
            if compare == "carry":
                for q in qs[200:220]:
                    ws.search(SearchRequest.build(q, k=5))
                    kept.settle()
            save(vault / NOTE, f"- Saved {r}: list what an archive holds:\n\n`tar tf x.tar`")
            t0 = time.perf_counter()
            ws.update([NOTE])
            t1 = time.perf_counter()
            kept.settle()  # (a save's own reading aside)
            reads, carries = kept.reads, kept.carries
            t2 = time.perf_counter()
            ws.searcher._vector_table()
            t3 = time.perf_counter()
            ws.search(SearchRequest.build(qs[r], k=5))
            t4 = time.perf_counter()
            counts[side][0] += kept.reads - reads
            counts[side][1] += kept.carries - carries
            for name, ms in (("update", t1 - t0), ("vectors_of_the_new_state", t3 - t2),
                             ("that_and_the_search", t4 - t2)):
                times[side].setdefault(name, []).append(ms * 1000)
    finally:
        vector_snapshot._memo = memo
        PhraseScores.wrote = wrote  # type: ignore[method-assign]
        ws.close()
    out: dict[str, object] = {"chunks": chunks, "rounds_each": rounds // 2, "k": 5}
    for side, per in times.items():
        out[side] = {name: round(statistics.median(xs), 1) for name, xs in per.items()}
        if compare == "carry":
            out[side]["phrases_read_whole_in_the_timed_searches"] = counts[side][0]  # type: ignore[index]
            out[side]["phrases_carried_in_the_timed_searches"] = counts[side][1]  # type: ignore[index]
    return out


def after_saves(vault: Path, note: Path, questions: list[str], warm: list[str], rounds: int,
                embedder: Any = None, settings: Any = None) -> dict[str, Any]:
    """``rounds`` saves of ``note`` in ``vault``, each followed by its update and a search, and
    a search with no save before it; ``questions`` gives two new questions a round, ``warm``
    those answered before the timing. ``million_bench.py`` passes its own ``embedder`` and
    ``settings``."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import SearchRequest, create_embedder
    from mdsearch_ls.engine.service.folder import IndexedFolder

    settings = settings or Settings()
    embedder = embedder or create_embedder(settings)
    original = note.read_text(encoding="utf-8")
    rel = note.relative_to(vault).as_posix()
    folder = IndexedFolder(vault, settings, embedder)
    folder.defer_vectors = True  # as the background process writes (engine/service/background)
    runs: dict[str, list[float]] = {"update_ms": [], "after_save_ms": [], "no_save_ms": []}

    def search(q: str) -> float:
        t0 = time.perf_counter()
        folder.search(SearchRequest.build(q, k=5))
        return (time.perf_counter() - t0) * 1000

    try:
        t0 = time.perf_counter()
        folder.start_index().result(timeout=7200)
        opened_s = time.perf_counter() - t0
        assert folder.ws is not None and not folder.ws.read_only
        t0 = time.perf_counter()
        for q in warm:
            search(q)
        kept = folder.ws.manifest.phrase_scores
        assert kept is not None
        kept.settle()
        warm_s, kept_rows = time.perf_counter() - t0, kept.held
        for r in range(rounds):
            note.write_text(f"{original.rstrip()}\n\n- Round {r}: list what an archive "
                            f"holds:\n\n`tar tf path/to/x.tar`\n", encoding="utf-8")
            t0 = time.perf_counter()
            ws = folder.ws
            changed = ws.changed_notes(among=[rel])
            assert changed, "the save was not seen"
            folder.submit(ws.update, changed).result(timeout=600)
            runs["update_ms"].append((time.perf_counter() - t0) * 1000)
            runs["after_save_ms"].append(search(questions[2 * r]))
            runs["no_save_ms"].append(search(questions[2 * r + 1]))
            kept.settle()  # what the search put aside is read before the next round
    finally:
        note.write_text(original, encoding="utf-8")
        if folder.ws is not None and not folder.ws.read_only:
            folder.submit(folder.ws.update, [rel]).result(timeout=600)
        folder.close()
    out: dict[str, Any] = {name: round(statistics.median(ms), 1) for name, ms in runs.items()}
    out.update({f"{name}_all": [round(x, 1) for x in ms] for name, ms in runs.items()})
    out.update({"rounds": rounds, "open_s": round(opened_s, 2), "warm_s": round(warm_s, 2),
                "kept_rows": kept_rows, "anon_mb": anon_mb()})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vaults", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, help="30, or 12 for no-save")
    ap.add_argument("--compare", choices=[*sorted(SIDES), "no-save"], default="carry")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    qs = queries()

    def measured(vault: Path) -> dict[str, Any]:
        if args.compare != "no-save":
            return run(vault, args.rounds or 30, args.compare)
        rounds = args.rounds or 12
        return after_saves(vault, vault / NOTE, qs[150:150 + 2 * rounds], qs[:30], rounds)

    result = {"compare": args.compare, "load_at_start": os.getloadavg()[0],
              "vaults": {v.name: measured(v) for v in args.vaults},
              "load_at_end": os.getloadavg()[0]}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
