"""The freshness check a CLI search makes before it decides to open the index for writing: is the
index up to date with its notes? It must see every edit made while nothing was running, agree
with what an update would do (``pending_changes`` counts exactly what ``index`` then reads or
drops), and create nothing."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.freshness import WalkBeside
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder, bump_mtime, write_note

REPO = Path(__file__).resolve().parents[2]


def _vault(root: Path) -> Path:
    write_note(root, "a.md", "# A\n\nThe first note.\n")
    write_note(root, "deep/er/b.md", "# B\n\nA note two folders down.\n")
    write_note(root, "c.markdown", "# C\n\nThe other suffix.\n")
    write_note(root, "drafts/d.md", "# D\n\nA draft.\n")
    write_note(root, ".obsidian/workspace.md", "not a note\n")
    write_note(root, "node_modules/pkg/README.md", "not a note either\n")
    return root


def _files(folder: Path) -> dict[str, float]:
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*")}


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path, Settings]:
    root = _vault(tmp_path / "notes")
    index = tmp_path / "index"
    settings = Settings(max_file_bytes=10_000)
    with Workspace(root, settings, FakeEmbedder(), index_dir=index) as ws:  # type: ignore[arg-type]
        ws.index()
    return root, index, settings


def _pending(root: Path, index: Path, settings: Settings) -> int:
    with Workspace.open(root, settings, "read", embedder=FakeEmbedder(),  # type: ignore[arg-type]
                        index_dir=index) as ro:
        return ro.pending_changes()


def _update(root: Path, index: Path, settings: Settings) -> int:
    """What an update then does: notes indexed or dropped."""
    with Workspace(root, settings, FakeEmbedder(), index_dir=index) as ws:  # type: ignore[arg-type]
        report = ws.index()
    return report.files_indexed + report.files_deleted


def test_each_kind_of_change_made_while_nothing_ran_is_seen(
        indexed: tuple[Path, Path, Settings]) -> None:
    root, index, settings = indexed
    assert _pending(root, index, settings) == 0
    changes = [
        lambda: (root / "a.md").write_text("# A\n\nEdited in place.\n", encoding="utf-8"),
        lambda: bump_mtime(root / "deep/er/b.md"),  # same bytes, newer mtime (a touch)
        lambda: write_note(root, "new/e.md", "# E\n\nA new note in a new folder.\n"),
        lambda: (root / "c.markdown").unlink(),
        lambda: (root / "drafts").rename(root / "archive"),  # a folder moved: one gone, one new
    ]
    # (notes the check counts, notes the update then indexes or drops: a touched note is read
    # again and found unchanged)
    expected = [(1, 1), (1, 0), (1, 1), (1, 1), (2, 2)]
    for change, (pending, acted) in zip(changes, expected, strict=True):
        change()
        assert _pending(root, index, settings) == pending
        assert _update(root, index, settings) == acted
        assert _pending(root, index, settings) == 0


def test_what_the_index_leaves_out_is_no_change(indexed: tuple[Path, Path, Settings]) -> None:
    root, index, settings = indexed
    write_note(root, ".obsidian/plugins.md", "settings\n")
    write_note(root, "node_modules/x/CHANGELOG.md", "a package\n")
    write_note(root, "notes.txt", "not markdown\n")
    write_note(root, "ignored/f.md", "# F\n")
    write_note(root, ".gitignore", "ignored/\n")
    assert _pending(root, index, settings) == 0


def test_a_gitignore_and_an_oversize_file_follow_the_indexer(
        indexed: tuple[Path, Path, Settings]) -> None:
    root, index, settings = indexed
    write_note(root, "deep/.gitignore", "er/\n")  # b.md is now ignored: the update drops it
    assert _pending(root, index, settings) == 1
    assert _update(root, index, settings) == 1
    write_note(root, "big.md", "# Big\n\n" + "word " * 5000)  # over max_file_bytes: skipped
    assert _pending(root, index, settings) == 0
    (root / "a.md").write_text("# A\n\n" + "grown " * 5000, encoding="utf-8")  # dropped
    assert _pending(root, index, settings) == 1
    assert _update(root, index, settings) == 1
    assert _pending(root, index, settings) == 0


def test_include_and_exclude_patterns_are_the_scans(tmp_path: Path) -> None:
    root = _vault(tmp_path / "notes")
    index = tmp_path / "index"
    settings = Settings(include=["deep/**", "*.md"], exclude=["drafts/"])
    with Workspace(root, settings, FakeEmbedder(), index_dir=index) as ws:  # type: ignore[arg-type]
        ws.index()
        assert sorted(ws.notes()) == ["a.md", "deep/er/b.md"]
    write_note(root, "drafts/g.md", "# G\n")  # excluded
    write_note(root, "h.markdown", "# H\n")  # not included
    assert _pending(root, index, settings) == 0
    write_note(root, "deep/i.md", "# I\n")
    assert _pending(root, index, settings) == 1


def test_the_check_creates_nothing(indexed: tuple[Path, Path, Settings]) -> None:
    root, index, settings = indexed
    (root / "a.md").write_text("# A\n\nChanged.\n", encoding="utf-8")
    before_notes, before_index = _files(root), _files(index)
    assert _pending(root, index, settings) == 1
    assert _files(root) == before_notes
    assert set(_files(index)) <= set(before_index)  # no file made (SQLite's -shm may go)


def test_the_stat_scan_finds_what_the_full_scan_finds(tmp_path: Path) -> None:
    root = _vault(tmp_path / "notes")
    write_note(root, "sub/.gitignore", "*.md\n!keep.md\n")
    write_note(root, "sub/keep.md", "# keep\n")
    write_note(root, "sub/drop.md", "# drop\n")
    write_note(root, "huge.md", "x" * 2000)
    (root / "loop").symlink_to(root, target_is_directory=True)
    for include, exclude in (((), ()), (("*.md",), ()), ((), ("deep/",))):
        skips: list[tuple[str, float, int, str]] = []
        found = sources.scan(root, include=include, exclude=exclude, max_file_bytes=1000,
                             skipped=lambda *skip: skips.append(skip))  # noqa: B023
        skipped = [rel for rel, *_ in skips]
        notes, oversize = sources.stat_scan(root, include=include, exclude=exclude,
                                            max_file_bytes=1000)
        assert notes == {f.rel: (f.mtime, f.size) for f in found}
        assert sorted(oversize) == sorted(skipped) == ["huge.md"]
        assert "sub/keep.md" in notes and "sub/drop.md" not in notes


def _each_kind_of_change(root: Path, new_note: str) -> list[Callable[[], object]]:
    """An edit, a touch, a new note (``new_note``), a delete, a folder moved, a ``.gitignore``
    that leaves a note out, and a note grown past the size limit, in that order."""
    return [
        lambda: (root / "a.md").write_text("# A\n\nEdited in place.\n", encoding="utf-8"),
        lambda: bump_mtime(root / "deep/er/b.md"),
        lambda: write_note(root, new_note, "# E\n\nA new note in a new folder.\n"),
        lambda: (root / "c.markdown").unlink(),
        lambda: (root / "drafts").rename(root / "archive"),
        lambda: write_note(root, "deep/.gitignore", "er/\n"),
        lambda: (root / "a.md").write_text("# A\n\n" + "grown " * 5000, encoding="utf-8"),
    ]


def _update_only(root: Path, index: Path, settings: Settings, changed: list[str]) -> int:
    """The CLI's targeted update: only the notes the check named."""
    with Workspace(root, settings, FakeEmbedder(), index_dir=index) as ws:  # type: ignore[arg-type]
        report = ws.update(changed)
    return report.files_indexed + report.files_deleted


