"""Dot-folders are tools' files, not notes: left out by default, brought back by a glob naming
them; .git/ .obsidian/ .trash/ stay out regardless. And counting notes before a first index."""

from __future__ import annotations

from pathlib import Path

from mdsearch_ls.engine.notes.files import SourceFilter, count_notes, scan


def _tree(root: Path) -> None:
    for rel in ("a.md", "sub/b.md", ".venv/lib/site-packages/pkg/README.md", ".cache/c.md",
                ".notes/d.md", ".notes/deep/e.md", "sub/.hidden/f.md", ".obsidian/g.md",
                ".trash/h.md", ".dotfile.md"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# N\n\ntext\n", "utf-8")


def _rels(root: Path, **kwargs: object) -> list[str]:
    return [f.rel for f in scan(root, **kwargs)]  # type: ignore[arg-type]


def test_dot_folders_are_left_out_by_default(tmp_path: Path) -> None:
    _tree(tmp_path)
    # A dot-file is a note like any other; only dot-folders are skipped.
    assert _rels(tmp_path) == [".dotfile.md", "a.md", "sub/b.md"]
    flt = SourceFilter(tmp_path)
    assert not flt.accepts(".notes/d.md")
    assert not flt.accepts("sub/.hidden/f.md")


def test_an_include_glob_naming_a_dot_folder_brings_it_back(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _rels(tmp_path, include=[".notes/**"]) == [".notes/d.md", ".notes/deep/e.md"]
    assert _rels(tmp_path, include=["*.md", ".notes/"]) == [
        ".dotfile.md", ".notes/d.md", ".notes/deep/e.md", "a.md", "sub/b.md"]
    assert _rels(tmp_path, include=["**/.hidden/*.md"]) == ["sub/.hidden/f.md"]
    # The folders mdsearch never indexes stay out even when a glob names them.
    assert _rels(tmp_path, include=[".obsidian/**", ".trash/**"]) == []


def test_an_exclude_negation_brings_a_dot_folder_back(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _rels(tmp_path, exclude=["!.cache/"]) == [".cache/c.md", ".dotfile.md", "a.md",
                                                     "sub/b.md"]


def test_count_notes_agrees_with_scan_and_stops_early(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert count_notes(tmp_path) == (3, True)
    assert count_notes(tmp_path, include=[".notes/**"]) == (2, True)
    n, complete = count_notes(tmp_path, stop_after=1)
    assert (n, complete) == (2, False)  # "more than 1"
