"""Tests for ranking: the fusion rules on hand-made candidate lists, and their parameters."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mdsearch_ls.engine.locations import ChunkRecord
from mdsearch_ls.engine.search.note_lookups import Name
from mdsearch_ls.engine.search.ranking import (
    Candidate,
    RankingParams,
    convex,
    long_note_penalty,
    looks_exact,
    names_not_words,
    rank,
    rrf,
    short_section_factor,
)


def chunk(cid: str, path: str | None = None, text: str | None = None) -> ChunkRecord:
    path = path or f"{cid}.md"
    return ChunkRecord(path=path, title=cid, breadcrumb=cid, start_line=0, end_line=1, id=cid,
                       ordinal=0, section=0, text=text or cid, embed_hash=f"e{cid}",
                       body_hash=f"b{cid}")


def cand(cid: str, *, sem=None, kw=None, cos=None, bm25=None, path=None, weight=1.0,
         chunks=1, words=None):
    text = " ".join(["word"] * words) if words else None
    return Candidate(chunk=chunk(cid, path, text), semantic_rank=sem, keyword_rank=kw,
                     cosine=cos, bm25=bm25, weight=weight, note_chunks=chunks)


def order(cands, **kw) -> list[str]:
    kw.setdefault("named", {})
    kw.setdefault("params", RankingParams())
    return [c.chunk.id for c in rank(cands, **kw)]


def test_params_reject_what_cannot_work():
    with pytest.raises(ValueError, match="fusion"):
        RankingParams(fusion="borda")
    with pytest.raises(ValueError, match="convex_alpha"):
        RankingParams(convex_alpha=1.5)
    with pytest.raises(ValueError):
        RankingParams(min_pool=0)
    with pytest.raises(ValueError, match="exact_alpha"):
        RankingParams(exact_alpha=-0.1)
    with pytest.raises(ValueError, match="long_note"):
        RankingParams(long_note_free_chunks=0)
    with pytest.raises(ValueError, match="long_note_by"):
        RankingParams(long_note_by="words")
    with pytest.raises(ValueError, match="short_floor"):
        RankingParams(short_floor=-1.0)
    assert RankingParams(min_pool=10, pool_per_hit=3).pool(2) == 10
    assert RankingParams(min_pool=10, pool_per_hit=3).pool(20) == 60
    assert "convex_alpha" in RankingParams.names()


def test_convex_keeps_the_gap_rrf_flattens():
    cands = [cand("x", sem=1, cos=0.9), cand("b", sem=2, kw=2, cos=0.3, bm25=8.5),
             cand("y", kw=1, cos=0.1, bm25=9.0)]
    assert order(cands, mode="hybrid", fusion="convex")[0] == "x"
    assert order(cands, mode="hybrid", fusion="rrf")[0] == "b"
    # The weights are parameters: all weight on BM25 puts the best keyword hit first.
    keyword_only = RankingParams(convex_alpha=0.0)
    assert order(cands, mode="hybrid", fusion="convex", params=keyword_only)[0] == "y"


def test_convex_scales_over_at_least_the_minimum_span():
    """Two candidates 0.05 apart in cosine: min-max alone would make that the full scale."""
    cands = [cand("a", sem=1, cos=0.80), cand("b", sem=2, cos=0.75)]
    a, b = convex(cands, RankingParams(convex_alpha=1.0, convex_min_span=0.25))
    assert a == pytest.approx(1.0) and b == pytest.approx(0.8)
    a, b = convex(cands, RankingParams(convex_alpha=1.0, convex_min_span=0.0))
    assert (a, b) == (pytest.approx(1.0), pytest.approx(0.0))


def test_rrf_weights_and_k():
    cands = [cand("s", sem=1), cand("k", kw=1)]
    s, k = rrf(cands, RankingParams(rrf_k=10, semantic_weight=2.0))
    assert s == pytest.approx(2 / 11) and k == pytest.approx(1 / 11)


def test_boilerplate_weight_scales_every_mode():
    cands = [cand("common", sem=1, cos=0.9, weight=0.3), cand("own", sem=2, cos=0.85)]
    for mode, fusion in (("hybrid", "convex"), ("hybrid", "rrf"), ("semantic", "convex")):
        assert order(cands, mode=mode, fusion=fusion) == ["own", "common"]


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_the_named_reward_goes_to_one_section_of_the_named_note_in_hybrid_only(fusion):
    cands = [cand("other", sem=1, kw=1, cos=0.9, bm25=9.0),
             cand("named-1", sem=2, kw=2, cos=0.85, bm25=8.0, path="Named.md"),
             cand("named-2", sem=3, kw=3, cos=0.84, bm25=7.9, path="Named.md")]
    ranked = rank(cands, mode="hybrid", fusion=fusion, named={"Named.md": Name(1, False)},
                  params=RankingParams())
    assert ranked[0].chunk.id == "named-1"
    assert [c.chunk.id for c in ranked if c.named] == ["named-1"]
    plain = rank(cands, mode="semantic", fusion=fusion, named={"Named.md": Name(1, False)},
                 params=RankingParams())
    assert plain[0].chunk.id == "other" and not any(c.named for c in plain)


def test_rank_does_not_change_its_input():
    cands = [cand("a", sem=1, cos=0.5)]
    ranked = rank(cands, mode="hybrid", fusion="convex", named={"a.md": Name(1, False)},
                  params=RankingParams())
    assert ranked[0].fused > 0 and ranked[0].named
    assert cands[0].fused == 0.0 and not cands[0].named


def test_a_dropped_requirement_is_a_tier_and_a_preference_a_boost():
    near = cand("near", sem=1, cos=0.9)
    # A required phrase no section held with the others: its holders first, however far behind.
    held = replace(cand("held", sem=2, cos=0.6), required_share=0.5)
    assert order([near, held], mode="hybrid", fusion="convex") == ["held", "near"]
    assert order([near, held], mode="semantic", fusion="convex") == ["held", "near"]
    # A preferred phrase only adds: too little to overtake a clearly closer section...
    prefers = replace(cand("prefers", sem=2, cos=0.6), phrase_share=1.0)
    assert order([near, prefers], mode="hybrid", fusion="convex") == ["near", "prefers"]
    # ... enough between two about as close, and in proportion to the boost.
    close = replace(cand("close", sem=2, cos=0.88), phrase_share=1.0)
    assert order([near, close], mode="hybrid", fusion="convex") == ["close", "near"]
    assert order([near, close], mode="hybrid", fusion="convex",
                 params=RankingParams(phrase_boost=0.0)) == ["near", "close"]
    assert order([near, prefers], mode="hybrid", fusion="rrf",
                 params=RankingParams(phrase_boost=1.5)) == ["prefers", "near"]


@pytest.mark.parametrize("query", ["Ctrl+E", "cssclasses", "Restricted mode", "[[note#^block]]",
                                   "npm install -g obsidian-headless", "aliases:"])
def test_terms_look_exact(query):
    assert looks_exact(query)


@pytest.mark.parametrize("query", [
    "", "toggle dark mode", "how do I undo a bad deploy",
    'Add execute permission to all files ending in ".sh"',  # a question quoting a name
    "can it open pdfs and videos?",
])
def test_questions_do_not_look_exact(query):
    assert not looks_exact(query)


def test_an_exact_term_weighs_bm25_more_than_a_question_does():
    """The same two candidates: the closest in meaning wins a question, the one holding the
    typed term wins when the query is the term itself."""
    cands = [cand("meaning", sem=1, kw=2, cos=0.80, bm25=2.0),
             cand("words", sem=2, kw=1, cos=0.60, bm25=9.0)]
    kw = {"mode": "hybrid", "fusion": "convex"}
    assert order(cands, query="what opens the reading view", **kw)[0] == "meaning"
    assert order(cands, query="Ctrl+E", **kw)[0] == "words"
    same = RankingParams(exact_alpha=RankingParams().convex_alpha)
    assert order(cands, query="Ctrl+E", params=same, **kw)[0] == "meaning"


def test_long_notes_pay_a_penalty_that_grows_with_their_length():
    p = RankingParams(long_note_penalty=0.06, long_note_free_chunks=4)
    assert long_note_penalty(1, p) == 0.0 and long_note_penalty(4, p) == 0.0
    assert long_note_penalty(8, p) == pytest.approx(0.06 * 0.6931, rel=1e-3)
    assert long_note_penalty(160, p) > long_note_penalty(40, p) > long_note_penalty(8, p)
    # A section of a 160-chunk reference page a little closer to the question than the short
    # page's loses to it; in rrf fusion and in the single modes the length does not count.
    cands = [cand("manual", sem=1, cos=0.82, path="Manual.md", chunks=160),
             cand("howto", sem=2, cos=0.78, path="How to.md", chunks=3)]
    q = "how do I do the thing"
    assert order(cands, mode="hybrid", fusion="convex", query=q) == ["howto", "manual"]
    assert order(cands, mode="hybrid", fusion="rrf", query=q) == ["manual", "howto"]
    assert order(cands, mode="semantic", fusion="convex", query=q) == ["manual", "howto"]
    off = RankingParams(long_note_penalty=0.0)
    assert order(cands, mode="hybrid", fusion="convex", query=q, params=off)[0] == "manual"


def test_boilerplate_in_a_long_note_stays_below_its_own_text():
    """The penalty is taken after the boilerplate weight: scaling a score the penalty made
    negative would lift a template section above the note's own text."""
    cands = [cand("top", sem=1, cos=0.9),
             cand("own", sem=2, cos=0.7, path="Long.md", chunks=160),
             cand("template", sem=3, cos=0.7, path="Long.md", chunks=160, weight=0.3)]
    assert order(cands, mode="hybrid", fusion="convex", query="what is in the long note") == [
        "top", "own", "template"]


