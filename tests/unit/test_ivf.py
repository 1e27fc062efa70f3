"""IVF lists in the vector snapshot: built by the writer past a row threshold, the same from the
same rows, never used for another state, close to exact search, and ranking alike in every
process that maps them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index import ivf, vector_snapshot
from mdsearch_ls.engine.search.vectors import VectorTable
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, copy_vault

N, DIM, CENTRES = 3000, 32, 60


def _clustered(seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Rows around a few centres (sections on a few topics), and queries near the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    rows = centres[rng.integers(0, CENTRES, N)] + rng.standard_normal((N, DIM))
    queries = centres[rng.integers(0, CENTRES, 40)] + rng.standard_normal((40, DIM))
    rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    return rows, queries


def _save(folder: Path, rows: np.ndarray, ident: str = "7:t") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "space.sqlite3"
    assert vector_snapshot.save(manifest, ident, len(rows),
                                ((f"c{i}", f"note{i // 5}.md", v) for i, v in enumerate(rows)))
    return manifest


def _table(manifest: Path, ident: str = "7:t") -> VectorTable:
    mapped = vector_snapshot.load(manifest, ident)
    assert mapped is not None
    return VectorTable(7, *mapped)


@pytest.fixture
def lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lists from 1,000 rows, 8 of them probed: small enough that a query reads a share."""
    monkeypatch.setattr(ivf, "MIN_ROWS", 1000)
    monkeypatch.setattr(ivf, "PROBES", 8)


