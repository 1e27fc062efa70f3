"""Tests for the SQLite manifest: atomic replace, FTS rows, vector cache, tags, generation."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.locations import ChunkRecord, FileRecord, FileUpdate


@pytest.fixture
def manifest(tmp_path):
    m = Manifest(tmp_path / "idx" / "space.sqlite3")
    yield m
    m.close()


def make_update(
    path: str,
    bodies: list[str],
    *,
    tags: tuple[str, ...] = (),
    content_hash: str | None = None,
    mtime: float = 1000.0,
    id_prefix: str | None = None,
) -> FileUpdate:
    prefix = id_prefix if id_prefix is not None else path
    chunks = tuple(
        ChunkRecord(
            id=f"{prefix}#{i}",
            path=path,
            ordinal=i,
            section=i,
            title=f"Section {i}",
            breadcrumb=f"{path} > Section {i}",
            start_line=i * 10,
            end_line=i * 10 + 9,
            text=body,
            embed_hash=f"e:{body}",
            body_hash=f"b:{body}",
        )
        for i, body in enumerate(bodies)
    )
    file = FileRecord(
        path=path,
        content_hash=content_hash or f"h:{'|'.join(bodies)}",
        mtime=mtime,
        size=sum(map(len, bodies)),
        title=path.rsplit("/", 1)[-1],
        aliases=("alias one",),
        tags=tags,
        chunk_ids=tuple(c.id for c in chunks),
    )
    return FileUpdate(file, chunks, tuple((c.title, c.text) for c in chunks))


def fts_rows(m: Manifest) -> int:
    return m._conn().execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]


def orphan_fts_rows(m: Manifest) -> int:
    return m._conn().execute(
        "SELECT COUNT(*) FROM chunks_fts WHERE rowid NOT IN (SELECT rowid FROM chunks)"
    ).fetchone()[0]


def test_apply_inserts_file_chunks_and_keyword_rows(manifest):
    manifest.apply([make_update("a.md", ["alpha words", "beta words"], tags=("x",))])
    rec = manifest.file("a.md")
    assert rec is not None
    assert rec.chunk_ids == ("a.md#0", "a.md#1")
    assert rec.tags == ("x",)
    assert rec.aliases == ("alias one",)
    assert rec.indexed_at > 0
    assert manifest.counts() == (1, 2)
    assert manifest.chunk_ids() == {"a.md#0", "a.md#1"}
    assert [c.text for c in manifest.chunks_for("a.md")] == ["alpha words", "beta words"]
    assert fts_rows(manifest) == 2
    assert set(manifest.files()) == {"a.md"}
    assert manifest.file("missing.md") is None


def test_files_of_and_paths_under_read_only_what_is_asked(manifest):
    """A save reads its own notes' records, not every note's; a folder's notes are found by
    prefix, with LIKE's wildcards in a folder's name taken literally."""
    manifest.apply([
        make_update("a_b/one.md", ["x"], tags=("t/1", "t/2")),
        make_update("axb/two.md", ["y"]),
        make_update("a_b/deep/three.md", ["z"]),
        make_update("a_bc/four.md", ["w"]),
    ])
    assert manifest.files_of(["a_b/one.md", "missing.md"]) == {
        "a_b/one.md": manifest.files()["a_b/one.md"]}
    assert manifest.files_of(["a_b/one.md"])["a_b/one.md"].tags == ("t/1", "t/2")
    assert manifest.files_of([]) == {}
    assert manifest.paths_under("a_b") == ["a_b/deep/three.md", "a_b/one.md"]
    assert manifest.paths_under("a_b/") == ["a_b/deep/three.md", "a_b/one.md"]
    assert manifest.paths_under("a%") == []


def test_apply_replaces_a_file_completely(manifest):
    manifest.apply([make_update("a.md", ["one", "two", "three"], tags=("old",))])
    manifest.apply([make_update("a.md", ["uno"], tags=("new",), id_prefix="a2")])
    assert manifest.counts() == (1, 1)
    assert manifest.chunk_ids() == {"a2#0"}
    assert manifest.file("a.md").tags == ("new",)
    assert manifest.paths_with_tags(["old"]) == set()
    # The keyword rows followed: only the new chunk is findable, no FTS row is left behind.
    assert fts_rows(manifest) == 1
    assert orphan_fts_rows(manifest) == 0
    assert manifest.keyword_search('"two"', 10) == []
    assert [cid for cid, _ in manifest.keyword_search('"uno"', 10)] == ["a2#0"]


def test_apply_with_deletes_in_one_call(manifest):
    manifest.apply([make_update("a.md", ["apple"]), make_update("b.md", ["banana"])])
    manifest.apply([make_update("c.md", ["cherry"])], deletes=["a.md"])
    assert set(manifest.files()) == {"b.md", "c.md"}
    assert manifest.chunk_ids() == {"b.md#0", "c.md#0"}
    assert fts_rows(manifest) == 2
    assert orphan_fts_rows(manifest) == 0
    assert manifest.keyword_search('"apple"', 10) == []


def test_apply_is_atomic_when_a_later_update_fails(manifest):
    manifest.apply([make_update("a.md", ["apple"]), make_update("b.md", ["banana"])])
    gen = manifest.generation
    good = make_update("a.md", ["apricot"], id_prefix="new-a")
    # b.md's new chunk reuses a.md's new id: the UNIQUE constraint fails mid-transaction.
    bad = make_update("b.md", ["blueberry"], id_prefix="new-a")
    with pytest.raises(sqlite3.IntegrityError):
        manifest.apply([good, bad], deletes=["b.md"])
    # Nothing of the failed call is visible: a.md and b.md are as before, FTS too.
    assert manifest.chunk_ids() == {"a.md#0", "b.md#0"}
    assert [c.text for c in manifest.chunks_for("a.md")] == ["apple"]
    assert fts_rows(manifest) == 2
    assert [cid for cid, _ in manifest.keyword_search('"apple"', 10)] == ["a.md#0"]
    assert manifest.keyword_search('"apricot"', 10) == []
    assert manifest.generation == gen
    # And the connection is usable afterwards (the transaction was rolled back, not left open).
    manifest.apply([good])
    assert [c.text for c in manifest.chunks_for("a.md")] == ["apricot"]


def test_apply_rejects_keyword_rows_that_do_not_match_chunks(manifest):
    manifest.apply([make_update("a.md", ["apple"])])
    u = make_update("a.md", ["x", "y"])
    broken = FileUpdate(u.file, u.chunks, u.keyword_rows[:1])
    with pytest.raises(ValueError):
        manifest.apply([broken])
    assert manifest.chunk_ids() == {"a.md#0"}
    assert fts_rows(manifest) == 1


def test_delete_files_removes_chunks_tags_and_fts(manifest):
    manifest.apply([make_update("a.md", ["apple", "pie"], tags=("food",)),
                    make_update("b.md", ["banana"], tags=("food",))])
    manifest.delete_files(["a.md", "not-indexed.md"])
    assert set(manifest.files()) == {"b.md"}
    assert manifest.chunks_for("a.md") == []
    assert manifest.paths_with_tags(["food"]) == {"b.md"}
    assert fts_rows(manifest) == 1
    assert orphan_fts_rows(manifest) == 0


def test_clear_keeps_only_the_vector_cache(manifest):
    manifest.put_vectors({"e:apple": np.ones(4, dtype=np.float32)})
    manifest.apply([make_update("a.md", ["apple"], tags=("t",))])
    gen = manifest.generation
    manifest.clear()
    assert manifest.counts() == (0, 0)
    assert fts_rows(manifest) == 0
    assert manifest.paths_with_tags(["t"]) == set()
    assert "e:apple" in manifest.vectors(["e:apple"])
    assert manifest.generation == gen + 1


def test_vectors_roundtrip_and_gc(manifest):
    v1 = np.arange(8, dtype=np.float32)
    v2 = np.ones(8, dtype=np.float32)
    manifest.put_vectors({"e:apple": v1, "e:unused": v2})
    manifest.apply([make_update("a.md", ["apple"])])
    got = manifest.vectors(["e:apple", "e:unused", "e:nope", "e:apple"])
    assert set(got) == {"e:apple", "e:unused"}
    np.testing.assert_array_equal(got["e:apple"], v1)
    assert got["e:apple"].dtype == np.float32
    assert manifest.gc_vectors() == 1
    assert set(manifest.vectors(["e:apple", "e:unused"])) == {"e:apple"}
    # Once no chunk uses it, the vector goes too.
    manifest.delete_files(["a.md"])
    assert manifest.gc_vectors() == 1
    assert manifest.vectors(["e:apple"]) == {}


def test_vectors_many_hashes_are_batched(manifest):
    vecs = {f"h{i}": np.full(3, i, dtype=np.float32) for i in range(1200)}
    manifest.put_vectors(vecs)
    got = manifest.vectors(vecs)
    assert len(got) == 1200
    assert got["h1199"][0] == 1199


def test_get_chunks_many_ids(manifest):
    manifest.apply([make_update("a.md", [f"body {i}" for i in range(700)])])
    ids = [f"a.md#{i}" for i in range(700)] + ["unknown"]
    got = manifest.get_chunks(ids)
    assert len(got) == 700
    assert got["a.md#699"].text == "body 699"


def test_nested_tags_match_parent_and_all_tags_are_required(manifest):
    manifest.apply([
        make_update("a.md", ["x"], tags=("project/alpha", "urgent")),
        make_update("b.md", ["y"], tags=("project",)),
        make_update("c.md", ["z"], tags=("projects", "project_x")),
        make_update("d.md", ["w"], tags=("project/beta/deep",)),
    ])
    assert manifest.paths_with_tags(["project"]) == {"a.md", "b.md", "d.md"}
    assert manifest.paths_with_tags(["project/alpha"]) == {"a.md"}
    assert manifest.paths_with_tags(["project/beta"]) == {"d.md"}
    assert manifest.paths_with_tags(["project", "urgent"]) == {"a.md"}
    assert manifest.paths_with_tags(["alpha"]) == set()  # a child name alone is not the tag
    # LIKE wildcards in a tag are literal: "project_" must not match "projects".
    assert manifest.paths_with_tags(["project_x"]) == {"c.md"}
    assert manifest.paths_with_tags(["project%"]) == set()


def test_generation_bumps_on_every_content_write(manifest, tmp_path):
    seen = [manifest.generation]

    def step():
        assert manifest.generation > seen[-1]
        seen.append(manifest.generation)

    manifest.apply([make_update("a.md", ["apple"])])
    step()
    manifest.apply([make_update("a.md", ["apricot"])])
    step()
    manifest.delete_files(["a.md"])
    step()
    manifest.clear()
    step()
    # An empty apply writes nothing and does not invalidate caches.
    manifest.apply([])
    assert manifest.generation == seen[-1]
    # The generation survives a reopen (a server restart must not reuse old cache keys).
    manifest.close()
    reopened = Manifest(manifest.path)
    try:
        assert reopened.generation == seen[-1]
        assert reopened.get_meta("last_update") is not None
    finally:
        reopened.close()


def test_touch_updates_mtime_and_size_only(manifest):
    manifest.apply([make_update("a.md", ["apple"], mtime=1000.0)])
    before = manifest.file("a.md")
    manifest.touch("a.md", 2000.0, 77, 2001.0)
    after = manifest.file("a.md")
    assert after.mtime == 2000.0
    assert (after.size, after.ctime) == (77, 2001.0)
    assert after.content_hash == before.content_hash
    assert after.chunk_ids == before.chunk_ids
    assert manifest.file_mtimes() == {"a.md": 2000.0}


def test_touch_bumps_generation(manifest):
    """The modified: filter reads mtimes through a generation-keyed cache; a touch moves mtimes."""
    manifest.apply([make_update("a.md", ["apple"], mtime=1000.0)])
    gen = manifest.generation
    manifest.touch("a.md", 2000.0, 5, 2000.0)
    assert manifest.generation > gen


def test_keyword_search_ranks_title_and_filters_paths(manifest):
    manifest.apply([
        make_update("a.md", ["the budget for the quarter"]),
        make_update("b.md", ["budget budget budget review"]),
        make_update("c.md", ["nothing relevant"]),
    ])
    hits = manifest.keyword_search('"budget"', 10)
    assert [cid for cid, _ in hits] == ["b.md#0", "a.md#0"]
    assert hits[0][1] >= hits[1][1]  # higher is better
    assert [cid for cid, _ in manifest.keyword_search('"budget"', 10, {"a.md"})] == ["a.md#0"]
    assert manifest.keyword_search('"budget"', 1)[0][0] == "b.md#0"
    with pytest.raises(ValueError):
        manifest.keyword_search('"unclosed', 10)


def test_body_file_counts_counts_distinct_notes(manifest):
    manifest.apply([
        make_update("a.md", ["shared", "shared"]),
        make_update("b.md", ["shared"]),
        make_update("c.md", ["unique"]),
    ])
    counts = manifest.body_file_counts(["b:shared", "b:unique", "b:none"])
    assert counts == {"b:shared": 2, "b:unique": 1}


def test_reads_from_another_thread_see_committed_writes(manifest):
    manifest.apply([make_update("a.md", ["apple"])])
    out: list[int] = []
    t = threading.Thread(target=lambda: out.append(manifest.counts()[1]))
    t.start()
    t.join()
    assert out == [1]


def test_threads_one_after_another_share_one_connection_and_see_new_writes(manifest):
    # a holder answers each channel connection on a new thread: one connection kept per thread
    # that ever asked grew it by its page cache a search, without end
    seen: list[int] = []
    for n in range(1, 31):
        manifest.apply([make_update(f"n{n}.md", ["apple"])])
        t = threading.Thread(target=lambda: seen.append(manifest.counts()[0]))
        t.start()
        t.join()
    assert seen == list(range(1, 31))  # no thread reads through an older thread's snapshot
    assert len(manifest._owners) == 2  # this thread's and the one the ended threads passed on


def test_meta_roundtrip(manifest):
    assert manifest.get_meta("k") is None
    manifest.set_meta("k", "v1")
    manifest.set_meta("k", "v2")
    assert manifest.get_meta("k") == "v2"


def test_schema_mismatch_is_refused(tmp_path):
    path = tmp_path / "m.sqlite3"
    Manifest(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    conn.close()
    with pytest.raises(sqlite3.DatabaseError, match="schema"):
        Manifest(path)


def test_a_manifest_made_before_the_change_stamp_gets_it_from_its_mtimes(manifest):
    """Its holder's open adds ``ctime``, each note's mtime (a note last changed by writing it
    has both times equal), so no note is read again for want of it."""
    manifest.apply([make_update("a.md", ["apple"], mtime=1000.0)])
    path = manifest.path
    manifest.close()
    with sqlite3.connect(path) as conn:  # as a release before the stamp left it
        conn.execute("ALTER TABLE files DROP COLUMN ctime")
    conn.close()
    writer = Manifest(path)
    try:
        assert writer.file_stats() == {"a.md": (1000.0, writer.file("a.md").size)}
        assert writer.file("a.md").ctime == 1000.0
        writer.touch("a.md", 1000.0, 5, 1234.5)
        assert writer.file_stats() == {"a.md": (1234.5, 5)}
    finally:
        writer.close()
