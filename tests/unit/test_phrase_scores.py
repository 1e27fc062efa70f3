"""Kept phrase scores (engine/index/phrase_scores.py): the same list as FTS5's whole query, to
the last bit, before and after writes, for any pool, with ties in FTS5's order."""

from __future__ import annotations

import random

import pytest

from mdsearch_ls.engine.index import bm25_rows
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.index.phrase_scores import PhraseScores
from mdsearch_ls.engine.search import keyword
from tests.unit.test_manifest import make_update

WORDS = [
    "file", "directory", "current", "list", "copy", "remove", "archive", "user", "group",
    "owner", "print", "sort", "size", "disk", "network", "backup", "sync", "phone", "laptop",
    "note", "vault", "search",
]


def _body(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))


@pytest.fixture
def manifest(tmp_path):
    m = Manifest(tmp_path / "idx" / "space.sqlite3")
    rng = random.Random(7)
    m.apply([make_update(f"n{i}.md", [_body(rng) for _ in range(rng.randint(1, 4))])
             for i in range(120)])
    # Identical sections tie: FTS5 orders them by rowid, and so must the sums.
    m.apply([make_update(f"copy{i}.md", ["copy the current directory to the backup disk"])
             for i in range(6)])
    yield m
    m.close()


QUERIES = [
    "copy the current directory to the backup disk",
    "how do I keep my notes the same on my phone and my laptop",
    "list files by size",
    "remove a user from a group",
    "print disk usage of the current directory sorted by size",
    "network sync of the vault",
]


def _keeping(m: Manifest) -> PhraseScores:
    """``m`` keeping phrase scores, every phrase of these small vaults counted as common."""
    m.keep_phrase_scores()
    assert m.phrase_scores is not None
    m.phrase_scores.common_rows = 1
    return m.phrase_scores


def _both(m: Manifest, query: str, limit: int, weights=(4.0, 1.0)):
    terms = keyword.or_terms(query, pairs=True)
    match = " OR ".join(terms)
    plain = m.keyword_search(match, limit, None, weights)
    summed = m.keyword_search(match, limit, None, weights, terms)
    if m.phrase_scores is not None:
        m.phrase_scores.settle()  # what a cold search put aside is read
    return plain, summed


@pytest.mark.parametrize("limit", [1, 5, 60, 1000])
def test_kept_sums_are_fts5s_list_to_the_last_bit(manifest, limit):
    _keeping(manifest)
    for _ in range(2):  # read alone, then from what was kept
        for q in QUERIES:
            plain, summed = _both(manifest, q, limit)
            assert plain, q
            assert summed == plain, q  # ids and float scores, exactly
    assert manifest.phrase_scores.held > 0


def test_a_cold_search_asks_fts5_and_keeps_its_common_phrases_for_the_next(manifest):
    """The first search after a start (or a write) finds nothing kept: FTS5 answers it whole,
    and its common phrases are read on a thread of their own; the next search of those words
    reads none of them again."""
    scores = _keeping(manifest)
    query = "print disk usage of the current directory sorted by size"
    plain, summed = _both(manifest, query, 20)
    assert summed == plain
    assert scores.held > 0
    reads = scores.reads
    plain, summed = _both(manifest, query, 20)
    assert summed == plain
    assert scores.reads == reads


def test_ties_go_by_rowid_across_the_cut(manifest):
    manifest.keep_phrase_scores()
    plain, summed = _both(manifest, "copy the current directory to the backup disk", 3)
    assert [cid for cid, _ in plain] == ["copy0.md#0", "copy1.md#0", "copy2.md#0"]
    assert summed == plain


def test_title_weight_is_part_of_what_is_kept(manifest):
    _keeping(manifest)
    for weights in [(4.0, 1.0), (1.0, 1.0), (4.0, 1.0), (0.0, 1.0)]:
        plain, summed = _both(manifest, "list files by size", 60, weights)
        assert summed == plain, weights


