"""An edit that keeps a note's size and sets its mtime back is still an edit (issue 58): the
inode's change time moved, so a search's update and ``mdsearch index`` read the note and compare
its content hash. Real ``mdsearch`` processes with the real model."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.integration.conftest import run_cli

pytestmark = pytest.mark.slow

OFF = {"MDSEARCH_BACKGROUND": "off"}


def edit_keeping_size_and_mtime(note: Path, old: str, new: str) -> None:
    """What a tool that restores times does (``cp -p``, ``rsync -t``, ``touch -r``)."""
    assert len(old) == len(new)
    st = note.stat()
    note.write_text(note.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = note.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def found(vault: Path, cache: Path, word: str, *more: str) -> list[str]:
    done = run_cli("search", word, "--root", str(vault), "--mode", "keyword", "--format",
                   "paths", *more, cache=cache, env=OFF)
    hits = [Path(line).name for line in done.stdout.splitlines()]
    assert done.returncode == (0 if hits else 1), done.stderr  # 1: nothing found, as grep
    return hits


@pytest.fixture
def vault(tmp_path: Path) -> tuple[Path, Path]:
    notes, cache = tmp_path / "vault", tmp_path / "cache"
    notes.mkdir()
    (notes / "plan.md").write_text("# Plan\n\nThe launch code word is banana.\n",
                                   encoding="utf-8")
    (notes / "other.md").write_text("# Other\n\nNothing to see here.\n", encoding="utf-8")
    done = run_cli("index", str(notes), cache=cache, env=OFF)
    assert done.returncode == 0, done.stderr
    return notes, cache


def test_a_search_notices_an_edit_that_set_the_mtime_back(vault: tuple[Path, Path]) -> None:
    notes, cache = vault
    edit_keeping_size_and_mtime(notes / "plan.md", "banana", "cherry")
    assert found(notes, cache, "cherry") == ["plan.md"]
    assert found(notes, cache, "banana", "--no-update") == []


def test_index_notices_it_and_a_chmod_costs_no_embedding(vault: tuple[Path, Path]) -> None:
    notes, cache = vault
    edit_keeping_size_and_mtime(notes / "plan.md", "banana", "grapes")
    done = run_cli("index", str(notes), cache=cache, env=OFF)
    assert done.returncode == 0, done.stderr
    assert re.search(r"\b1 indexed\b", done.stdout + done.stderr), done.stdout + done.stderr
    assert found(notes, cache, "grapes", "--no-update") == ["plan.md"]
    (notes / "other.md").chmod(0o640)  # its change time moves, its text does not
    again = run_cli("index", str(notes), cache=cache, env=OFF)
    said = again.stdout + again.stderr
    assert again.returncode == 0 and re.search(r"\b0 embedded\b", said), said
