"""Folder patterns matched without pathspec match exactly what pathspec's GitIgnoreSpec does,
and a look at notes with no .gitignore and no glob of the user's never imports pathspec."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pathspec
import pytest

from mdsearch_ls.engine.notes import ignore_rules
from mdsearch_ls.engine.notes.files import DEFAULT_EXCLUDES, HIDDEN_DIRS

PARTS = ["notes", ".git", "node_modules", "drafts", ".obsidian", ".trash", ".x", "a.md",
         ".hidden.md", "node_modules.md", "Drafts", "draft", "git", "Archive 2024"]

PATHS = sorted({"/".join(p) + end for n in (1, 2, 3) for p in itertools.product(PARTS, repeat=n)
                for end in ("", "/")})


@pytest.mark.parametrize("lines", [
    [*DEFAULT_EXCLUDES],
    [HIDDEN_DIRS],
    [*DEFAULT_EXCLUDES, "drafts/"],
    [HIDDEN_DIRS, "drafts/", "Archive 2024/"],
    [],
])
def test_folder_patterns_match_as_pathspec_matches_them(lines: list[str]) -> None:
    ours = ignore_rules.spec(lines)
    assert isinstance(ours, ignore_rules.FolderNames)
    theirs = pathspec.GitIgnoreSpec.from_lines(lines)
    differ = [p for p in PATHS if ours.match_file(p) != theirs.match_file(p)]
    assert not differ, differ[:10]


@pytest.mark.parametrize("line", ["*.tmp", "!drafts/", "drafts", "a/b/", "/drafts/", "dr*/",
                                  "# drafts/", "drafts/ ", " drafts/", "dr\\ afts/", "**/x/"])
def test_anything_but_a_folder_name_is_pathspecs(line: str) -> None:
    got = ignore_rules.spec([*DEFAULT_EXCLUDES, line])
    assert isinstance(got, pathspec.GitIgnoreSpec)
    theirs = pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, line])
    assert [got.match_file(p) for p in PATHS] == [theirs.match_file(p) for p in PATHS]


_LOOK = """
import sys
from pathlib import Path
from mdsearch_ls.engine.notes import files
root = Path(sys.argv[1])
notes, _ = files.stat_scan(root, exclude=sys.argv[2:])
print(len(notes), "pathspec" in sys.modules)
"""


@pytest.mark.parametrize(("gitignore", "exclude", "imported"), [
    (False, [], False), (False, ["drafts/"], False), (True, [], True), (False, ["*.tmp"], True)])
def test_a_look_imports_pathspec_only_for_what_needs_it(
        tmp_path: Path, gitignore: bool, exclude: list[str], imported: bool) -> None:
    for rel in ("a.md", "drafts/b.md", "sub/c.md", ".obsidian/d.md", "node_modules/e.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# x\n", encoding="utf-8")
    if gitignore:
        (tmp_path / ".gitignore").write_text("sub/\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _LOOK, str(tmp_path), *exclude],
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    count, seen = done.stdout.split()
    assert seen == str(imported)
    assert int(count) == 3 - ("drafts/" in exclude) - gitignore