def test_below_the_threshold_the_snapshot_is_exact(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rows, _ = _clustered()
    monkeypatch.setattr(ivf, "MIN_ROWS", N + 1)
    table = _table(_save(tmp_path, rows))
    assert table.lists is None
    monkeypatch.setattr(ivf, "MIN_ROWS", N)
    table = _table(_save(tmp_path / "at", rows))
    assert table.lists is not None and table.lists.nlist == ivf.list_count(N)


def _listed_and_exact(tmp_path: Path) -> tuple[VectorTable, VectorTable, np.ndarray]:
    """A snapshot of clustered rows with IVF lists, the same rows without them, and queries."""
    rows, queries = _clustered()
    table = _table(_save(tmp_path, rows))
    assert table.lists is not None
    exact = VectorTable(7, table._ids, (table._path_idx, table._path_names), table.matrix)
    return table, exact, queries


@pytest.mark.usefixtures("lowered")
def test_recall_against_exact_search(tmp_path: Path) -> None:
    table, exact, queries = _listed_and_exact(tmp_path)
    found = 0
    for q in queries:
        want = {cid for cid, _ in exact.nearest(q, 10, None, None)}
        got = table.nearest(q, 10, None, None)
        assert len(got) == 10
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        found += len(want & {cid for cid, _ in got})
    assert found / (10 * len(queries)) >= 0.98
    # each list is a contiguous slice of the mapped matrix, in list order
    assert int(table.lists.offsets[-1]) == len(table) == N


@pytest.mark.usefixtures("lowered")
def test_the_same_rows_build_the_same_lists(tmp_path: Path) -> None:
    rows, _ = _clustered()
    a, b = _table(_save(tmp_path / "a", rows)), _table(_save(tmp_path / "b", rows))
    assert a.lists is not None and b.lists is not None
    assert np.array_equal(a.lists.centroids, b.lists.centroids)
    assert np.array_equal(a.lists.offsets, b.lists.offsets)
    assert np.array_equal(np.asarray(a._ids), np.asarray(b._ids))
    c = _table(_save(tmp_path / "c", _clustered(seed=6)[0]))
    assert c.lists is not None and not np.array_equal(a.lists.centroids, c.lists.centroids)


@pytest.mark.usefixtures("lowered")
@pytest.mark.parametrize("damage", ["identity", "centroids-gone", "offsets", "centroids-cut"])
def test_lists_that_do_not_match_are_never_used(tmp_path: Path, damage: str) -> None:
    rows, _ = _clustered()
    manifest = _save(tmp_path, rows)
    head_path = tmp_path / "space.vectors.json"
    head = json.loads(head_path.read_text())
    centroids = tmp_path / head["ivf"]["centroids"]
    if damage == "identity":
        assert vector_snapshot.load(manifest, "8:t") is None
        return
    if damage == "centroids-gone":
        centroids.unlink()
    elif damage == "offsets":
        head["ivf"]["offsets"][-1] -= 1  # lists that do not cover the rows
        head_path.write_text(json.dumps(head))
    else:
        centroids.write_bytes(centroids.read_bytes()[:100])
    assert vector_snapshot.load(manifest, "7:t") is None  # the manifest's rows, exactly, instead


@pytest.mark.usefixtures("lowered")
def test_filters_narrow_exact_broad_through_the_lists(tmp_path: Path) -> None:
    table, exact, queries = _listed_and_exact(tmp_path)
    notes = sorted(set(table._path_names))
    narrow = set(notes[:20])  # 100 of 3,000 rows: searched exactly over its rows
    broad = set(notes[::2])  # half the rows: probed, then the rows it passes
    assert not table._probe_beats_exact(100) and table._probe_beats_exact(N // 2)
    for q in queries[:10]:
        assert table.nearest(q, 10, narrow, None) == exact.nearest(q, 10, narrow, None)
        got = table.nearest(q, 10, broad, None)
        assert len(got) == 10 and all(table.path_at(table.row_of[c]) in broad for c, _ in got)
    # a k the probed lists cannot fill reads more lists, never returns short
    assert len(table.nearest(queries[0], 1500, broad, None)) == 1500
    assert len(table.nearest(queries[0], N, None, None)) == N


@pytest.mark.slow
def test_the_real_model_ranks_alike_through_the_lists(
        tmp_path: Path, real_embedder, monkeypatch: pytest.MonkeyPatch,
        _isolated_cache: Path) -> None:
    """The handbook vault with lists from 10 rows: a CLI process (``--no-resident``, read-only,
    mapping the snapshot), a reader and the writer in this process all give the same hits, and
    the first hits exact search gives, though each query reads 4 of the lists."""
    monkeypatch.setattr(ivf, "MIN_ROWS", 10)  # the writer's decision; readers follow the file
    monkeypatch.setattr(ivf, "PROBES", 4)
    root = copy_vault(tmp_path / "vault")
    queries = ["how do we rotate the backup encryption keys", "who approves an invoice",
               "on-call escalation when the pager fires", "interview loop for new hires",
               "expense policy for travel", "what to do in a security incident"]

    def answers(ws: Workspace, mode: str = "semantic") -> list[list[tuple[str, int]]]:
        return [[(h.path, h.start_line) for h in ws.hits(q, 3, mode=mode)] for q in queries]

    def cli() -> list[list[tuple[str, int]]]:
        batch = "\n".join(json.dumps({"query": q}) for q in queries) + "\n"
        res = subprocess.run(
            [sys.executable, "-m", "mdsearch_ls", "search", "--format", "json", "-k", "3",
             "--no-resident", "--queries", "-"],
            capture_output=True, text=True, timeout=300, cwd=root, input=batch,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        assert res.returncode == 0, res.stderr
        return [[(h["path"], h["start_line"]) for h in json.loads(line)["results"]]
                for line in res.stdout.splitlines() if line.strip()]

    with Workspace.open(root, Settings(), "write", embedder=real_embedder) as ws:
        ws.index()
    with Workspace.open(root, Settings(), "read", embedder=real_embedder) as ro:
        table = ro.searcher._vector_table()
        assert table.lists is not None and table.lists.nprobe < table.lists.nlist
        probed = answers(ro)
        hybrid = answers(ro, "hybrid")
        # the searcher's 60 candidates span most of this vault's lists; 5 read only 4 of them
        exact_table = VectorTable(0, table._ids, (table._path_idx, table._path_names),
                                  table.matrix)
        near = [([c for c, _ in table.nearest(v, 5, None, None)],
                 [c for c, _ in exact_table.nearest(v, 5, None, None)])
                for v in (real_embedder.embed_query(q) for q in queries)]
        assert all(a[0] == e[0] for a, e in near)
        assert sum(len(set(a) & set(e)) for a, e in near) >= 0.8 * 5 * len(queries)
    assert cli() == hybrid  # another process, the same lists, the same hits
    with Workspace.open(root, Settings(), "write", embedder=real_embedder) as ws:
        assert ws.searcher._vector_table().lists is not None  # the writer maps the same lists
        assert answers(ws) == probed and answers(ws, "hybrid") == hybrid
    next(_isolated_cache.glob("indexes/*/*.vectors.json")).unlink()  # exact, from the manifest
    with Workspace.open(root, Settings(), "read", embedder=real_embedder) as ro:
        assert ro.searcher._vector_table().lists is None
        exact = answers(ro)
    assert [a[0] for a in probed] == [e[0] for e in exact]
    assert sum(len(set(a) & set(e)) for a, e in zip(probed, exact, strict=True)) >= 0.9 * sum(
        len(e) for e in exact)


def _writer(root: Path, index: Path, mode: str = "write") -> Workspace:
    return Workspace.open(root, Settings(), mode, embedder=FakeEmbedder(),  # type: ignore[arg-type]
                          index_dir=index)


def _reader(root: Path, index: Path) -> Workspace:
    return _writer(root, index, "read")


QUESTIONS = ["budget approval", "rotate backup keys", "pager escalation", "travel expenses",
             "hiring interview", "security incident", "office wifi", "release checklist"]


def _answers(ws: Workspace) -> tuple[list[list[str]], list[list[tuple[str, int]]]]:
    """The vector table's 3 nearest rows per question (what the lists change), and the hits."""
    table = ws.searcher._vector_table()
    assert table is not None
    vectors = [FakeEmbedder().embed_query(q) for q in QUESTIONS]
    return ([[c for c, _ in table.nearest(v, 3, None, None)] for v in vectors],
            [[(h.path, h.start_line) for h in ws.hits(q, 5, mode="semantic")]
             for q in QUESTIONS])


def test_a_snapshot_left_without_lists_gets_them(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot from a version (or threshold) without lists is written again by the next
    writer that closes, though the state it copies has not changed."""
    root, index = copy_vault(tmp_path / "vault"), tmp_path / "index"

    with _writer(root, index) as ws:
        ws.index()
    head_path = next(index.glob("*.vectors.json"))
    assert "ivf" not in json.loads(head_path.read_text())
    monkeypatch.setattr(ivf, "MIN_ROWS", 10)
    with _writer(root, index):
        pass
    head = json.loads(head_path.read_text())
    assert "ivf" in head and (index / head["ivf"]["centroids"]).exists()
    with _writer(root, index):
        pass
    assert json.loads(head_path.read_text()) == head  # complete: not written again


def test_a_few_rows_past_a_lowered_threshold_still_make_lists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ivf, "MIN_ROWS", 1)
    rows, queries = _clustered()
    table = _table(_save(tmp_path, rows[:3]))
    assert table.lists is not None and table.lists.nlist == 3
    assert [c for c, _ in table.nearest(queries[0], 3, None, None)] == [
        c for c, _ in VectorTable(7, table._ids, (table._path_idx, table._path_names),
                                  table.matrix).nearest(queries[0], 3, None, None)]


def test_a_large_writer_maps_the_snapshot_of_its_state_else_asks_chroma(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_MAX_CHUNKS the writer never loads its vectors: the snapshot of its own state
    (with the readers' lists), or the last one patched with what changed since, or Chroma once
    its index has moved on from both."""
    import mdsearch_ls.engine.search.searcher as searcher_mod
    from tests.conftest import write_note

    monkeypatch.setattr(ivf, "MIN_ROWS", 10)
    root, index = copy_vault(tmp_path / "vault"), tmp_path / "index"

    with _writer(root, index) as ws:
        ws.index()
    monkeypatch.setattr(searcher_mod, "EXACT_MAX_CHUNKS", 0)
    with _writer(root, index) as ws:
        table = ws.searcher._vector_table()
        assert table is not None and table.lists is not None
        assert isinstance(table.matrix, np.memmap)
        assert ws.hits("budget approval", 3, mode="semantic")  # ranked through the lists
        write_note(root, "new.md", "# Volcano\n\nLava and eruptions.\n")
        ws.update(["new.md"])
        patched = ws.searcher._vector_table()
        assert patched is not None and patched.lists is not None and patched.mapped
        assert ws.hits("lava eruptions", 1, mode="semantic")[0].path == "new.md"
        ws.manifest.set_meta("lineage", "another")  # (as after the manifest was made again)
        write_note(root, "new2.md", "# Comet\n\nIce and a tail.\n")
        ws.update(["new2.md"])
        assert ws.searcher._vector_table() is None  # Chroma answers this state
        assert ws.hits("comet ice tail", 1, mode="semantic")[0].path == "new2.md"
        ws.rest()  # leaves the snapshot of this state: searched from now on, not Chroma's answer
        assert ws.searcher._vector_table() is not None
        cached = ws.searcher.cache_hits
        assert ws.hits("comet ice tail", 1, mode="semantic")[0].path == "new2.md"
        assert ws.searcher.cache_hits == cached
    with _reader(root, index) as ro:
        assert ro.searcher._vector_table().lists is not None  # the closed writer's new lists
        assert ro.hits("lava eruptions", 1, mode="semantic")[0].path == "new.md"


def test_a_writer_with_its_own_vectors_ranks_as_its_readers_before_and_after_it_rests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between ivf.MIN_ROWS and EXACT_MAX_CHUNKS a writer that indexed with no snapshot to map
    searches its own vectors in memory, exactly, as a reader of the manifest does; when it rests
    it leaves the lists and maps them, and ranks as the readers that map them do (not by the
    exact table it held: the lists answer some of these queries differently)."""
    import mdsearch_ls.engine.search.searcher as searcher_mod

    monkeypatch.setattr(ivf, "MIN_ROWS", 10)
    monkeypatch.setattr(ivf, "PROBES", 1)
    assert searcher_mod.EXACT_MAX_CHUNKS > 10
    root, index = copy_vault(tmp_path / "vault"), tmp_path / "index"
    ws = _writer(root, index)
    try:
        ws.index()
        own = ws.searcher._vector_table()
        assert own is not None and own.lists is None and not own.mapped
        exact = _answers(ws)
        with _reader(root, index) as ro:
            assert ro.searcher._vector_table().lists is None
            assert _answers(ro) == exact
        ws.rest()
        table = ws.searcher._vector_table()
        assert table is not None and table.lists is not None and table.mapped
        probed = _answers(ws)
        assert probed[0] != exact[0]
        with _reader(root, index) as ro:
            assert ro.searcher._vector_table().lists is not None
            assert _answers(ro) == probed
    finally:
        ws.close()


def test_an_answer_ranked_while_the_writer_rested_is_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that ranked by the writer's own vectors while the writer rested (and forgot the
    answers of that copy) does not put its answer in the cache: the same question asked again
    is ranked by the lists the readers probe."""
    monkeypatch.setattr(ivf, "MIN_ROWS", 10)
    monkeypatch.setattr(ivf, "PROBES", 1)
    root, index = copy_vault(tmp_path / "vault"), tmp_path / "index"
    with _writer(root, index) as ws:
        ws.index()
        assert not ws.searcher._vector_table().mapped
        search = ws.searcher._search

        def racing(*args: object, **kwargs: object) -> object:
            answer = search(*args, **kwargs)  # ranked by its own copy...
            ws.rest()  # ...which the writer forgets before the answer is kept
            return answer

        monkeypatch.setattr(ws.searcher, "_search", racing)
        ws.hits("budget approval", 5, mode="semantic")
        monkeypatch.setattr(ws.searcher, "_search", search)
        cached = ws.searcher.cache_hits
        again = [(h.path, h.start_line) for h in ws.hits("budget approval", 5, mode="semantic")]
        assert ws.searcher.cache_hits == cached and ws.searcher._vector_table().mapped
        with _reader(root, index) as ro:
            assert [(h.path, h.start_line)
                    for h in ro.hits("budget approval", 5, mode="semantic")] == again


def test_a_reader_that_read_every_vector_maps_the_snapshot_its_writer_leaves_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that searched before the writer's first snapshot read every vector into memory
    and ranked exactly; once the writer leaves the snapshot of that same state, the reader maps
    it at its next search and ranks by the lists, as every process does, without waiting for a
    write (answers it kept of its own copy forgotten)."""
    monkeypatch.setattr(ivf, "MIN_ROWS", 10)
    monkeypatch.setattr(ivf, "PROBES", 1)
    root, index = copy_vault(tmp_path / "vault"), tmp_path / "index"
    with _writer(root, index) as writer:
        writer.index()
        ro = _reader(root, index)
        exact = _answers(ro)
        assert not ro.searcher._vector_table().mapped
    # the writer's close left the snapshot of this state; nothing was written to the index
    with ro:
        table = ro.searcher._vector_table()
        assert table.mapped and table.lists is not None
        probed = _answers(ro)
        assert probed[0] != exact[0]
        with _reader(root, index) as fresh:
            assert fresh.manifest.generation == ro.manifest.generation
            assert _answers(fresh) == probed


@pytest.mark.usefixtures("lowered")
def test_the_files_hold_the_rows_grouped_by_list_across_many_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written and regrouped a few rows at a time (every block size smaller than the rows),
    the snapshot holds each row once, in its list, with its own id and note; rows counted but
    never given are not rows of it."""
    monkeypatch.setattr(vector_snapshot, "WRITE_ROWS", 64)
    monkeypatch.setattr(ivf, "BLOCK", 250)
    rows, _ = _clustered()
    manifest = tmp_path / "space.sqlite3"
    assert vector_snapshot.save(manifest, "7:t", N + 37,
                                ((f"c{i}", f"note{i // 5}.md", v) for i, v in enumerate(rows)))
    table = _table(manifest)
    assert table.lists is not None and len(table._ids) == N
    order = np.array([int(cid[1:]) for cid in table._ids])
    assert sorted(order) == list(range(N))
    assert np.array_equal(table.matrix, rows[order])
    assert [table._path_names[p] for p in table._path_idx] == [f"note{i // 5}.md" for i in order]
    labels = ivf.assign(rows, table.lists.centroids)
    offsets = table.lists.offsets
    for i in range(table.lists.nlist):
        assert set(labels[order[offsets[i]:offsets[i + 1]]]) <= {i}


def test_more_rows_than_counted_leave_no_snapshot(tmp_path: Path) -> None:
    rows, _ = _clustered()
    manifest = tmp_path / "space.sqlite3"
    assert not vector_snapshot.save(manifest, "7:t", 100,
                                    ((f"c{i}", "n.md", v) for i, v in enumerate(rows[:101])))
    assert vector_snapshot.load(manifest, "7:t") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []


_WRITE_AND_MEASURE = """
import sys
import numpy as np
from pathlib import Path
from mdsearch_ls.engine.index import ivf, vector_snapshot
ivf.MIN_ROWS = 1000
n, dim = int(sys.argv[2]), 384
base = np.random.default_rng(3).standard_normal((512, dim)).astype(np.float32)
base /= np.linalg.norm(base, axis=1, keepdims=True)
def rows():
    for i in range(n):
        yield f"c{i}", f"n{i // 8}.md", base[i % 512] + np.float32(i * 1e-7)
def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
before = hwm()
assert vector_snapshot.save(Path(sys.argv[1]) / "space.sqlite3", "1:t", n, rows())
print(hwm() - before)
"""


def _peak_growth_mb(folder: Path, n: int) -> int:
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", _WRITE_AND_MEASURE, str(folder), str(n)],
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    table = _table(folder / "space.sqlite3", "1:t")
    assert table.lists is not None and len(table._ids) == n
    return int(done.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's VmHWM")
def test_writing_a_large_snapshot_keeps_its_rows_out_of_the_writers_memory(
        tmp_path: Path) -> None:
    """A writer's peak RSS while it leaves a snapshot of 200k rows against one of 100k: the
    100k rows more (146 MB of vectors, written, then regrouped by list) add a small part of
    that. Written and regrouped through mappings, every page touched stayed in RSS (the
    matrix, then its regrouped copy: 0.6 GB at 200k rows)."""
    added_mb = 100_000 * 384 * 4 // 2**20
    grew = _peak_growth_mb(tmp_path / "200k", 200_000) - _peak_growth_mb(tmp_path / "100k",
                                                                         100_000)
    assert grew < added_mb // 4, (grew, added_mb)


@pytest.mark.usefixtures("lowered")
@pytest.mark.parametrize("fails", ["first files", "regrouped files"])
def test_a_full_disk_mid_write_leaves_no_snapshot_and_no_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """A write that fails (a full disk) costs the next reader a slower load, nothing else: no
    snapshot is named, the files begun are gone, and a snapshot written before stays whole."""
    rows, _ = _clustered()
    manifest = _save(tmp_path, rows[:2000], ident="6:t")
    kept = sorted(p.name for p in tmp_path.iterdir())

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    if fails == "first files":
        monkeypatch.setattr(vector_snapshot._Npy, "_flush", full)
    else:
        monkeypatch.setattr(vector_snapshot.os, "pwrite", full)
    assert not vector_snapshot.save(manifest, "7:t", N,
                                    ((f"c{i}", f"n{i}.md", v) for i, v in enumerate(rows)))
    assert sorted(p.name for p in tmp_path.iterdir()) == kept
    assert vector_snapshot.load(manifest, "7:t") is None
    assert len(_table(manifest, "6:t")._ids) == 2000
