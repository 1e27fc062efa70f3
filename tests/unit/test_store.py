"""Tests for ChromaStore: batch limits, cosine similarity, id and where restrictions, paging.

Each test runs twice: on the local persistent store in a folder, and on a real Chroma server
(``chroma run`` on a loopback port, see tests/chroma_server.py) through the HTTP client.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from mdsearch_ls.engine.index.vector_store import EF_SEARCH, ChromaStore


@pytest.fixture(params=["local", "http"])
def open_store(request, tmp_path):
    """``open_store(folder, name, **kw)``: a ChromaStore of the parametrised kind. On the
    server, the test's collections carry a key of their own (as an index's do), so tests never
    see each other's."""
    key = "-t" + uuid.uuid4().hex[:8]
    opened = []

    def make(folder, name, **kw):
        if request.param == "local":
            s = ChromaStore(folder, name, **kw)
        else:
            url = request.getfixturevalue("chroma_server").url
            s = ChromaStore(None, name + key, url=url, space=name, **kw)
        opened.append(s)
        return s

    make.kind = request.param
    yield make
    for s in opened:
        s.close()


def unit(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def meta(path: str, **extra) -> dict:
    return {"path": path, "title": "t", "breadcrumb": "b", "start_line": 0, "end_line": 1,
            "mtime": 0.0, "tags": "", **extra}


@pytest.fixture
def store(open_store, tmp_path):
    return open_store(tmp_path / "chroma", "test-space-v1")


class _Spy:
    """Wraps a Chroma collection and records the size of each write call."""

    def __init__(self, col):
        self._col = col
        self.upserts: list[int] = []
        self.deletes: list[int] = []
        self.gets: list[dict] = []

    def upsert(self, **kw):
        self.upserts.append(len(kw["ids"]))
        return self._col.upsert(**kw)

    def delete(self, **kw):
        self.deletes.append(len(kw["ids"]))
        return self._col.delete(**kw)

    def get(self, **kw):
        self.gets.append(kw)
        return self._col.get(**kw)

    def __getattr__(self, name):
        return getattr(self._col, name)


def test_batch_size_is_capped_by_the_client_limit(open_store, tmp_path):
    s = open_store(tmp_path / "c", "cap-space-v1", batch_size=10**9)
    assert s.max_batch > 0
    assert s.batch_size == s.max_batch
    assert open_store(tmp_path / "c", "cap-space-v1", batch_size=0).batch_size == 1


def test_upsert_and_delete_batches_never_exceed_the_limit(open_store, tmp_path):
    s = open_store(tmp_path / "c", "batch-space-v1", batch_size=7)
    spy = _Spy(s._col)
    s._col = spy
    ids = [f"id{i}" for i in range(20)]
    vecs = np.stack([unit(np.random.default_rng(i).random(8)) for i in range(20)])
    s.upsert(ids, vecs, [meta(f"n{i}.md") for i in range(20)])
    assert spy.upserts == [7, 7, 6]
    assert s.count() == 20
    s.delete(ids[:15])
    assert spy.deletes == [7, 7, 1]
    assert s.all_ids() == set(ids[15:])


def test_client_limit_wins_over_a_larger_setting(open_store, tmp_path, monkeypatch):
    from chromadb.api.client import Client

    monkeypatch.setattr(Client, "get_max_batch_size", lambda self: 3)
    s = open_store(tmp_path / "c", "small-limit-v1", batch_size=1000)
    assert s.batch_size == 3
    spy = _Spy(s._col)
    s._col = spy
    ids = [f"id{i}" for i in range(8)]
    s.upsert(ids, np.stack([unit([1, i]) for i in range(8)]), [meta("x.md")] * 8)
    s.delete(ids)
    assert spy.upserts == [3, 3, 2]
    assert spy.deletes == [3, 3, 2]
    assert s.count() == 0


def test_empty_writes_are_no_ops(store):
    store.upsert([], np.zeros((0, 4), dtype=np.float32), [])
    store.delete([])
    assert store.count() == 0
    assert store.query(unit([1, 0, 0, 0]), 5) == []


def test_mismatched_lengths_are_rejected(store):
    with pytest.raises(ValueError):
        store.upsert(["a", "b"], np.stack([unit([1, 0])]), [meta("a.md"), meta("b.md")])


def test_query_returns_cosine_similarity_best_first(store):
    vecs = {
        "same": unit([1, 0, 0]),
        "close": unit([1, 0.2, 0]),
        "orthogonal": unit([0, 1, 0]),
        "opposite": unit([-1, 0, 0]),
    }
    store.upsert(list(vecs), np.stack(list(vecs.values())), [meta(f"{k}.md") for k in vecs])
    q = unit([1, 0, 0])
    got = store.query(q, 10)
    assert [cid for cid, _ in got] == ["same", "close", "orthogonal", "opposite"]
    sims = dict(got)
    assert sims["same"] == pytest.approx(1.0, abs=1e-5)
    assert sims["close"] == pytest.approx(float(q @ vecs["close"]), abs=1e-5)
    assert sims["orthogonal"] == pytest.approx(0.0, abs=1e-5)
    assert sims["opposite"] == pytest.approx(-1.0, abs=1e-5)
    assert [cid for cid, _ in store.query(q, 2)] == ["same", "close"]
    assert store.query(q, 0) == []
    # several vectors in one call: each its own neighbours, in the order asked
    many = store.query_many([unit([0, 1, 0]), q], 2)
    assert [[cid for cid, _ in hits] for hits in many] == [["orthogonal", "close"],
                                                            ["same", "close"]]
    assert store.query_many([q, q], 0) == [[], []] and store.query_many([], 3) == []


def test_upsert_replaces_vector_and_metadata(store):
    store.upsert(["a"], np.stack([unit([1, 0])]), [meta("a.md")])
    store.upsert(["a"], np.stack([unit([0, 1])]), [meta("moved.md")])
    assert store.count() == 1
    assert store.query(unit([0, 1]), 1)[0][1] == pytest.approx(1.0, abs=1e-5)
    assert store.query(unit([0, 1]), 5, where={"path": "moved.md"})[0][0] == "a"
    assert store.query(unit([0, 1]), 5, where={"path": "a.md"}) == []


def test_query_restricted_to_ids(store):
    ids = [f"c{i}" for i in range(6)]
    vecs = np.stack([unit([1, i * 0.1, 0]) for i in range(6)])
    store.upsert(ids, vecs, [meta("n.md")] * 6)
    got = store.query(unit([1, 0, 0]), 10, ids=["c5", "c3"])
    assert [cid for cid, _ in got] == ["c3", "c5"]
    assert store.query(unit([1, 0, 0]), 10, ids=[]) == []


def test_query_where_filter_on_path(store):
    ids = ["f1", "f2", "o1", "o2"]
    paths = ["finance/a.md", "finance/b.md", "ops/a.md", "ops/b.md"]
    # The ops vectors are the best matches: a filter must still return the finance ones.
    vecs = np.stack([unit([0.2, 1]), unit([0.1, 1]), unit([1, 0]), unit([1, 0.01])])
    store.upsert(ids, vecs, [meta(p) for p in paths])
    got = store.query(unit([1, 0]), 10, where={"path": {"$in": ["finance/a.md", "finance/b.md"]}})
    assert [cid for cid, _ in got] == ["f1", "f2"]
    got = store.query(unit([1, 0]), 10, where={"path": {"$ne": "ops/a.md"}})
    assert "o1" not in {cid for cid, _ in got}
    assert len(got) == 3


def test_all_ids_pages_through_a_large_collection(open_store, tmp_path, monkeypatch):
    from mdsearch_ls.engine.index import vector_store

    monkeypatch.setattr(vector_store, "ID_PAGE", 1000)
    s = open_store(tmp_path / "c", "page-space-v1", batch_size=500)
    n = 2345
    rng = np.random.default_rng(0)
    vecs = rng.random((n, 4)).astype(np.float32)
    s.upsert([f"id{i}" for i in range(n)], vecs, [meta("n.md")] * n)
    spy = _Spy(s._col)
    s._col = spy
    assert s.all_ids() == {f"id{i}" for i in range(n)}
    # Paged: several get() calls, none asking for everything at once.
    assert [g["limit"] for g in spy.gets] == [1000, 1000, 1000]


def test_all_ids_pages_are_not_the_write_batch(open_store, tmp_path):
    """Each get costs Chroma ~0.13 s plus the ids it skips, so listing ids in pages of the write
    batch (1,000) made a repair's comparison grow with the square of the index (13.6 s at
    100k chunks, ~half an hour at a million): the pages are ID_PAGE ids."""
    from mdsearch_ls.engine.index import vector_store

    s = open_store(tmp_path / "c", "page-size-v1", batch_size=7)
    n = 50
    s.upsert([f"id{i}" for i in range(n)], np.random.default_rng(1).random((n, 4), np.float32),
             [meta("n.md")] * n)
    spy = _Spy(s._col)
    s._col = spy
    assert len(s.all_ids()) == n
    assert [g["limit"] for g in spy.gets] == [vector_store.ID_PAGE]
    assert vector_store.ID_PAGE >= 10_000


def test_reopen_sees_persisted_vectors(open_store, tmp_path):
    s = open_store(tmp_path / "c", "persist-space-v1")
    s.upsert(["a", "b"], np.stack([unit([1, 0]), unit([0, 1])]), [meta("a.md"), meta("b.md")])
    s.close()
    again = open_store(tmp_path / "c", "persist-space-v1")
    assert again.all_ids() == {"a", "b"}
    # Another collection name is another embedding space: empty.
    other = open_store(tmp_path / "c", "other-space-v1")
    assert other.count() == 0


def test_chunk_metadata_is_derived_from_the_location(store):
    """The store's metadata is the chunk's Location plus its note's mtime and tags, spelled in
    one place, and a path where-clause finds the chunk by it."""
    from mdsearch_ls.engine.index.vector_store import chunk_metadata
    from mdsearch_ls.engine.locations import ChunkRecord, FileRecord

    rec = ChunkRecord(path="a/b.md", title="B", breadcrumb="A > B", start_line=3, end_line=9,
                      id="c1", ordinal=0, section=1, text="x", embed_hash="e", body_hash="h")
    file = FileRecord("a/b.md", "h", 12.5, 1, "B", (), ("x", "y/z"), ("c1",))
    meta = chunk_metadata(rec, file)
    assert meta == {**rec.location_fields(), "mtime": 12.5, "tags": ",x,y/z,"}
    assert list(meta)[:5] == ["path", "title", "breadcrumb", "start_line", "end_line"]
    assert chunk_metadata(rec, None)["tags"] == ""
    store.upsert(["c1"], np.stack([unit([1, 0, 0])]), [meta])
    assert [cid for cid, _ in store.query(unit([1, 0, 0]), 1, where={"path": "a/b.md"})] == ["c1"]


def test_the_clean_close_token_stays_with_the_collection(open_store, tmp_path):
    """The token the writer seals a clean close with is read back by the next open, and
    writing it leaves the collection's cosine space alone (Chroma refuses to change it)."""
    s = open_store(tmp_path / "c", "marker-space-v1")
    assert s.marker() is None
    s.upsert(["a"], np.stack([unit([1, 0])]), [meta("a.md")])
    s.set_marker("7 feedface")
    s.close()
    again = open_store(tmp_path / "c", "marker-space-v1")
    assert again.marker() == "7 feedface"
    again.set_marker("")  # a writer has started writing
    assert again.marker() != "7 feedface"
    assert again.query(unit([0.6, 0.8]), 1)[0][1] == pytest.approx(0.6, abs=1e-5)


def test_on_a_server_only_this_index_s_collections_are_its_other_spaces(chroma_server):
    """Many indexes share a server: another index's collections (another key) are never listed
    as this one's, so pruning old spaces can never drop them."""
    url = chroma_server.url
    key, other_key = "-i" + uuid.uuid4().hex[:8], "-i" + uuid.uuid4().hex[:8]
    opened = [ChromaStore(None, f"{space}{k}", url=url, space=space)
              for space, k in [("new-v1", key), ("old-v1", key), ("new-v1", other_key)]]
    try:
        assert opened[0].other_collections() == {"old-v1": f"old-v1{key}"}
        assert opened[2].other_collections() == {}
        with pytest.raises(ValueError):
            opened[0].drop_collection(opened[0].name)
    finally:
        for s in opened:
            s.close()


def test_every_collection_searches_with_the_measured_ef_search(open_store, tmp_path):
    """A new collection is made with EF_SEARCH; one made before it (with Chroma's default, as
    every index's was) is given it when opened, since Chroma keeps a collection's own."""
    made = open_store(tmp_path / "chroma", "old-space-v1")
    assert made._col.configuration_json["hnsw"]["ef_search"] == EF_SEARCH
    made._col.modify(configuration={"hnsw": {"ef_search": 100}})
    made.close()
    opened = open_store(tmp_path / "chroma", "old-space-v1")
    assert opened._col.configuration_json["hnsw"]["ef_search"] == EF_SEARCH
    assert opened._col.configuration_json["hnsw"]["space"] == "cosine"
