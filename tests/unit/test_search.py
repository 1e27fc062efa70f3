"""Tests for search: query syntax, fusion, filters in both modes, collapsing, boilerplate, cache.

Ranking here is asserted only in relative terms that any sane tuning keeps (an item found by both
retrievers beats one found by one; a filter never lets an outsider in), so these tests survive
changes to the weights in ranking.RankingParams.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.search.note_lookups import written_as_name
from mdsearch_ls.engine.search.query import (
    Filters,
    QueryError,
    structured_filters,
)
from mdsearch_ls.engine.search.ranking import RankingParams, boilerplate_weight


def ts(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").timestamp()


def test_a_structured_phrase_filters_and_ranks(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "a.md", "# A\n\nPayment terms are net 30 for every client.\n")
    write(root, "b.md", "# B\n\nPayment terms differ: 30 days net, usually.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    hits = ws.hits("payment terms", 5, filters=structured_filters(phrase="net 30"))
    assert [h.path for h in hits] == ["a.md"]
    # A phrase alone is a query too, as a typed "net 30" is.
    assert [h.path for h in ws.hits("", 5, filters=structured_filters(phrase="net 30"))] == [
        "a.md"
    ]


def test_boilerplate_weight():
    assert boilerplate_weight(1) == boilerplate_weight(2) == 1.0
    assert 0 < boilerplate_weight(5) < boilerplate_weight(3) < 1.0


def test_a_hits_snippet_is_the_text_a_reader_sees(tmp_path, write, make_workspace, fake_embedder):
    """Markup gone, a wikilink read as its alias, a code block as its first line: a ``#``
    comment there is code, not a heading marker to strip."""
    root = tmp_path / "notes"
    write(root, "s.md", "# Shell\n\nRun **this** with [[Tools|the tools]]:\n\n"
                        "```sh\n# list the files\nls -la\n```\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    (hit,) = ws.hits("list the files", 5)
    assert hit.snippet == "Run this with the tools: # list the files"


# ---- searching a real (small) index -----------------------------------------------------------


@pytest.fixture
def small(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "x.md", "# Xylophone\n\nMusic lessons on the xylophone.\n")
    write(root, "y.md", "# Yacht\n\nSailing a yacht in the bay.\n")
    write(root, "b.md", "# Both\n\nA page about both xylophones and yachts.\n")
    write(root, "c.md", "# Cello\n\nCello strings and bows.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    ids = {p: ws.manifest.file(p).chunk_ids[0] for p in ("x.md", "y.md", "b.md", "c.md")}
    return ws, ids


QUESTION = "which one is it about"


def test_rrf_item_ranked_well_in_both_beats_a_single_first(small, monkeypatch):
    ws, ids = small
    semantic = [(ids["x.md"], 0.9), (ids["b.md"], 0.8), (ids["c.md"], 0.1)]
    keyword_rows = [(ids["y.md"], 9.0), (ids["b.md"], 8.0)]
    monkeypatch.setattr(ws.searcher, "_nearest", lambda *a, **kw: list(semantic))
    monkeypatch.setattr(ws.manifest, "keyword_search", lambda *a, **kw: list(keyword_rows))

    hybrid = [h.path for h in ws.hits("anything", 10, mode="hybrid")]
    assert hybrid[0] == "b.md"
    assert set(hybrid) == {"x.md", "y.md", "b.md", "c.md"}
    assert hybrid.index("c.md") > max(hybrid.index("x.md"), hybrid.index("y.md"))

    assert [h.path for h in ws.hits("anything", 10, mode="semantic")] == ["x.md", "b.md", "c.md"]
    assert [h.path for h in ws.hits("anything", 10, mode="keyword")] == ["y.md", "b.md"]


def test_convex_fusion_keeps_score_gaps_that_rrf_flattens(small, monkeypatch):
    """x.md is by far the best semantic match; b.md is second in both lists. RRF, which sees
    only ranks, puts b.md first; convex fusion, which sees the gap, puts x.md first (for a
    question: a query that reads as an exact term weighs BM25 more, see test_ranking)."""
    ws, ids = small
    semantic = [(ids["x.md"], 0.9), (ids["b.md"], 0.3), (ids["c.md"], 0.1)]
    keyword_rows = [(ids["y.md"], 9.0), (ids["b.md"], 8.5)]
    monkeypatch.setattr(ws.searcher, "_nearest", lambda *a, **kw: list(semantic))
    monkeypatch.setattr(ws.manifest, "keyword_search", lambda *a, **kw: list(keyword_rows))

    def cosines(cands, qvec):
        for c in cands:
            if c.cosine is None:
                c.cosine = 0.1

    monkeypatch.setattr(ws.searcher, "_fill_cosines", cosines)
    rrf = [h.path for h in ws.searcher.search(QUESTION, 10, fusion="rrf").hits]
    convex = [h.path for h in ws.searcher.search(QUESTION, 10, fusion="convex").hits]
    assert rrf[0] == "b.md"
    assert convex[:2] == ["x.md", "b.md"]
    with pytest.raises(QueryError, match="fusion"):
        ws.searcher.search(QUESTION, 10, fusion="borda")


def test_ranking_parameters_are_passed_to_the_searcher(small, monkeypatch):
    """A benchmark tries a weight by replacing the searcher's parameters, not by editing a
    module: the same query then ranks differently, and the cache does not serve the old order."""
    from dataclasses import replace

    ws, ids = small
    semantic = [(ids["x.md"], 0.9), (ids["b.md"], 0.3), (ids["c.md"], 0.1)]
    keyword_rows = [(ids["y.md"], 9.0), (ids["b.md"], 8.5)]
    monkeypatch.setattr(ws.searcher, "_nearest", lambda *a, **kw: list(semantic))
    monkeypatch.setattr(ws.manifest, "keyword_search", lambda *a, **kw: list(keyword_rows))
    s = ws.searcher
    assert s.params == RankingParams()
    assert s.search(QUESTION, 10, fusion="convex").hits[0].path == "x.md"
    monkeypatch.setattr(s, "params", replace(s.params, convex_alpha=0.0))
    assert s.search(QUESTION, 10, fusion="convex").hits[0].path == "y.md"
    monkeypatch.setattr(s, "params", replace(s.params, fusion="rrf"))
    assert s.search(QUESTION, 10).hits[0].path == "b.md"  # no fusion given: the parameters'


def test_only_hybrid_adds_adjacent_word_pairs_to_the_keyword_query(small, monkeypatch):
    ws, _ = small
    seen: dict[str, str] = {}

    def record(match, limit, paths=None, weights=(4.0, 1.0), terms=None):
        seen[mode] = match
        return []

    monkeypatch.setattr(ws.manifest, "keyword_search", record)
    for mode in ("hybrid", "keyword"):
        ws.hits("sailing yacht", 5, mode=mode)
    assert seen["hybrid"] == '"sailing" OR "yacht" OR "sailing yacht"'
    assert seen["keyword"] == '"sailing" OR "yacht"'


def test_explain_carries_both_ranks(small, monkeypatch):
    ws, ids = small
    monkeypatch.setattr(ws.searcher, "_nearest", lambda *a, **kw: [(ids["b.md"], 0.5)])
    monkeypatch.setattr(ws.manifest, "keyword_search", lambda *a, **kw: [(ids["b.md"], 1.0)])
    hit = ws.hits("anything", 5)[0]
    assert hit.explain["semantic_rank"] == 1 and hit.explain["keyword_rank"] == 1
    assert hit.explain["fused"] > 0
    assert set(hit.to_json()) == {"path", "title", "breadcrumb", "start_line", "end_line",
                                  "score", "snippet"}
    assert "explain" in hit.to_json(explain=True)


@pytest.fixture
def named(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "Yacht club.md", "# Yacht club\n\nMembers meet on Fridays.\n")
    write(root, "Harbour.md",
          "---\naliases: [Marina]\n---\n# Harbour\n\nThe yacht club moors its boats here.\n")
    write(root, "How.md", "# How\n\nA note whose name is a stopword.\n")
    write(root, "Cello.md", "# Cello\n\nCello strings and bows.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    ids = {p: ws.manifest.file(p).chunk_ids[0]
           for p in ("Yacht club.md", "Harbour.md", "How.md", "Cello.md")}
    return ws, ids


def test_named_notes_need_every_word_of_a_title_or_alias(named):
    ws, _ = named
    everything = ["Yacht club.md", "Harbour.md", "How.md", "Cello.md"]

    def words(text: str, paths: list[str]) -> dict[str, int]:
        return {p: n.words for p, n in ws.searcher.notes.named_notes(text, paths).items()}

    assert words("yacht club fees", everything) == {"Yacht club.md": 2}
    assert words("Yacht fees", everything) == {}  # half a name is not a name
    assert words("opening hours of the marina", everything) == {"Harbour.md": 1}
    assert words("how do I tune a cello", everything) == {"Cello.md": 1}  # not How.md
    assert words("cellos", everything) == {}  # exact words: no stemming
    assert words("yacht club", ["Harbour.md"]) == {}  # only among the candidates


@pytest.mark.parametrize(("query", "quoted", "written"), [
    ("use `sort` on the list", (), True),          # a code span
    ("page through the output of 'sort'", (), True),  # quotes
    ("print the file type of command", ("sort",), True),  # a phrase typed in double quotes
    ("when is Sort stable", (), True),               # a capital past the first word
    ("sort", (), True),                              # the whole query
    ("Sort names so file10 comes after file9", (), False),  # the first word of a sentence
    ("sort file names naturally", (), False),
    ("it doesn't sort, it's broken", (), False),     # apostrophes are not quotes
])
def test_a_name_written_as_one(query, quoted, written):
    assert written_as_name(query, frozenset({"sort"}), quoted) is written


def test_a_one_word_name_is_rare_when_few_notes_hold_it(tmp_path, write, make_workspace,
                                                       fake_embedder):
    root = tmp_path / "notes"
    write(root, "Xargs.md", "# Xargs\n\nBuild command lines from input.\n")
    write(root, "Table.md", "# Table\n\nRender a table.\n")
    write(root, "Sign-in.md", "# Sign-in\n\nWhen the sign-in fails.\n")
    for i in range(8):
        write(root, f"Page {i}.md", f"# Page {i}\n\nA table of things, number {i}.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    paths = ws.manifest.all_paths()
    assert ws.searcher.notes.rare_words({"xargs", "table"}, 0.2) == {"xargs"}
    named = ws.searcher.notes.named_notes("xargs or a table", paths, rare_share=0.2)
    assert named["Xargs.md"].rare and not named["Table.md"].rare
    assert not ws.searcher.notes.named_notes("xargs", paths)["Xargs.md"].rare  # not asked
    # A name with a stopword in it is one content word, but typed in one piece it is a name.
    assert ws.searcher.notes.named_notes("sign-in fails on my phone", paths)["Sign-in.md"].written
    assert not ws.searcher.notes.named_notes("in which room do I sign", paths)[
        "Sign-in.md"].written


def test_a_long_section_is_one_section_however_many_chunks(tmp_path, write, make_workspace,
                                                         fake_embedder):
    root = tmp_path / "notes"
    prose = " ".join(f"sentence {i} of a long chapter about one subject." for i in range(200))
    write(root, "Chapter.md", f"# Chapter\n\n## One subject\n\n{prose}\n")
    write(root, "Reference.md", "# Reference\n\n" + "".join(
        f"## Item {i}\n\nWhat item {i} does.\n\n" for i in range(6)))
    ws = make_workspace(root, fake_embedder)
    ws.index()
    paths = ["Chapter.md", "Reference.md"]
    chunks = ws.searcher.notes.note_sizes(paths, "chunks")
    sections = ws.searcher.notes.note_sizes(paths, "sections")
    assert chunks["Chapter.md"] > sections["Chapter.md"] <= 2
    assert sections["Reference.md"] >= 6 > sections["Chapter.md"]


@pytest.mark.parametrize("fusion", ["rrf", "convex"])
def test_a_note_the_query_names_moves_up_in_hybrid_only(named, monkeypatch, fusion):
    """Harbour is first in both lists, Yacht club second; the query names Yacht club."""
    ws, ids = named
    semantic = [(ids["Harbour.md"], 0.9), (ids["Yacht club.md"], 0.85), (ids["Cello.md"], 0.1)]
    keyword_rows = [(ids["Harbour.md"], 9.0), (ids["Yacht club.md"], 8.0)]
    monkeypatch.setattr(ws.searcher, "_nearest", lambda *a, **kw: list(semantic))
    monkeypatch.setattr(ws.manifest, "keyword_search", lambda *a, **kw: list(keyword_rows))

    hits = ws.searcher.search("yacht club fees", 10, fusion=fusion).hits
    assert [h.path for h in hits][:2] == ["Yacht club.md", "Harbour.md"]
    assert hits[0].explain["title_match"] is True and hits[1].explain["title_match"] is False
    # Without the name the lists decide.
    plain = ws.searcher.search("membership fees", 10, fusion=fusion).hits
    assert [h.path for h in plain][:2] == ["Harbour.md", "Yacht club.md"]
    # The single modes stay pure: the name is a hybrid signal.
    assert ws.searcher.search("yacht club fees", 10, mode="semantic").hits[0].path == "Harbour.md"
    assert ws.searcher.search("yacht club fees", 10, mode="keyword").hits[0].path == "Harbour.md"


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_only_the_best_section_of_a_named_note_is_rewarded(tmp_path, write, make_workspace,
                                                           fake_embedder, fusion):
    root = tmp_path / "notes"
    write(root, "Search.md", "# Search\n\nSearch operators and syntax.\n\n"
                             "## History\n\nRecent searches are kept.\n")
    write(root, "Settings.md", "# Settings\n\n## Excluded files\n\n"
                               "Hide files from search results and the graph.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    hits = ws.searcher.search("hide files from search", 10, fusion=fusion).hits
    rewarded = [(h.path, h.title) for h in hits if h.explain["title_match"]]
    assert len(rewarded) == 1 and rewarded[0][0] == "Search.md"


def test_renaming_a_note_changes_what_names_it(named, tmp_path):
    ws, _ = named
    root = tmp_path / "notes"
    (root / "Cello.md").rename(root / "Violoncello.md")
    ws.index()
    paths = ws.manifest.all_paths()
    assert list(ws.searcher.notes.named_notes("violoncello repair", paths)) == ["Violoncello.md"]
    assert ws.searcher.notes.named_notes("cello repair", paths) == {}


def test_ids_unknown_to_the_manifest_are_dropped(small, monkeypatch):
    ws, ids = small
    monkeypatch.setattr(ws.searcher, "_nearest",
                        lambda *a, **kw: [("orphan-from-a-crash", 0.99), (ids["c.md"], 0.2)])
    hits = ws.hits("cello", 5, mode="semantic")
    assert [h.path for h in hits] == ["c.md"]


def test_scores_are_cosine_similarities(small):
    ws, _ = small
    q = "cello strings"
    hit = ws.hits(q, 1, mode="semantic")[0]
    assert hit.path == "c.md"
    vec = ws.manifest.vectors([ws.manifest.chunks_for("c.md")[0].embed_hash])
    expected = float(next(iter(vec.values())) @ ws.embedder.vector(q))
    assert hit.score == pytest.approx(expected, abs=1e-4)
    assert ws.hits(q, 1, mode="hybrid")[0].score == pytest.approx(expected, abs=1e-4)


def test_keyword_hits_carry_their_bm25_rank_and_no_similarity(small, fake_embedder):
    """Keyword mode never embeds the query, even with the model loaded: it has no similarity
    to show (None, null in JSON), and says where BM25 put the hit instead."""
    ws, _ = small
    calls = fake_embedder.query_calls
    hits = ws.hits("cello strings", 5, mode="keyword")
    assert fake_embedder.query_calls == calls
    assert hits[0].path == "c.md"
    assert [h.keyword_rank for h in hits] == sorted(h.keyword_rank for h in hits)
    assert hits[0].keyword_rank == 1 and hits[0].bm25 is not None and hits[0].bm25 > 0
    assert all(h.score is None and h.semantic_rank is None for h in hits)
    assert hits[0].to_json()["score"] is None
    hybrid = ws.hits("cello strings", 5, mode="hybrid")[0]
    assert hybrid.semantic_rank == 1 and hybrid.keyword_rank == 1 and hybrid.score is not None


def test_keyword_mode_never_loads_the_model(tmp_path, write, make_workspace, fake_embedder_cls):
    root = tmp_path / "notes"
    write(root, "a.md", "# A\n\nThe backup.retention_days setting.\n")
    indexing = fake_embedder_cls()
    ws = make_workspace(root, indexing, index_dir=tmp_path / "idx")
    ws.index()
    ws.close()
    cold = fake_embedder_cls()
    cold.loaded = False
    ws = make_workspace(root, cold, index_dir=tmp_path / "idx")
    hits = ws.hits("retention", 5, mode="keyword")
    assert [h.path for h in hits] == ["a.md"]
    assert cold.query_calls == 0 and cold.document_calls == 0


def test_mode_and_k_validation(small):
    ws, _ = small
    with pytest.raises(RequestError, match="hybrid"):
        ws.hits("x", 5, mode="fuzzy")
    with pytest.raises(QueryError):
        ws.searcher.search("x", 0)
    with pytest.raises(QueryError, match="expected a date"):
        ws.hits("x modified:yesterday", 5)


def test_empty_text_returns_nothing(small):
    ws, _ = small
    assert ws.hits("   ", 5) == []
    assert ws.hits("path:x.md", 5) == []


@pytest.fixture(scope="module")
def filtered(tmp_path_factory, write, fake_embedder_cls):
    """Many strong matches outside finance/, one weak match inside: a post-filter would miss it.

    Built once for the module (read-only tests); the index dir is explicit, so the per-test cache
    directory does not matter here.
    """
    from mdsearch_ls.engine.workspace import Workspace

    base = tmp_path_factory.mktemp("filtered")
    root = base / "notes"
    old = ts("2020-06-01")
    new = time.time() - 3600
    for i in range(70):
        write(root, f"ops/report{i:02}.md", f"# Revenue report {i}\n\nrevenue revenue revenue\n",
              mtime=old)
    write(root, "finance/ledger.md",
          "---\ntags: [money/q3]\n---\n# Ledger\n\nA short revenue mention among many other "
          "words about ledgers, accounts, invoices, receipts, balances and audits.\n",
          mtime=new)
    write(root, "finance/old.md", "# Old\n\nOld revenue notes about ledgers and audits.\n",
          mtime=old)
    ws = Workspace(root, Settings(), fake_embedder_cls(), index_dir=base / "index")
    ws.index()
    yield ws
    ws.close()


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_path_filter_is_pushed_into_every_mode(filtered, mode):
    hits = filtered.hits("revenue path:finance/", 10, mode=mode)
    assert {h.path for h in hits} == {"finance/ledger.md", "finance/old.md"}


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_tag_filter_in_every_mode(filtered, mode):
    hits = filtered.hits("revenue tag:money", 10, mode=mode)
    assert [h.path for h in hits] == ["finance/ledger.md"]
    assert filtered.hits("revenue tag:money/q3", 10, mode=mode)[0].path == "finance/ledger.md"
    assert filtered.hits("revenue tag:nomatch", 10, mode=mode) == []


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_modified_filter_in_every_mode(filtered, mode):
    recent = filtered.hits("revenue modified:>30d", 10, mode=mode)
    assert [h.path for h in recent] == ["finance/ledger.md"]
    older = filtered.hits("revenue audits modified:<2021-01-01 path:finance/", 10, mode=mode)
    assert [h.path for h in older] == ["finance/old.md"]


def test_filtered_semantic_search_ranks_the_notes_that_pass_by_cosine(filtered):
    """A file filter: Chroma's nearest among the passing notes, each by its true cosine."""
    import numpy as np

    query = "ledger audits revenue"
    hits = filtered.hits(f"{query} path:ops/", 100, mode="semantic")
    qvec = filtered.embedder.vector(query)
    chunks = [c for p in filtered.manifest.all_paths() if p.startswith("ops/")
              for c in filtered.manifest.chunks_for(p)]
    vecs = filtered.manifest.vectors(c.embed_hash for c in chunks)
    want = sorted(((float(np.dot(vecs[c.embed_hash], qvec)), c.path) for c in chunks),
                  key=lambda t: (-t[0], t[1]))
    assert len(chunks) == len(hits) == 70  # one section per note: every passing note, once
    assert [round(h.score, 5) for h in hits] == [round(s, 5) for s, _ in want]
    assert all(h.path.startswith("ops/") for h in hits)


