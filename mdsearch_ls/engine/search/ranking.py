"""Fusing the semantic and keyword candidate lists into one order, with every knob in one place.

The functions here see only candidate lists and :class:`RankingParams` (no index, no model), so
a benchmark can try another weight by passing parameters, and a unit test can check a fusion
rule on hand-made candidates. Why the defaults are what they are is measured in
benchmarks/README.md (quality).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from mdsearch_ls.config import FUSIONS, Settings
from mdsearch_ls.engine.locations import ChunkRecord

if TYPE_CHECKING:
    from mdsearch_ls.engine.search.note_lookups import Name


@dataclass(frozen=True)
class RankingParams:
    """Every ranking knob, with the values the labelled query sets measured best."""

    fusion: str = Settings.fusion
    """How hybrid mode fuses the two lists: "convex" (CONVEX_ALPHA x min-max cosine + the rest x
    BM25 / best BM25, over the candidates) or "rrf" (reciprocal rank fusion). Convex ranked
    better on both labelled sets: RRF sees only ranks, so a section that is by far the closest
    in meaning is pulled level with a weak keyword hit that holds the same rank in the other
    list."""
    convex_alpha: float = 0.7
    """Weight of the scaled cosine in convex fusion; BM25 gets the rest."""
    convex_min_span: float = 0.25
    """Convex fusion scales cosines to [0, 1] over the candidates, but never over a range
    narrower than this: in a small vault, or when every candidate is about as close, min-max
    would turn a 0.05 cosine gap into the full scale and drown the keyword evidence (and the
    boilerplate down-weighting) in noise. Half the candidate pools measured on tldr span 0.27
    or more."""
    rrf_k: int = 60
    """The k of reciprocal rank fusion, 1 / (k + rank)."""
    semantic_weight: float = 1.0
    """Weight of the semantic list in rrf fusion (and in the single semantic mode's order)."""
    keyword_weight: float = 1.0
    """Weight of the keyword list in rrf fusion (and in the single keyword mode's order)."""
    title_boost: float = 0.25
    """Hybrid mode rewards a note whose name the query spells out: every word of its title
    (front matter or file name) or of one of its aliases is in the query ("revenue tracking"
    names Revenue tracking.md, "find files owned by tom" names find.md). It is the signal a
    person gives when they remember what a note is called, and neither list ranks it
    reliably: BM25 spreads it over the body's words, the embedding blurs it. In convex fusion
    this is added to the fused score (which lies in [0, 1])."""
    title_weight: float = 1.0
    """In rrf fusion the named notes are a third ranked list (longer names first) of this
    weight."""
    name_semantic_rank: int = 3
    """A name or a word? In a question, a note named by one word ("rerun tests every time I
    save a file" names nushell's reference page ``save``; issue 57's site names its ``year``
    and ``page`` pages in every other question) is rewarded only if the semantic list also
    ranks one of its sections among this many first, or if the word is rare in the vault
    (``name_rare_share``). A name of two or more content words, one the query writes as a
    name (a code span, quotes, capitals past the first word, the whole query) and any name in
    a query that reads as an exact term are rewarded as before. 0: every named note is
    rewarded (the rule before issue 57). Measured in benchmarks/README.md (issue 57)."""
    name_rare_share: float = 0.05
    """A one-word name counts as a name when at most this share of the vault's notes hold the
    word: tldr's command names (``find`` 2 %, ``xargs``) are rare in its prose, an API
    reference's everyday words are not (nushell's ``table`` 36 %, ``error`` 9 %)."""
    phrase_mode: str = "prefer"
    """What a phrase typed in quotes is: "prefer" (every section is searched, those holding it
    gain ``phrase_boost``) or "require" (only sections holding it are searched, as a phrase
    given as a filter always is). On the nl2bash/tldr set, where quotes mark example arguments
    ("file1", "destination_dir"), requiring them cost hybrid top-5 0.564 -> 0.477 (README).
    Either way a phrase no section holds never empties the result."""
    phrase_boost: float = 0.1
    """What holding every preferred phrase adds to the fused score (in proportion for some):
    on the convex scale, or as much as a first place in a list of that weight for rrf and the
    single modes. Measured on nl2bash/tldr: 0.05 / 0.1 / 0.25 / 0.5 gave hybrid top-5 0.570 /
    0.564 / 0.559 / 0.542."""
    exact_alpha: float = 0.3
    """Convex alpha for a query that reads as an exact term rather than a question (see
    :func:`looks_exact`: ``Ctrl+E``, ``aliases:``, ``YubiKey``): the words typed are the
    evidence there, and the model, which embeds ``Ctrl+E`` close to every shortcut, is not."""
    long_note_penalty: float = 0.06
    """Convex fusion subtracts this x ln(chunks / ``long_note_free_chunks``) from the score of a
    section of a note longer than that: a note of 160 chunks has 160 chances that one section
    is close to a query by accident, so a broad reference page (a CLI manual, every setting)
    outranked the short page about the one thing asked."""
    long_note_free_chunks: int = 4
    """Notes up to this many chunks (sections, see ``long_note_by``) pay no long-note penalty
    (nearly every tldr page, most notes of a small vault)."""
    long_note_by: str = "sections"
    """What makes a note long for the penalty: its "sections" (headings' spans) or its
    "chunks" (the rule before issue 57). A reference page of 160 one-line sections has 160
    chances that one is close to a query by accident; a book chapter whose 20 sections are
    cut into 60 chunks has 20, and it is the answer to many questions about its subject
    (nushell's book: 60 chunks in 27 sections for Configuration)."""
    short_floor: float = 0.75
    """Convex fusion scales the BM25 of a section shorter than this x the median length (in
    words) of the pool's keyword hits as if it had that length, for a hit of one term: BM25's
    length normalisation lifts a one-paragraph reference page that holds one common word of a
    question up to 1.7 x the same hit in a section of ordinary length, enough to outrank the
    section that answers in other words. 0: off."""
    title_column_weight: float = 4.0
    """BM25 weight of the FTS title column (section title, heading path, note title and
    aliases) against the body column's 1."""
    min_pool: int = 60
    """The ranking depth: candidates taken from each list and ranked together, whatever k, and
    what convex fusion scales cosines and BM25 over. The order of the first hits is a function
    of the query and the index alone, so a person asking for 50 results sees the 5 that 5
    would show, first (a pool that grew with k moved the min-max range and every score: the
    first 5 of k=5 and k=50 differed on 123 of 184 obsidian-help queries). 60 is the pool that
    k=10 had before, so the figures measured at k=10 keep their meaning."""
    pool_per_hit: int = 6
    """When the ranked pool holds fewer than k hits (k beyond about ``min_pool / 2`` with one
    hit per note), a deeper pool of k x this per list is fetched and its other candidates are
    ranked, on the first pool's scale, after the first pool's hits."""

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion: expected one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.phrase_mode not in ("require", "prefer"):
            raise ValueError(f"phrase_mode: expected require or prefer, got {self.phrase_mode!r}")
        if not 0.0 <= self.convex_alpha <= 1.0:
            raise ValueError(f"convex_alpha: expected 0 to 1, got {self.convex_alpha}")
        if not 0.0 <= self.exact_alpha <= 1.0:
            raise ValueError(f"exact_alpha: expected 0 to 1, got {self.exact_alpha}")
        if self.rrf_k < 0 or self.min_pool < 1 or self.pool_per_hit < 1:
            raise ValueError("rrf_k must be >= 0, min_pool and pool_per_hit >= 1")
        if self.long_note_penalty < 0 or self.long_note_free_chunks < 1:
            raise ValueError("long_note_penalty must be >= 0, long_note_free_chunks >= 1")
        if self.title_column_weight <= 0:
            raise ValueError("title_column_weight must be > 0")
        if self.long_note_by not in ("sections", "chunks"):
            raise ValueError(f"long_note_by: expected sections or chunks, got "
                             f"{self.long_note_by!r}")
        if self.short_floor < 0 or self.name_semantic_rank < 0 or self.name_rare_share < 0:
            raise ValueError("short_floor, name_semantic_rank and name_rare_share must be >= 0")

    def pool(self, k: int) -> int:
        """How many candidates to take from each list to fill ``k`` hits when the ranked pool
        (``min_pool``) does not."""
        return max(self.min_pool, k * self.pool_per_hit)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters' names (what a benchmark's ``--param`` accepts)."""
        return tuple(f.name for f in fields(cls))


@dataclass
class Candidate:
    """One chunk found by either list, with what each list said about it."""

    chunk: ChunkRecord
    semantic_rank: int | None = None
    keyword_rank: int | None = None
    cosine: float | None = None
    """Similarity to the query; None when not computed (keyword mode never embeds the query)."""
    bm25: float | None = None
    weight: float = 1.0
    """The boilerplate weight of the chunk's body (see :func:`boilerplate_weight`)."""
    fused: float = 0.0
    named: bool = False
    """Whether the named-note reward went to this candidate."""
    phrase_share: float = 0.0
    """The share of the query's preferred phrases the chunk holds."""
    required_share: float = 0.0
    """The share of the required phrases the chunk holds, when no section held them all and
    they were dropped: the chunks holding more of them rank first."""
    note_chunks: int = 1
    """How long the candidate's note is, in the unit of ``RankingParams.long_note_by`` (for the
    long-note penalty)."""


