"""An index bigger than one Chroma batch (5,461 with chromadb 1.x) is written, repaired and dropped.

The fake embedder keeps this fast; the store is the real Chroma on disk, since its batch limit is
what is under test.
"""

from __future__ import annotations

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.workspace import Workspace

N_SECTIONS = 6_100


def big_note(n: int) -> str:
    body = "\n".join(
        f"## Topic {i}\n\nEntry {i} about item{i} and widget{i % 97}.\n" for i in range(n)
    )
    return "# Big catalogue\n\n" + body


@pytest.mark.slow
def test_index_larger_than_one_chroma_batch(tmp_path, write, fake_embedder):
    root = tmp_path / "notes"
    write(root, "catalogue.md", big_note(N_SECTIONS))
    for i in range(20):
        write(root, f"small/n{i}.md", f"# Small {i}\n\nA small note number {i}.\n")
    # A configured batch far above Chroma's limit: the store's own cap must apply. (One note
    # over max_chunks_per_file's default is what makes the write bigger than one batch.)
    settings = Settings(batch_size=100_000, max_chunks_per_file=10_000)
    idx = tmp_path / "idx"
    with Workspace(root, settings, fake_embedder, index_dir=idx) as ws:
        assert ws.store.batch_size == ws.store.max_batch < N_SECTIONS
        sizes: list[int] = []
        col = ws.store._col
        real_upsert = col.upsert

        def spy(**kw):
            sizes.append(len(kw["ids"]))
            return real_upsert(**kw)

        ws.store._col = type("Spy", (), {
            "upsert": staticmethod(spy),
            "__getattr__": lambda self, name: getattr(col, name),
        })()

        report = ws.index()
        chunks = ws.manifest.counts()[1]
        assert chunks > 6_000
        assert report.chunks_total == chunks
        assert ws.store.count() == chunks
        assert max(sizes) <= ws.store.max_batch
        assert sum(sizes) == chunks
        assert ws.store.all_ids() == ws.manifest.chunk_ids()

        # Searching the big index works and respects filters.
        assert ws.hits("item4321", 5, mode="keyword")[0].title == "Topic 4321"
        exact = "Big catalogue Topic 4321 Entry 4321 about item4321 and widget53"
        top = ws.hits(exact, 5, mode="semantic")[0]
        assert top.title == "Topic 4321"
        assert top.score > 0.9
        assert {h.path for h in ws.hits("small note path:small/", 5)} <= {
            f"small/n{i}.md" for i in range(20)
        }

        # Losing every vector in Chroma is repaired from the cache on reopen, in batches.
        ws.store._col = col
        ws.store.delete(sorted(ws.store.all_ids()))
        assert ws.store.count() == 0

    embedded_before = fake_embedder.documents_embedded
    with Workspace(root, settings, fake_embedder, index_dir=idx) as ws:
        assert ws.store.count() == chunks
        assert fake_embedder.documents_embedded == embedded_before

        assert ws.store.all_ids() == ws.manifest.chunk_ids()

        # Deleting the big note removes more ids than one batch holds.
        (root / "catalogue.md").unlink()
        report = ws.index()
        assert report.files_deleted == 1
        assert ws.store.count() == ws.manifest.counts()[1] == 20
