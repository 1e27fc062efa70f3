"""Gitignore-style rules for which folders and files are notes, pathspec only where it is needed.

The default excludes (``.git/``, ``node_modules/``, ``.obsidian/``, ``.trash/``) and the
dot-folder rule (``.*/``) are folder patterns: a folder of that name, at any depth, and all
below it. Matching them needs no pattern engine, and importing pathspec cost about 10 ms of
every command that looks at the notes (``status``, a keyword search, a search, a no-op index),
a tenth of ``mdsearch status``. So a list of such patterns (the user's own excludes too, when
they are plain folder names) is matched here, exactly as pathspec's ``GitIgnoreSpec`` matches it
(``tests/unit/test_ignore_rules.py`` compares the two); anything else (a glob, a negation, a
path, a ``.gitignore`` file) is pathspec's, imported then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pathspec

_FOLDER_NAME = re.compile(r"[^/\\*?\[\]!#\s](?:[^/\\*?\[\]]*[^/\\*?\[\]\s])?/")
"""``name/``: a folder of exactly that name anywhere (no glob, escape, negation, comment or
inner slash; no space at either end: gitignore trims a trailing one)."""

DOT_FOLDERS = ".*/"


class Matcher(Protocol):
    def match_file(self, file: str) -> bool: ...


class FolderNames:
    """Folder patterns matched by name: a path matches when one of its folders (every part but
    the last; a path ending in ``/`` is a folder) is named so, or starts with a dot when
    ``.*/`` is among them."""

    def __init__(self, names: Iterable[str], dot_folders: bool) -> None:
        self.names = frozenset(names)
        self.dot_folders = dot_folders

    def match_file(self, file: str) -> bool:
        return any(part in self.names or (self.dot_folders and part.startswith("."))
                   for part in file.split("/")[:-1])


def spec(lines: Iterable[str]) -> Matcher:
    """What ``pathspec.GitIgnoreSpec.from_lines(lines)`` matches: :class:`FolderNames` when
    every line is a folder pattern, else that spec."""
    lines = list(lines)
    if all(line == DOT_FOLDERS or _FOLDER_NAME.fullmatch(line) for line in lines):
        return FolderNames((line[:-1] for line in lines if line != DOT_FOLDERS),
                           DOT_FOLDERS in lines)
    return gitignore(lines)


def gitignore(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    """A ``.gitignore`` file's rules (negations and all), in pathspec."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(lines))
