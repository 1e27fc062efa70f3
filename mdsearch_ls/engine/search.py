"""Query -> hits: inline filters, semantic and keyword candidates, reciprocal rank fusion, related.

Ranking is done on chunks and then collapsed to sections (one hit per section: several chunks of
a long section are one place to a reader) and capped per note. Scores shown to people are the
cosine similarity of query and section, whatever the mode, so a number means the same thing in
the CLI, a hover and the editor; the fused RRF value that orders hybrid results is in
``Hit.explain``.
"""

from __future__ import annotations

import fnmatch
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from mdsearch_ls.config import MODES
from mdsearch_ls.engine import keyword
from mdsearch_ls.engine.errors import RequestError

if TYPE_CHECKING:
    from mdsearch_ls.engine.manifest import ChunkRecord, Manifest
    from mdsearch_ls.engine.store import ChromaStore

RRF_K = 60
SEMANTIC_WEIGHT = 1.0
KEYWORD_WEIGHT = 1.0
NOTE_FUSION = False
MULTI_CHUNK_BONUS = 0.0
MIN_POOL = 50
# How hybrid mode fuses the two lists: "convex" (the default: CONVEX_ALPHA * min-max cosine + the
# rest * BM25 / best BM25, over the candidates) or "rrf" (reciprocal rank fusion, k=RRF_K). Convex
# is the default because it ranked better on both labelled sets (benchmarks/README.md): RRF sees
# only ranks, so a section that is by far the closest in meaning is pulled level with a weak
# keyword hit that happens to hold the same rank in the other list.
FUSIONS = ("convex", "rrf")
FUSION = "convex"
CONVEX_ALPHA = 0.7
# Convex fusion scales cosines to [0, 1] over the candidates, but never over a range narrower
# than this: in a small vault, or when every candidate is about as close, min-max would turn a
# 0.05 cosine gap into the full scale and drown the keyword evidence (and the boilerplate
# down-weighting) in noise. Half the candidate pools measured on tldr span 0.27 or more.
CONVEX_MIN_SPAN = 0.25
# Hybrid mode also rewards a note whose name the query spells out: every word of its title (front
# matter or file name) or of one of its aliases is in the query ("revenue tracking" names
# Revenue tracking.md, "find files owned by tom" names find.md). It is the signal a person gives
# when they remember what a note is called, and neither list ranks it reliably: BM25 spreads it
# over the body's words, the embedding blurs it. In rrf fusion the named notes are a third ranked
# list (longer names first) of weight TITLE_WEIGHT; in convex fusion TITLE_BOOST is added to the
# fused score (which lies in [0, 1]). Measured in benchmarks/README.md.
TITLE_WEIGHT = 1.0
TITLE_BOOST = 0.25
# Filtered semantic search is exact (a matrix product over the chunks that pass) up to this many
# chunks in the index: it costs about a millisecond at 10k chunks, where Chroma's `where path
# $in [...]` cost 20-30 ms and over-fetching could miss a narrow folder's best sections. Above it,
# Chroma: a where-clause below BROAD_FILTER_SHARE of notes passing, an over-fetch above it.
EXACT_FILTER_MAX_CHUNKS = 250_000
BROAD_FILTER_SHARE = 0.5
FILTER_NAMES = ("path", "tag", "type", "modified")


class QueryError(RequestError):
    """A query a person typed that cannot be run; the message says how to fix it."""

    def __init__(self, message: str, field: str | None = "query") -> None:
        super().__init__(message, field)


@dataclass(frozen=True)
class Filters:
    """Restrictions pushed down into both indexes. Empty means "everything"."""

    paths: tuple[str, ...] = ()
    """Folder prefixes (``finance/``) or globs (``**/2024-*.md``); a note matching any passes."""
    tags: tuple[str, ...] = ()
    """Tags a note must all carry (front matter or inline ``#tag``); ``a`` matches ``a/b`` too."""
    types: tuple[str, ...] = ()
    """File suffixes without the dot: ``md``, ``markdown``."""
    modified_after: float | None = None
    modified_before: float | None = None
    phrases: tuple[str, ...] = ()
    """Exact phrases a section must contain."""

    @property
    def file_level(self) -> bool:
        return bool(
            self.paths or self.tags or self.types
            or self.modified_after is not None or self.modified_before is not None
        )

    def merged(self, other: Filters) -> Filters:
        return Filters(
            paths=self.paths + other.paths,
            tags=self.tags + other.tags,
            types=self.types + other.types,
            modified_after=_max_opt(self.modified_after, other.modified_after),
            modified_before=_min_opt(self.modified_before, other.modified_before),
            phrases=self.phrases + other.phrases,
        )

    def key(self) -> tuple[Any, ...]:
        return (self.paths, self.tags, self.types, self.modified_after, self.modified_before,
                self.phrases)