def test_a_write_rescores_what_was_kept(manifest):
    """Every write moves each phrase's idf and the mean row length: scores kept from before it
    would rank the new section wrongly (or not at all)."""
    _keeping(manifest)
    _both(manifest, "copy the current directory to the backup disk", 10)
    manifest.apply([make_update("new.md", ["copy the current directory to the backup disk, "
                                           "copy the current directory to the backup disk"])])
    plain, summed = _both(manifest, "copy the current directory to the backup disk", 10)
    assert "new.md#0" in [cid for cid, _ in plain]
    assert summed == plain
    manifest.apply([], deletes=["new.md"])
    plain, summed = _both(manifest, "copy the current directory to the backup disk", 10)
    assert "new.md#0" not in [cid for cid, _ in summed]
    assert summed == plain


def test_budget_bounds_what_is_kept(manifest):
    manifest.keep_phrase_scores()
    scores = manifest.phrase_scores
    scores.common_rows, scores.budget = 1, 150
    for q in QUERIES:
        plain, summed = _both(manifest, q, 20)
        assert summed == plain
        assert scores.held <= 150


def test_a_reader_beside_the_writer_sees_its_writes(tmp_path, manifest):
    """A server reading an index another process writes: the kept scores follow the file's
    generation, not this process's. It knows nothing of which rows went, so it drops what it
    kept rather than carry it (and the list is FTS5's)."""
    reader = Manifest(manifest.path, read_only=True)
    try:
        _keeping(reader)
        _both(reader, "remove a user from a group", 10)
        manifest.apply([make_update("late.md", ["remove user group remove user group"])])
        plain, summed = _both(reader, "remove a user from a group", 10)
        assert "late.md#0" in [cid for cid, _ in plain]
        assert summed == plain
        assert reader.phrase_scores.carries == 0
    finally:
        reader.close()


def test_nothing_kept_without_a_long_running_holder(manifest):
    assert manifest.phrase_scores is None
    plain, summed = _both(manifest, "list files by size", 10)
    assert summed == plain