def test_updating_only_the_changed_notes_leaves_nothing_for_a_full_update(
        indexed: tuple[Path, Path, Settings]) -> None:
    """What a search does after a save: the notes the check named are updated one by one (no
    second scan); a full update afterwards must find nothing left to do, for every kind of
    change, including ones the indexer skips or drops."""
    root, index, settings = indexed
    changes = _each_kind_of_change(root, "new/e.md")
    acted = [1, 0, 1, 1, 2, 1, 1]
    for change, want in zip(changes, acted, strict=True):
        change()
        with Workspace.open(root, settings, "read", embedder=FakeEmbedder(),  # type: ignore[arg-type]
                            index_dir=index) as ro:
            changed = ro.changed_notes()
        assert changed
        assert _update_only(root, index, settings, changed) == want
        assert _pending(root, index, settings) == 0
        assert _update(root, index, settings) == 0


# ---- the walk run in a process beside the caller (a CLI search with nothing holding the index)

# A fresh interpreter: the test process has threads of its own, beside which nothing is forked.
BESIDE = """
import json, os, sys
from pathlib import Path
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index import freshness
from mdsearch_ls.engine.workspace import Workspace

root, index, child = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
if child == "garbled":
    freshness._walk_and_send = lambda fd, *_: os.write(fd, b"\\xff half an answer")
elif child == "failed":
    freshness._walk_and_send = lambda fd, *_: 1 / 0
settings = Settings(max_file_bytes=10_000)
walk = freshness.WalkBeside(root, settings, index)
forked = walk.pid is not None and walk.pid != os.getpid()
from tests.conftest import FakeEmbedder  # (numpy's threads: after the fork, as in the CLI)
with Workspace.open(root, settings, "read", embedder=FakeEmbedder(), index_dir=index) as ro:
    beside = ro.changed_notes(seen=walk.seen)
    here = ro.changed_notes()
print(json.dumps({"forked": forked, "reaped": walk.pid is None, "beside": beside, "here": here}))
"""


