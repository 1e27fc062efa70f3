"""The status vocabulary (engine/states.py) and its generated TypeScript copy."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.service.folder import IndexedFolder
from mdsearch_ls.engine.service.folders import Folders
from mdsearch_ls.engine.states import (
    FOLDER_STATUS_FIELDS,
    INDEX_PROGRESS_FIELDS,
    FolderState,
    IndexPhase,
    ModelState,
    overall_phase,
    overall_state,
)
from tests.conftest import FakeEmbedder, write_note

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("copy", ["vscode-extension/src/status.generated.ts",
                                  "obsidian-plugin/src/client/status.generated.ts"])
def test_the_typescript_status_words_are_generated_from_the_enums(copy: str) -> None:
    """A hand edit of a client's status.generated.ts, or a new state without re-running the
    generator, fails here (the drift that showed a starting folder as ready). Each client has a
    copy of its own: the Obsidian plugin's folder must need nothing outside it."""
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "sync_protocol.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    text = (REPO / copy).read_text("utf-8")
    for kind in (FolderState, ModelState, IndexPhase):
        for member in kind:
            assert f"'{member.value}'" in text


def test_a_folders_status_record_has_exactly_the_declared_fields(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    folders = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    folder = folders.add(root, Settings())
    try:
        record = folder.status()
        assert list(record) == list(FOLDER_STATUS_FIELDS)
        assert record["state"] == FolderState.STARTING
        assert list(record["index"]) == list(INDEX_PROGRESS_FIELDS)
        folder.start_index().result(timeout=30)
        record = folder.status()
        assert list(record) == list(FOLDER_STATUS_FIELDS)
        assert (record["state"], record["files"]) == (FolderState.READY, 1)
        others = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
        try:  # the same record, asked of the holder by another process
            asked = others.add(root, Settings())
            asked.open_now()
            record = asked.status()
            assert list(record) == list(FOLDER_STATUS_FIELDS)
            assert record["read_only"] and record["held_by"]["role"] == "server"
        finally:
            others.close()
    finally:
        folders.close()


def test_the_process_shows_its_least_finished_state() -> None:
    S, M = FolderState, ModelState
    assert overall_state([], M.NOT_LOADED) == S.READY
    assert overall_state([S.READY, S.STARTING, S.INDEXING], M.LOADED) == S.STARTING
    assert overall_state([S.READY, S.INDEXING], M.LOADED) == S.INDEXING
    assert overall_state([S.READY, S.INDEXING], M.LOADING) == S.LOADING_MODEL
    assert overall_state([S.READY, S.ERROR], M.LOADED) == S.ERROR
    assert overall_state([S.ERROR, S.ERROR], M.LOADING) == S.ERROR, "nothing will become ready"
    assert overall_state([S.READY, S.READY], M.LOADED) == S.READY
    P = IndexPhase
    assert overall_phase([]) == P.EMPTY
    assert overall_phase([P.READY, P.BUILDING]) == P.BUILDING
    assert overall_phase([P.READY, P.ERROR]) == P.READY, "one broken folder does not hide the rest"
    assert overall_phase([P.EMPTY, P.INTERRUPTED]) == P.INTERRUPTED


def test_a_first_index_about_to_start_says_building_not_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the index's open and the start of its first run, while the model still loads,
    a search must hear "building", never "empty": an MCP client was told nothing was indexed
    (caught by a clean-clone CI run)."""
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    entered, release = _pause_before_the_first_look(monkeypatch)
    embedder = FakeEmbedder()
    embedder.loaded = False  # type: ignore[misc]  (as a real model still loading)
    folders = Folders(Settings(), embedder=embedder, watch=False)
    folder = folders.add(root, Settings())
    try:
        run = folder.start_index()
        assert entered.wait(30)
        assert folder.index_state().state == IndexPhase.BUILDING
        release.set()
        run.result(timeout=30)
        assert folder.index_state().state == IndexPhase.READY
    finally:
        release.set()
        folders.close()


def _pause_before_the_first_look(monkeypatch: pytest.MonkeyPatch
                                 ) -> tuple[threading.Event, threading.Event]:
    """Hold a folder between the index's open and its first look at the notes."""
    entered, release = threading.Event(), threading.Event()
    real = IndexedFolder._first_look

    def first_look(self: IndexedFolder, **kwargs: object) -> object:
        entered.set()
        release.wait(30)
        return real(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(IndexedFolder, "_first_look", first_look)
    return entered, release


def test_a_first_look_over_a_whole_index_says_ready(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started on a folder indexed before: while it looks for changes, its searches
    (and any other process's) answer from an index that is whole, and must not say "still
    being built (0 of 0 notes)", as they did."""
    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    first = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    try:
        first.add(root, Settings()).start_index().result(timeout=30)
    finally:
        first.close()
    write_note(root, "b.md", "# B\n\nbeta\n")  # something for the look to find
    entered, release = _pause_before_the_first_look(monkeypatch)
    folders = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    folder = folders.add(root, Settings())
    try:
        run = folder.start_index()
        assert entered.wait(30)
        assert folder.state != FolderState.READY  # the look is still to come
        assert folder.index_state().state == IndexPhase.READY
        release.set()
        run.result(timeout=30)
        assert folder.index_state().state == IndexPhase.READY
        assert folder.index_state().files_total == 2
    finally:
        release.set()
        folders.close()