def test_a_server_keeps_them_and_a_command_does_not(tmp_path, write, fake_embedder):
    """Only a process that searches many times keeps scores (they cost more to read alone
    than the whole query does once), and its searches rank as a command's do."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.workspace import Workspace

    root = tmp_path / "notes"
    rng = random.Random(3)
    for i in range(30):
        write(root, f"n{i}.md", f"# Note {i}\n\n{_body(rng)}\n")
    settings = Settings()
    ws = Workspace.open(root, settings, "write", embedder=fake_embedder)
    ws.index()
    assert ws.manifest.phrase_scores is None
    first = [h.chunk_id for h in ws.hits("copy the current directory to a backup disk", 10)]
    ws.close()
    ws = Workspace.open(root, settings, "write", embedder=fake_embedder, role="server")
    try:
        assert isinstance(ws.manifest.phrase_scores, PhraseScores)
        ws.manifest.phrase_scores.common_rows = 1
        for _ in range(2):
            ws.searcher._cache.clear()
            hits = ws.hits("copy the current directory to a backup disk", 10)
            assert [h.chunk_id for h in hits] == first
            ws.manifest.phrase_scores.settle()
        assert ws.manifest.phrase_scores.held > 0
    finally:
        ws.close()


def _kept_rows(scores: PhraseScores) -> dict:
    return {key: rows for key, rows in scores._kept.items()}


def _same_as_read(m: Manifest, key, rows) -> None:
    """A kept phrase's rows are exactly what reading it from FTS5 now gives (order aside); a
    phrase is kept under its tokens (these words' stems read as themselves), and a carryable
    one as its counts and lengths, scored when a search needs it."""
    conn = m._conn()
    fresh = bm25_rows.read(conn, f'"{key[0]}"', (key[1], key[2]))
    kept = m.phrase_scores._scores(conn, m.phrase_scores.state(conn), rows)
    assert (rows.scores.size == 0) == (rows.freq is not None), key
    mine, theirs = rows.rowids.argsort(), fresh.rowids.argsort()
    assert rows.rowids[mine].tolist() == fresh.rowids[theirs].tolist(), key
    assert kept[mine].tolist() == fresh.scores[theirs].tolist(), key  # bit for bit
    if rows.freq is not None and fresh.freq is not None:
        assert rows.freq[mine].tolist() == fresh.freq[theirs].tolist(), key
        assert rows.length[mine].tolist() == fresh.length[theirs].tolist(), key


WRITES = [
    # (what the write does, updates, deletes): the last note's rowids are given again by FTS5
    ("edit the last note", lambda: [make_update("copy5.md", ["copy copy the backup disk file",
                                                             "list the current user group"])], []),
    ("edit a note in the middle", lambda: [make_update("n40.md", ["sort files by size on disk",
                                                                  "remove the owner"])], []),
    ("add a note", lambda: [make_update("fresh.md", ["print the current directory " * 3])], []),
    ("delete a note", lambda: [], ["n7.md"]),
    ("edit two notes", lambda: [make_update("n3.md", ["network sync of the phone"]),
                                make_update("fresh.md", ["print print print"])], []),
]


def test_a_servers_own_writes_carry_the_kept_scores_exactly(manifest):
    """A server's save: the phrases kept before it are scored again for the new idf and mean
    length from each row's count and length (engine/index/bm25_rows.py), not read again, and
    each is what FTS5 gives now to the last bit, whether the write edited, added, deleted or
    gave a deleted rowid again, and so is every list summed from them."""
    scores = _keeping(manifest)
    for q in QUERIES:
        _both(manifest, q, 40)
    assert all(rows.freq is not None for rows in _kept_rows(scores).values())
    for what, updates, deletes in WRITES:
        manifest.apply(updates(), deletes=deletes)
        reads, carries = scores.reads, scores.carries
        for q in QUERIES:
            plain, summed = _both(manifest, q, 40)
            assert summed == plain, (what, q)
        assert scores.carries > carries, what
        assert scores.reads == reads, what  # every phrase carried: none read again
        for key, rows in _kept_rows(scores).items():
            _same_as_read(manifest, key, rows)
    manifest.touch("n1.md", 2000.0, 10, 2000.0)  # a new state in which no row changed
    carries = scores.carries
    for q in QUERIES:
        plain, summed = _both(manifest, q, 40)
        assert summed == plain
    assert scores.carries > carries


def test_several_writes_between_two_searches_are_carried_together(manifest):
    scores = _keeping(manifest)
    query = "print disk usage of the current directory sorted by size"
    _both(manifest, query, 30)
    reads = scores.reads
    for _what, updates, deletes in WRITES:
        manifest.apply(updates(), deletes=deletes)
    plain, summed = _both(manifest, query, 30)
    assert summed == plain
    assert scores.reads == reads and scores.carries > 0


def test_a_new_state_walks_the_writes_once_per_state_not_once_per_kept_phrase(
    manifest, monkeypatch
):
    """The turn to a write's state asks which kept phrases can be carried: one walk of the
    writes for each state they were kept at, not one for each phrase (at 96k chunks 847 kept
    phrases made that 30 ms of the first search after every save; at a million, thousands)."""
    scores = _keeping(manifest)
    for q in QUERIES:
        _both(manifest, q, 40)
    kept = len(_kept_rows(scores))
    assert kept > 20
    walks: list[object] = []
    turning = []
    real_turn, real_since = PhraseScores._turn, PhraseScores._since

    def turn(self, conn, state):
        turning.append(1)
        try:
            return real_turn(self, conn, state)
        finally:
            turning.pop()

    def since(self, then, now):
        if turning:
            walks.append(then)
        return real_since(self, then, now)

    monkeypatch.setattr(PhraseScores, "_turn", turn)
    monkeypatch.setattr(PhraseScores, "_since", since)
    manifest.apply([make_update("fresh.md", ["print the current directory"])])
    plain, summed = _both(manifest, QUERIES[0], 40)
    assert summed == plain
    assert 0 < len(walks) <= 2, walks  # one for the row lengths, one for the phrases
    assert scores.carries > 0


def test_a_check_that_fails_reads_the_phrase_again(manifest, monkeypatch):
    """Each carry asks FTS5 for one unchanged row: if the recomputed double differs (here: the
    mean row length off in its last digits), the phrase is read whole, and the list is still
    FTS5's."""
    scores = _keeping(manifest)
    query = "list files by size"
    _both(manifest, query, 30)
    real = bm25_rows.avgdl
    monkeypatch.setattr(bm25_rows, "avgdl", lambda totals: real(totals) * (1 + 1e-12))
    manifest.apply([make_update("n40.md", ["sort files by size"])])
    reads = scores.reads
    plain, summed = _both(manifest, query, 30)
    assert summed == plain
    assert scores.carries == 0 and scores.reads > reads


def test_weights_that_are_not_whole_are_kept_but_not_carried(manifest):
    """A count solved from a score is only certain with whole weights: others are read again
    after a write, as before."""
    scores = _keeping(manifest)
    weights = (2.5, 1.0)
    _both(manifest, "list files by size", 30, weights)
    assert all(rows.freq is None for rows in _kept_rows(scores).values())
    manifest.apply([make_update("n40.md", ["sort files by size"])])
    plain, summed = _both(manifest, "list files by size", 30, weights)
    assert summed == plain and scores.carries == 0


def test_row_lengths_and_table_totals_are_fts5s(manifest, monkeypatch):
    """The docsize records decoded in numpy and the averages record are what FTS5 counts."""
    conn = manifest._conn()
    rows = conn.execute("SELECT id, sz FROM chunks_fts_docsize ORDER BY id").fetchall()
    decoded = bm25_rows.lengths([sz for _, sz in rows])
    assert decoded is not None
    assert decoded.tolist() == [sum(bm25_rows.varints(sz)) for _, sz in rows]
    monkeypatch.setattr(bm25_rows, "BATCH", 7)  # read a few rows at a time, as at 96k
    by_rowid = bm25_rows.all_lengths(conn)
    assert by_rowid is not None
    assert [int(by_rowid[i]) for i, _ in rows] == decoded.tolist()
    assert bm25_rows.table_totals(conn) == (len(rows), int(decoded.sum()))
    assert bm25_rows.varints(bytes([0x85, 0xEF, 0x17, 0x03])) == [96151, 3]
    assert bm25_rows.lengths([bytes([0x83, 0x01, 0x02]), b"\x05\x7f"]).tolist() == [387, 132]


def test_a_rebuild_is_not_carried(manifest):
    """``clear()`` (a rebuild) rewrites the whole table and records no rows: nothing kept is
    carried through it, and the lists after it are FTS5's."""
    scores = _keeping(manifest)
    _both(manifest, "list files by size", 30)
    manifest.clear()
    rng = random.Random(11)
    manifest.apply([make_update(f"r{i}.md", [_body(rng)]) for i in range(40)])
    plain, summed = _both(manifest, "list files by size", 30)
    assert plain and summed == plain
    assert scores.carries == 0


def test_a_reader_reads_no_row_lengths(tmp_path, manifest):
    """Only a writer's own writes are carried, so a reader never pays for the row lengths that
    carrying needs (a whole table read at each new state)."""
    reader = Manifest(manifest.path, read_only=True)
    try:
        scores = _keeping(reader)
        plain, summed = _both(reader, "list files by size", 30)
        assert summed == plain and scores.held > 0
        assert scores._lengths is None
        assert all(rows.freq is None for rows in _kept_rows(scores).values())
    finally:
        reader.close()
    _keeping(manifest)
    _both(manifest, "list files by size", 30)
    assert manifest.phrase_scores._lengths is not None


def test_searches_reading_two_states_each_get_their_own(manifest):
    """Two searches in flight across a write read two snapshots: each gets FTS5's list of its
    own state, whichever of them the kept scores were last turned to."""
    import sqlite3

    scores = _keeping(manifest)
    query = "list files by size"
    terms = keyword.or_terms(query, pairs=True)
    match = " OR ".join(terms)
    _both(manifest, query, 30)
    old = sqlite3.connect(manifest.path)
    try:
        old.execute("BEGIN")
        old.execute("SELECT count(*) FROM chunks").fetchone()  # the snapshot is taken here
        then = old.execute("SELECT rowid, bm25(chunks_fts, 4.0, 1.0) FROM chunks_fts WHERE "
                           "chunks_fts MATCH ? ORDER BY 2, 1 LIMIT 30", (match,)).fetchall()
        manifest.apply([make_update("n40.md", ["list list files files by size size"])])
        _both(manifest, query, 30)  # turned to the new state, kept there
        got = scores.top(old, terms, 30, (4.0, 1.0))
        assert got == [(r, -s) for r, s in then]
        plain, summed = _both(manifest, query, 30)  # and back: the new state's own list
        assert summed == plain
    finally:
        old.close()


def test_a_state_turned_between_a_searchs_check_and_its_lookups_is_not_summed(manifest):
    """The race itself: a search checks the state (the new one), then another search of the
    old snapshot turns what is kept to the old state and keeps its rows, then the first looks
    its phrases up. It must not sum the old state's scores: its list is its own state's."""
    import sqlite3

    scores = _keeping(manifest)
    query = "list files by size"
    terms = keyword.or_terms(query, pairs=True)
    old = sqlite3.connect(manifest.path)
    try:
        old.execute("BEGIN")
        old.execute("SELECT count(*) FROM chunks").fetchone()  # the old snapshot
        manifest.apply([make_update("n40.md", ["list list files files by size size"])])
        plain, _ = _both(manifest, query, 30)  # kept at the new state

        class Interleaved:
            """The kept scores' lock, the other search run just before its second taking."""

            def __init__(self, lock):
                self.lock, self.taken, self.other = lock, 0, True

            def __enter__(self):
                self.taken += 1
                if self.taken == 2 and self.other:
                    self.other = False
                    scores.top(old, terms, 30, (4.0, 1.0))  # turns to the old state, keeps
                return self.lock.__enter__()

            def __exit__(self, *exc):
                return self.lock.__exit__(*exc)

        scores._lock = Interleaved(scores._lock)
        new = manifest._conn()
        got = scores.top(new, terms, 30, (4.0, 1.0))
        assert not scores._lock.other  # the other search did run in between
        id_of = dict(new.execute("SELECT rowid, id FROM chunks"))
        assert [(id_of[r], s) for r, s in got] == plain  # ids and scores, exactly
    finally:
        old.close()


def test_two_spellings_of_a_word_are_one_kept_phrase(manifest):
    """A phrase is kept under the tokens the table's tokenizer makes of it: "sorted files"
    after "sort file" reads nothing again, and still sums to FTS5's list."""
    scores = _keeping(manifest)
    _both(manifest, "sort file", 20)
    _both(manifest, "sort file", 20)  # (the first search is FTS5's whole query)
    reads = scores.reads
    plain, summed = _both(manifest, "sorted files", 20)
    assert summed == plain and plain
    assert scores.reads == reads
    assert {key[0] for key in scores._kept} >= {"sort", "file"}


def _warming(m: Manifest, budget: int | None = None) -> PhraseScores:
    m.keep_phrase_scores(warm=keyword.STOPWORDS)
    scores = m.phrase_scores
    assert scores is not None
    scores.common_rows = 2
    if budget is not None:
        scores.budget = budget
    return scores


def test_the_warm_reads_the_commonest_words_before_a_question_needs_them(manifest):
    """Once searches begin, a server reads the index's common words on its thread (not the
    words a query leaves out): a question met for the first time then reads none of its
    words alone, only its pairs, and its list is FTS5's to the last bit."""
    scores = _warming(manifest)
    _both(manifest, "laptop", 10)  # the first search starts the warm
    kept = {key[0] for key in scores._kept}
    assert {"file", "directori", "copi", "backup", "disk"} <= kept
    assert not kept & {"the", "to"}  # stopwords of the "copy the current directory" notes
    reads = scores.reads
    query = "print the owner of each archive by size"
    plain, summed = _both(manifest, query, 30)
    assert summed == plain and plain
    pairs = [t for t in keyword.or_terms(query, pairs=True) if " " in t]
    assert scores.reads - reads <= len(pairs)
    for key, rows in _kept_rows(scores).items():
        _same_as_read(manifest, key, rows)


def test_after_the_warm_a_pair_of_counted_words_is_read_without_a_count(manifest):
    """The warm notes every word's row count; a pair can hold no more rows than its rarer
    word, so when that bound keeps the query warm the pair is read straight away: no FTS5
    count for a word or a pair, and still FTS5's list."""
    scores = _warming(manifest)
    _both(manifest, "laptop", 10)
    query = "sort the current directory by size"
    terms = keyword.or_terms(query, pairs=True)
    assert any(" " in t for t in terms)
    conn = manifest._conn()
    asked: list[str] = []
    conn.set_trace_callback(asked.append)
    try:
        summed = manifest.keyword_search(" OR ".join(terms), 30, None, (4.0, 1.0), terms)
    finally:
        conn.set_trace_callback(None)
    assert not [q for q in asked if "count(*)" in q]
    assert summed == manifest.keyword_search(" OR ".join(terms), 30, None, (4.0, 1.0))
    assert scores.reads > 0


def test_the_warm_keeps_the_commonest_words_within_its_share_of_the_budget(manifest):
    from mdsearch_ls.engine.index.phrase_scores import WARM_SHARE

    scores = _warming(manifest, budget=400)
    _both(manifest, "laptop", 10)
    conn = manifest._conn()
    rows = {key[0]: r.size for key, r in scores._kept.items()}
    assert rows and sum(rows.values()) <= 400 * WARM_SHARE + rows.get("laptop", 0)
    count = {w: conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                             (f'"{w}"',)).fetchone()[0] for w in WORDS}
    left_out = [w for w in WORDS if count[w] > min(rows.values()) and w not in rows
                and keyword.tokens(w) == [w]]
    # (a word commoner than one kept is left out only when it did not fit what was left)
    assert all(count[w] > 400 * WARM_SHARE - sum(rows.values()) for w in left_out)


