"""What a writing open costs when the last writer closed cleanly (issue 26): two counts, not a
walk over every id in Chroma, and still a full repair whenever Chroma may differ."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.vector_store import ChromaStore
from mdsearch_ls.engine.workspace import Workspace


@pytest.fixture
def vault(tmp_path: Path, write) -> Path:
    root = tmp_path / "notes"
    for i in range(6):
        write(root, f"n{i}.md", f"# Note {i}\n\nThe {i}th note on gardening and tools.\n")
    return root


class _Walks:
    """Counts full reads of Chroma's ids (the cost a clean close saves)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = ChromaStore.all_ids

        def counting(store: ChromaStore) -> set[str]:
            self.n += 1
            return real(store)

        monkeypatch.setattr(ChromaStore, "all_ids", counting)


def test_an_open_after_a_clean_close_does_not_walk_chroma(vault, tmp_path, fake_embedder,
                                                           monkeypatch) -> None:
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
    walks = _Walks(monkeypatch)
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        report = ws.index()  # the CLI's `index`: reconcile on open and again in the run
        assert report.repaired == 0
        assert walks.n == 0
        assert ws.store.all_ids() == ws.manifest.chunk_ids()


def test_a_writer_that_did_not_close_leaves_a_full_comparison(vault, tmp_path, fake_embedder,
                                                               write, monkeypatch) -> None:
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
    ws = Workspace(vault, Settings(), fake_embedder, index_dir=idx)
    write(vault, "n0.md", "# Note 0\n\nRewritten: now about bicycles.\n")
    ws.update(["n0.md"])
    orphan = fake_embedder.embed_documents(["orphan"])
    ws.store.upsert(["orphan-id"], orphan, [{"path": "gone.md"}])
    ws.abandon()  # a killed process: no clean close
    ws.store.close()
    walks = _Walks(monkeypatch)
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        assert walks.n >= 1
        assert "orphan-id" not in ws.store.all_ids()
        assert ws.store.all_ids() == ws.manifest.chunk_ids()


def test_a_chroma_changed_behind_a_clean_close_is_still_repaired(vault, tmp_path,
                                                                 fake_embedder) -> None:
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
        lost = sorted(ws.manifest.chunk_ids())[:2]
        ws.store.delete(lost)  # not through the writer: the marker cannot know
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        assert set(lost) <= ws.store.all_ids()
        assert ws.store.all_ids() == ws.manifest.chunk_ids()


def test_counts_follow_each_commit(vault, tmp_path, fake_embedder, write) -> None:
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
        assert ws.manifest.counts() == (6, 6)
        write(vault, "n6.md", "# Note 6\n\nOne more.\n\n## Part\n\nAnd a second section.\n")
        ws.update(["n6.md"])
        assert ws.manifest.counts() == (7, 8)
        ws.delete(["n1.md"])
        assert ws.manifest.counts() == (6, 7)


def test_a_seal_whose_token_differs_is_compared_in_full_at_the_next_open(
        vault, tmp_path, fake_embedder, monkeypatch) -> None:
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
        path, generation = ws.manifest.path, ws.manifest.generation
    # the manifest's half of the token no longer matches the collection's
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'store_clean'",
                   (f"{generation} not-the-collections",))
    walks = _Walks(monkeypatch)
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        assert walks.n == 1  # the full comparison
        assert ws.store.all_ids() == ws.manifest.chunk_ids()
