"""Every section of an index (its place, names and boilerplate count), kept current without
reading it all again.

The writing aids name sections (link completion matches headings, a near-duplicate says where the
other copy is) and leave template text aside; which sections are near a paragraph or a section is
Chroma's answer (see :func:`rows_of_chunks`), so the table holds no vectors. Reading every row
after each save would still cost tens of milliseconds at 10k sections, so a table is refreshed
from the previous one: only the notes indexed since it was read (``files.indexed_at``) are read
again, the rows of deleted notes dropped, and the boilerplate counts (in how many notes a
section's text occurs) recomputed from a map kept beside the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest

_COLUMNS = (
    "SELECT c.id, c.path, c.section, c.title, c.breadcrumb, c.start_line, c.end_line, "
    "c.body_hash, length(c.text), f.title FROM chunks c JOIN files f ON f.path = c.path "
)
SECTION_SQL = _COLUMNS + "ORDER BY c.path, c.ordinal"
SECTIONS_OF_SQL = _COLUMNS + "WHERE c.path IN ({marks}) ORDER BY c.path, c.ordinal"
CHUNK_SECTIONS_SQL = "SELECT id, path, section FROM chunks WHERE id IN ({marks})"
REFRESH_SHARE = 0.25
"""Above this share of notes changed, reading everything is as quick as a refresh."""


@dataclass
class SectionTable:
    """Every indexed section, row ``i`` of each column describing section ``i``. A note's
    sections are the contiguous rows ``spans[path]``, in reading order."""

    paths: list[str]
    sections: np.ndarray
    """Each row's section number in its note (``ChunkRecord.section``)."""
    titles: list[str]
    breadcrumbs: list[str]
    first_chunk: list[str]
    start_lines: np.ndarray
    end_lines: np.ndarray
    length: np.ndarray
    """Characters of the section's text (its chunks' text, heading included)."""
    boiler: np.ndarray
    """In how many notes the section's most widespread chunk body occurs (1: its own only)."""
    hashes: list[tuple[str, ...]]
    """Each row's chunk body hashes."""
    keys: list[str]
    """What link completion matches a heading by: its title, then its note's, case folded."""
    is_heading: np.ndarray
    """False for the text before the first heading and for a top heading saying the note's
    title: a link there is a link to the note."""
    body_notes: dict[str, set[str]]
    """Each body hash's notes (what ``boiler`` counts)."""
    through: float = 0.0
    """The latest ``files.indexed_at`` the table holds."""
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        spans: dict[str, tuple[int, int]] = {}
        for i, p in enumerate(self.paths):
            a, _ = spans.get(p, (i, i))
            spans[p] = (a, i + 1)
        self.spans = spans

    def __len__(self) -> int:
        return len(self.paths)

    def rows(self, path: str) -> range:
        a, b = self.spans.get(path, (0, 0))
        return range(a, b)

    def row_of(self, path: str, section: int) -> int | None:
        """The row of section number ``section`` of ``path`` (a chunk's ``section``)."""
        for r in self.rows(path):
            if int(self.sections[r]) == section:
                return r
        return None

    def row_at(self, path: str, line: int) -> int | None:
        """The row of the section of ``path`` holding ``line`` (as indexed)."""
        found = None
        for r in self.rows(path):
            if int(self.start_lines[r]) <= line:
                found = r
        return found