def test_a_warm_after_a_write_by_another_process_reads_the_new_state(tmp_path, manifest,
                                                                    monkeypatch):
    monkeypatch.setattr("mdsearch_ls.engine.index.phrase_scores.WARM_AGAIN_S", 0.0)
    reader = Manifest(manifest.path, read_only=True)
    try:
        scores = _warming(reader)
        _both(reader, "laptop", 10)
        manifest.apply([make_update("late.md", ["laptop phone laptop phone sync"])])
        _both(reader, "laptop", 10)  # a new state: what was kept goes, the warm runs again
        plain, summed = _both(reader, "sync my phone and laptop", 10)
        assert "late.md#0" in [cid for cid, _ in plain]
        assert summed == plain
        assert "phone" in {key[0] for key in scores._kept}
        for key, rows in _kept_rows(scores).items():
            _same_as_read(reader, key, rows)
    finally:
        reader.close()


def test_a_reader_beside_a_busy_writer_reads_the_vocabulary_once_in_a_while(manifest):
    """Each save of another process drops all a reader keeps; reading the vocabulary again
    after every one would keep a core busy beside an editor saving every few seconds."""
    reader = Manifest(manifest.path, read_only=True)
    try:
        scores = _warming(reader)
        _both(reader, "laptop", 10)
        warmed = scores.reads
        assert warmed > 5
        for i in range(3):
            manifest.apply([make_update(f"late{i}.md", ["laptop phone sync"])])
            _both(reader, "laptop", 10)
        assert scores.reads - warmed <= 3 * 2  # its own phrases only, never the vocabulary
    finally:
        reader.close()


def test_a_warm_grows_the_budget_with_the_table_past_its_default(manifest, monkeypatch):
    """Past BUDGET / PER_ROW rows (100k) a server keeps PER_ROW rows a row of the table, so
    that a million chunks' common words fit; below it, the budget it was given stays."""
    from mdsearch_ls.engine.index import phrase_scores

    rows = manifest._conn().execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    kept = _warming(manifest)
    _both(manifest, "laptop", 10)
    kept.settle()
    assert kept.budget == phrase_scores.BUDGET  # 130 rows: far below
    kept.close()
    manifest.phrase_scores = None
    monkeypatch.setattr(phrase_scores, "BUDGET", phrase_scores.PER_ROW * rows - 1)
    grown = _warming(manifest, budget=400)
    _both(manifest, "laptop", 10)
    grown.settle()
    assert grown.budget == phrase_scores.PER_ROW * rows
