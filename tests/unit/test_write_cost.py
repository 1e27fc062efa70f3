"""A write costs the notes it changes, not the index: no save, delete or scan that changes
nothing builds the record of every note (at a million chunks that was a second and a hundred
megabytes per save; benchmarks/million_bench.py)."""

from __future__ import annotations

import pytest

from mdsearch_ls.engine.index.manifest import Manifest


@pytest.fixture
def vault(tmp_path, write):
    root = tmp_path / "notes"
    write(root, "a.md", "# Alpha\n\nApples and apricots grow in the orchard.\n")
    write(root, "ab/x.md", "# Ab\n\nAbsolutely a sibling folder of a.\n")
    write(root, "sub/c.md", "# Gamma\n\nCherries are red.\n")
    write(root, "sub/deep/d.md", "# Delta\n\nDates are sweet.\n")
    write(root, "sub_other/e.md", "# Epsilon\n\nElderberries.\n")
    return root


@pytest.fixture
def no_full_reads(monkeypatch):
    """Reading every note's record fails the test."""
    def refuse(self):
        raise AssertionError("a write read every note's record")
    monkeypatch.setattr(Manifest, "files", refuse)


def test_writes_read_only_the_records_they_change(vault, make_workspace, fake_embedder,
                                                 no_full_reads, write):
    ws = make_workspace(vault, fake_embedder)
    assert ws.index().files_indexed == 5
    # A scan that changes nothing, then one that changes one note and misses one.
    assert ws.index().files_indexed == 0
    write(vault, "a.md", "# Alpha\n\nApples, apricots and almonds.\n")
    (vault / "sub_other" / "e.md").unlink()
    report = ws.index()
    assert (report.files_indexed, report.files_deleted) == (1, 1)
    assert "almonds" in " ".join(r.text for r in ws.manifest.chunks_for("a.md"))
    # A save, and the delete of a folder that arrives as one path.
    write(vault, "sub/c.md", "# Gamma\n\nCherries are red and sour.\n")
    assert ws.update([vault / "sub/c.md"]).files_indexed == 1
    assert ws.delete(["sub"]).files_deleted == 2
    assert ws.notes() == ["a.md", "ab/x.md"]
    assert ws.store.all_ids() == ws.manifest.chunk_ids()


def test_files_of_reads_the_named_records(vault, make_workspace, fake_embedder, write):
    write(vault, "t.md", "---\ntags: [one, two]\naliases: [Tee]\n---\n# T\n\nTagged.\n")
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    every = ws.manifest.files()
    got = ws.manifest.files_of(["t.md", "a.md", "missing.md", "t.md"])
    assert got == {"t.md": every["t.md"], "a.md": every["a.md"]}
    assert got["t.md"].tags == ("one", "two")
    assert ws.manifest.file("t.md") == every["t.md"]
    assert ws.manifest.file("missing.md") is None
    # More paths than one SQLite statement takes.
    assert len(ws.manifest.files_of([f"n{i}.md" for i in range(1200)] + ["a.md"])) == 1


def test_paths_under_is_the_folder_and_nothing_beside_it(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    m = ws.manifest
    assert m.paths_under("sub") == ["sub/c.md", "sub/deep/d.md"]
    assert m.paths_under("sub/") == ["sub/c.md", "sub/deep/d.md"]
    assert m.paths_under("a") == []  # not ab/x.md, not a.md
    assert m.paths_under("Sub") == []  # paths are case-sensitive
    assert m.paths_under("sub/deep") == ["sub/deep/d.md"]


def test_an_index_run_that_changes_nothing_does_not_collect_vectors(
        vault, make_workspace, fake_embedder, monkeypatch, write):
    """Dropping unused cached vectors reads the whole vector table (0.85 s at 400k chunks): a
    run after a change does it, a run that changed nothing does not, and what a change left
    unused is still dropped."""
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    calls: list[int] = []
    real = Manifest.gc_vectors
    monkeypatch.setattr(Manifest, "gc_vectors", lambda self: calls.append(1) or real(self))
    ws.index()
    ws.index()
    assert calls == []
    write(vault, "a.md", "# Alpha\n\nSomething else entirely about plums.\n")
    ws.update([vault / "a.md"])  # the old text's vector is now unused
    cached = ws.manifest._conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    ws.index()
    assert calls == [1]
    used = ws.manifest._conn().execute(
        "SELECT COUNT(DISTINCT embed_hash) FROM chunks").fetchone()[0]
    assert ws.manifest._conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == used
    assert used < cached
    ws.index()
    assert calls == [1]


def test_collect_vectors_runs_once_per_generation(tmp_path):
    import numpy as np

    m = Manifest(tmp_path / "m.sqlite3")
    try:
        m.put_vectors({"e:unused": np.ones(4, dtype=np.float32)})
        assert m.collect_vectors() == 1
        m.put_vectors({"e:later": np.ones(4, dtype=np.float32)})
        assert m.collect_vectors() == 0  # nothing was written since: left for the next change
        m.touch("none.md", 1.0, 1, 1.0)  # any write moves the generation
        assert m.collect_vectors() == 1
    finally:
        m.close()