def _beside(root: Path, index: Path, child: str = "walks") -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", BESIDE, str(root), str(index), child],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_walk_beside_answers_as_one_made_here(indexed: tuple[Path, Path, Settings]) -> None:
    """Every kind of change, the oversize and the skipped ones too, named alike by the look
    whose walk ran in a child process and by the look made in process."""
    root, index, settings = indexed
    kinds = _each_kind_of_change(root, "new/é e.md")
    changes = [lambda: None, *kinds[:-1],
               lambda: write_note(root, "big.md", "# Big\n\n" + "word " * 5000), kinds[-1]]
    named = []
    for change in changes:
        change()
        found = _beside(root, index)
        assert found["forked"] and found["reaped"]
        assert found["beside"] == found["here"]
        named.append(found["here"])
        _update(root, index, settings)
    assert named == [[], ["a.md"], ["deep/er/b.md"], ["new/é e.md"], ["c.markdown"],
                     ["archive/d.md", "drafts/d.md"], ["deep/er/b.md"], [], ["a.md"]]


@pytest.mark.parametrize("child", ["garbled", "failed"])
def test_a_child_without_an_answer_leaves_the_walk_here(
        indexed: tuple[Path, Path, Settings], child: str) -> None:
    root, index, _settings = indexed
    (root / "a.md").write_text("# A\n\nEdited in place.\n", encoding="utf-8")
    found = _beside(root, index, child)
    assert found["forked"] and found["reaped"]
    assert found["beside"] == found["here"] == ["a.md"]


def test_beside_running_threads_nothing_is_forked(tmp_path: Path) -> None:
    """A fork copies locks other threads hold: with one running, the walk is made here."""
    root = _vault(tmp_path / "notes")
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait)
    waiting.start()
    try:
        walk = WalkBeside(root, Settings(), None)
        assert walk.pid is None
        assert dict(walk.seen().items()) == sources.stat_scan(root)[0]
    finally:
        stop.set()
        waiting.join()


def test_a_fork_refused_leaves_the_walk_here(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A limit on processes (EAGAIN) or a sandbox: the search goes on, walking in process."""
    root = _vault(tmp_path / "notes")
    monkeypatch.setattr("mdsearch_ls.engine.index.freshness._threads", lambda: 1)

    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    fds = len(os.listdir("/proc/self/fd"))
    walk = WalkBeside(root, Settings(), None)
    assert walk.pid is None and len(os.listdir("/proc/self/fd")) == fds  # (no pipe left open)
    assert dict(walk.seen().items()) == sources.stat_scan(root)[0]


def test_the_childs_answer_keeps_every_name(tmp_path: Path) -> None:
    """Paths come back through bytes: a name that is not UTF-8, spaces, other scripts."""
    root = _vault(tmp_path / "notes")
    write_note(root, "日本語/メモ.md", "# メモ\n")
    write_note(root, "with space/and, comma.md", "# x\n")
    os.close(os.open(os.fsencode(root) + b"/caf\xe9.md", os.O_CREAT | os.O_WRONLY))
    done = subprocess.run([sys.executable, "-c", WALKED, str(root)], capture_output=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    beside, here = marshal.loads(done.stdout)
    assert beside == here and "caf\udce9.md" in here and "日本語/メモ.md" in here


WALKED = """
import marshal, os, sys
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.freshness import WalkBeside
from mdsearch_ls.engine.notes.files import stat_scan
walk = WalkBeside(sys.argv[1], Settings(), None)
assert walk.pid is not None
sys.stdout.buffer.write(marshal.dumps((dict(walk.seen().items()), stat_scan(sys.argv[1])[0])))
"""
