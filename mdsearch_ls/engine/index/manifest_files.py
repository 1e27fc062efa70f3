"""The manifest's reads of note records: every note's, or only the named ones'.

The writer's paths (a scan's diff, a save, a delete) read only the records of the notes they
change: building a record of every note (its tags and its chunk ids parsed from JSON) cost a
save 1.1 s and 65 MB at 400k chunks in 44k notes, and a scan that changed nothing 95 MB, that
nothing used (benchmarks/million_bench.py). A mixin of
:class:`~mdsearch_ls.engine.index.manifest.Manifest`, apart so that each file reads as one
concern.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from mdsearch_ls.engine.index.manifest_schema import _file_record
from mdsearch_ls.engine.locations import FileRecord


class FileReads:
    """The note-record reads of a manifest; the connection comes from it."""

    _FILE_COLS = "path, content_hash, mtime, size, title, aliases, chunk_ids, indexed_at, ctime"
    """(a reader of a manifest made before ``ctime`` reads ``mtime`` in its place: see
    ``Manifest._check_and_create``)"""

    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _rows_in(self, sql: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        raise NotImplementedError

    def files(self) -> dict[str, FileRecord]:
        """Every note's record: for a caller that needs them all. The writer reads
        :meth:`file_stats` and then :meth:`files_of` the notes that changed."""
        conn = self._conn()
        tags: dict[str, list[str]] = {}
        for path, tag in conn.execute("SELECT path, tag FROM file_tags ORDER BY rowid"):
            tags.setdefault(path, []).append(tag)
        return {
            row[0]: _file_record(row, tags.get(row[0], ()))
            for row in conn.execute(f"SELECT {self._FILE_COLS} FROM files")
        }

    def files_of(self, paths: Iterable[str]) -> dict[str, FileRecord]:
        """The records of those of ``paths`` that are indexed (any number of paths; the others
        are left out): what a write reads, so that it costs the notes it changes."""
        tags: dict[str, list[str]] = {}
        wanted = list(dict.fromkeys(paths))
        for path, tag in self._rows_in(
                "SELECT path, tag FROM file_tags WHERE path IN ({marks}) ORDER BY rowid", wanted):
            tags.setdefault(path, []).append(tag)
        return {
            row[0]: _file_record(row, tags.get(row[0], ()))
            for row in self._rows_in(
                f"SELECT {self._FILE_COLS} FROM files WHERE path IN ({{marks}})", wanted)
        }

    def paths_under(self, folder: str) -> list[str]:
        """The indexed notes inside ``folder`` (a relative path; any depth), by the path index
        rather than a walk through every record."""
        # A range of the primary key: the paths that start with "folder/" sort between it
        # and "folder0" ("0" follows "/"), case-sensitively, as the paths are.
        base = folder.rstrip("/")
        return [r[0] for r in self._conn().execute(
            "SELECT path FROM files WHERE path >= ? AND path < ? ORDER BY path",
            (base + "/", base + "0"))]

    def file_stats(self) -> dict[str, tuple[float, int]]:
        """``{path: (ctime, size)}`` of every indexed note (its change stamp: see
        :attr:`FileRecord.ctime`): what a freshness check and a scan's diff compare, without
        building a record (and reading the tags) of each note."""
        cols = self._FILE_COLS.split(", ")[-1]
        return {path: (ctime, size) for path, ctime, size in
                self._conn().execute(f"SELECT path, {cols}, size FROM files")}

    def file(self, path: str) -> FileRecord | None:
        return self.files_of([path]).get(path)
