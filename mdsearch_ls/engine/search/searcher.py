"""Query -> hits: candidates from the semantic and keyword indexes, fused, collapsed to sections.

Ranking is done on chunks and then collapsed to sections (one hit per section: several chunks of
a long section are one place to a reader) and capped per note. The score shown to people is the
cosine similarity of query and section, so a number means the same thing in the CLI, a hover and
the editor; it is None in keyword mode, which never embeds the query. What ordered the list (the
fused score, each list's rank) is on the hit and in ``Hit.explain``. The query grammar is in
:mod:`~mdsearch_ls.engine.search.query`, the fusion rules and their knobs in
:mod:`~mdsearch_ls.engine.search.ranking`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mdsearch_ls.config import FUSIONS, MODES, Settings
from mdsearch_ls.engine.search import keyword, phrases, ranking
from mdsearch_ls.engine.search.hits import Hit, SearchResult
from mdsearch_ls.engine.search.legs import QueryVector, keyword_leg
from mdsearch_ls.engine.search.note_lookups import NoteLookups
from mdsearch_ls.engine.search.query import Filters, QueryError, parse_query
from mdsearch_ls.engine.search.ranking import Candidate, RankingParams, boilerplate_weight

if TYPE_CHECKING:
    import numpy as np

    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.index.vector_store import ChromaStore

BROAD_FILTER_SHARE = 0.5
"""A filter that lets at least this share of the notes through is run as an over-fetch of the
nearest chunks, dropping the others; a narrower one as a Chroma ``where`` on the notes' paths
(a ``$in`` over thousands of paths cost Chroma more than the over-fetch)."""


def _filter_words(filters: Filters) -> str:
    """The note filters of a search as a person typed them (``path:notes/ tag:x``)."""
    words = [*(f"path:{p}" for p in filters.paths), *(f"tag:{t}" for t in filters.tags),
             *(f"type:{t}" for t in filters.types)]
    if filters.modified_after is not None or filters.modified_before is not None:
        words.append("the modified: range")
    return " ".join(words)


@dataclass
class _Collapse:
    """The hits listed so far, by section and by note (see :meth:`Searcher._collapse`)."""

    hits: list[Hit] = field(default_factory=list)
    sections: dict[tuple[str, int], int] = field(default_factory=dict)
    per_path: dict[str, int] = field(default_factory=dict)
    frozen: int = 0
    """How many of ``hits`` came from an earlier pool: they are not widened any more."""


class Searcher:
    """Read side of one index: semantic candidates from the Chroma collection, keyword ones
    from FTS5, fused here. Thread-safe; never blocks on the writer. ``params`` may be replaced
    whole at any time (it is frozen); cached results are keyed by it.
    """

    def __init__(
        self,
        manifest: Manifest,
        store: ChromaStore,
        embedder: Any,
        *,
        per_file: int = Settings.per_file,
        cache_size: int = 256,
        params: RankingParams | None = None,
    ) -> None:
        self.manifest = manifest
        self.store = store
        self.embedder = embedder
        self.per_file = per_file
        self.params = params or RankingParams()
        self._cache: OrderedDict[tuple[Any, ...], tuple[tuple[Hit, ...], tuple[str, ...]]]
        self._cache = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.cache_hits = 0
        self.notes = NoteLookups(manifest)

    # -- note-level lookups --

    def allowed_paths(self, filters: Filters) -> set[str] | None:
        """Notes passing the file-level filters, or None when there are none (all pass)."""
        return self.notes.allowed_paths(filters)

    # -- search --

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str = "hybrid",
        filters: Filters | None = None,
        per_file: int | None = None,
        fusion: str | None = None,
    ) -> SearchResult:
        """Ranked sections for a query as typed (inline filters allowed), with the notes a person
        should see beside them (``fusion`` None: ``params.fusion``); QueryError if it cannot run."""
        if mode not in MODES:
            raise QueryError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        params = self.params
        fusion = fusion or params.fusion
        if fusion not in FUSIONS:
            raise QueryError(f"unknown fusion {fusion!r}; expected one of {', '.join(FUSIONS)}")
        if k < 1:
            raise QueryError("k must be at least 1")
        parsed = parse_query(query)
        text, inline = parsed.text, parsed.filters
        if filters is not None and filters.phrases:
            # A phrase given as an argument is also text to rank by, as a typed one is.
            text = " ".join([text, *(p for p in filters.phrases if p not in inline.phrases)])
        preferred: tuple[str, ...] = ()
        if params.phrase_mode == "prefer":
            # Typed quotes are preferences; phrases given as filters stay requirements.
            preferred, inline = inline.phrases, replace(inline, phrases=())
        filters = inline if filters is None else filters.merged(inline)
        per_file = self.per_file if per_file is None else per_file
        key = (text, filters.key(), preferred, mode, fusion, k, per_file, params,
               self.manifest.generation)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
        if cached is None:
            cached = self._search(text, k, mode, filters, preferred, per_file, fusion, params)
            with self._lock:
                self._cache[key] = cached
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        hits, notes = cached
        return SearchResult(list(hits), parsed.notes + notes)

    def _search(
        self, text: str, k: int, mode: str, filters: Filters, preferred: Sequence[str],
        per_file: int, fusion: str, params: RankingParams,
    ) -> tuple[tuple[Hit, ...], tuple[str, ...]]:
        """Hits and notes. Required phrases restrict the search to the sections holding them
        all; when none does (or none the filters allow), the search runs without them, the
        sections holding more of them first, and a note says so: an empty list would tell the
        person nothing. Preferred phrases add ``params.phrase_boost`` to the sections holding
        them; one no section holds gets a note too."""
        if not text.strip():
            return (), ()
        allowed = self.allowed_paths(filters)
        if allowed is not None and not allowed:
            return (), (f"no note matches {_filter_words(filters)}",)
        required = phrases.searchable(filters.phrases)
        prefer = phrases.holding(self.manifest, phrases.searchable(
            [p for p in preferred if p not in required]))
        notes = (phrases.missing_note(prefer.missing),) if prefer.missing else ()
        if required:
            match = keyword.phrase_match(required)
            ids = self.manifest.phrase_chunk_ids(match) if match else set()
            if ids:
                hits = self._ranked(text, k, mode, allowed, per_file, fusion, params,
                                    required=(required, ids), prefer=prefer)
                if hits:
                    return tuple(hits), notes
            held = phrases.holding(self.manifest, required)
            notes = (phrases.dropped_note(held, filtered=allowed is not None), *notes)
            hits = self._ranked(text, k, mode, allowed, per_file, fusion, params,
                                prefer=prefer, dropped=held)
            return tuple(hits), notes
        return tuple(self._ranked(text, k, mode, allowed, per_file, fusion, params,
                                  prefer=prefer)), notes

    def _ranked(
        self,
        text: str,
        k: int,
        mode: str,
        allowed: set[str] | None,
        per_file: int,
        fusion: str,
        params: RankingParams,
        *,
        required: tuple[Sequence[str], set[str]] | None = None,
        prefer: phrases.Holding | None = None,
        dropped: phrases.Holding | None = None,
    ) -> list[Hit]:
        """One retrieval and ranking. ``required``: phrases and the chunks holding them all,
        to which both lists are restricted; ``prefer``: phrases that add to a chunk's score;
        ``dropped``: requirements no section met, whose holders rank first.

        The candidates ranked are a fixed depth of each list (``params.min_pool``), whatever
        k, and convex fusion scales over them alone: the first hits are a function of the
        query and the index, the same for every k. Only when that pool holds fewer than k hits
        is a deeper one fetched; its other candidates are ranked on the same scale and listed
        after the pool's hits, which they neither displace nor widen."""
        depth = params.min_pool
        must, only = required if required is not None else ((), None)
        qvec = QueryVector(lambda: self.embedder.embed_query(text)) if mode != "keyword" else None
        cands, full = self._pool(text, depth, mode, allowed, must, only, qvec, params)
        if not cands:
            return []
        shown_fusion = fusion if mode == "hybrid" else None
        scale = ranking.convex_scale(cands, params)
        ordered = self._order(cands, text, mode, fusion, params, prefer, dropped, scale)
        state = _Collapse()
        hits = self._collapse(ordered, k, per_file, mode, shown_fusion, state)
        deeper = params.pool(k)
        if len(hits) < k and full and deeper > depth:
            more, _ = self._pool(text, deeper, mode, allowed, must, only, qvec, params)
            seen = {c.chunk.id for c in cands}
            rest = [c for c in more if c.chunk.id not in seen]
            if rest:
                state.frozen = len(hits)
                ordered = self._order(rest, text, mode, fusion, params, prefer, dropped, scale)
                hits = self._collapse(ordered, k, per_file, mode, shown_fusion, state)
        return hits

    def _pool(
        self,
        text: str,
        pool: int,
        mode: str,
        allowed: set[str] | None,
        must: Sequence[str],
        only: set[str] | None,
        qvec: QueryVector | None,
        params: RankingParams,
    ) -> tuple[list[Candidate], bool]:
        """The candidates of the first ``pool`` of each list, with their cosines, and whether
        either list was cut at ``pool`` (so a deeper pool could hold more)."""
        keyword_rows: list[tuple[str, float]] = []
        leg: Future[list[tuple[str, float]]] | None = None
        if mode in ("hybrid", "keyword"):
            # Adjacent-word phrases help the fused ranking but not BM25 alone (measured; see
            # keyword.or_terms), so only hybrid asks for them.
            match = keyword.build_match(text, must, pairs=mode == "hybrid")
            if match:
                args = (match, pool, allowed, (params.title_column_weight, 1.0))
                if qvec is not None:
                    leg = keyword_leg(self.manifest.keyword_search, *args)
                else:
                    keyword_rows = self.manifest.keyword_search(*args)
        try:
            semantic = self._nearest(qvec.get(), pool, allowed, only) if qvec is not None else []
        finally:  # (the keyword list is never left running past its search)
            keyword_rows = leg.result() if leg is not None else keyword_rows
        full = len(semantic) >= pool or len(keyword_rows) >= pool
        cands = self._candidates(semantic, keyword_rows, allowed)
        if cands and qvec is not None:
            # Keyword-only candidates get their similarity from the stored vectors; keyword mode
            # has no query vector and shows none (embedding the query just for that cost as
            # much as the whole keyword search).
            self._fill_cosines(cands, qvec.get())
        return cands, full

    def _order(
        self,
        cands: list[Candidate],
        text: str,
        mode: str,
        fusion: str,
        params: RankingParams,
        prefer: phrases.Holding | None,
        dropped: phrases.Holding | None,
        scale: ranking.Scale,
    ) -> list[Candidate]:
        """The candidates' per-chunk evidence filled in (boilerplate weight, phrases, note size,
        named notes), then ranked on ``scale``."""
        boiler = self.manifest.body_file_counts(c.chunk.body_hash for c in cands)
        paths = {c.chunk.path for c in cands}
        sizes = self.notes.note_sizes(paths, params.long_note_by) if mode == "hybrid" else {}
        for held in (prefer, dropped):
            if held is not None:
                held.fill(c.chunk.id for c in cands)
        for c in cands:
            c.weight = boilerplate_weight(boiler.get(c.chunk.body_hash, 1))
            if prefer is not None:
                c.phrase_share = prefer.share(c.chunk.id)
            if dropped is not None:
                c.required_share = dropped.share(c.chunk.id)
            c.note_chunks = sizes.get(c.chunk.path, 1)
        quoted = [p for held in (prefer, dropped) if held is not None for p in held.phrases]
        named = (self.notes.named_notes(text, paths, quoted, params.name_rare_share)
                 if mode == "hybrid" else {})
        return ranking.rank(cands, mode=mode, fusion=fusion, named=named, params=params,
                            query=text, scale=scale)

    def _candidates(
        self,
        semantic: Sequence[tuple[str, float]],
        keyword_rows: Sequence[tuple[str, float]],
        allowed: set[str] | None,
    ) -> list[Candidate]:
        """One candidate per chunk found by either list (semantic order first, then the keyword
        list's others), with its record; chunks deleted meanwhile or outside the filter go."""
        ids = list(dict.fromkeys([cid for cid, _ in semantic] + [cid for cid, _ in keyword_rows]))
        if not ids:
            return []
        records = self.manifest.get_chunks(ids)
        by_id: dict[str, Candidate] = {}
        for cid in ids:
            rec = records.get(cid)
            if rec is not None and (allowed is None or rec.path in allowed):
                by_id[cid] = Candidate(chunk=rec)
        for rank, (cid, sim) in enumerate(semantic, start=1):
            if cid in by_id:
                by_id[cid].semantic_rank, by_id[cid].cosine = rank, sim
        for rank, (cid, bm25) in enumerate(keyword_rows, start=1):
            if cid in by_id:
                by_id[cid].keyword_rank, by_id[cid].bm25 = rank, bm25
        return list(by_id.values())

    def _nearest(
        self,
        qvec: np.ndarray,
        pool: int,
        allowed: set[str] | None,
        phrase_ids: set[str] | None,
    ) -> list[tuple[str, float]]:
        """The ``pool`` nearest chunks from the Chroma collection, among the notes a filter
        allows (the caller drops any other an over-fetch brings) and the chunks holding a
        required phrase."""
        where, sem_pool = None, pool
        if allowed is not None:
            total = self.notes.count()
            share = len(allowed) / total if total else 1.0
            if share >= BROAD_FILTER_SHARE:
                # A filter most notes pass: a `$in` over thousands of paths costs Chroma more
                # than over-fetching and dropping the few others afterwards (by a margin of
                # the pool's, never of k's: the candidates must not depend on k).
                sem_pool = int(pool / share) + pool // 5
            else:
                where = {"path": {"$in": sorted(allowed)}}
        ids = sorted(phrase_ids) if phrase_ids is not None else None
        return self.store.query(qvec, sem_pool, where=where, ids=ids)

    def _fill_cosines(self, cands: Iterable[Candidate], qvec: np.ndarray) -> None:
        import numpy as np

        missing = [c for c in cands if c.cosine is None]
        if not missing:
            return
        vecs = self.manifest.vectors(c.chunk.embed_hash for c in missing)
        for c in missing:
            v = vecs.get(c.chunk.embed_hash)
            if v is not None:
                c.cosine = float(np.dot(v, qvec))

    def _collapse(
        self, ordered: Sequence[Candidate], k: int, per_file: int, mode: str,
        fusion: str | None = None, state: _Collapse | None = None,
    ) -> list[Hit]:
        """Hits from ranked chunks: a section once (its range widened to every chunk of it
        that ranked, in the whole pool, so a range does not depend on k either), at most
        ``per_file`` per note, ``k`` in all. ``state`` carries the hits of an earlier pool on
        (whose first ``frozen`` are neither widened nor repeated)."""
        st = state if state is not None else _Collapse()
        hits, seen_sections, per_path = st.hits, st.sections, st.per_path
        for c in ordered:
            ch = c.chunk
            key = (ch.path, ch.section)
            if key in seen_sections:
                # Another chunk of a section already listed: widen that hit's range instead.
                i = seen_sections[key]
                if i >= st.frozen:
                    h = hits[i]
                    hits[i] = replace(
                        h, start_line=min(h.start_line, ch.start_line),
                        end_line=max(h.end_line, ch.end_line),
                    )
                continue
            if len(hits) >= k or per_path.get(ch.path, 0) >= per_file:
                continue
            per_path[ch.path] = per_path.get(ch.path, 0) + 1
            seen_sections[key] = len(hits)
            hits.append(
                Hit(
                    **ch.location_fields(),
                    score=None if c.cosine is None else float(c.cosine),
                    text=ch.text,
                    chunk_id=ch.id,
                    semantic_rank=c.semantic_rank,
                    keyword_rank=c.keyword_rank,
                    bm25=c.bm25,
                    explain={
                        "mode": mode,
                        "semantic_rank": c.semantic_rank,
                        "keyword_rank": c.keyword_rank,
                        "bm25": None if c.bm25 is None else round(c.bm25, 4),
                        "title_match": c.named,
                        "fusion": fusion,
                        "fused": round(c.fused, 6),
                    },
                )
            )
        return list(hits)

    # -- related --

    def related(
        self,
        vector: np.ndarray,
        *,
        exclude_path: str | None,
        k: int = 5,
        min_score: float = -1.0,
        per_file: int = 1,
    ) -> list[Hit]:
        """Sections nearest to ``vector`` in other notes, boilerplate pushed down, one per note."""
        pool = max(30, k * 8)
        # Unfiltered, over-fetching by the note's own chunks (dropped below): Chroma's
        # `where path $ne` cost 41 ms a query at 10k chunks, an unfiltered one 7 ms.
        record = self.manifest.file(exclude_path) if exclude_path else None
        found = self.store.query(vector, pool + (len(record.chunk_ids) if record else 0))
        if not found:
            return []
        records = self.manifest.get_chunks([cid for cid, _ in found])
        found = [(cid, sim) for cid, sim in found
                 if cid in records and records[cid].path != exclude_path][:pool]
        cands = [
            Candidate(chunk=records[cid], semantic_rank=i, cosine=sim)
            for i, (cid, sim) in enumerate(found, start=1)
        ]
        boiler = self.manifest.body_file_counts(c.chunk.body_hash for c in cands)
        for c in cands:
            # Boilerplate pushed down as in search; the shown score stays the cosine.
            c.fused = (c.cosine or 0.0) * boilerplate_weight(boiler.get(c.chunk.body_hash, 1))
        cands = [c for c in cands if (c.cosine or 0.0) >= min_score]
        ordered = sorted(cands, key=lambda c: (-c.fused, c.chunk.id))
        return self._collapse(ordered, k, per_file, "related")