def _max_opt(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True)
class Hit:
    """One section that answers a query."""

    path: str
    title: str
    breadcrumb: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    chunk_id: str = ""
    explain: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self, *, explain: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "title": self.title,
            "breadcrumb": self.breadcrumb,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
        }
        if explain:
            out["explain"] = self.explain
        return out


# ---- query syntax ---------------------------------------------------------------------------

_TOKEN_RE = re.compile(r'(?<!\S)([A-Za-z]+):("[^"]*"|\S+)|"([^"]*)"')
_DATE_RE = re.compile(r"^(>=|<=|>|<|=)?(.+)$")
_REL_RE = re.compile(r"^(\d+)([dwmy])$")


def _parse_when(value: str, name: str) -> tuple[str, float, float]:
    """``>2025-01-01`` -> ('>', start of that day, end of it); ``>7d`` = within the last 7 days."""
    m = _DATE_RE.match(value)
    op, raw = (m.group(1) or "="), m.group(2) if m else value
    rel = _REL_RE.match(raw)
    if rel:
        n, unit = int(rel.group(1)), rel.group(2)
        days = {"d": 1, "w": 7, "m": 30, "y": 365}[unit] * n
        t = (datetime.now(timezone.utc) - timedelta(days=days)).timestamp()
        # "modified:7d" with no operator means "in the last 7 days".
        return (">" if op == "=" else op), t, t
    try:
        day = datetime.strptime(raw, "%Y-%m-%d")
        following = day + timedelta(days=1)
    except ValueError:
        try:
            day = datetime.strptime(raw, "%Y-%m")
        except ValueError:
            raise QueryError(
                f"{name}:{value}: expected a date like >2025-01-01, <2025-06, =2025-03-14 or >7d"
            ) from None
        # A month means the whole month: =2025-06 is June, >2025-06 is from July on.
        following = day.replace(year=day.year + day.month // 12, month=day.month % 12 + 1)
    # Local time: "modified on that day" means the user's day.
    return op, day.timestamp(), following.timestamp()


def parse_query(query: str) -> tuple[str, Filters]:
    """Split ``revenue tag:finance path:reports/ "Q3 2024"`` into free text and :class:`Filters`.

    Only ``name:value`` with an alphabetic name and no space after the colon is a filter, so
    prose such as "note: the VPN" and times like 10:30 stay text; URLs are left alone. An unknown
    name is an error listing the valid ones: a silently ignored filter returns wrong results.
    """
    paths: list[str] = []
    tags: list[str] = []
    types: list[str] = []
    after: float | None = None
    before: float | None = None

    phrases: list[str] = []

    def take(m: re.Match[str]) -> str:
        nonlocal after, before
        if m.group(3) is not None:  # a quoted phrase
            if m.group(3).strip():
                phrases.append(m.group(3).strip())
            return " "
        name, value = m.group(1).lower(), m.group(2)
        if value.startswith("//"):
            return m.group(0)  # a URL such as https://example.com
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1]
        if name not in FILTER_NAMES:
            raise QueryError(
                f"unknown filter '{m.group(1)}:'; valid filters are "
                + ", ".join(f"{n}:" for n in FILTER_NAMES)
                + ' (put text in quotes, like "todo:later", to search for it literally)'
            )
        if not value:
            raise QueryError(f"filter {name}: needs a value, e.g. {name}:{_EXAMPLES[name]}")
        if name == "path":
            paths.append(value.lstrip("./") if value.startswith("./") else value)
        elif name == "tag":
            tags.append(value.lstrip("#").lower())
        elif name == "type":
            types.append(value.lstrip(".").lower())
        else:
            op, start, end = _parse_when(value, name)
            if op in (">", ">="):
                after = _max_opt(after, end if op == ">" else start)
            elif op in ("<", "<="):
                before = _min_opt(before, start if op == "<" else end)
            else:
                after, before = _max_opt(after, start), _min_opt(before, end)
        return " "

    # One left-to-right scan: a quoted "a:b" is a phrase, and name:"a b" is a filter value.
    rest = _TOKEN_RE.sub(take, query)
    for t in types:
        if t not in ("md", "markdown"):
            raise QueryError(f"type:{t}: mdsearch indexes md and markdown files")
    text = " ".join((rest + " " + " ".join(phrases)).split())
    filters = Filters(tuple(paths), tuple(tags), tuple(types), after, before, tuple(phrases))
    return text, filters


