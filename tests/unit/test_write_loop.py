"""Bounded work per note and early commits: the write loop of the indexer.

What a user would notice: a first index that shows progress and commits as it goes, so a kill
loses at most one batch and the next run re-embeds nothing committed; one huge note that is
capped at ``max_chunks_per_file`` and never holds back the rest of the vault; warnings about a
note said once per change of it, not on every scan. Fake embedder, real SQLite and Chroma.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import mdsearch_ls.engine.index.embed_queue as indexer_mod
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.search.requests import SearchRequest
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, write_note
from tests.index_state import assert_consistent, clean_build, snapshot


def headings_note(n: int, tag: str = "big") -> str:
    """One tiny section per heading: one chunk each."""
    return "\n".join(f"## {tag} heading {i}\n\nLine {i} of the {tag} note.\n" for i in range(n))


def small_vault(root: Path, notes: int = 10) -> Path:
    for i in range(notes):
        write_note(root, f"small/n{i:02}.md",
                   f"# Small {i}\n\nFirst part {i}.\n\n## More {i}\n\nSecond part {i}.\n",
                   mtime=1.7e9 + i)
    return root


class RecordingEmbedder(FakeEmbedder):
    """Records each batch and how many vectors the manifest had committed when it came."""

    def __init__(self, manifest_path: Path | None = None, *, fail_on_call: int | None = None):
        super().__init__()
        self.batches: list[list[str]] = []
        self.committed_before: list[int] = []
        self.manifest_path = manifest_path
        self.fail_on_call = fail_on_call

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.manifest_path is not None:
            conn = sqlite3.connect(f"file:{self.manifest_path}?mode=ro", uri=True)
            try:
                self.committed_before.append(
                    conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
            finally:
                conn.close()
        if self.fail_on_call is not None and len(self.batches) + 1 == self.fail_on_call:
            raise KeyboardInterrupt("killed while embedding")  # what a kill looks like here
        self.batches.append(list(texts))
        return super().embed_documents(texts)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> int:
    """Batches of exactly 8 chunks, whatever the speed of the fake embedder."""
    for name in ("EMBED_BATCH", "MIN_BATCH", "MAX_BATCH"):
        monkeypatch.setattr(indexer_mod, name, 8)
    return 8


def open_ws(root: Path, idx: Path, embedder: FakeEmbedder, **settings: object) -> Workspace:
    return Workspace.open(root, Settings(**settings),  # type: ignore[arg-type]
                          embedder=embedder, index_dir=idx)


def test_a_note_over_max_chunks_per_file_is_capped_with_one_warning(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write_note(root, "huge.md", headings_note(30))
    write_note(root, "other.md", "# Other\n\nNothing special.\n")
    with open_ws(root, tmp_path / "idx", FakeEmbedder(), max_chunks_per_file=10) as ws:
        report = ws.index()
        chunks = ws.manifest.chunks_for("huge.md")
        assert len(chunks) == 10
        assert [c.ordinal for c in chunks] == list(range(10))  # the first ten, in order
        warned = [w for w in report.warnings if "huge.md" in w]
        assert len(warned) == 1
        assert "30 chunks" in warned[0] and "max_chunks_per_file" in warned[0]
        assert ws.hits("big heading 3", 3, mode="keyword")[0].path == "huge.md"
        # past the cap: no section holds the phrase (the search falls back and says so)
        past = ws.search(SearchRequest.build('"big heading 25"', k=3, mode="keyword"))
        assert all(h.title != "big heading 25" for h in past.hits)
        assert any("no section contains" in n for n in past.notes)
        # Once per change: an unchanged note is not read again, so no second warning...
        assert ws.index().warnings == []
        # ... until it changes.
        write_note(root, "huge.md", headings_note(31), mtime=1.8e9)
        assert any("31 chunks" in w for w in ws.index().warnings)
        assert_consistent(ws)


def test_each_batch_is_committed_before_the_next_is_embedded(tmp_path: Path,
                                                            small_batches: int) -> None:
    root = tmp_path / "notes"
    write_note(root, "long.md", headings_note(50))
    idx = tmp_path / "idx"
    with open_ws(root, idx, FakeEmbedder()) as ws:  # creates the manifest
        path = ws.manifest.path
    embedder = RecordingEmbedder(path)
    with open_ws(root, idx, embedder) as ws:
        ws.index()
        assert [len(b) for b in embedder.batches] == [8] * 6 + [2]
        # Before batch k is embedded, the k-1 batches before it are in the manifest.
        assert embedder.committed_before == [8 * k for k in range(7)]


def test_a_kill_loses_at_most_one_batch_and_the_next_run_resumes(tmp_path: Path,
                                                                small_batches: int) -> None:
    root = small_vault(tmp_path / "notes", 4)
    write_note(root, "long.md", headings_note(50))
    idx = tmp_path / "idx"
    dying = RecordingEmbedder(fail_on_call=5)
    ws = open_ws(root, idx, dying)
    with pytest.raises(KeyboardInterrupt):
        ws.index()
    committed = ws.manifest._conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    assert committed == 4 * 8  # every batch before the kill, none lost
    ws.abandon()  # the process died: nothing is closed cleanly
    total = 50 + 4 * 2
    again = RecordingEmbedder()
    with open_ws(root, idx, again) as ws:
        report = ws.index()
        assert again.documents_embedded == total - committed  # nothing committed is redone
        assert report.chunks_embedded == total - committed
        assert report.vector_cache_hits == committed
        assert snapshot(ws) == clean_build(root, tmp_path / "clean", FakeEmbedder())


def test_a_cancel_inside_a_long_note_keeps_its_committed_batches(tmp_path: Path,
                                                                small_batches: int) -> None:
    root = tmp_path / "notes"
    write_note(root, "long.md", headings_note(40))
    embedder = RecordingEmbedder()
    with open_ws(root, tmp_path / "idx", embedder) as ws:
        report = ws.index(cancel=lambda: len(embedder.batches) >= 3)
        assert report.cancelled
        assert ws.manifest.counts() == (0, 0)  # the note is not complete: not written
        # ... but its vectors stay for the next run (no garbage collection after a cancel).
        kept = ws.manifest._conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        assert kept == 24
        assert ws.index_state().state == "interrupted"
        embedder.reset_counts()
        report = ws.index()
        assert embedder.documents_embedded == 40 - 24
        assert ws.manifest.counts() == (1, 40)
        assert ws.index_state().state == "ready"


def test_a_huge_note_does_not_hold_back_the_rest_of_the_vault(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              small_batches: int) -> None:
    monkeypatch.setattr(indexer_mod, "BIG_NOTE", 20)
    root = small_vault(tmp_path / "notes", 10)
    write_note(root, "a-huge.md", headings_note(200))  # scanned first: "a" sorts first
    written: list[str] = []
    real_apply = Manifest.apply

    def record(self, updates, deletes=()):
        written.extend(u.file.path for u in updates)
        return real_apply(self, updates, deletes)

    monkeypatch.setattr(Manifest, "apply", record)
    embedder = RecordingEmbedder()
    with open_ws(root, tmp_path / "idx", embedder) as ws:
        ws.index()
        assert written[-1] == "a-huge.md"
        assert sorted(written[:-1]) == [f"small/n{i:02}.md" for i in range(10)]
        # The small notes' 20 chunks were embedded in the first batches, before any of the
        # huge note's.
        first = [t for b in embedder.batches[:3] for t in b]
        assert len(first) == 20 and all("Small" in t for t in first)
        assert snapshot(ws) == clean_build(root, tmp_path / "clean", FakeEmbedder())


def test_big_and_small_batches_take_turns_over_the_backlog(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           small_batches: int) -> None:
    """With more big-note chunks waiting than BIG_BACKLOG, memory stays bounded: big batches
    are embedded between small ones instead of after all of them."""
    monkeypatch.setattr(indexer_mod, "BIG_NOTE", 20)
    monkeypatch.setattr(indexer_mod, "BIG_BACKLOG", 30)
    root = tmp_path / "notes"
    write_note(root, "a-huge.md", headings_note(100, "huge"))
    write_note(root, "b-large.md", headings_note(60, "large"))
    for i in range(40):
        write_note(root, f"c/n{i:02}.md", f"# Small {i}\n\nText {i}.\n\n## Part\n\nMore {i}.\n")
    embedder = RecordingEmbedder()
    with open_ws(root, tmp_path / "idx", embedder) as ws:
        ws.index()
        kinds = ["small" if all("Small" in t or "Part" in t for t in b) else "big"
                 for b in embedder.batches]
        # Small batches are embedded before the big notes are done: they interleave.
        last_small = max(i for i, k in enumerate(kinds) if k == "small")
        assert "big" in kinds[:last_small]
        assert snapshot(ws) == clean_build(root, tmp_path / "clean", FakeEmbedder())


def test_progress_moves_with_every_batch_inside_one_note(tmp_path: Path,
                                                        small_batches: int) -> None:
    root = tmp_path / "notes"
    write_note(root, "long.md", headings_note(40))
    seen: list[tuple[int, int, int]] = []
    with open_ws(root, tmp_path / "idx", FakeEmbedder()) as ws:
        report = ws.index(progress=lambda d, t, c: seen.append((d, t, c)))
    chunks = [c for _, _, c in seen]
    assert chunks == sorted(chunks)
    assert chunks[1:6] == [8, 16, 24, 32, 40]  # one call per embedded batch
    assert [d for d, _, _ in seen[:5]] == [0] * 5  # while the note itself is not done yet
    assert seen[-1] == (1, 1, report.chunks_written)


def test_batch_size_follows_the_model_speed(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of about BATCH_SECONDS of model time: a slow model gets small batches (a kill
    costs little), a fast one large ones. The clock is simulated: 0.05 s per chunk."""
    clock = {"now": 0.0}
    monkeypatch.setattr(indexer_mod.time, "perf_counter", lambda: clock["now"])

    class Timed(RecordingEmbedder):
        def embed_documents(self, texts):
            clock["now"] += 0.05 * len(texts)
            return super().embed_documents(texts)

    root = tmp_path / "notes"
    write_note(root, "long.md", headings_note(300))
    embedder = Timed()
    with open_ws(root, tmp_path / "idx", embedder) as ws:
        ws.index()
    sizes = [len(b) for b in embedder.batches]
    assert sizes[0] == indexer_mod.EMBED_BATCH
    assert all(abs(s - 20) <= 2 for s in sizes[4:-1]), sizes  # 1 s / 0.05 s per chunk


def test_a_shared_section_waits_for_its_one_vector(tmp_path: Path, small_batches: int) -> None:
    """Two notes with the same section text share one vector: it is embedded once even when
    the second note arrives while the first one's batch is still being filled."""
    root = tmp_path / "notes"
    shared = "## Template\n\nThe same words in every note.\n"
    write_note(root, "a.md", "# A\n\nAlpha.\n\n" + shared)
    write_note(root, "b.md", "# B\n\nBeta.\n\n" + shared)
    embedder = RecordingEmbedder()
    with open_ws(root, tmp_path / "idx", embedder) as ws:
        report = ws.index()
        texts = [t for b in embedder.batches for t in b]
        assert len(texts) == len(set(texts))
        assert report.chunks_embedded + report.vector_cache_hits == report.chunks_written
        assert_consistent(ws)
