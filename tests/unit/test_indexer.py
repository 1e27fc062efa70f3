"""Tests for the indexer through the Workspace facade: incremental work, repair, lock, progress.

Fake embedder, real Chroma on disk and real SQLite, so the counts asserted here are the counts a
user pays for in model time.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import IndexLockedError
from mdsearch_ls.engine.index.indexer import chunk_id
from mdsearch_ls.engine.index.layout import cache_root, default_index_dir, space_name
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.workspace import Workspace

SECTION_WORDS = [
    "invoices", "payroll", "firewall", "backups", "hiring", "roadmap", "support", "releases",
    "laptops", "contracts", "travel", "budget",
]


def long_note(edited: int | None = None) -> str:
    """A note with one section per topic, each well under chunk_size: one chunk per section."""
    parts = ["# Handbook", "", "Intro paragraph about the handbook.", ""]
    for i, word in enumerate(SECTION_WORDS):
        parts += [f"## {word.title()}", ""]
        body = f"This section explains {word} in some detail. " * 6
        if i == edited:
            body += "An extra sentence was added here."
        parts += [body.strip(), ""]
    return "\n".join(parts)


def consistent(ws: Workspace) -> bool:
    return ws.store.all_ids() == ws.manifest.chunk_ids()


def fts_count(ws: Workspace) -> int:
    return ws.manifest._conn().execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]


@pytest.fixture
def vault(tmp_path, write):
    root = tmp_path / "notes"
    write(root, "a.md", "# Alpha\n\nApples and apricots grow in the orchard.\n")
    write(root, "b.md", "# Beta\n\nBananas ripen in the sun.\n\n## More\n\nBlueberries too.\n")
    write(root, "sub/c.md", "# Gamma\n\nCherries are red.\n")
    write(root, "handbook.md", long_note())
    return root


def test_full_index_counts(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    report = ws.index()
    files, chunks = ws.manifest.counts()
    assert report.files_total == files == 4
    assert report.files_indexed == 4
    assert report.files_unchanged == 0
    assert report.chunks_total == chunks == ws.store.count()
    assert chunks >= 1 + 2 + 1 + len(SECTION_WORDS)
    assert report.chunks_written == chunks
    assert report.chunks_embedded == fake_embedder.documents_embedded
    assert report.chunks_embedded + report.vector_cache_hits == chunks
    assert fts_count(ws) == chunks
    assert consistent(ws)
    assert "4 files" in report.summary()


def test_second_run_embeds_nothing(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    fake_embedder.reset_counts()
    report = ws.index()
    assert fake_embedder.documents_embedded == 0
    assert report.files_indexed == 0
    assert report.files_unchanged == 4
    assert report.chunks_embedded == 0
    assert report.chunks_written == 0


def test_reopen_embeds_nothing(vault, tmp_path, fake_embedder, fake_embedder_cls):
    with Workspace(vault, Settings(), fake_embedder, index_dir=tmp_path / "idx") as ws:
        ws.index()
        n = ws.manifest.counts()[1]
    again = fake_embedder_cls()
    with Workspace(vault, Settings(), again, index_dir=tmp_path / "idx") as ws:
        report = ws.index()
        assert again.documents_embedded == 0
        assert report.files_unchanged == 4
        assert ws.store.count() == n


def test_touched_but_unchanged_file_is_not_reembedded(vault, make_workspace, fake_embedder,
                                                      touch_later):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    touch_later(vault / "a.md")
    fake_embedder.reset_counts()
    report = ws.index()
    assert fake_embedder.documents_embedded == 0
    assert report.files_indexed == 0
    assert ws.manifest.file("a.md").mtime == (vault / "a.md").stat().st_mtime
    # Recorded: the next scan does not even read it.
    assert ws.index().files_unchanged == 4


def test_editing_one_section_embeds_only_its_chunk(vault, make_workspace, fake_embedder,
                                                   touch_later):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    before = ws.manifest.file("handbook.md").chunk_ids
    assert len(before) >= len(SECTION_WORDS)
    (vault / "handbook.md").write_text(long_note(edited=5), encoding="utf-8")
    touch_later(vault / "handbook.md")
    fake_embedder.reset_counts()
    report = ws.index()
    assert report.files_indexed == 1
    assert report.files_unchanged == 3
    assert 1 <= report.chunks_embedded <= 2
    assert fake_embedder.documents_embedded == report.chunks_embedded
    assert "extra sentence" in " ".join(fake_embedder.texts)
    after = ws.manifest.file("handbook.md").chunk_ids
    assert report.vector_cache_hits == len(after) - report.chunks_embedded
    assert len(set(before) - set(after)) == report.chunks_embedded
    assert consistent(ws)
    assert fts_count(ws) == ws.manifest.counts()[1]


def test_update_of_one_path(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    (vault / "a.md").write_text("# Alpha\n\nAvocados now.\n", encoding="utf-8")
    fake_embedder.reset_counts()
    report = ws.update(["a.md"])
    assert report.files_indexed == 1
    assert fake_embedder.documents_embedded == 1
    assert "Avocados" in ws.manifest.chunks_for("a.md")[0].text
    assert consistent(ws)
    # Absolute paths are accepted too.
    assert ws.update([vault / "a.md"]).files_indexed == 0


def test_delete_removes_chunks_everywhere(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    ids = set(ws.manifest.file("b.md").chunk_ids)
    assert ids <= ws.store.all_ids()
    (vault / "b.md").unlink()
    report = ws.index()
    assert report.files_deleted == 1
    assert ws.manifest.file("b.md") is None
    assert not ids & ws.store.all_ids()
    assert not ids & ws.manifest.chunk_ids()
    assert ws.manifest.keyword_search('"bananas"', 10) == []
    assert fts_count(ws) == ws.manifest.counts()[1]
    assert consistent(ws)


def test_delete_event_and_folder_delete(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    assert ws.delete(["a.md", "never-indexed.md"]).files_deleted == 1
    assert ws.delete(["sub"]).files_deleted == 1  # a folder: every note under it
    assert set(ws.manifest.files()) == {"b.md", "handbook.md"}
    assert consistent(ws)
    # update() of a path that no longer exists drops it as well.
    (vault / "b.md").unlink()
    assert ws.update(["b.md"]).files_deleted == 1
    assert set(ws.manifest.files()) == {"handbook.md"}
    assert consistent(ws)


def test_move_to_another_folder_reuses_vectors(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    (vault / "archive").mkdir()
    shutil.move(vault / "handbook.md", vault / "archive" / "handbook.md")
    fake_embedder.reset_counts()
    report = ws.rename([("handbook.md", "archive/handbook.md")])
    assert fake_embedder.documents_embedded == 0
    assert report.files_indexed == 1
    assert report.files_deleted == 1
    assert report.vector_cache_hits == len(ws.manifest.file("archive/handbook.md").chunk_ids)
    assert ws.manifest.file("handbook.md") is None
    assert consistent(ws)


def test_rename_found_by_a_full_scan_reuses_vectors(tmp_path, write, make_workspace,
                                                    fake_embedder):
    root = tmp_path / "notes"
    write(root, "old name.md", "---\ntitle: Stable title\n---\n# Stable title\n\nBody text.\n")
    ws = make_workspace(root, fake_embedder)
    ws.index()
    (root / "old name.md").rename(root / "new name.md")
    fake_embedder.reset_counts()
    report = ws.index()
    assert fake_embedder.documents_embedded == 0
    assert report.files_deleted == 1 and report.files_indexed == 1
    assert set(ws.manifest.files()) == {"new name.md"}
    assert consistent(ws)


def test_chunk_ids_are_deterministic(vault, tmp_path, make_workspace, fake_embedder_cls):
    one = make_workspace(vault, fake_embedder_cls(), index_dir=tmp_path / "one")
    two = make_workspace(vault, fake_embedder_cls(), index_dir=tmp_path / "two")
    one.index()
    two.index()
    assert one.manifest.chunk_ids() == two.manifest.chunk_ids()
    for rec in one.manifest.chunks_for("handbook.md"):
        assert rec.id == chunk_id("handbook.md", rec.ordinal, rec.embed_hash)
    assert chunk_id("a.md", 0, "h") != chunk_id("a.md", 1, "h") != chunk_id("b.md", 1, "h")


def test_crash_between_chroma_and_manifest_is_repaired(vault, tmp_path, monkeypatch,
                                                       fake_embedder, touch_later):
    idx = tmp_path / "idx"
    ws = Workspace(vault, Settings(), fake_embedder, index_dir=idx)
    ws.index()
    old_ids = set(ws.manifest.file("handbook.md").chunk_ids)
    old_hash = ws.manifest.file("handbook.md").content_hash

    real_apply = Manifest.apply
    calls = {"n": 0}

    def crash_once(self, updates, deletes=()):
        if updates and calls["n"] == 0:
            calls["n"] += 1
            raise RuntimeError("simulated crash after the Chroma write")
        return real_apply(self, updates, deletes)

    monkeypatch.setattr(Manifest, "apply", crash_once)
    (vault / "handbook.md").write_text(long_note(edited=2), encoding="utf-8")
    touch_later(vault / "handbook.md")
    with pytest.raises(RuntimeError, match="simulated crash"):
        ws.update(["handbook.md"])
    # The crash left Chroma ahead of the manifest: new ids in, one old id out.
    assert ws.store.all_ids() != ws.manifest.chunk_ids()
    ws.close()

    ws = Workspace(vault, Settings(), fake_embedder, index_dir=idx)
    try:
        # Reopening repairs: Chroma holds exactly what the manifest says, nothing twice.
        assert consistent(ws)
        assert ws.store.count() == ws.manifest.counts()[1]
        assert set(ws.manifest.file("handbook.md").chunk_ids) == old_ids
        assert ws.manifest.file("handbook.md").content_hash == old_hash
        # The old content hash makes the next index bring the note up to date.
        fake_embedder.reset_counts()
        report = ws.index()
        assert report.files_indexed == 1
        # The new vector was cached before the crash: no model call needed now.
        assert report.chunks_embedded == 0
        rec = ws.manifest.file("handbook.md")
        assert rec.content_hash != old_hash
        assert any("extra sentence" in c.text for c in ws.manifest.chunks_for("handbook.md"))
        assert consistent(ws)
        assert ws.store.count() == ws.manifest.counts()[1]
    finally:
        ws.close()


def test_chroma_missing_ids_are_restored_on_reopen(vault, tmp_path, fake_embedder):
    idx = tmp_path / "idx"
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
        want = ws.manifest.chunk_ids()
        lost = sorted(want)[:5]
        # Chroma written past the manifest, as a writer killed between the two writes leaves
        # it (every write to Chroma first clears the clean-close token, so this close seals
        # nothing and the next open compares ids)
        ws.indexer._writing_store()
        ws.store.delete(lost)
        ws.store.upsert(["orphan-id"], ws.embedder.embed_documents(["orphan"]),
                        [{"path": "gone.md"}])
        assert ws.store.all_ids() != want
    fake_embedder.reset_counts()
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        assert ws.store.all_ids() == want
        assert fake_embedder.documents_embedded == 0  # restored from the vector cache
        # Restored vectors are searchable with their metadata.
        rec = ws.manifest.get_chunks(lost[:1])[lost[0]]
        got = ws.store.query(ws.manifest.vectors([rec.embed_hash])[rec.embed_hash], 3,
                             where={"path": rec.path})
        assert lost[0] in {cid for cid, _ in got}


def test_reconcile_without_cached_vector_forgets_the_note(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    ids = list(ws.manifest.file("a.md").chunk_ids)
    ws.store.delete(ids)
    ws.manifest._conn().execute("DELETE FROM vectors")
    ws.manifest._conn().commit()
    assert ws.indexer.reconcile() == len(ids)
    assert ws.manifest.file("a.md") is None  # forgotten, so the next scan re-embeds it
    fake_embedder.reset_counts()
    report = ws.index()
    assert report.files_indexed == 1
    assert fake_embedder.documents_embedded == len(ids)
    assert consistent(ws)


def test_second_workspace_on_same_index_is_refused_fast(vault, tmp_path, fake_embedder):
    idx = tmp_path / "idx"
    first = Workspace(vault, Settings(), fake_embedder, index_dir=idx)
    try:
        t0 = time.perf_counter()
        with pytest.raises(IndexLockedError, match="another mdsearch process holds"):
            Workspace(vault, Settings(), fake_embedder, index_dir=idx)
        assert time.perf_counter() - t0 < 2.0
        # The refused open did not break the first one.
        first.index()
    finally:
        first.close()
    # Released on close: a new one opens.
    Workspace(vault, Settings(), fake_embedder, index_dir=idx).close()


def test_lock_refused_from_another_thread_too(vault, tmp_path, fake_embedder):
    idx = tmp_path / "idx"
    errors: list[BaseException] = []
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx):

        def other():
            try:
                Workspace(vault, Settings(), fake_embedder, index_dir=idx)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], IndexLockedError)


def test_default_index_dir_is_in_the_cache_not_the_notes(vault, fake_embedder, _isolated_cache):
    before = sorted(p.relative_to(vault) for p in vault.rglob("*"))
    with Workspace(vault, Settings(), fake_embedder) as ws:
        ws.index()
        assert ws.index_dir == default_index_dir(vault)
        assert ws.index_dir.is_relative_to(cache_root())
        assert cache_root() == Path(_isolated_cache)
        assert not ws.index_dir.is_relative_to(vault.resolve())
        assert (ws.index_dir / "ROOT").read_text().strip() == str(vault.resolve())
    assert sorted(p.relative_to(vault) for p in vault.rglob("*")) == before
    # Keyed by path: another folder with the same name gets another index.
    other = vault.parent / "elsewhere" / vault.name
    other.mkdir(parents=True)
    assert default_index_dir(other) != default_index_dir(vault)


def test_index_dir_inside_the_notes_is_not_indexed(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder, index_dir=vault / ".mdsearch-index")
    ws.index()
    assert all(not p.startswith(".mdsearch") for p in ws.manifest.files())


def test_missing_root_is_a_clear_error(tmp_path, fake_embedder):
    with pytest.raises(FileNotFoundError, match="not found"):
        Workspace(tmp_path / "nope", Settings(), fake_embedder, index_dir=tmp_path / "i")
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(NotADirectoryError):
        Workspace(tmp_path / "file.md", Settings(), fake_embedder, index_dir=tmp_path / "i")


def test_progress_is_monotonic_and_ends_at_total(tmp_path, write, make_workspace,
                                                 fake_embedder, monkeypatch):
    import mdsearch_ls.engine.index.embed_queue as indexer_mod

    monkeypatch.setattr(indexer_mod, "GROUP_FILES", 3)
    root = tmp_path / "notes"
    for i in range(10):
        write(root, f"n{i:02}.md", f"# Note {i}\n\nText number {i}.\n")
    ws = make_workspace(root, fake_embedder)
    seen: list[tuple[int, int, int]] = []
    ws.index(progress=lambda d, t, c: seen.append((d, t, c)))
    done = [d for d, _, _ in seen]
    assert len(seen) >= 4  # the start, then each group of 3 files
    assert all(t == 10 for _, t, _ in seen)
    assert done == sorted(done)
    assert done[-1] == 10
    assert [c for _, _, c in seen] == sorted(c for _, _, c in seen)
    # An up-to-date index reports done == total at once.
    seen.clear()
    ws.index(progress=lambda d, t, c: seen.append((d, t, c)))
    assert seen[-1][:2] == (10, 10)


def test_cancel_stops_early_and_a_later_run_finishes(tmp_path, write, make_workspace,
                                                     fake_embedder, monkeypatch):
    import mdsearch_ls.engine.index.embed_queue as indexer_mod

    monkeypatch.setattr(indexer_mod, "GROUP_FILES", 2)
    root = tmp_path / "notes"
    for i in range(12):
        write(root, f"n{i:02}.md", f"# Note {i}\n\nText number {i}.\n")
    ws = make_workspace(root, fake_embedder)
    asked = {"n": 0}

    def cancel() -> bool:
        asked["n"] += 1
        return asked["n"] > 4

    report = ws.index(cancel=cancel)
    assert report.cancelled
    assert "(cancelled)" in report.summary()
    indexed = ws.manifest.counts()[0]
    assert 0 < indexed < 12
    assert indexed == report.files_indexed
    assert consistent(ws)
    fake_embedder.reset_counts()
    report = ws.index()
    assert not report.cancelled
    assert ws.manifest.counts()[0] == 12
    assert report.files_indexed == 12 - indexed
    assert fake_embedder.documents_embedded == 12 - indexed
    assert consistent(ws)


def test_chunk_settings_select_another_space(vault, tmp_path, fake_embedder):
    idx = tmp_path / "idx"
    small = Settings(chunk_size=120, chunk_overlap=20)
    assert space_name(small) != space_name(Settings())
    assert space_name(Settings(model="/models/other-model")) != space_name(Settings())
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        ws.index()
        default_space, default_chunks = ws.space, ws.manifest.counts()[1]
        default_manifest = ws.manifest.path
    with Workspace(vault, small, fake_embedder, index_dir=idx) as ws:
        assert ws.space != default_space
        assert ws.manifest.path != default_manifest
        assert ws.store.name != default_space
        assert ws.manifest.counts() == (0, 0)  # nothing mixed in from the other space
        assert ws.store.count() == 0
        ws.index()
        small_chunks = ws.manifest.counts()[1]
        assert small_chunks > default_chunks  # smaller chunks, more of them
        assert ws.store.count() == small_chunks
    with Workspace(vault, Settings(), fake_embedder, index_dir=idx) as ws:
        fake_embedder.reset_counts()
        assert ws.index().files_unchanged == 4  # the first space is still intact
        assert fake_embedder.documents_embedded == 0
        assert ws.store.count() == default_chunks


def test_only_the_newest_other_space_is_kept(vault, tmp_path, fake_embedder):
    """Three settings in turn: the first one's manifest and collection are deleted on the third
    open, the second one's kept (switching back to it re-embeds nothing)."""
    idx = tmp_path / "idx"
    first, second, third = (Settings(chunk_size=n, chunk_overlap=20) for n in (1000, 300, 120))
    with Workspace(vault, first, fake_embedder, index_dir=idx) as ws:
        ws.index()
        first_space = ws.space
    with Workspace(vault, second, fake_embedder, index_dir=idx) as ws:
        ws.index()
        second_space = ws.space
        assert ws.dropped_spaces == []  # one other space is kept
    time.sleep(0.01)  # distinct manifest mtimes
    with Workspace(vault, third, fake_embedder, index_dir=idx) as ws:
        ws.index()
        assert ws.dropped_spaces == [first_space]
        assert not (idx / f"{first_space}.sqlite3").exists()
        assert list(ws.store.other_collections()) == [second_space]
    with Workspace(vault, second, fake_embedder, index_dir=idx) as ws:
        fake_embedder.reset_counts()
        assert ws.dropped_spaces == []  # the third is now the newest other
        assert ws.index().files_unchanged == 4
        assert fake_embedder.documents_embedded == 0
        assert consistent(ws)