_EXAMPLES = {"path": "finance/", "tag": "project", "type": "md", "modified": ">2025-01-01"}
STRUCTURED_FILTERS = (*FILTER_NAMES, "phrase")


def structured_filters(**values: str | Sequence[str] | None) -> Filters:
    """Filters given as arguments (``--path``, the ``filters`` object of ``mdsearch.search``).

    Each name of :data:`STRUCTURED_FILTERS` takes one value or a list; values mean exactly
    what they mean typed inline (``path="finance/"`` is ``path:finance/``), because they go
    through the same parser, so the two forms can never drift apart and give the same errors.
    """
    parts: list[str] = []
    phrases: list[str] = []
    for name, raw in values.items():
        if name not in STRUCTURED_FILTERS:
            raise QueryError(
                f"unknown filter {name!r}; valid filters are " + ", ".join(STRUCTURED_FILTERS)
            )
        if raw is None:
            continue
        items = [raw] if isinstance(raw, str) else list(raw)
        for v in items:
            if not isinstance(v, str) or not v.strip():
                raise QueryError(f"filter {name}: expected non-empty text, got {v!r}")
            if '"' in v:
                raise QueryError(f'filter {name}: a value cannot contain a double quote (")')
            if name == "phrase":
                phrases.append(v.strip())
            else:
                parts.append(f'{name}:"{v.strip()}"')
    _, filters = parse_query(" ".join(parts))
    return replace(filters, phrases=filters.phrases + tuple(phrases))


@dataclass(frozen=True)
class _PathMatcher:
    """``path:`` patterns compiled once: prefixes as one ``startswith``, globs as regexes."""

    prefixes: tuple[str, ...]
    globs: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, patterns: Sequence[str]) -> _PathMatcher:
        prefixes: list[str] = []
        globs: list[re.Pattern[str]] = []
        for pat in patterns:
            if any(c in pat for c in "*?["):
                globs.append(re.compile(fnmatch.translate(pat)))
                if pat.startswith("**/"):
                    globs.append(re.compile(fnmatch.translate(pat[3:])))
            else:
                prefixes.append(pat)  # a folder, a note, or the start of a name
        return cls(tuple(prefixes), tuple(globs))

    def __call__(self, path: str) -> bool:
        if self.prefixes and path.startswith(self.prefixes):
            return True
        return any(g.match(path) for g in self.globs)


def path_matches(path: str, pattern: str) -> bool:
    """Folder prefix (``finance/``, ``finance``) or glob (``**/*.md``, ``daily/2024-*``)."""
    return _PathMatcher.of((pattern,))(path)


# ---- the searcher ---------------------------------------------------------------------------


@dataclass
class _Candidate:
    chunk: ChunkRecord
    semantic_rank: int | None = None
    keyword_rank: int | None = None
    cosine: float | None = None
    bm25: float | None = None
    fused: float = 0.0
    named: bool = False