def test_a_word_of_a_question_is_not_a_name_unless_something_says_it_is():
    """Issue 57: "rerun tests every time I save a file" names a reference page ``save`` by a
    word of the sentence. It keeps the reward only with other evidence: the semantic list ranks
    it near the top, the word is rare in the vault, the name has two words or is written as a
    name, or the whole query reads as an exact term."""
    cands = [cand("watch", sem=1, kw=2, cos=0.6, bm25=5.0),
             cand("save", sem=9, kw=1, cos=0.5, bm25=6.0),
             cand("far", sem=None, kw=3, cos=0.2, bm25=4.0)]
    word = Name(1, False)
    q = "rerun tests every time I save a file"
    p = RankingParams(name_semantic_rank=3)
    assert names_not_words(cands, {"save.md": word}, q, p) == set()
    assert names_not_words(cands, {"watch.md": word}, q, p) == {"watch.md"}  # ranked by meaning
    for name in (Name(2, False), Name(1, True), Name(1, False, rare=True)):
        assert names_not_words(cands, {"save.md": name}, q, p) == {"save.md"}
    assert names_not_words(cands, {"save.md": word}, "save", p) == {"save.md"}  # exact term
    off = RankingParams(name_semantic_rank=0)  # the rule before issue 57
    assert names_not_words(cands, {"save.md": word, "far.md": word}, q, off) == {
        "save.md", "far.md"}
    kw = {"mode": "hybrid", "fusion": "convex", "query": q}
    assert order(cands, named={"save.md": word}, params=p, **kw)[0] == "watch"
    assert order(cands, named={"save.md": word}, params=off, **kw)[0] == "save"


def test_a_very_short_section_does_not_win_on_the_lift_bm25_gives_short_texts():
    assert short_section_factor(100, 50.0) == 1.0 and short_section_factor(50, 50.0) == 1.0
    assert short_section_factor(25, 50.0) < 1.0
    # never below BM25's own floor for a text of no length: (1 + k1 (1 - b)) / (1 + k1)
    assert short_section_factor(0, 50.0) == pytest.approx((1 + 1.2 * 0.25) / 2.2)
    # One common word of the question: a one-paragraph page (12 words) holds it with a
    # higher BM25 than the answer (a section of ordinary length, closer in meaning) holds its
    # two words; the floor takes the page's lift away, and with it the first place.
    cands = [cand("answer", sem=1, kw=2, cos=0.62, bm25=7.0, words=80),
             cand("stub", sem=3, kw=1, cos=0.60, bm25=10.0, words=12),
             cand("other", sem=2, kw=3, cos=0.61, bm25=6.5, words=90)]
    kw = {"mode": "hybrid", "fusion": "convex", "query": "how do I make the corners round"}
    assert order(cands, params=RankingParams(short_floor=0.0), **kw)[0] == "stub"
    assert order(cands, params=RankingParams(short_floor=0.75), **kw)[0] == "answer"