def boilerplate_weight(n_files: int) -> float:
    """Down-weight text that recurs in many notes (templates, daily-note scaffolding).

    Two notes sharing a section is often a real duplicate worth finding; from three on it is a
    pattern, and its weight falls with the log of how common it is.
    """
    if n_files < 3:
        return 1.0
    return 1.0 / (1.0 + math.log(n_files / 2.0))


def looks_exact(text: str) -> bool:
    """Whether a query reads as an exact term rather than a question: at most two words, or at
    most five with a symbol among them (``Ctrl+Shift+V``, ``[[note#^block]]``,
    ``npm install -g x``). A long question that quotes a file name is still a question."""
    words = text.split()
    if not words:
        return False
    if len(words) <= 2:
        return True
    return len(words) <= 5 and (
        any(not (ch.isalnum() or ch.isspace() or ch in "?',.!-") for ch in text)
        or any(w.startswith("-") for w in words))  # a command-line flag


def long_note_penalty(chunks: int, params: RankingParams) -> float:
    """What a section of a note of ``chunks`` chunks (or sections) loses in convex fusion."""
    if chunks <= params.long_note_free_chunks:
        return 0.0
    return params.long_note_penalty * math.log(chunks / params.long_note_free_chunks)


@dataclass(frozen=True)
class Scale:
    """What convex fusion scales by: the cosine range and the best BM25 of the ranked pool.
    Taken from the fixed-depth pool only, so candidates fetched to fill a larger k are scored
    on the same scale and cannot move the first pool's scores."""

    lo: float
    hi: float
    best: float