def test_the_filter_table_follows_index_changes(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "finance/ledger.md", "# Ledger\n\nRevenue by month.\n")
    write(root, "ops/report.md", "# Report\n\nRevenue report.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    assert [h.path for h in ws.hits("revenue path:finance/", 10, mode="semantic")] == [
        "finance/ledger.md"
    ]
    write(root, "finance/forecast.md", "# Forecast\n\nRevenue forecast for next year.\n")
    ws.update(["finance/forecast.md"])
    after = {h.path for h in ws.hits("revenue path:finance/", 10, mode="semantic")}
    assert after == {"finance/ledger.md", "finance/forecast.md"}
    (root / "finance" / "ledger.md").unlink()
    ws.update(["finance/ledger.md"])
    assert [h.path for h in ws.hits("revenue path:finance/", 10, mode="semantic")] == [
        "finance/forecast.md"
    ]


def test_a_narrow_filter_is_a_chroma_where_and_a_broad_one_an_over_fetch(filtered, monkeypatch):
    filtered.searcher._cache.clear()
    seen: list[tuple[int, dict | None]] = []
    real = filtered.store.query

    def spy(vector, k, *, where=None, ids=None):
        seen.append((k, where))
        return real(vector, k, where=where, ids=ids)

    monkeypatch.setattr(filtered.store, "query", spy)
    # A narrow filter: a where clause.
    filtered.hits("revenue path:finance/", 5, mode="semantic")
    assert seen[-1][1] == {"path": {"$in": ["finance/ledger.md", "finance/old.md"]}}
    # 70 of 72 notes pass path:ops/: no `$in` list, a bigger pool, and only ops/ notes back.
    hits = filtered.hits("ledger audits revenue path:ops/", 10, mode="semantic")
    assert seen[-1][1] is None and seen[-1][0] > 60
    assert hits and all(h.path.startswith("ops/") for h in hits)


