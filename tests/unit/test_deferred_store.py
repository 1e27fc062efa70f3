"""A writer that leaves Chroma behind (a CLI search updating a few saved notes): the manifest
answers at once, and the next writer that opens Chroma catches it up from the vector cache,
quietly and exactly, without the model."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.indexer import DEFERRED, STORE_CLEAN
from mdsearch_ls.engine.index.vector_store import BEHIND, DeferredStore
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, write_note
from tests.index_state import assert_consistent, clean_build, snapshot


def _vault(root: Path) -> Path:
    write_note(root, "birds.md", "# Birds\n\nkestrels hover\n\n## Owls\n\nowls hunt at night\n")
    write_note(root, "fish.md", "# Fish\n\nsalmon swim upstream\n")
    write_note(root, "trees.md", "# Trees\n\noaks grow slowly\n")
    return root


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


def _open(root: Path, index: Path, **kw: Any) -> Workspace:
    return Workspace.open(root, Settings(), "write", embedder=FakeEmbedder(), index_dir=index,
                          **kw)


def test_a_deferred_writer_leaves_chroma_and_the_next_open_catches_it_up_exactly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    root = _vault(tmp_path / "vault")
    index = tmp_path / "index"
    with _open(root, index) as ws:
        ws.index()
    chroma_files = _files(index / "chroma")
    # edits made while nothing ran: one in place (lines of a later section move), one new note,
    # one deleted, one with new tags only
    write_note(root, "birds.md", "# Birds\n\nkestrels hover\nand stoop\n\n## Owls\n\n"
                                 "owls hunt at night\n")
    write_note(root, "moss.md", "# Moss\n\nmoss likes shade\n")
    (root / "fish.md").unlink()
    write_note(root, "trees.md", "---\ntags: [wood]\n---\n# Trees\n\noaks grow slowly\n")
    changed = ["birds.md", "fish.md", "moss.md", "trees.md"]
    embedder = FakeEmbedder()
    with Workspace.open(root, Settings(), "write", embedder=embedder, index_dir=index,
                        defer_vectors=True) as ws:
        assert isinstance(ws.store, DeferredStore)
        report = ws.update(changed)
        assert (report.files_indexed, report.files_deleted) == (3, 1)
        assert ws.hits("moss likes shade", 1)[0].path == "moss.md"  # answered at once
        assert ws.manifest.get_meta(STORE_CLEAN) == DEFERRED
        assert json.loads(ws.manifest.get_meta(BEHIND) or "") == [
            "birds.md", "moss.md", "trees.md"]
    assert _files(index / "chroma") == chroma_files  # Chroma was not opened, let alone written
    caplog.set_level(logging.INFO)
    embedded = FakeEmbedder()
    with Workspace.open(root, Settings(), "write", embedder=embedded, index_dir=index,
                        role="server") as ws:
        # A server finds Chroma as the last clean close left it: trusted, and caught up at its
        # first write (its first answer does not wait for Chroma's graph); searches meanwhile
        # read the manifest's vectors, never the Chroma that is behind.
        assert ws.repaired == 0 and ws.healed is None
        assert ws.searcher.store is None and "caught up" not in caplog.text
        assert ws.hits("moss likes shade", 1)[0].path == "moss.md"
        assert "fish.md" not in {h.path for h in ws.hits("salmon swim upstream", 5)}
        write_note(root, "lichen.md", "# Lichen\n\nlichen on old stones\n")  # a save
        ws.update(["lichen.md"])
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "caught up with 3 notes" in caplog.text  # a catch-up, not a repair
        assert embedded.documents_embedded == 1  # the new note only: the rest from the cache
        assert ws.searcher.store is ws.store
        assert_consistent(ws)
        caught = snapshot(ws)
        assert ws.manifest.get_meta(BEHIND) == ""
    clean = clean_build(root, tmp_path / "clean", FakeEmbedder())
    assert caught == clean, caught.diff(clean)  # Chroma's metadata too: lines, tags, mtimes
    with _open(root, index) as ws:
        assert ws.indexer is not None and ws.indexer._store_known_clean()


def test_after_a_crash_a_deferred_writer_keeps_the_repair_loud(tmp_path: Path) -> None:
    """A writer that died mid-write left the token cleared: a deferred writer after it does
    not turn that repair into a quiet catch-up."""
    root = _vault(tmp_path / "vault")
    index = tmp_path / "index"
    with _open(root, index) as ws:
        ws.index()
        ws.manifest.set_meta(STORE_CLEAN, "")  # as a killed writer leaves it
        ws.store.delete([next(iter(ws.manifest.chunk_ids()))])  # and Chroma short of a chunk
        ws.indexer._settled = False  # (so this close does not seal)
    write_note(root, "moss.md", "# Moss\n\nmoss likes shade\n")
    with _open(root, index, defer_vectors=True) as ws:
        ws.update(["moss.md"])
        assert ws.manifest.get_meta(STORE_CLEAN) == ""
    with _open(root, index) as ws:
        assert ws.repaired and ws.repaired >= 1
        assert_consistent(ws)


def test_a_clean_close_lets_the_next_open_trust_chroma_without_reading_its_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chroma's count and probe read its whole graph into memory; after a clean close that
    nothing has touched since, the open needs neither. Any file of the folder changed (a sync
    tool, a restore, damage) brings both back."""
    from mdsearch_ls.engine.index.vector_store import ChromaStore

    root = _vault(tmp_path / "vault")
    index = tmp_path / "index"
    with _open(root, index) as ws:
        ws.index()
    asked: list[str] = []
    real_probe, real_count = ChromaStore.probe, ChromaStore.count
    monkeypatch.setattr(ChromaStore, "probe",
                        lambda self, v: asked.append("probe") or real_probe(self, v))
    monkeypatch.setattr(ChromaStore, "count",
                        lambda self: asked.append("count") or real_count(self))
    with _open(root, index) as ws:
        assert ws.repaired == 0 and asked == []
        assert ws.hits("oaks grow slowly", 1)[0].path == "trees.md"
        report = ws.index()  # `mdsearch index` with nothing to do: its own reconcile too
        assert (report.files_indexed, report.repaired, asked) == (0, 0, [])
    with _open(root, index) as ws:  # a close that wrote nothing keeps it so
        assert asked == []
        write_note(root, "moss.md", "# Moss\n\nmoss likes shade\n")
        ws.update(["moss.md"])
    assert asked == ["count"]  # the close after a write checks the counts before it seals
    asked.clear()
    with _open(root, index) as ws:  # and the next open trusts the new state
        assert asked == []
        assert ws.store.count() == ws.manifest.counts()[1]
    asked.clear()
    # Chroma's own open touches its SQLite file without changing it (a process killed after
    # opening Chroma leaves just that): still trusted
    sqlite = index / "chroma" / "chroma.sqlite3"
    os.utime(sqlite, ns=(sqlite.stat().st_atime_ns, sqlite.stat().st_mtime_ns + 1))
    with _open(root, index) as ws:
        assert asked == []
    graph = next(p for p in (index / "chroma").rglob("*") if p.is_file() and p != sqlite)
    os.utime(graph, ns=(graph.stat().st_atime_ns, graph.stat().st_mtime_ns + 1))
    with _open(root, index) as ws:
        assert "probe" in asked and ws.repaired == 0