class Searcher:
    """Read side of one index. Thread-safe; never blocks on the writer.

    ``store`` None is the read-only side of an index another process writes: Chroma is not
    process-safe, so every vector query is then answered exactly from the manifest's vectors
    (SQLite is), as filtered queries always are.
    """

    def __init__(
        self,
        manifest: Manifest,
        store: ChromaStore | None,
        embedder: Any,
        *,
        per_file: int = 2,
        cache_size: int = 256,
    ) -> None:
        self.manifest = manifest
        self.store = store
        self.embedder = embedder
        self.per_file = per_file
        self._cache: OrderedDict[tuple[Any, ...], list[Hit]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.cache_hits = 0
        self._file_meta: tuple[int, dict[str, tuple[float, str]]] | None = None
        self._names: tuple[int, dict[str, tuple[frozenset[str], ...]]] | None = None
        self._allowed: dict[tuple[Any, ...], set[str]] = {}
        self._allowed_gen = -1
        self._table: _VectorTable | None = None
        self._table_lock = threading.Lock()

    # -- filters --

    def allowed_paths(self, filters: Filters) -> set[str] | None:
        """Notes passing the file-level filters, or None when there are none (all pass).

        Cached per filter until the index changes: the LSP asks the same filtered query again
        at every keystroke of the text after it.
        """
        if not filters.file_level:
            return None
        gen = self.manifest.generation
        key = filters.key()[:5]
        with self._lock:
            if self._allowed_gen != gen:
                self._allowed, self._allowed_gen = {}, gen
            hit = self._allowed.get(key)
        if hit is not None:
            return hit
        paths = self._compute_allowed(filters)
        with self._lock:
            if self._allowed_gen == gen:
                if len(self._allowed) >= 64:
                    self._allowed.clear()
                self._allowed[key] = paths
        return paths

    def _compute_allowed(self, filters: Filters) -> set[str]:
        files = self._files_meta()
        paths = set(files)
        if filters.paths:
            matcher = _PathMatcher.of(filters.paths)
            paths = {p for p in paths if matcher(p)}
        if filters.types:
            paths = {p for p in paths if p.rsplit(".", 1)[-1].lower() in filters.types}
        if filters.modified_after is not None:
            paths = {p for p in paths if files[p][0] >= filters.modified_after}
        if filters.modified_before is not None:
            paths = {p for p in paths if files[p][0] < filters.modified_before}
        if filters.tags:
            paths &= self.manifest.paths_with_tags(filters.tags)
        return paths

    def _files_meta(self) -> dict[str, tuple[float, str]]:
        gen = self.manifest.generation
        cached = self._file_meta
        if cached is not None and cached[0] == gen:
            return cached[1]
        meta = {p: (m, "") for p, m in self.manifest.file_mtimes().items()}
        self._file_meta = (gen, meta)
        return meta

    # -- note names --

    def _name_tokens(self) -> dict[str, tuple[frozenset[str], ...]]:
        gen = self.manifest.generation
        cached = self._names
        if cached is not None and cached[0] == gen:
            return cached[1]
        names: dict[str, tuple[frozenset[str], ...]] = {}
        for path, titles in self.manifest.titles().items():
            sets = [frozenset(keyword.tokens(t)) for t in titles]
            # A name made only of stopwords ("How", "It") is named by half of all questions.
            names[path] = tuple(s for s in sets if s and not s <= keyword.STOPWORDS)
        self._names = (gen, names)
        return names

    def named_notes(self, text: str, paths: Iterable[str]) -> dict[str, int]:
        """Notes among ``paths`` whose title or an alias the query names in full.

        Maps each to the word count of the longest name named: "revenue tracking q3" names both
        a note "Revenue" and a note "Revenue tracking", and the second is the more specific.
        Words are matched exactly (no stemming): folding plurals let "files" name a note "file".
        """
        words = set(keyword.tokens(text))
        if not words:
            return {}
        names = self._name_tokens()
        out: dict[str, int] = {}
        for p in set(paths):
            n = max((len(s) for s in names.get(p, ()) if s <= words), default=0)
            if n:
                out[p] = n
        return out

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
    ) -> list[Hit]:
        """Ranked sections for a typed query (inline filters allowed)."""
        if mode not in MODES:
            raise QueryError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        fusion = fusion or FUSION
        if fusion not in FUSIONS:
            raise QueryError(f"unknown fusion {fusion!r}; expected one of {', '.join(FUSIONS)}")
        if k < 1:
            raise QueryError("k must be at least 1")
        text, inline = parse_query(query)
        if filters is not None and filters.phrases:
            # A phrase given as an argument is also text to rank by, as a typed one is.
            text = " ".join([text, *(p for p in filters.phrases if p not in inline.phrases)])
        filters = inline if filters is None else filters.merged(inline)
        per_file = self.per_file if per_file is None else per_file
        key = (text, filters.key(), mode, fusion, k, per_file, self.manifest.generation)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return list(cached)
        hits = self._search(text, k, mode, filters, per_file, fusion)
        with self._lock:
            self._cache[key] = hits
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return list(hits)

    def _search(
        self, text: str, k: int, mode: str, filters: Filters, per_file: int, fusion: str = FUSION
    ) -> list[Hit]:
        if not text.strip():
            return []
        allowed = self.allowed_paths(filters)
        if allowed is not None and not allowed:
            return []
        pool = max(MIN_POOL, k * 6)
        cands: dict[str, _Candidate] = {}
        phrase_ids: set[str] | None = None
        if filters.phrases:
            match = keyword.phrase_match(filters.phrases)
            phrase_ids = self.manifest.phrase_chunk_ids(match) if match else set()
            if not phrase_ids:
                return []
        qvec: np.ndarray | None = None
        if mode in ("hybrid", "semantic"):
            qvec = self.embedder.embed_query(text)
            restricted = allowed is not None or phrase_ids is not None
            table = self._vector_table() if restricted or self.store is None else None
            if table is not None:
                found = table.nearest(qvec, pool, allowed, phrase_ids)
            else:
                found = self._chroma_nearest(qvec, pool, k, allowed, phrase_ids)
            for rank, (cid, sim) in enumerate(found, start=1):
                cands[cid] = _Candidate(chunk=None, semantic_rank=rank, cosine=sim)  # type: ignore[arg-type]
        if mode in ("hybrid", "keyword"):
            # Adjacent-word phrases help the fused ranking but not BM25 alone (measured; see
            # keyword.build_match), so only hybrid asks for them.
            match = keyword.build_match(text, filters.phrases, pairs=mode == "hybrid")
            if match:
                rows = self.manifest.keyword_search(match, pool, allowed)
                for rank, (cid, bm25) in enumerate(rows, start=1):
                    c = cands.setdefault(cid, _Candidate(chunk=None))  # type: ignore[arg-type]
                    c.keyword_rank, c.bm25 = rank, bm25
        if not cands:
            return []
        records = self.manifest.get_chunks(list(cands))
        live = {cid: c for cid, c in cands.items() if cid in records}
        for cid, c in live.items():
            c.chunk = records[cid]
        if allowed is not None:
            live = {cid: c for cid, c in live.items() if c.chunk.path in allowed}
        if not live:
            return []
        if qvec is None:
            qvec = self._query_vector_for_scores(text)
        self._fill_cosines(live.values(), qvec)
        boiler = self.manifest.body_file_counts(c.chunk.body_hash for c in live.values())
        weights = {c.chunk.id: boilerplate_weight(boiler.get(c.chunk.body_hash, 1))
                   for c in live.values()}
        if fusion == "convex" and mode == "hybrid":
            _fuse_convex(list(live.values()))
            for c in live.values():
                c.fused *= weights[c.chunk.id]
        else:
            for c in live.values():
                fused = 0.0
                if c.semantic_rank is not None:
                    fused += SEMANTIC_WEIGHT / (RRF_K + c.semantic_rank)
                if c.keyword_rank is not None:
                    fused += KEYWORD_WEIGHT / (RRF_K + c.keyword_rank)
                c.fused = fused * weights[c.chunk.id]
        if mode == "hybrid":
            self._reward_named(text, live.values(), weights, fusion)
        if NOTE_FUSION and mode == "hybrid":
            _fuse_notes(list(live.values()), weights)
        ordered = sorted(live.values(), key=lambda c: (-c.fused, -(c.cosine or 0.0), c.chunk.id))
        return self._collapse(ordered, k, per_file, mode,
                              fusion if mode == "hybrid" else None)

    def _reward_named(
        self, text: str, cands: Iterable[_Candidate], weights: dict[str, float], fusion: str
    ) -> None:
        """Add the named-note signal to the best section of each note the query names.

        Only that section: the note's other sections still have to earn their places, so a
        note named by a common word ("Search") does not fill the list with all its sections.
        """
        cands = list(cands)
        named = self.named_notes(text, {c.chunk.path for c in cands})
        if not named:
            return
        best: dict[str, _Candidate] = {}
        for c in cands:
            b = best.get(c.chunk.path)
            if c.chunk.path in named and (
                b is None or (c.fused, c.cosine or 0.0) > (b.fused, b.cosine or 0.0)
            ):
                best[c.chunk.path] = c
        if fusion == "convex":
            for c in best.values():
                c.named = True
                c.fused += TITLE_BOOST * weights[c.chunk.id]
            return
        order = sorted(named, key=lambda p: (-named[p], -(best[p].cosine or -1.0), p))
        for rank, path in enumerate(order, start=1):
            c = best[path]
            c.named = True
            c.fused += TITLE_WEIGHT * weights[c.chunk.id] / (RRF_K + rank)

    def _chroma_nearest(
        self,
        qvec: np.ndarray,
        pool: int,
        k: int,
        allowed: set[str] | None,
        phrase_ids: set[str] | None,
    ) -> list[tuple[str, float]]:
        """Semantic candidates from Chroma: unfiltered queries, and filtered ones in an index
        too large for the in-memory table (the caller drops notes a filter does not allow)."""
        where = None
        sem_pool = pool
        if allowed is not None:
            total = len(self._files_meta())
            share = len(allowed) / total if total else 1.0
            if share >= BROAD_FILTER_SHARE:
                # A filter most notes pass: a `$in` over thousands of paths costs Chroma more
                # than over-fetching and dropping the few others afterwards.
                sem_pool = int(pool / share) + k
            else:
                where = {"path": {"$in": sorted(allowed)}}
        ids = sorted(phrase_ids) if phrase_ids is not None else None
        assert self.store is not None  # a read-only searcher always has the vector table
        return self.store.query(qvec, sem_pool, where=where, ids=ids)

    def _vector_table(self) -> _VectorTable | None:
        """The in-memory vectors for exact filtered search, reloaded when the index changed;
        None when the index is too large to hold them (Chroma filters instead)."""
        gen = self.manifest.generation
        table = self._table
        if table is not None and table.generation == gen:
            return table
        with self._table_lock:
            table = self._table
            if table is not None and table.generation == gen:
                return table
            if self.store is not None and self.manifest.counts()[1] > EXACT_FILTER_MAX_CHUNKS:
                return None
            ids, paths, matrix = self.manifest.vector_table()
            table = _VectorTable(gen, ids, paths, matrix)
            self._table = table
            return table

    def _query_vector_for_scores(self, text: str) -> np.ndarray | None:
        # Keyword mode still reports cosine scores when the model is already loaded, but never
        # loads it just for that: keyword mode must work (and be fast) without the model.
        if getattr(self.embedder, "loaded", True):
            return self.embedder.embed_query(text)
        return None

    def _fill_cosines(self, cands: Any, qvec: np.ndarray | None) -> None:
        missing = [c for c in cands if c.cosine is None]
        if not missing or qvec is None:
            return
        vecs = self.manifest.vectors(c.chunk.embed_hash for c in missing)
        for c in missing:
            v = vecs.get(c.chunk.embed_hash)
            if v is not None:
                c.cosine = float(np.dot(v, qvec))

    def _collapse(
        self, ordered: Sequence[_Candidate], k: int, per_file: int, mode: str,
        fusion: str | None = None,
    ) -> list[Hit]:
        hits: list[Hit] = []
        seen_sections: dict[tuple[str, int], int] = {}
        per_path: dict[str, int] = {}
        for c in ordered:
            ch = c.chunk
            key = (ch.path, ch.section)
            if key in seen_sections:
                # Another chunk of a section already listed: widen that hit's range instead.
                i = seen_sections[key]
                h = hits[i]
                hits[i] = replace(
                    h, start_line=min(h.start_line, ch.start_line),
                    end_line=max(h.end_line, ch.end_line),
                )
                continue
            if per_path.get(ch.path, 0) >= per_file:
                continue
            per_path[ch.path] = per_path.get(ch.path, 0) + 1
            seen_sections[key] = len(hits)
            hits.append(
                Hit(
                    path=ch.path,
                    title=ch.title,
                    breadcrumb=ch.breadcrumb,
                    start_line=ch.start_line,
                    end_line=ch.end_line,
                    score=float(c.cosine) if c.cosine is not None else 0.0,
                    snippet=make_snippet(ch.text),
                    chunk_id=ch.id,
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
            if len(hits) >= k:
                break
        return hits

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
        table = self._vector_table() if self.store is None else None
        if table is not None:
            # the note's own chunks are dropped after: over-fetch by as many as it has
            own = table.rows_of_path.get(exclude_path or "")
            extra = 0 if own is None else int(own.size)
            found = [hit for hit in table.nearest(vector, pool + extra, None, None)
                     if table.paths[table.row_of[hit[0]]] != exclude_path][:pool]
        else:
            assert self.store is not None  # no table only when Chroma is there to ask
            where = {"path": {"$ne": exclude_path}} if exclude_path else None
            found = self.store.query(vector, pool, where=where)
        if not found:
            return []
        records = self.manifest.get_chunks([cid for cid, _ in found])
        cands = [
            _Candidate(chunk=records[cid], semantic_rank=i, cosine=sim)
            for i, (cid, sim) in enumerate(found, start=1)
            if cid in records and records[cid].path != exclude_path
        ]
        boiler = self.manifest.body_file_counts(c.chunk.body_hash for c in cands)
        for c in cands:
            c.fused = (c.cosine or 0.0) * boilerplate_weight(boiler.get(c.chunk.body_hash, 1))
        cands = [c for c in cands if (c.cosine or 0.0) >= min_score]
        ordered = sorted(cands, key=lambda c: (-c.fused, c.chunk.id))
        return self._collapse(ordered, k, per_file, "related")


class _VectorTable:
    """Every chunk vector of one index generation, for exact search over a filtered subset."""

    def __init__(self, generation: int, ids: list[str], paths: list[str], matrix: np.ndarray):
        self.generation = generation
        self.ids = ids
        self.paths = paths
        self.matrix = matrix
        self.row_of = {cid: i for i, cid in enumerate(ids)}
        rows: dict[str, list[int]] = {}
        for i, p in enumerate(paths):
            rows.setdefault(p, []).append(i)
        self.rows_of_path = {p: np.asarray(r, dtype=np.int64) for p, r in rows.items()}
        # Rows per allowed-path set: Searcher caches those sets, so a filter typed again (or
        # refined word by word) finds its rows here instead of gathering thousands of arrays.
        self._rows_memo: OrderedDict[int, tuple[set[str], np.ndarray]] = OrderedDict()
        self._memo_lock = threading.Lock()

    def nearest(
        self,
        qvec: np.ndarray,
        k: int,
        paths: set[str] | None,
        ids: set[str] | None,
    ) -> list[tuple[str, float]]:
        """The ``k`` chunks closest to ``qvec`` among those of ``paths`` and in ``ids``; with
        neither, among all (only a read-only searcher asks that: it has no Chroma)."""
        if ids is None and paths is None:
            rows = np.arange(len(self.ids), dtype=np.int64)
        elif ids is None:
            assert paths is not None
            rows = self._rows_for(paths)
        else:
            rows = np.asarray(sorted(self.row_of[c] for c in ids if c in self.row_of
                                     and (paths is None or self.paths[self.row_of[c]] in paths)),
                              dtype=np.int64)
        if rows.size == 0 or self.matrix.size == 0:
            return []
        sims = self.matrix[rows] @ np.asarray(qvec, dtype=np.float32)
        n = min(k, rows.size)
        top = np.argpartition(-sims, n - 1)[:n]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.ids[int(rows[i])], float(sims[i])) for i in top]

    def _rows_for(self, paths: set[str]) -> np.ndarray:
        with self._memo_lock:
            hit = self._rows_memo.get(id(paths))
            if hit is not None and hit[0] is paths:
                self._rows_memo.move_to_end(id(paths))
                return hit[1]
        parts = [self.rows_of_path[p] for p in paths if p in self.rows_of_path]
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        with self._memo_lock:
            self._rows_memo[id(paths)] = (paths, rows)  # holding `paths` keeps its id unique
            while len(self._rows_memo) > 16:
                self._rows_memo.popitem(last=False)
        return rows


