"""The keyword list from tantivy instead of FTS5's ``bm25()``: what issue 55 asks before a second
keyword store is adopted (its speed at 96k, and whether quality holds).

    pip install tantivy        (not a dependency of mdsearch; 0.27 measured)
    python benchmarks/tantivy_bench.py scale_bench.py --parts in_process [...]
    python benchmarks/tantivy_bench.py quality.py vault|obsidian-help|tldr [...]

Runs the named benchmark of this folder, its arguments as given, with one change:
``Manifest.keyword_search`` answers from a tantivy index (block-max WAND) in memory, built from
the manifest's FTS5 rows at the first keyword search of each manifest generation (the build is
in ``first_search_s`` of ``scale_bench.py``; every other figure is a search). Nothing else
of the engine changes: the same FTS5 match string (tantivy's query language has the same
``OR``, ``AND``, quotes and parentheses), the same fusion, the same pools.

One field holds the title column ``title_column_weight`` times, then the body: FTS5's ``bm25()``
sums a term's weighted counts over the columns and normalises by the row's length, and this is
the nearest tantivy gets to it. Two fields with a title boost (tantivy's BM25 of each field,
added) measured worse: hybrid top-1 0.877 on the examples vault and 0.648 on obsidian-help
held-out at boost 4 (0.892 / 0.692 at 1), against FTS5's 0.923 / 0.725. Its analyzer is the
nearest to ``porter unicode61 remove_diacritics 2``: words split at non-alphanumerics,
lowercased, ASCII-folded, stemmed (Snowball English, not FTS5's Porter). CJK runs (the index's
bigrams) are not matched the way the engine's tokenizer does; the labelled sets have none.

A prototype to measure, not an engine: the index is rebuilt whole after any write, and
``paths`` filters over-fetch 50 x the pool.
"""

from __future__ import annotations

import runpy
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tantivy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mdsearch_ls.engine.index import manifest as manifest_module  # noqa: E402

_lock = threading.Lock()
_built: dict[tuple[str, int], tuple[Any, dict[int, str], dict[str, str]]] = {}


def _analyzer() -> Any:
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(64)).filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold()).filter(tantivy.Filter.stemmer("english"))
            .build())


def _index(m: Any, title_times: int) -> tuple[Any, dict[int, str], dict[str, str]]:
    """The manifest's FTS rows in a tantivy index in memory, for its current generation."""
    key = (str(m.path), m.generation)
    with _lock:
        got = _built.get(key)
        if got is not None:
            return got
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("rowid", stored=True, indexed=True, fast=True)
        sb.add_text_field("text", stored=False, tokenizer_name="mds", index_option="position")
        idx = tantivy.Index(sb.build())
        idx.register_tokenizer("mds", _analyzer())
        writer = idx.writer(heap_size=200_000_000, num_threads=1)
        conn = m._conn()
        for rowid, title, body in conn.execute("SELECT rowid, title, body FROM chunks_fts"):
            text = " ".join([title or ""] * title_times + [body or ""])
            writer.add_document(tantivy.Document(rowid=rowid, text=text))
        writer.commit()
        writer.wait_merging_threads()
        idx.reload()
        ids = dict(conn.execute("SELECT rowid, id FROM chunks"))
        paths = dict(conn.execute("SELECT id, path FROM chunks"))
        _built.clear()
        _built[key] = got = (idx, ids, paths)
        return got


def keyword_search(self: Any, match: str, limit: int, paths: set[str] | None = None,
                   weights: Sequence[float] = (4.0, 1.0)) -> list[tuple[str, float]]:
    """``Manifest.keyword_search`` (same arguments, higher is better) answered by tantivy."""
    idx, ids, path_of = _index(self, max(1, round(float(weights[0]) / float(weights[1]))))
    try:
        query = idx.parse_query(match, ["text"])
    except ValueError as exc:
        raise ValueError(f"keyword query could not be parsed: {exc}") from exc
    searcher = idx.searcher()
    out: list[tuple[str, float]] = []
    for score, address in searcher.search(query, limit if paths is None else limit * 50).hits:
        cid = ids.get(searcher.doc(address)["rowid"][0])
        if cid is not None and (paths is None or path_of[cid] in paths):
            out.append((cid, float(score)))
            if len(out) >= limit:
                break
    return out


def main(argv: list[str]) -> None:
    if not argv or not (ROOT / "benchmarks" / argv[0]).is_file():
        raise SystemExit(__doc__)
    manifest_module.Manifest.keyword_search = keyword_search  # type: ignore[method-assign]
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_path(str(ROOT / "benchmarks" / argv[0]), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