def test_rebuild_reembeds_nothing_thanks_to_the_cache(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    ws.index()
    n = ws.manifest.counts()[1]
    fake_embedder.reset_counts()
    report = ws.index(rebuild=True)
    assert report.files_indexed == 4
    assert report.chunks_embedded == 0
    assert report.vector_cache_hits == n
    assert ws.store.count() == n
    assert consistent(ws)


def test_excluded_and_oversized_notes(tmp_path, write, make_workspace, fake_embedder):
    root = tmp_path / "notes"
    write(root, "keep.md", "# Keep\n\nkept\n")
    write(root, "drafts/skip.md", "# Skip\n\nskipped\n")
    write(root, "big.md", "# Big\n\n" + "word " * 400)
    ws = make_workspace(root, fake_embedder,
                        settings=Settings(exclude=("drafts/",), max_file_bytes=1000))
    report = ws.index()
    assert set(ws.manifest.files()) == {"keep.md"}
    assert any("big.md" in w for w in report.warnings)
    # A targeted update respects the same rules.
    assert ws.update(["drafts/skip.md"]).files_indexed == 0
    assert ws.update(["big.md"]).files_skipped == 1
    assert set(ws.manifest.files()) == {"keep.md"}


def test_status(vault, make_workspace, fake_embedder):
    ws = make_workspace(vault, fake_embedder)
    assert ws.status()["files"] == 0 and ws.status()["last_update"] is None
    ws.index()
    info = ws.status()
    assert info["files"] == 4
    assert info["chunks"] == ws.store.count()
    assert info["model"] == fake_embedder.name
    assert info["space"] == ws.space
    assert info["last_update"]
