"""The folders service (engine/service/folders.py): the one set of rules both servers follow.

Each rule here was once written twice (language server and MCP server) and the copies disagreed;
these tests pin the single version on a real index on disk with the fake embedder.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import Folders, FolderState, IndexPhase, ModelState, SearchRequest
from mdsearch_ls.engine.index.layout import default_index_dir, index_lock
from mdsearch_ls.engine.service import folder as folder_module
from tests.conftest import FakeEmbedder, write_note


class Watch:
    """Wake a test when the service reports a change and a condition holds (no sleeping)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()

    def __call__(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def until(self, check: Callable[[], bool], timeout: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(check, timeout)


@pytest.fixture
def service() -> Iterator[tuple[Folders, Watch, list[str]]]:
    watch = Watch()
    rescans: list[str] = []
    folders = Folders(Settings(), embedder=FakeEmbedder(), on_change=watch,
                      on_rescan=lambda f: rescans.append(f.name))
    yield folders, watch, rescans
    folders.close(timeout=10)


def _ready(folders: Folders, root: Path) -> None:
    folder = folders.add(root, Settings())
    assert folder is not None
    assert folders.index(folder).result(timeout=30) is not None


def _hits(folders: Folders, query: str, k: int = 10) -> list[str]:
    request = SearchRequest.build(query, k=k, mode="semantic")
    return [f"{f.name}:{h.path}" for f, h in folders.search(request)]


def test_nested_folders_resolve_to_the_deepest_root(service, tmp_path: Path) -> None:
    folders, _, _ = service
    outer = tmp_path / "docs"
    inner = outer / "team"
    write_note(inner, "plan.md", "# Plan\n\nship it\n")
    write_note(outer, "index.md", "# Index\n\nall docs\n")
    folders.add(outer, Settings())
    folders.add(inner, Settings())
    found = folders.locate(inner / "plan.md")
    assert found is not None and found[0].root == inner.resolve() and found[1] == "plan.md"
    assert folders.folder_of(outer / "index.md").root == outer.resolve()
    assert folders.locate(tmp_path / "elsewhere.md") is None
    assert folders.add(outer, Settings()) is folders.get(outer), "the same root twice is one folder"
    assert folders.add(tmp_path / "missing", Settings()) is None


def test_an_atomic_save_is_decided_by_the_disk_not_the_event(service, tmp_path: Path) -> None:
    folders, _, _ = service
    root = tmp_path / "vault"
    note = write_note(root, "birds.md", "# Birds\n\nkestrels hover over fields\n")
    _ready(folders, root)
    # An editor's atomic save: "deleted" and "created" for a file that exists now, in either order.
    note.write_text("# Birds\n\nowls hunt at night\n", "utf-8")
    assert folders.changed_all([(note, True), (note, False), (note, True)]) == 3
    assert folders.settled(timeout=30)
    assert _hits(folders, "owls hunt at night", k=1) == ["vault:birds.md"]
    note.unlink()
    assert folders.changed(note, note.exists())
    assert folders.settled(timeout=30)
    assert _hits(folders, "owls hunt at night") == []


def test_a_new_folder_queues_its_notes_and_a_gone_one_drops_them(service, tmp_path: Path) -> None:
    folders, _, rescans = service
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    _ready(folders, root)
    sub = root / "moved"
    write_note(sub, "b.md", "# B\n\nbravo charlie\n")
    write_note(sub, "deeper/c.md", "# C\n\ndelta echo\n")
    (sub / "data.bin").write_bytes(b"\0\1")
    assert folders.changed(sub, exists=True)
    assert folders.settled(timeout=30)
    assert sorted(folders.get(root).notes()) == ["a.md", "moved/b.md", "moved/deeper/c.md"]
    assert rescans == [], "a new folder queues its notes; it does not rescan the root"
    for p in sorted(sub.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    sub.rmdir()
    assert folders.changed(sub, exists=False)
    assert folders.settled(timeout=30)
    assert folders.get(root).notes() == ["a.md"]
    empty = root / "attachments"
    empty.mkdir()
    assert not folders.changed(empty, exists=True), "a folder without notes concerns no index"
    assert not folders.changed(root / "image.png", exists=True)


def test_a_changed_gitignore_rescans_its_folder_once(service, tmp_path: Path) -> None:
    folders, _, rescans = service
    a, b = tmp_path / "a", tmp_path / "b"
    write_note(a, "x.md", "# X\n")
    write_note(b, "y.md", "# Y\n")
    _ready(folders, a)
    _ready(folders, b)
    events = [(a / ".gitignore", True), (a / "sub" / ".gitignore", True),
              (a / ".gitignore", True), (b / ".gitignore", False)]
    folders.changed_all(events)
    assert sorted(rescans) == ["a", "b"]


def test_searches_across_folders_merge_in_one_order(service, tmp_path: Path) -> None:
    folders, _, _ = service
    a, b = tmp_path / "a", tmp_path / "b"
    write_note(a, "gulls.md", "# Gulls\n\ngulls nest on cliffs by the sea\n")
    write_note(a, "bread.md", "# Bread\n\nflour water salt yeast\n")
    write_note(b, "terns.md", "# Terns\n\nterns nest on cliffs by the sea too\n")
    _ready(folders, a)
    _ready(folders, b)
    request = SearchRequest.build("nest on cliffs by the sea", k=3, mode="semantic")
    merged = folders.search(request)
    scores = [h.score for _, h in merged]
    assert {f.name for f, _ in merged[:2]} == {"a", "b"}, "each folder's best comes first"
    assert scores[:2] == sorted(scores[:2], reverse=True)
    only_b = folders.search(request, per_folder=lambda f: request if f.name == "b" else None)
    assert [f.name for f, _ in only_b] == ["b"]


def test_status_speaks_one_vocabulary(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    embedder = FakeEmbedder()
    embedder.loaded = False  # type: ignore[misc]
    watch = Watch()
    folders = Folders(Settings(), embedder=embedder, on_change=watch)
    try:
        folder = folders.add(root, Settings())
        assert folder is not None
        status = folders.status()
        assert status["state"] == FolderState.STARTING, "a folder not yet started is not ready"
        assert status["model_state"] == ModelState.NOT_LOADED
        assert [f["state"] for f in status["folders"]] == [FolderState.STARTING]

        def load() -> None:
            embedder.loaded = True  # type: ignore[misc]

        embedder.load = load  # type: ignore[method-assign]
        assert folders.load_model()
        assert folders.wait_model(30)
        assert watch.until(lambda: folders.model_state == ModelState.LOADED)
        folders.index(folder).result(timeout=30)
        status = folders.status()
        assert status["state"] == FolderState.READY
        assert folders.index_state()["state"] == IndexPhase.READY
        assert not folders.load_model(), "a loaded model is not loaded again"
    finally:
        folders.close(timeout=10)


def test_a_lock_nobody_answers_for_yet_is_waited_for_then_taken(
        service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process between taking the lock and listening (a few milliseconds) is not an error:
    the folder looks again until it can ask it, or hold the index itself."""
    folders, _, _ = service
    monkeypatch.setattr(folder_module, "RETRY_LOCKED_S", 0.01)
    root = tmp_path / "vault"
    write_note(root, "kestrel.md", "# Kestrel\n\na falcon that hovers\n")
    index_dir = default_index_dir(root)
    other = index_lock(index_dir)  # another process's lock, with no record yet
    tries: list[bool] = []
    real_hold = folder_module.IndexedFolder._hold

    def hold(self: folder_module.IndexedFolder) -> bool:
        held = real_hold(self)
        tries.append(held)
        if not held:
            other.release()  # that process exits: the next look takes the lock
        return held

    monkeypatch.setattr(folder_module.IndexedFolder, "_hold", hold)
    folder = folders.add(root, Settings())
    assert folders.index(folder).result(timeout=30) is not None
    assert tries == [False, True] and folder.held
    assert _hits(folders, "falcon that hovers", k=1) == ["vault:kestrel.md"]


def test_a_second_service_asks_the_holder_and_takes_over_when_it_goes(tmp_path: Path) -> None:
    """Two processes (two services here) on one folder: the first holds the index, the second
    asks it through the channel and gets the same answers; when the first goes, the second's
    next request finds nobody and it holds the index itself."""
    root = tmp_path / "vault"
    write_note(root, "kestrel.md", "# Kestrel\n\na falcon that hovers\n")
    write_note(root, "boats.md", "# Boats\n\nboats sail on the sea\n")
    first = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    second = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    try:
        _ready(first, root)
        mine = second.add(root, Settings())
        assert second.index(mine).result(timeout=30) is None  # the holder looks, not this one
        assert not mine.held and mine.remote is not None
        assert _hits(second, "falcon that hovers") == _hits(first, "falcon that hovers")
        assert mine.status()["held_by"] == {"pid": os.getpid(), "role": "server"}
        assert sorted(mine.notes()) == ["boats.md", "kestrel.md"]
        assert mine.is_indexed("boats.md") and not mine.is_indexed("nope.md")
        first.close(timeout=10)
        assert _hits(second, "boats sail", k=1) == ["vault:boats.md"]
        assert mine.held
    finally:
        first.close(timeout=10)
        second.close(timeout=10)


def test_close_reports_a_writer_that_does_not_stop_in_time(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n")
    folders = Folders(Settings(), embedder=FakeEmbedder())
    folder = folders.add(root, Settings())
    folders.index(folder).result(timeout=30)
    release, started = threading.Event(), threading.Event()

    def long_batch() -> None:
        started.set()
        release.wait(30)

    folder.submit(long_batch)  # a batch that runs long
    assert started.wait(30), "the writer never started the batch"  # running, not just queued
    try:
        assert folders.close(timeout=0.2) is False
        assert len(folders) == 0
    finally:
        release.set()


def test_a_folder_the_service_holds_says_where_to_ask(service, tmp_path: Path) -> None:
    """The holder's record beside the index: its pid, what it is, and its endpoint."""
    folders, _, _ = service
    root = tmp_path / "notes"
    write_note(root, "a.md", "# A\n\ntext\n")
    _ready(folders, root)
    record = json.loads((default_index_dir(root.resolve()) / "holder.json").read_text())
    assert (record["pid"], record["role"]) == (os.getpid(), "server")
    assert record["address"] and len(bytes.fromhex(record["key"])) == 32
    folders.close(timeout=10)
    assert not (default_index_dir(root.resolve()) / "holder.json").exists()