def _fuse_convex(cands: list[_Candidate]) -> None:
    """Score fusion: unlike RRF it keeps how far apart two candidates are, so a section that is
    clearly the best semantic match is not pulled level with a weak keyword hit of equal rank."""
    cos = [c.cosine for c in cands if c.cosine is not None]
    lo, hi = (min(cos), max(cos)) if cos else (0.0, 1.0)
    lo = min(lo, hi - CONVEX_MIN_SPAN)
    best = max((c.bm25 or 0.0 for c in cands), default=0.0) or 1.0
    for c in cands:
        dense = ((c.cosine or lo) - lo) / (hi - lo) if hi > lo else 0.0
        sparse = (c.bm25 or 0.0) / best
        c.fused = CONVEX_ALPHA * dense + (1.0 - CONVEX_ALPHA) * sparse


def _fuse_notes(cands: list[_Candidate], weights: dict[str, float]) -> None:
    """Fuse the two lists at note level: each note enters each list at its best chunk's rank.

    Chunk-level RRF splits a note's evidence when one chunk matches the meaning and another the
    words (a long page, a section and its continuation): neither chunk gets both contributions.
    Here every list is reduced to its notes (a note's rank is where its best chunk, boilerplate
    weighted, stands), the note ranks are fused, and the note's best chunk carries that score;
    its other chunks keep their own chunk-level score, so a second section of a note still has
    to earn its place against other notes.
    """
    notes: dict[str, float] = {}
    for attr, w in (("semantic_rank", SEMANTIC_WEIGHT), ("keyword_rank", KEYWORD_WEIGHT)):
        # Each note's entry in this list: its chunk with the best boilerplate-weighted RRF term.
        entry: dict[str, tuple[float, float]] = {}
        for c in cands:
            rank = getattr(c, attr)
            if rank is None:
                continue
            bw = weights[c.chunk.id]
            term = bw / (RRF_K + rank)
            if c.chunk.path not in entry or term > entry[c.chunk.path][0]:
                entry[c.chunk.path] = (term, bw)
        ordered = sorted(entry.items(), key=lambda kv: (-kv[1][0], kv[0]))
        for note_rank, (path, (_, bw)) in enumerate(ordered, start=1):
            notes[path] = notes.get(path, 0.0) + w * bw / (RRF_K + note_rank)
    best: dict[str, _Candidate] = {}
    matched: dict[str, int] = {}
    for c in cands:
        p = c.chunk.path
        matched[p] = matched.get(p, 0) + 1
        b = best.get(p)
        if b is None or (c.fused, c.cosine or 0.0) > (b.fused, b.cosine or 0.0):
            best[p] = c
    for p, c in best.items():
        bonus = MULTI_CHUNK_BONUS * math.log(matched[p]) / (RRF_K + 1)
        c.fused = max(c.fused, notes.get(p, 0.0) + bonus)


