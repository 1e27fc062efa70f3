"""What may leave a folder: the rules a note passes before a front end hands its text out.

The language server shows notes to a person and the MCP server hands them to an assistant, which
may ask for any path it likes (``../../etc/passwd``, a symlink out of the vault, an excluded
draft). The rules are the indexer's own, so a note that is not searchable is not readable either,
and they live in one place so the two servers cannot disagree about them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.notes.decoding import read_source


def read_checked(
    root: Path,
    rel: str | None,
    given: object,
    *,
    accepts: Callable[[str], bool],
    max_file_bytes: int,
    formats: Sequence[str] = (),
) -> tuple[str, str]:
    """``(rel, text)`` of the note ``rel`` of ``root`` (``given`` is what the caller wrote, for
    the message), or :class:`RequestError` (field ``path``) saying which rule refused it: the
    path lies inside the folder (a symlink leading out is refused, as the indexer refuses it),
    names a note the index would take (an ``exclude`` glob also keeps it from being read, and
    is answered as a note that does not exist), and is text under ``max_file_bytes``. A
    document of a format ``formats`` names is read as the indexer reads it, converted to
    markdown: a hit's lines are lines of that text."""
    if not rel:
        raise RequestError(f"{given} is not inside {root}", "path")
    full = root / rel
    real, real_root = os.path.realpath(full), os.path.realpath(root)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise RequestError(f"{rel} leads outside {root} (a symlink); not read", "path")
    if not sources.is_note_name(rel, formats):
        extra = "".join(f", .{f}" for f in formats)
        raise RequestError(f"{rel} is not a markdown note (.md, .markdown{extra})", "path")
    if not full.is_file() or not accepts(rel):
        # an excluded note (settings, .gitignore, a hidden folder) is answered as a missing
        # one: whoever asks (an assistant, a team member) must not learn that it exists
        raise RequestError(f"{rel} does not exist in {root}", "path")
    read = read_source(full, rel, max_file_bytes=max_file_bytes, formats=formats)
    if read.text is None:
        raise RequestError(read.warning or f"{rel} cannot be read", "path")
    return rel, read.text