@dataclass
class _Columns:
    """Rows of sections as plain lists (what is filtered and joined on a refresh)."""

    paths: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    crumbs: list[str] = field(default_factory=list)
    first: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    length: list[int] = field(default_factory=list)
    hashes: list[tuple[str, ...]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    heading: list[bool] = field(default_factory=list)


def _columns(rows: Sequence[tuple[Any, ...]]) -> _Columns:
    """Chunk rows (``SECTION_SQL``, in note and reading order) grouped into sections."""
    cols = _Columns()
    hashes: list[list[str]] = []
    last: tuple[str, int] | None = None
    for cid, path, section, title, crumb, start, end, body_hash, n_chars, note in rows:
        if (path, section) != last:
            last = (path, section)
            cols.keys.append(f"{title}  {note}".casefold())
            cols.heading.append(" > " in crumb or title.strip().casefold() != (
                note or "").strip().casefold())
            cols.paths.append(path)
            cols.numbers.append(section)
            cols.titles.append(title)
            cols.crumbs.append(crumb)
            cols.first.append(cid)
            cols.starts.append(start)
            cols.ends.append(end)
            cols.length.append(0)
            hashes.append([])
        i = len(cols.paths) - 1
        cols.ends[i] = max(cols.ends[i], end)
        cols.length[i] += int(n_chars or 0)
        hashes[i].append(body_hash)
    cols.hashes = [tuple(h) for h in hashes]
    return cols


def _boiler(hashes: Sequence[tuple[str, ...]], body_notes: dict[str, set[str]]) -> list[int]:
    return [max((len(body_notes.get(h, ())) for h in hs), default=1) for hs in hashes]


def _table(cols: _Columns, boiler: Sequence[int], body_notes: dict[str, set[str]],
           through: float) -> SectionTable:
    return SectionTable(
        cols.paths, np.asarray(cols.numbers, dtype=np.int64), cols.titles, cols.crumbs,
        cols.first, np.asarray(cols.starts, dtype=np.int64),
        np.asarray(cols.ends, dtype=np.int64), np.asarray(cols.length, dtype=np.int64),
        np.asarray(boiler, dtype=np.int64), cols.hashes, cols.keys,
        np.asarray(cols.heading, dtype=bool), body_notes, through,
    )


def build_sections(rows: Sequence[tuple[Any, ...]], through: float = 0.0) -> SectionTable:
    """A table from ``SECTION_SQL`` rows."""
    cols = _columns(rows)
    body_notes: dict[str, set[str]] = {}
    for path, hs in zip(cols.paths, cols.hashes, strict=True):
        for h in hs:
            body_notes.setdefault(h, set()).add(path)
    return _table(cols, _boiler(cols.hashes, body_notes), body_notes, through)


def refresh_sections(old: SectionTable, rows: Sequence[tuple[Any, ...]],
                     replaced: set[str], through: float) -> SectionTable:
    """``old`` with the notes of ``replaced`` dropped and ``rows`` (their sections now, if they
    still exist) added. The body-hash map moves to the new table (readers of ``old`` use its
    counts, already computed), and only rows holding a hash whose notes changed are counted
    again."""
    new = _columns(rows)
    body_notes, old.body_notes = old.body_notes, {}
    touched: set[str] = set()
    keep: list[int] = []
    for i, p in enumerate(old.paths):
        if p not in replaced:
            keep.append(i)
            continue
        for h in old.hashes[i]:
            notes = body_notes.get(h)
            if notes is not None:
                notes.discard(p)
                touched.add(h)
                if not notes:
                    del body_notes[h]
    for p, hs in zip(new.paths, new.hashes, strict=True):
        for h in hs:
            body_notes.setdefault(h, set()).add(p)
            touched.add(h)

    def kept(values: Sequence[Any]) -> list[Any]:
        return [values[i] for i in keep]

    hashes = kept(old.hashes) + new.hashes
    boiler = kept(old.boiler.tolist()) + [0] * len(new.paths)
    for i, hs in enumerate(hashes):
        if i >= len(keep) or not touched.isdisjoint(hs):
            boiler[i] = max((len(body_notes.get(h, ())) for h in hs), default=1)
    merged = _Columns(
        kept(old.paths) + new.paths, kept(old.sections.tolist()) + new.numbers,
        kept(old.titles) + new.titles, kept(old.breadcrumbs) + new.crumbs,
        kept(old.first_chunk) + new.first, kept(old.start_lines.tolist()) + new.starts,
        kept(old.end_lines.tolist()) + new.ends, kept(old.length.tolist()) + new.length,
        hashes, kept(old.keys) + new.keys, kept(old.is_heading.tolist()) + new.heading,
    )
    return _table(merged, boiler, body_notes, through)


def read_sections(manifest: Manifest, previous: SectionTable | None,
                  current: Iterable[str]) -> SectionTable:
    """The sections of the index now: a refresh of ``previous`` when few notes changed since it
    was read, else everything read anew. ``current``: the notes the index holds now."""
    through = float(manifest.read("SELECT MAX(indexed_at) FROM files")[0][0] or 0.0)
    if previous is None:
        return build_sections(manifest.read(SECTION_SQL), through)
    now = set(current)
    changed = {p for (p,) in manifest.read(
        "SELECT path FROM files WHERE indexed_at > ?", (previous.through,))}
    replaced = changed | (set(previous.spans) - now)
    if not replaced:
        return previous
    if len(changed) > REFRESH_SHARE * max(len(now), 1):
        return build_sections(manifest.read(SECTION_SQL), through)
    rows: list[tuple[Any, ...]] = []
    ordered = sorted(changed)
    for i in range(0, len(ordered), 500):
        batch = ordered[i:i + 500]
        rows.extend(manifest.read(SECTIONS_OF_SQL.format(marks=",".join("?" * len(batch))),
                                  batch))
    return refresh_sections(previous, rows, replaced, through)


def rows_of_chunks(manifest: Manifest, table: SectionTable,
                   chunk_ids: Iterable[str]) -> dict[str, int]:
    """Each chunk's section row: how the nearest chunks Chroma answers become sections. Chunks
    the table does not hold (indexed after it was read) are left out."""
    ids = list(dict.fromkeys(chunk_ids))
    out: dict[str, int] = {}
    for i in range(0, len(ids), 500):
        batch = ids[i:i + 500]
        for cid, path, section in manifest.read(
                CHUNK_SECTIONS_SQL.format(marks=",".join("?" * len(batch))), batch):
            row = table.row_of(path, int(section))
            if row is not None:
                out[cid] = row
    return out


__all__ = ["SECTION_SQL", "SectionTable", "build_sections", "read_sections", "refresh_sections",
           "rows_of_chunks"]