def test_a_background_folder_writes_whole_scans_without_chroma_and_is_caught_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """What the background process's folders do (engine/service/background.py): a full look at
    the notes and single saves, all without Chroma; the next writer that opens it catches up
    quietly and exactly. A rebuild is refused there: it needs the store."""
    from mdsearch_ls.engine.service.folder import IndexedFolder

    root = _vault(tmp_path / "vault")
    index = tmp_path / "index"
    with _open(root, index) as ws:
        ws.index()
    chroma_files = _files(index / "chroma")
    write_note(root, "moss.md", "# Moss\n\nmoss likes shade\n")  # while nothing ran
    (root / "fish.md").unlink()
    folder = IndexedFolder(root, Settings(index_dir=str(index)), FakeEmbedder())  # type: ignore[arg-type]
    folder.defer_vectors = True
    try:
        report = folder.start_index().result(timeout=30)
        assert report is not None and (report.files_indexed, report.files_deleted) == (1, 1)
        assert folder.ws is not None and isinstance(folder.ws.store, DeferredStore)
        write_note(root, "ferns.md", "# Ferns\n\nferns uncurl in spring\n")  # a save
        folder.queue("ferns.md", "update")
        folder.settled().result(timeout=30)
        assert folder.ws.hits("ferns uncurl", 1)[0].path == "ferns.md"
        with pytest.raises(RuntimeError, match="rebuild needs the vector store"):
            folder.ws.index(rebuild=True)
    finally:
        folder.close()
    assert _files(index / "chroma") == chroma_files
    caplog.set_level(logging.INFO)
    with Workspace.open(root, Settings(), "write", embedder=FakeEmbedder(),
                        index_dir=index) as ws:
        assert ws.repaired == 0 and ws.healed is None
        # a command (`mdsearch index`) catches up at its open, and seals at its close
        assert ws.indexer is not None and ws.indexer.behind is None
        assert "caught up with 2 notes" in caplog.text
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert_consistent(ws)
        caught = snapshot(ws)
    clean = clean_build(root, tmp_path / "clean", FakeEmbedder())
    assert caught == clean, caught.diff(clean)


def test_a_writer_that_opens_behind_and_writes_nothing_leaves_the_catch_up_to_the_next(
    tmp_path: Path,
) -> None:
    """A server that opened a Chroma behind a deferred writer and closed without writing must
    not seal it as clean: the next writer still catches it up (and a rebuild just empties it)."""
    root = _vault(tmp_path / "vault")
    index = tmp_path / "index"
    with _open(root, index) as ws:
        ws.index()
    write_note(root, "moss.md", "# Moss\n\nmoss likes shade\n")
    with _open(root, index, defer_vectors=True) as ws:
        ws.update(["moss.md"])
    for _ in range(2):  # a server opens and closes, twice, writing nothing
        with _open(root, index, role="server") as ws:
            assert ws.indexer is not None and ws.indexer.behind is not None
            assert ws.hits("moss likes shade", 1)[0].path == "moss.md"
            ws.rest()  # a server at rest seals a clean store: not this one
        assert ws.manifest.get_meta(STORE_CLEAN) == DEFERRED
        assert json.loads(ws.manifest.get_meta(BEHIND) or "") == ["moss.md"]
    with _open(root, index, role="server") as ws:
        write_note(root, "lichen.md", "# Lichen\n\nlichen on old stones\n")
        ws.update(["lichen.md"])
        assert_consistent(ws)
    with _open(root, index) as ws:
        assert ws.indexer is not None and ws.indexer._store_known_clean()
        assert ws.indexer.behind is None
        ws.index(rebuild=True)
        assert_consistent(ws)
