"""The inotify watch a server keeps so that its freshness check stats the notes an event named
instead of every note (index/notewatch.py), on real files and the real kernel queue.

What must hold: every kind of change made after a full look is named (or makes the next look a
full one), and the answer from the named notes is exactly the full look's answer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.notewatch import NoteWatch, local_tree
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, bump_mtime, write_note

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Workspace, NoteWatch]]:
    root = tmp_path / "notes"
    write_note(root, "a.md", "# A\n\nThe first note.\n")
    write_note(root, "deep/er/b.md", "# B\n\nA note two folders down.\n")
    write_note(root, "c.md", "# C\n\nA third.\n")
    write_note(root, ".obsidian/workspace.md", "not a note\n")
    ws = Workspace(root, Settings(max_file_bytes=10_000), FakeEmbedder(),  # type: ignore[arg-type]
                   index_dir=tmp_path / "index")
    ws.index()
    watch = NoteWatch.for_root(root)
    assert watch is not None, local_tree(root)
    try:
        yield ws, watch
    finally:
        watch.close()
        ws.close()


def _full_look(ws: Workspace, watch: NoteWatch) -> list[str] | None:
    watch.start_full_look()
    changed = ws.changed_notes(watch=watch)
    ws.index()
    watch.full_look_done()
    return changed


def test_each_change_to_a_note_is_named_and_judged_as_the_full_look_judges_it(
        watched: tuple[Workspace, NoteWatch]) -> None:
    ws, watch = watched
    root = ws.root
    assert _full_look(ws, watch) == []
    assert watch.touched() == set()  # nothing since: a search stats nothing
    changes: list[tuple[Callable[[], object], set[str], list[str]]] = [
        # (change, notes the queue names, what the full look says changed)
        (lambda: (root / "a.md").write_text("# A\n\nEdited in place.\n", encoding="utf-8"),
         {"a.md"}, ["a.md"]),
        (lambda: bump_mtime(root / "deep/er/b.md"), {"deep/er/b.md"}, ["deep/er/b.md"]),
        (lambda: write_note(root, "deep/new.md", "# New\n\nA new note.\n"),
         {"deep/new.md"}, ["deep/new.md"]),
        (lambda: (root / "c.md").unlink(), {"c.md"}, ["c.md"]),
        (lambda: (root / "a.md").rename(root / "deep/a2.md"), {"a.md", "deep/a2.md"},
         ["a.md", "deep/a2.md"]),
        (lambda: (root / "deep/new.md").write_text("x" * 20_000, encoding="utf-8"),  # too big
         {"deep/new.md"}, ["deep/new.md"]),
        (lambda: (root / "notes.txt").write_text("not markdown\n", encoding="utf-8"),
         {"notes.txt"}, []),
    ]
    for change, named, full in changes:
        change()
        touched = watch.touched()
        assert touched == named
        assert ws.changed_notes(among=touched) == full == sorted(ws.changed_notes() or [])
        ws.update(full)
        assert ws.changed_notes(among=touched) == [] == ws.changed_notes()
        watch.settled(touched)
        assert watch.touched() == set()
    assert watch.full_looks == 1


def test_an_atomic_save_is_named(watched: tuple[Workspace, NoteWatch]) -> None:
    """Obsidian, VS Code and vim save through a temporary file renamed over the note."""
    ws, watch = watched
    _full_look(ws, watch)
    tmp = ws.root / "deep" / ".b.md.tmp"
    tmp.write_text("# B\n\nSaved atomically.\n", encoding="utf-8")
    os.replace(tmp, ws.root / "deep/er/b.md")
    touched = watch.touched()
    assert touched is not None and "deep/er/b.md" in touched
    assert ws.changed_notes(among=touched) == ["deep/er/b.md"] == ws.changed_notes()


@pytest.mark.parametrize("change", [
    pytest.param(lambda root: (root / "new-folder").mkdir(), id="folder created"),
    pytest.param(lambda root: (root / "deep").rename(root / "moved"), id="folder moved"),
    pytest.param(lambda root: (root / ".gitignore").write_text("c.md\n"), id="ignore rules"),
    pytest.param(lambda root: (root / "deep/er/b.md").unlink() or (root / "deep/er").rmdir(),
                 id="folder removed"),
])
def test_what_the_queue_cannot_name_note_by_note_asks_for_a_full_look(
        watched: tuple[Workspace, NoteWatch], change: Callable[[Path], object]) -> None:
    ws, watch = watched
    _full_look(ws, watch)
    change(ws.root)
    assert watch.touched() is None
    _full_look(ws, watch)  # sets the watch again, on the folders as they are now
    assert watch.touched() == set()
    write_note(ws.root, "later.md", "# Later\n\nAfter the full look.\n")
    assert watch.touched() == {"later.md"}


def test_a_note_that_is_a_symbolic_link_is_never_trusted_to_the_queue(
        watched: tuple[Workspace, NoteWatch]) -> None:
    ws, watch = watched
    (ws.root / "link.md").symlink_to(ws.root / "c.md")
    _full_look(ws, watch)
    assert watch.touched() is None  # an edit of c.md through its own name changes link.md too


def test_a_failed_update_makes_the_next_look_a_full_one(
        watched: tuple[Workspace, NoteWatch]) -> None:
    ws, watch = watched
    _full_look(ws, watch)
    write_note(ws.root, "e.md", "# E\n\nNew.\n")
    assert watch.touched() == {"e.md"}
    watch.distrust()
    assert watch.touched() is None


def test_a_network_mount_has_no_watch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mdsearch_ls.engine.index import notewatch

    monkeypatch.setattr(notewatch, "_mounts", lambda: [("/", "ext4"), (str(tmp_path), "nfs4")])
    assert "nfs4" in (local_tree(tmp_path / "vault") or "")
    assert NoteWatch.for_root(tmp_path / "vault") is None
    monkeypatch.setattr(notewatch, "_mounts",
                        lambda: [("/", "ext4"), (str(tmp_path / "v" / "shared"), "cifs")])
    assert "cifs" in (local_tree(tmp_path / "v") or "")
    monkeypatch.setattr(notewatch, "_mounts", lambda: [("/", "ext4"), ("/mnt/x y", "fuse")])
    assert local_tree(tmp_path) is None


def test_a_vault_of_more_folders_than_its_share_of_watches_is_looked_at_in_full(
        watched: tuple[Workspace, NoteWatch], monkeypatch: pytest.MonkeyPatch) -> None:
    """inotify watches are the user's, shared with the editor: a vault of more folders than a
    quarter of them gives every watch back and is looked at in full, every time."""
    ws, watch = watched
    monkeypatch.setattr(watch, "_budget", 2)  # the root and deep/ fit, deep/er/ does not
    assert _full_look(ws, watch) == []
    assert watch.touched() is None
    write_note(ws.root, "a.md", "# A\n\nEdited.\n")
    assert watch.touched() is None and ws.changed_notes() == ["a.md"]