def test_filter_arguments_merge_with_inline_filters(filtered):
    hits = filtered.hits("revenue", 10, filters=Filters(paths=("finance/",)))
    assert {h.path for h in hits} == {"finance/ledger.md", "finance/old.md"}
    hits = filtered.hits("revenue tag:money", 10, filters=Filters(paths=("finance/",)))
    assert [h.path for h in hits] == ["finance/ledger.md"]


def test_modified_filter_follows_a_touch(tmp_path, write, make_workspace, fake_embedder):
    """A note whose mtime moved (same content) must pass a modified: filter at once."""
    root = tmp_path / "notes"
    note = write(root, "a.md", "# A\n\nApples in the orchard.\n", mtime=ts("2020-01-01"))
    ws = make_workspace(root, fake_embedder)
    ws.index()
    assert ws.hits("apples modified:>2024-01-01", 5) == []
    now = time.time()
    os.utime(note, (now, now))
    report = ws.index()
    assert report.files_indexed == 0  # only touched
    assert [h.path for h in ws.hits("apples modified:>2024-01-01", 5)] == ["a.md"]


def test_phrase_filter_requires_the_exact_sequence(tmp_path, write, make_workspace,
                                                   fake_embedder):
    """A phrase given as a filter (and a typed one with phrase_mode "require") restricts the
    search to the sections holding it; a typed one is by default a preference: the section
    holding it first, the others after."""
    from dataclasses import replace

    root = tmp_path / "notes"
    write(root, "yes.md", "# Yes\n\nWe board the release train on Fridays.\n")
    write(root, "no.md", "# No\n\nThe train leaves before the release.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    phrase = structured_filters(phrase="release train")
    for mode in ("semantic", "keyword", "hybrid"):
        found = ws.searcher.search("", 5, mode=mode, filters=phrase)
        assert [h.path for h in found.hits] == ["yes.md"]
        assert found.notes == ()
        typed = ws.searcher.search('"release train"', 5, mode=mode)
        assert [h.path for h in typed.hits] == ["yes.md", "no.md"]
        assert typed.notes == ()
    ws.searcher.params = replace(ws.searcher.params, phrase_mode="require")
    for mode in ("semantic", "keyword", "hybrid"):
        found = ws.searcher.search('"release train"', 5, mode=mode)
        assert [h.path for h in found.hits] == ["yes.md"]


@pytest.fixture
def trains(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "yes.md", "# Yes\n\nWe board the release train on Fridays.\n")
    write(root, "no.md", "# No\n\nThe train leaves before the release.\n")
    write(root, "ops/freight.md", "# Freight\n\nThe freight schedule for the depot.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    return ws


@pytest.mark.parametrize("phrase_mode", ["prefer", "require"])
@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_a_phrase_no_section_contains_falls_back_with_a_note(trains, mode, phrase_mode):
    """A quoted phrase found nowhere does not empty the result: the words are still searched,
    and a note says no section holds it."""
    from dataclasses import replace

    trains.searcher.params = replace(trains.searcher.params, phrase_mode=phrase_mode)
    result = trains.searcher.search('"release freight" schedule', 5, mode=mode)
    assert result.hits and result.hits[0].path == "ops/freight.md"
    assert result.notes == (
        'no section contains "release freight"; showing the closest matches',
    )
    # The same through the workspace: hits only.
    assert [h.path for h in trains.hits('"release freight" schedule', 5, mode=mode)] == [
        h.path for h in result.hits
    ]
    # A required phrase too.
    required = trains.searcher.search("schedule", 5, mode=mode,
                                      filters=structured_filters(phrase="release freight"))
    assert required.hits[0].path == "ops/freight.md" and required.notes == result.notes


def test_required_phrases_no_section_holds_together_rank_their_holders_first(trains):
    """Two required phrases no section holds together: the search is not restricted, and the
    sections holding one of them come first."""
    both = structured_filters(phrase=["release train", "freight schedule"])
    result = trains.searcher.search("depot", 5, filters=both)
    paths = [h.path for h in result.hits]
    assert set(paths[:2]) == {"yes.md", "ops/freight.md"} and paths[2] == "no.md"
    assert result.notes == ('no section contains "release train", "freight schedule" together; '
                            "showing the closest matches, sections with the phrases first",)


def test_a_phrase_outside_the_filtered_notes_falls_back_too(trains):
    result = trains.searcher.search("path:ops/", 5,
                                    filters=structured_filters(phrase="release train"))
    assert [h.path for h in result.hits] == ["ops/freight.md"]
    assert result.notes == ('no section the filters allow contains "release train"; showing '
                            "the closest matches, sections with the phrases first",)


def test_parse_notes_reach_the_result(trains):
    result = trains.searcher.search("tga:freight schedule", 5)
    assert result.hits[0].path == "ops/freight.md"
    assert result.notes == (
        "`tga:` is not a filter, searched as text; did you mean `tag:`?",
    )
    again = trains.searcher.search("tga:freight schedule", 5)  # from the cache: same notes
    assert again.notes == result.notes and trains.searcher.cache_hits >= 1


def test_per_file_cap(tmp_path, write, make_workspace, fake_embedder_cls):
    root = tmp_path / "notes"
    sections = "\n".join(f"## Budget part {i}\n\nThe budget for item {i}.\n" for i in range(6))
    write(root, "long.md", "# Budget\n\n" + sections)
    write(root, "other.md", "# Other\n\nAnother budget note.\n")
    write(root, "third.md", "# Third\n\nA third budget note.\n")
    ws = make_workspace(root, fake_embedder_cls())
    ws.index()
    hits = ws.hits("budget", 10)
    assert sum(h.path == "long.md" for h in hits) == 2  # the default per_file
    assert {"other.md", "third.md"} <= {h.path for h in hits}
    hits = ws.searcher.search("budget", 10, per_file=1).hits
    assert sum(h.path == "long.md" for h in hits) == 1
    ws.close()
    ws = make_workspace(root, fake_embedder_cls(), settings=Settings(per_file=5),
                        index_dir=ws.index_dir)
    assert sum(h.path == "long.md" for h in ws.hits("budget", 20)) == 5


def test_chunks_of_one_section_collapse_into_one_hit(tmp_path, write, make_workspace,
                                                     fake_embedder):
    root = tmp_path / "notes"
    lines = [f"The firewall rule number {i} blocks port {1000 + i}." for i in range(30)]
    write(root, "fw.md", "# Firewall\n\n" + "\n\n".join(lines) + "\n")
    write(root, "other.md", "# Other\n\nA firewall appliance.\n")
    ws = make_workspace(root, fake_embedder,
                        settings=Settings(chunk_size=200, chunk_overlap=40))
    ws.index()
    chunks = ws.manifest.chunks_for("fw.md")
    assert len(chunks) >= 5 and len({c.section for c in chunks}) == 1
    for mode in ("semantic", "keyword", "hybrid"):
        hits = ws.hits("firewall rule blocks port", 10, mode=mode)
        fw = [h for h in hits if h.path == "fw.md"]
        assert len(fw) == 1, mode
        # The hit covers the chunks that matched, not just the best one.
        assert fw[0].end_line - fw[0].start_line > chunks[0].end_line - chunks[0].start_line
        assert fw[0].start_line >= chunks[0].start_line
        assert fw[0].end_line <= chunks[-1].end_line


def test_boilerplate_is_ranked_below_a_unique_section(tmp_path, write, make_workspace,
                                                      fake_embedder_cls, monkeypatch):
    root = tmp_path / "notes"
    template = "Discuss the quarterly roadmap items with the whole team."
    for i in range(1, 4):
        write(root, f"meeting{i}.md", f"## Review\n\n{template}\n")
    # The same words bar two the query does not contain: a hair less similar, but unique.
    unique = "Discuss the quarterly roadmap items with the whole crew today."
    write(root, "plan.md", f"## Review\n\n{unique}\n")
    embedder = fake_embedder_cls(dimension=4096)  # no hash collisions among these words
    ws = make_workspace(root, embedder)
    ws.index()
    for mode in ("semantic", "keyword", "hybrid"):
        hits = ws.hits("quarterly roadmap items", 10, mode=mode)
        assert len(hits) == 4, mode
        assert hits[0].path == "plan.md", (mode, [h.path for h in hits])
        # Ranked first despite a lower similarity (keyword mode, which has none: a lower BM25).
        if mode == "keyword":
            assert hits[0].bm25 < hits[1].bm25
        else:
            assert hits[0].score < hits[1].score
    # Control: without the down-weighting the template copies win, so the test above measures it.
    import mdsearch_ls.engine.search.searcher as search_mod

    monkeypatch.setattr(search_mod, "boilerplate_weight", lambda n: 1.0)
    hits = ws.hits("quarterly roadmap items", 9, mode="semantic")
    assert hits[-1].path == "plan.md"


def test_two_copies_are_not_boilerplate(tmp_path, write, make_workspace, fake_embedder_cls):
    root = tmp_path / "notes"
    write(root, "a.md", "## Review\n\nShared words about quarterly roadmap items here.\n")
    write(root, "b.md", "## Review\n\nShared words about quarterly roadmap items here.\n")
    ws = make_workspace(root, fake_embedder_cls(dimension=4096))
    ws.index()
    body = ws.manifest.chunks_for("a.md")[0].body_hash
    assert ws.manifest.body_file_counts([body]) == {body: 2}
    hits = ws.hits("quarterly roadmap items", 5, mode="semantic")
    assert all(h.explain["fused"] > 0 for h in hits)
    assert hits[0].explain["fused"] == pytest.approx(1 / 61, rel=0.01)  # no down-weighting


def test_query_cache_hit_and_invalidation(small, fake_embedder, touch_later):
    ws, _ = small
    first = ws.hits("cello strings", 5, mode="keyword")
    calls = fake_embedder.query_calls
    hits_before = ws.searcher.cache_hits
    again = ws.hits("cello strings", 5, mode="keyword")
    assert again == first
    assert ws.searcher.cache_hits == hits_before + 1
    assert fake_embedder.query_calls == calls  # answered from the cache: no embedding
    # Mutating the returned list does not poison the cache.
    again.clear()
    assert ws.hits("cello strings", 5, mode="keyword") == first
    # A different k, mode or filter is a different entry.
    ws.hits("cello strings", 2, mode="keyword")
    assert ws.searcher.cache_hits == hits_before + 2
    gen = ws.manifest.generation
    note = ws.root / "y.md"
    note.write_text("# Yacht\n\nCello strings on a yacht.\n", encoding="utf-8")
    touch_later(note)
    ws.update(["y.md"])
    assert ws.manifest.generation > gen
    after = ws.hits("cello strings", 5, mode="keyword")
    assert ws.searcher.cache_hits == hits_before + 2  # recomputed, not served stale
    assert "y.md" in {h.path for h in after}
    assert "y.md" not in {h.path for h in first}


def test_related_finds_other_notes_not_itself(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "a.md", "# Alpha\n\nKayak paddles and river rapids.\n\n## Later\n\nUnrelated.\n")
    write(root, "b.md", "# Beta\n\nRiver rapids need a kayak and paddles.\n")
    write(root, "c.md", "# Gamma\n\nTax returns and receipts.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    result = ws.related_to("a.md", 2)
    assert result.section is not None and result.section.title == "Alpha"
    assert result.hits and result.hits[0].path == "b.md"
    assert all(h.path != "a.md" for h in result.hits)
    assert ws.related_to("a.md", 2, min_score=0.99).hits == []
    # Unsaved editor text is used as given.
    edited = ws.related_to("a.md", 2, text="# Alpha\n\nTax returns and receipts due.\n",
                        min_score=-1.0)
    assert edited.hits[0].path == "c.md"


def test_related_embeds_unsaved_text_as_waited_for(tmp_path, write, make_workspace,
                                                   fake_embedder):
    # A hover's edited section is what a person waits for: an embedder that can embed it
    # beside an index's batch in progress (BatchingEmbedder.embed_waited) is asked that way.
    root = tmp_path / "notes"
    write(root, "a.md", "# Alpha\n\nKayak paddles and river rapids.\n")
    write(root, "c.md", "# Gamma\n\nTax returns and receipts.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    waited: list[str] = []

    def embed_waited(texts):  # type: ignore[no-untyped-def]
        waited.extend(texts)
        return fake_embedder.embed_documents(texts)

    fake_embedder.embed_waited = embed_waited
    fake_embedder.reset_counts()
    edited = ws.related_to("a.md", 2, text="# Alpha\n\nTax returns and receipts due.\n",
                           min_score=-1.0)
    assert edited.hits[0].path == "c.md"
    assert len(waited) == 1 and "receipts due" in waited[0]
    assert ws.related_to("a.md", 2).section is not None
    assert len(waited) == 1  # the saved text's vectors come from the index


def test_relative_modified_filter_uses_wall_clock(tmp_path, write, make_workspace,
                                                  fake_embedder):
    root = tmp_path / "notes"
    ten_days = (datetime.now() - timedelta(days=10)).timestamp()
    write(root, "old.md", "# Old\n\nKayaks.\n", mtime=ten_days)
    write(root, "new.md", "# New\n\nKayaks.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    assert [h.path for h in ws.hits("kayaks modified:>7d", 5)] == ["new.md"]
    assert [h.path for h in ws.hits("kayaks modified:<7d", 5)] == ["old.md"]
    assert {h.path for h in ws.hits("kayaks modified:>2w", 5)} == {"old.md", "new.md"}


# ---- the order does not depend on k (issue 21) -----------------------------------------------

_TOPICS = ["garden", "tomato", "invoice", "budget", "sailing", "piano", "backup", "server"]
_FILLER = ["notes", "about", "week", "plan", "list", "ideas", "review", "draft", "team", "home"]


def _many_notes(root, write, n: int = 60) -> None:
    """Notes of two sections each that share words in varied proportions, so cosines and BM25
    spread and many candidates compete for the first places."""
    for i in range(n):
        a, b = _TOPICS[i % len(_TOPICS)], _TOPICS[(i * 3 + 1) % len(_TOPICS)]
        fill = " ".join(_FILLER[(i + j) % len(_FILLER)] for j in range(i % 7 + 2))
        write(root, f"n{i:02d}.md",
              f"# Note {i}\n\n{a} {fill} {a if i % 2 else b}\n\n"
              f"## More\n\n{b} {fill} {' '.join([a] * (i % 4))}\n\nand {a} again {b}\n")


def test_the_first_hits_are_the_same_for_every_k(tmp_path, write, make_workspace, fake_embedder):
    """A person who asks for more results sees the same first results, with the same ranges:
    the ranked pool is a fixed depth of each list, and what fills a larger k comes after it
    (min_pool 8 makes k=10 and up fetch deeper)."""
    root = tmp_path / "notes"
    _many_notes(root, write)
    ws = make_workspace(root, fake_embedder)
    ws.index()
    queries = ["garden tomato plan", "invoice budget review", "piano week", "backup the server",
               "sailing ideas for the team", "tomato"]
    for params in (RankingParams(), RankingParams(min_pool=8, pool_per_hit=2),
                   RankingParams(fusion="rrf", min_pool=8, pool_per_hit=2)):
        ws.searcher.params = params
        for per_file in (1, 2):
            for query in queries:
                first = None
                for k in (5, 10, 20, 50):
                    hits = ws.searcher.search(query, k, per_file=per_file).hits
                    assert len(hits) >= 5
                    head = [(h.path, h.start_line, h.end_line) for h in hits[:5]]
                    first = first or head
                    assert head == first, (params, per_file, query, k)
                # more hits asked for are more hits listed, each note at most per_file times
                many = ws.searcher.search(query, 50, per_file=per_file).hits
                assert len(many) > 10
                assert max(sum(h.path == p for h in many) for p in {h.path for h in many}) \
                    <= per_file