def boilerplate_weight(n_files: int) -> float:
    """Down-weight text that recurs in many notes (templates, daily-note scaffolding).

    Two notes sharing a section is often a real duplicate worth finding; from three on it is a
    pattern, and its weight falls with the log of how common it is.
    """
    if n_files < 3:
        return 1.0
    return 1.0 / (1.0 + math.log(n_files / 2.0))


_WS = re.compile(r"\s+")
_MD_NOISE = re.compile(r"^\s{0,3}(#{1,6}\s+|[-*+]\s+|>\s?|\d+[.)]\s+)", re.M)


_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def make_snippet(text: str, limit: int = 200) -> str:
    """A one-line preview of the body: the heading is already shown as the title, so it goes, as
    does markup at line starts; whitespace is collapsed and the cut falls between words."""
    lines = text.split("\n")
    if len(lines) > 1 and _SETEXT.match(lines[1]) and lines[0].strip():
        lines = lines[2:]
    elif lines and re.match(r"^\s{0,3}#{1,6}(\s|$)", lines[0]):
        lines = lines[1:]
    body = "\n".join(lines)
    flat = _WS.sub(" ", _MD_NOISE.sub("", body)).strip() or _WS.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def mean_vector(vectors: Sequence[np.ndarray]) -> np.ndarray | None:
    """The normalised centroid of a section's chunk vectors (its "meaning" for related)."""
    if not vectors:
        return None
    v = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v

