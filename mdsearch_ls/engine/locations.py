"""Where a piece of a note is, and what the index keeps about notes and chunks.

One place in a note is spelled once, as :class:`Location`: the chunker's chunks, the manifest's
chunk records and the searcher's hits all extend it, and the vector store's metadata is derived
from it, so a field added or renamed here reaches every layer together instead of drifting in
four hand-written copies.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from operator import attrgetter

DOCUMENT_SUFFIXES: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".ipynb": "ipynb",
    ".org": "org",
}
"""Files that are not markdown but are converted to it when ``include_formats`` names their
format (``engine/notes/formats.py``). Here, at the bottom, because a hit's page is read from its
location and every layer above may ask what kind of file a path is."""

PAGE_HEADING = re.compile(r"^Page (\d+)$|\(p\. (\d+)\)$")
"""The headings the PDF converter writes: ``Page N`` over each page's text, and an outline
entry's title with ``(p. N)``, the page it points to: a PDF hit's page is in its section's
title, whichever of the two it is."""


def document_format(path: str) -> str | None:
    """The converted format of a file by its suffix (``"pdf"``), or None for a note (or any
    other file). Independent of the setting: it says what the file is, not whether it is read."""
    dot = path.rfind(".")
    return DOCUMENT_SUFFIXES.get(path[dot:].lower()) if dot >= 0 else None


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

    @property
    def page(self) -> int | None:
        """The 1-based page of a hit in a PDF (its section is one page: the converter puts a
        ``Page N`` heading at the top of each), else None."""
        if document_format(self.path) != "pdf":
            return None
        m = PAGE_HEADING.search(self.title)
        return int(m.group(1) or m.group(2)) if m else None

    @property
    def format(self) -> str | None:
        """The converted format of the file the hit is in (``"pdf"``), None for a note."""
        return document_format(self.path)

    @property
    def file_lines(self) -> bool:
        """Whether the lines are the file's own (a note, an Org file, converted line for line)
        rather than lines of a converted text (a PDF, Word, HTML, a notebook): only then may a
        front end open the file at them; otherwise at its top, with the page or heading."""
        return self.format in (None, "org")

    def location_fields(self) -> dict[str, str | int]:
        """The location alone, in declaration order (JSON output and store metadata)."""
        return {
            "path": self.path,
            "title": self.title,
            "breadcrumb": self.breadcrumb,
            "start_line": self.start_line,
            "end_line": self.end_line,
        }


@dataclass(frozen=True)
class Section:
    """The lines from one heading to the next heading of any level (``text``: as written,
    comments blanked). Here, not with the chunker that makes it, because a related-sections
    answer carries one, and a process that only reads answers never parses a note."""

    title: str
    level: int
    breadcrumb: tuple[str, ...]
    start_line: int
    end_line: int
    text: str


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


change_stamp = attrgetter("st_mtime" if os.name == "nt" else "st_ctime")
"""A stat's mark of change, what tells with its size that a file changed since it was read: the
inode's change time (``st_ctime``), which every write moves and no program can set back, where
an edit can restore a note's mtime; it moves on a chmod or a rename too, and such a note is
read again once and its content hash compared. On Windows ``st_ctime`` is the creation time:
the mtime there. (A C getter: the look calls it for every note.)"""


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
    ctime: float = 0.0
    """The note's change stamp when it was read (``files.change_stamp``): what tells it
    changed, since an edit can set its mtime back; ``mtime`` stays for the modified: filter."""


@dataclass(frozen=True)
class FileUpdate:
    """A note's complete new state; written atomically by ``Manifest.apply``."""

    file: FileRecord
    chunks: tuple[ChunkRecord, ...]
    keyword_rows: tuple[tuple[str, str], ...]  # (title column, body column) per chunk
    links: tuple[tuple[str, str, str, int], ...] = ()
    """The note's links as written: (kind, target, anchor, line); see ``engine/notes/links.py``."""
