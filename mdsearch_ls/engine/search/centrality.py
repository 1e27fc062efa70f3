"""How much each typed word carries a query's meaning, and what that does to keyword evidence.

BM25 counts every matched word at its rarity, whatever the question is about: in "how do I keep
my notes the same on my phone and my laptop", "keep" is a fairly rare word of an Obsidian vault
and sits in the title of `Import from Google Keep`, which then outranked the Sync sections the
question is about (issue 21, defect 2). The model can tell an incidental word from a central
one: the query embedded without the word moves little when the word was incidental ("keep":
1 - cosine 0.04) and much when it was the subject ("notes" 0.29, "laptop" 0.09).

A section's BM25 is then scaled by the centrality of the words it matched, each weighted by its
rarity (an IDF from FTS5's own document counts), so a section that matched only incidental
words keeps little of its keyword score and one that matched the subject keeps all of it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.search import keyword

if TYPE_CHECKING:
    import numpy as np

    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.search.ranking import Candidate

_cache_lock = threading.Lock()
_weights: OrderedDict[tuple[str, str], dict[str, float]] = OrderedDict()
_df: dict[tuple[str, int, str], int] = {}


def content_terms(text: str) -> list[str]:
    """The query's content words as the keyword query ORs them (stopwords aside), once each."""
    words = keyword.tokens(text)
    return list(dict.fromkeys(w for w in words if w not in keyword.STOPWORDS))


def without(text: str, term: str) -> str:
    """The query with every typed word whose tokens are just ``term`` left out."""
    return " ".join(w for w in text.split() if keyword.tokens(w) != [term])


def centralities(text: str, qvec: np.ndarray, embedder: Any, how: str) -> dict[str, float]:
    """Each content word's share of the query's meaning, the most central word 1.0.

    ``loo``: 1 - cosine(query, query without the word), one batch of the variants;
    ``word``: cosine(query, the word alone), each word's vector cached by the embedder.
    Cached per query text (the editor asks the same query at every keystroke of a filter).
    """
    terms = content_terms(text)
    if len(terms) < 2 or how == "flat":
        return {t: 1.0 for t in terms}
    key = (how, text)
    with _cache_lock:
        hit = _weights.get(key)
    if hit is not None:
        return hit
    import numpy as np

    if how == "loo":
        vecs = np.asarray(embedder.embed_documents([without(text, t) for t in terms]))
        raw = 1.0 - vecs @ qvec
    else:
        raw = np.array([float(np.dot(embedder.embed_query(t), qvec)) for t in terms])
    raw = np.maximum(raw, 0.0)
    top = float(raw.max()) or 1.0
    out = {t: float(r) / top for t, r in zip(terms, raw, strict=True)}
    with _cache_lock:
        _weights[key] = out
        while len(_weights) > 512:
            _weights.popitem(last=False)
    return out


def _rowids(manifest: Manifest, ids: Sequence[str]) -> dict[int, str]:
    marks = ",".join("?" * len(ids))
    return {int(r): cid for r, cid in manifest.read(
        f"SELECT rowid, id FROM chunks WHERE id IN ({marks})", list(ids))}


def term_stats(manifest: Manifest, terms: Sequence[str], ids: Sequence[str],
               ) -> tuple[int, dict[str, int], dict[str, set[str]]]:
    """The number of chunks, each term's document count, and which of ``ids`` hold each term
    (by FTS5, so stemming and tokenizing are the keyword search's own)."""
    gen = manifest.generation
    n = int(manifest.read("SELECT count(*) FROM chunks")[0][0]) if terms else 0
    by_row = _rowids(manifest, ids) if ids else {}
    marks = ",".join("?" * len(by_row))
    df: dict[str, int] = {}
    held: dict[str, set[str]] = {}
    for t in terms:
        match = '"' + t.replace('"', '""') + '"'
        key = (str(manifest.path), gen, t)
        with _cache_lock:
            count = _df.get(key)
        if count is None:
            count = int(manifest.read(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (match,))[0][0])
            with _cache_lock:
                if len(_df) > 4096:
                    _df.clear()
                _df[key] = count
        df[t] = count
        rows = manifest.read(
            f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({marks})",
            (match, *by_row)) if by_row else []
        held[t] = {by_row[int(r)] for (r,) in rows}
    return n, df, held


def term_bm25(manifest: Manifest, terms: Sequence[str], ids: Sequence[str],
              weights: tuple[float, float]) -> dict[str, dict[str, float]]:
    """Each term's own BM25 in each of ``ids`` that holds it: FTS5's bm25() of a one-term
    query, with the column weights of the keyword search. An OR query's BM25 is the sum of its
    phrases' parts, so these are exactly the parts of the score keyword_search gave."""
    by_row = _rowids(manifest, ids) if ids else {}
    marks = ",".join("?" * len(by_row))
    out: dict[str, dict[str, float]] = {}
    for t in terms:
        match = '"' + t.replace('"', '""') + '"'
        rows = manifest.read(
            f"SELECT rowid, bm25(chunks_fts, ?, ?) FROM chunks_fts WHERE chunks_fts MATCH ? "
            f"AND rowid IN ({marks})", (*weights, match, *by_row)) if by_row else []
        out[t] = {by_row[int(r)]: -float(b) for r, b in rows}
    return out


def apply_exact(cands: Sequence[Candidate], text: str, qvec: np.ndarray, manifest: Manifest,
                embedder: Any, how: str, power: float, title_weight: float) -> None:
    """Each keyword candidate's BM25 re-summed with every word's part x its centrality (the
    parts of adjacent-word pairs and identifiers x the mean centrality), as ``term_weight``."""
    weights = centralities(text, qvec, embedder, how)
    if len(weights) < 2:
        return
    hits = [c for c in cands if c.bm25]
    if not hits:
        return
    parts = term_bm25(manifest, list(weights), [c.chunk.id for c in hits], (title_weight, 1.0))
    mean = sum(w ** power for w in weights.values()) / len(weights)
    for c in hits:
        own = {t: parts[t].get(c.chunk.id, 0.0) for t in weights}
        rest = max(0.0, (c.bm25 or 0.0) - sum(own.values()))
        weighted = sum(weights[t] ** power * b for t, b in own.items()) + rest * mean
        c.term_weight = weighted / c.bm25 if c.bm25 else 1.0


def apply(cands: Sequence[Candidate], text: str, qvec: np.ndarray, manifest: Manifest,
          embedder: Any, how: str, power: float = 1.0, cut: float = 0.0,
          coverage: bool = False) -> None:
    """Set each keyword candidate's ``term_weight``: the IDF-weighted mean centrality (to the
    power ``power``) of the query words it holds."""
    weights = centralities(text, qvec, embedder, how)
    if cut > 0:
        weights = {t: float(w >= cut) for t, w in weights.items()}
    if len(weights) < 2:
        return
    hits = list(cands) if coverage else [c for c in cands if c.bm25]
    if not hits:
        return
    n, df, held = term_stats(manifest, list(weights), [c.chunk.id for c in hits])
    idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    if coverage:
        total = sum(idf[t] * w ** power for t, w in weights.items()) or 1.0
        for c in hits:
            c.coverage = sum(idf[t] * w ** power for t, w in weights.items()
                             if c.chunk.id in held[t]) / total
        return
    for c in hits:
        num = den = 0.0
        for t, w in weights.items():
            if c.chunk.id in held[t]:
                num += idf[t] * w ** power
                den += idf[t]
        if den > 0:
            c.term_weight = num / den
