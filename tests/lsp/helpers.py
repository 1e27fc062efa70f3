"""Small helpers shared by the LSP tests (expected counts and line numbers from the vault)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.notes import chunking


def expected_counts(root: Path) -> tuple[int, int]:
    """Files and chunks the engine's own chunker makes of a vault, with default settings."""
    s = Settings()
    files = chunks = 0
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        note = chunking.parse_note(
            path.read_text(encoding="utf-8"), fallback_title=PurePosixPath(rel).stem,
            chunk_size=s.chunk_size, chunk_overlap=s.chunk_overlap,
        )
        files += 1
        chunks += len(note.chunks)
    return files, chunks


def heading_line(path: Path, title: str) -> int:
    """0-based line of the heading ``title`` in ``path``."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if re.match(r"#+\s+" + re.escape(title) + r"\s*$", line):
            return n
    raise AssertionError(f"no heading {title!r} in {path}")


def section_end_line(path: Path, title: str) -> int:
    """0-based last line of the section ``title``: the line before the next heading (or EOF),
    trailing blank lines excluded."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = heading_line(path, title)
    end = len(lines) - 1
    for n in range(start + 1, len(lines)):
        if lines[n].startswith("#"):
            end = n - 1
            break
    while end > start and not lines[end].strip():
        end -= 1
    return end
