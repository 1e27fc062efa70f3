"""Kept phrase scores (engine/index/phrase_scores.py): the same list as FTS5's whole query, to
the last bit, before and after writes, for any pool, with ties in FTS5's order."""

from __future__ import annotations

import random

import pytest

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
    manifest.keep_phrase_scores()
    manifest.phrase_scores.common_rows = 1  # keep every phrase of this small vault
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
    manifest.keep_phrase_scores()
    scores = manifest.phrase_scores
    scores.common_rows = 1
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
    manifest.keep_phrase_scores()
    manifest.phrase_scores.common_rows = 1
    for weights in [(4.0, 1.0), (1.0, 1.0), (4.0, 1.0), (0.0, 1.0)]:
        plain, summed = _both(manifest, "list files by size", 60, weights)
        assert summed == plain, weights


def test_a_write_drops_what_was_kept(manifest):
    """Every write moves each phrase's idf and the mean row length: scores kept from before it
    would rank the new section wrongly (or not at all)."""
    manifest.keep_phrase_scores()
    manifest.phrase_scores.common_rows = 1
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
    generation, not this process's."""
    reader = Manifest(manifest.path, read_only=True)
    try:
        reader.keep_phrase_scores()
        reader.phrase_scores.common_rows = 1
        _both(reader, "remove a user from a group", 10)
        manifest.apply([make_update("late.md", ["remove user group remove user group"])])
        plain, summed = _both(reader, "remove a user from a group", 10)
        assert "late.md#0" in [cid for cid, _ in plain]
        assert summed == plain
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