def convex_scale(cands: Sequence[Candidate], params: RankingParams) -> Scale:
    """The min-max cosine range (never narrower than ``convex_min_span``) and the best BM25."""
    cos = [c.cosine for c in cands if c.cosine is not None]
    lo, hi = (min(cos), max(cos)) if cos else (0.0, 1.0)
    lo = min(lo, hi - params.convex_min_span)
    best = max((c.bm25 or 0.0 for c in cands), default=0.0) or 1.0
    return Scale(lo, hi, best)


def convex(cands: Sequence[Candidate], params: RankingParams, *, exact: bool = False,
           scale: Scale | None = None) -> list[float]:
    """Score fusion: unlike RRF it keeps how far apart two candidates are, so a section that is
    clearly the best semantic match is not pulled level with a weak keyword hit of equal rank.
    ``exact``: the query reads as an exact term, and BM25 gets more weight. ``scale``: the
    ranked pool's (default: these candidates')."""
    alpha = params.exact_alpha if exact else params.convex_alpha
    sc = scale or convex_scale(cands, params)
    lo, hi, best = sc.lo, sc.hi, sc.best
    floor = 0.0
    if params.short_floor:
        lengths = sorted(_words(c) for c in cands if c.bm25)
        floor = params.short_floor * lengths[len(lengths) // 2] if lengths else 0.0
    out = []
    for c in cands:
        dense = ((c.cosine or lo) - lo) / (hi - lo) if hi > lo else 0.0
        sparse = (c.bm25 or 0.0) / best
        if c.bm25 and floor:
            sparse *= short_section_factor(_words(c), floor)
        out.append(alpha * dense + (1.0 - alpha) * sparse)
    return out


def _words(c: Candidate) -> int:
    return len(c.chunk.text.split())


def short_section_factor(length: int, floor: float, k1: float = 1.2, b: float = 0.75) -> float:
    """BM25 of one hit in a section of ``floor`` words over the same hit in one of ``length``
    (1 from ``floor`` on). BM25 divides a hit by ``1 + k1 (1 - b + b len / avg)``; taking
    ``floor`` as the average, a section of ``floor`` words has 1 + k1 there, a shorter one
    less (at least 1 + k1 (1 - b)): this is that ratio, FTS5's k1 and b."""
    if length >= floor:
        return 1.0
    return (1.0 + k1 * (1.0 - b + b * length / floor)) / (1.0 + k1)


def rrf(cands: Sequence[Candidate], params: RankingParams) -> list[float]:
    """Reciprocal rank fusion: each list a candidate is in adds weight / (k + its rank)."""
    out = []
    for c in cands:
        fused = 0.0
        if c.semantic_rank is not None:
            fused += params.semantic_weight / (params.rrf_k + c.semantic_rank)
        if c.keyword_rank is not None:
            fused += params.keyword_weight / (params.rrf_k + c.keyword_rank)
        out.append(fused)
    return out


def names_not_words(cands: Sequence[Candidate], named: Mapping[str, Name], query: str,
                    params: RankingParams) -> set[str]:
    """The named notes that are named, not merely mentioned by a word of a question (see
    ``RankingParams.name_semantic_rank``)."""
    if not params.name_semantic_rank or looks_exact(query):
        return set(named)
    near = {c.chunk.path for c in cands
            if c.semantic_rank is not None and c.semantic_rank <= params.name_semantic_rank}
    return {p for p, n in named.items() if n.words >= 2 or n.written or n.rare or p in near}


def named_rewards(
    cands: Sequence[Candidate],
    fused: Sequence[float],
    named: Mapping[str, Name],
    fusion: str,
    params: RankingParams,
    query: str = "",
) -> dict[int, float]:
    """What the named-note signal adds, by candidate index: only to each named note's best
    section (by ``fused``, then cosine), so a note named by a common word ("Search") does not
    fill the list with all its sections; they still have to earn their places. Only notes
    named by a name get it (:func:`names_not_words`).

    ``named`` maps each note the query names to how it names it.
    """
    named = {p: named[p] for p in names_not_words(cands, named, query, params)}
    best: dict[str, int] = {}
    for i, c in enumerate(cands):
        b = best.get(c.chunk.path)
        if c.chunk.path in named and (
            b is None or (fused[i], c.cosine or 0.0) > (fused[b], cands[b].cosine or 0.0)
        ):
            best[c.chunk.path] = i
    if fusion == "convex":
        return {i: params.title_boost * cands[i].weight for i in best.values()}
    order = sorted(named, key=lambda p: (-named[p].words, -(cands[best[p]].cosine or -1.0), p))
    return {
        best[path]: params.title_weight * cands[best[path]].weight / (params.rrf_k + rank)
        for rank, path in enumerate(order, start=1)
    }


def rank(
    cands: Sequence[Candidate],
    *,
    mode: str,
    fusion: str,
    named: Mapping[str, Name],
    params: RankingParams,
    query: str = "",
    scale: Scale | None = None,
) -> list[Candidate]:
    """The candidates with their fused scores, best first.

    Hybrid mode fuses by ``fusion`` and adds the named-note reward; a single mode orders by
    its own list's reciprocal rank. Every score is scaled by the candidate's boilerplate
    weight. Convex fusion weighs BM25 more for a ``query`` that reads as an exact term and
    charges sections of long notes the long-note penalty. Candidates holding preferred phrases
    gain ``params.phrase_boost``; those holding more of a dropped requirement's phrases come
    first. Ties are broken by cosine, then chunk id, so the order is deterministic.
    ``scale``: what convex fusion scales by (default: these candidates' own, see
    :func:`convex_scale`).
    """
    hybrid = mode == "hybrid"
    scored = hybrid and fusion == "convex"
    base = (convex(cands, params, exact=looks_exact(query), scale=scale) if scored
            else rrf(cands, params))
    fused = [f * c.weight for f, c in zip(base, cands, strict=True)]
    if scored:
        # After the boilerplate weight: scaling a score the penalty made negative would raise it.
        fused = [f - long_note_penalty(c.note_chunks, params)
                 for f, c in zip(fused, cands, strict=True)]
    scale = 1.0 if hybrid and fusion == "convex" else 1.0 / (params.rrf_k + 1)
    for i, c in enumerate(cands):
        if c.phrase_share:
            fused[i] += params.phrase_boost * c.phrase_share * c.weight * scale
    rewards = (named_rewards(cands, fused, named, fusion, params, query) if hybrid and named
               else {})
    for i, extra in rewards.items():
        fused[i] += extra
    ranked = [replace(c, fused=f, named=i in rewards) for i, (c, f) in enumerate(zip(
        cands, fused, strict=True))]
    return sorted(ranked, key=lambda c: (-c.required_share, -c.fused, -(c.cosine or 0.0),
                                         c.chunk.id))
