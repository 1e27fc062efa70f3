"""find_index_root: the notes a command means when it is not told (the seam the CLI uses)."""

from __future__ import annotations

from pathlib import Path

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import find_index_root, has_index
from mdsearch_ls.engine.index.layout import count_notes
from mdsearch_ls.engine.workspace import Workspace


def test_walks_up_to_the_nearest_indexed_folder(tmp_path: Path, fake_embedder) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "deep").mkdir(parents=True)
    (outer / "a.md").write_text("# A\n\nApples.\n", "utf-8")
    (inner / "b.md").write_text("# B\n\nBoats.\n", "utf-8")
    assert find_index_root(inner / "deep") is None
    assert not has_index(outer, Settings())
    with Workspace.open(outer, Settings(), embedder=fake_embedder) as ws:
        ws.index()
    assert has_index(outer, Settings())
    assert not has_index(outer, Settings(chunk_size=500))  # another embedding space
    assert find_index_root(inner / "deep") == outer.resolve()
    with Workspace.open(inner, Settings(), embedder=fake_embedder) as ws:
        ws.index()
    assert find_index_root(inner / "deep") == inner.resolve()  # the nearest wins
    assert find_index_root(outer) == outer.resolve()
    assert find_index_root(tmp_path) is None


def test_an_index_dir_names_its_folder(tmp_path: Path, fake_embedder) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nApples.\n", "utf-8")
    index = tmp_path / "elsewhere"
    assert find_index_root(tmp_path, index) is None
    with Workspace.open(notes, Settings(), embedder=fake_embedder,
                        index_dir=index) as ws:
        ws.index()
    assert find_index_root(tmp_path / "anywhere", index) == notes.resolve()
    assert count_notes(notes, Settings()) == (1, True)
