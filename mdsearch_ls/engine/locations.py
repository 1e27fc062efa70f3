"""Where a piece of a note is, and what the index keeps about notes and chunks.

One place in a note is spelled once, as :class:`Location`: the chunker's chunks, the manifest's
chunk records and the searcher's hits all extend it, and the vector store's metadata is derived
from it, so a field added or renamed here reaches every layer together instead of drifting in
four hand-written copies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Location:
    """A range of lines in one note, as a person reads it: the note, its heading path, lines.

    Lines are 0-based and inclusive (LSP ranges); front ends add one where they print for people.
    """

    path: str
    """The note's path relative to the folder root, with forward slashes."""
    title: str
    """The heading of the section (the note's title for text before the first heading)."""
    breadcrumb: str
    """The headings from the top of the note down to this section, joined by ``" > "``."""
    start_line: int
    end_line: int

    def location_fields(self) -> dict[str, str | int]:
        """The location alone, in declaration order (JSON output and store metadata)."""
        return {
            "path": self.path,
            "title": self.title,
            "breadcrumb": self.breadcrumb,
            "start_line": self.start_line,
            "end_line": self.end_line,
        }


@dataclass(frozen=True, kw_only=True)
class ChunkRecord(Location):
    """One indexed chunk: where it is, what it says, and the hashes that key its vector."""

    id: str
    ordinal: int
    section: int
    text: str
    """The chunk as written in the note (what a snippet is made from)."""
    embed_hash: str
    """Hash of the embedded text: the key of the vector cache."""
    body_hash: str
    """Hash of the body without headings: equal for template sections across notes."""


@dataclass(frozen=True)
class FileRecord:
    """What the manifest knows about one note."""

    path: str
    content_hash: str
    mtime: float
    size: int
    title: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    indexed_at: float = 0.0


@dataclass(frozen=True)
class FileUpdate:
    """A note's complete new state; written atomically by ``Manifest.apply``."""

    file: FileRecord
    chunks: tuple[ChunkRecord, ...]
    keyword_rows: tuple[tuple[str, str], ...]  # (title column, body column) per chunk
    links: tuple[tuple[str, str, str, int], ...] = ()
    """The note's links as written: (kind, target, anchor, line); see ``engine/notes/links.py``."""
