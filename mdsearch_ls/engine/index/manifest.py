"""The manifest: one SQLite file that says what is indexed, and holds everything but the ANN graph.

It keeps, per note, the content hash, mtime, size and chunk ids; per chunk, its text and place; a
cache of vectors keyed by the hash of the embedded text; and the FTS5 keyword index. Because the
keyword rows and the manifest rows of a file are replaced in one SQLite transaction, the two can
never disagree after a crash. Chroma is the only store written separately, and it is reconciled
against this file on open (see :mod:`mdsearch_ls.engine.index.indexer`): the manifest is the truth.

The vector cache is why rebuilding is cheap: a chunk whose embedded text did not change keeps its
vector (an edit to one section of a long note embeds one chunk, not all), identical template
sections share one vector, and a damaged Chroma collection is rebuilt without touching the model.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mdsearch_ls.engine.index.manifest_schema import (
    _REQUIRED_TABLES,
    _RETIRED,
    _SCHEMA,
    LINKS_VERSION,
    SCHEMA_VERSION,
    ManifestDamagedError,
    _batched,
    _chunk_record,
    _file_record,
    _like_escape,
    _put_meta,
    add_ctime,
    drop_seal,
    seal,
    seal_kept,
    truncation,
    unsealed,
)
from mdsearch_ls.engine.locations import ChunkRecord, FileRecord, FileUpdate
from mdsearch_ls.engine.notes import cjk

log = logging.getLogger(__name__)

GC_META = "vectors_collected"
"""Meta: the generation at which unused cached vectors were last dropped."""
_READ_PER_SEEK = 100
"""A phrase's rows read whole cost about 1/100 of a seek each (96k chunks, December 2026): read
them whole up to this many per candidate chunk."""


class Manifest:
    """Thread-aware access to the manifest database.

    Each thread gets its own connection (SQLite connections are not shareable), WAL mode lets
    readers run while the single writer commits, and :attr:`generation` rises on every commit so
    caches above can tell when their answers went stale. A thread that ended leaves its
    connection to the next new thread: a holder answers every channel connection on a thread of
    its own, and a connection kept per thread that ever asked (its page cache up to 2 MB) grew a
    96k holder by about 2 MB a CLI search, without end.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._generation = 0
        self._gen_lock = threading.Lock()
        self._counts: tuple[int, tuple[int, int]] | None = None
        self._owners: dict[sqlite3.Connection, threading.Thread] = {}
        self._owners_lock = threading.Lock()
        self.created = False
        self._sealing = False
        self.checked = ""
        """What the open read to refuse a damaged file: "every page" or "header"."""
        try:
            self._check_and_create()
            self._generation = int(self.get_meta("generation") or 0)
        except BaseException:
            self.close()
            raise
        self._sealing = True

    def _check_and_create(self) -> None:
        """Refuse a damaged file before anything reads it; give a new file its tables.

        ``PRAGMA quick_check`` reads every page (about 80 ms for a 34 MB manifest), which is
        what catches a file truncated or overwritten in the middle: SQLite itself only notices
        when a query happens to touch a bad page, perhaps minutes into a run.
        """
        # The open checks every page unless the file is exactly as the last clean close left it
        # (the seal beside it: 0.3 s at 96k chunks saved); else what costs nothing (a file
        # shorter than its header says: cut by a crash or a sync tool). Damage inside a page
        # is met by the query that reads it, which says so.
        full = unsealed(self.path)
        header = truncation(self.path) if self.path.exists() else "ok"
        conn = self._conn()
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
        )}
        self.checked = "every page" if full else "header"
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")] if full else [header]
        if problems != ["ok"]:
            detail = " ".join("; ".join(map(str, problems)).split())
            raise ManifestDamagedError(f"integrity check failed: {detail[:200]}")
        if not tables & _REQUIRED_TABLES:
            # A new (or emptied) file.
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
                _put_meta(conn, "links", LINKS_VERSION)
                _put_meta(conn, "keywords", str(cjk.FORMAT))
                _put_meta(conn, "lineage", secrets.token_hex(8))
            self.created = True
            return
        missing = sorted(_REQUIRED_TABLES - tables)
        if missing:
            raise ManifestDamagedError(f"tables missing: {', '.join(missing)}")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or str(row[0]) != str(SCHEMA_VERSION):
            found = "no schema version" if row is None else f"schema version {row[0]}"
            raise ManifestDamagedError(
                f"{found}, this mdsearch reads schema version {SCHEMA_VERSION}"
            )
        with conn:
            conn.executescript(_SCHEMA)  # tables added since the file was made
            conn.executescript(_RETIRED)  # what an older mdsearch kept and this one does not
            if conn.execute("SELECT 1 FROM meta WHERE key = 'lineage'").fetchone() is None:
                _put_meta(conn, "lineage", secrets.token_hex(8))  # see vector_snapshot
        add_ctime(conn)
        if self.get_meta("links") != LINKS_VERSION:
            with conn:
                conn.execute("UPDATE files SET size = -1, content_hash = ''")
                _put_meta(conn, "links", LINKS_VERSION)
        if self.keywords_outdated():
            self._convert_keywords(conn)

    def keywords_outdated(self) -> bool:
        """Whether the keyword columns predate :data:`cjk.FORMAT` (a write open converts)."""
        return self.get_meta("keywords") != str(cjk.FORMAT)

    def _convert_keywords(self, conn: sqlite3.Connection) -> None:
        """Rewrite the FTS rows holding CJK text in the current format, from the rows
        themselves: no note is read again and no vector is touched."""
        rows = conn.execute("SELECT rowid, title, body FROM chunks_fts").fetchall()
        changed = [(r, cjk.expand(t), cjk.expand(b)) for r, t, b in rows
                   if cjk.has_cjk(t) or cjk.has_cjk(b)]
        with conn:
            for rowid, title, body in changed:
                conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
                conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                             (rowid, title, body))
            _put_meta(conn, "keywords", str(cjk.FORMAT))
            # A new generation, so readers in other processes reload (not _bump: the
            # in-memory generation is read from the file only after this check).
            gen = int(self.get_meta("generation") or 0) + 1
            _put_meta(conn, "generation", str(gen))
        log.info("keyword index converted to format %d (%d rows with CJK text)", cjk.FORMAT,
                 len(changed))

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._left_behind() or self._connect()
            self._local.conn = conn
        return conn

    def _left_behind(self) -> sqlite3.Connection | None:
        """The connection of a thread that ended, now this thread's (its warm page cache with
        it); None when every connection's thread is still running."""
        me = threading.current_thread()
        with self._owners_lock:
            for conn, owner in self._owners.items():
                if not owner.is_alive():
                    self._owners[conn] = me
                    return conn
        return None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
        except BaseException:  # a file that is not a database fails here
            conn.close()
            raise
        with self._owners_lock:
            self._owners[conn] = threading.current_thread()
        return conn

    def sealed(self) -> bool:
        """Whether no query met damage since a writer's open last trusted or checked the file:
        a read-only no-op ``index`` needs that, or its writer's open must check (and heal)."""
        return seal_kept(self.path)

    def met_damage(self) -> None:
        """A query met a damaged page: no seal (this process's or the last writer's) may spare
        the next writer's open its check of every page, the check that heals it."""
        self._sealing = False
        drop_seal(self.path)

    def close(self) -> None:
        """Close every thread's connection; a clean close seals the file."""
        clean = self._sealing
        for conn in self._owners:
            try:
                conn.close()
            except sqlite3.Error:
                clean = False
        self._owners.clear()
        self._local = threading.local()
        self._sealing = False
        if clean:
            seal(self.path)

    # ---- meta -------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Bumped on every write; the query cache keys on it."""
        return self._generation

    def get_meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        conn = self._conn()
        with conn:
            _put_meta(conn, key, value)

    def _bump(self, conn: sqlite3.Connection) -> None:
        with self._gen_lock:
            self._generation += 1
            gen = self._generation
        _put_meta(conn, "generation", str(gen))
        _put_meta(conn, "last_update", str(time.time()))

    # ---- reads ------------------------------------------------------------------------------

    def titles(self, paths: Iterable[str] | None = None) -> dict[str, tuple[str, ...]]:
        """Each note's names (of ``paths``, or all): its title (front matter or file name)
        first, then its aliases."""
        sql = "SELECT path, title, aliases FROM files"
        rows = (self._conn().execute(sql) if paths is None
                else self._rows_in(sql + " WHERE path IN ({marks})", paths))
        return {path: (title, *json.loads(aliases)) for path, title, aliases in rows}

    def counts(self) -> tuple[int, int]:
        """(notes, chunks), counted once per generation: every search asks (for its index
        state and the exact/approximate choice), and two COUNT(*) scans grow with the index."""
        cached = self._counts
        if cached is not None and cached[0] == self.generation:
            return cached[1]
        # One statement, one snapshot: the generation stored beside the counts is the one
        # they belong to, even while a writer's transaction (its generation already bumped in
        # memory) is not committed yet.
        gen, files, chunks = self._conn().execute(
            "SELECT (SELECT value FROM meta WHERE key = 'generation'), "
            "(SELECT COUNT(*) FROM files), (SELECT COUNT(*) FROM chunks)"
        ).fetchone()
        result = (int(files), int(chunks))
        self._counts = (int(gen or 0), result)
        return result

    def chunk_ids(self) -> set[str]:
        return {r[0] for r in self._conn().execute("SELECT id FROM chunks")}

    _CHUNK_COLS = (
        "id, path, ordinal, section, title, breadcrumb, start_line, end_line, text, "
        "embed_hash, body_hash"
    )

    def chunks_for(self, path: str) -> list[ChunkRecord]:
        rows = self._conn().execute(
            f"SELECT {self._CHUNK_COLS} FROM chunks WHERE path = ? ORDER BY ordinal", (path,)
        )
        return [_chunk_record(row) for row in rows]

    def get_chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        sql = f"SELECT {self._CHUNK_COLS} FROM chunks WHERE id IN ({{marks}})"
        return {row[0]: _chunk_record(row) for row in self._rows_in(sql, ids)}

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query of another engine module's own (the writing aids' tables),
        on this thread's connection; a table an older index lacks reads as no rows."""
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise

    def body_file_counts(self, body_hashes: Iterable[str]) -> dict[str, int]:
        """In how many notes each body text occurs: the measure of template boilerplate."""
        sql = ("SELECT body_hash, COUNT(DISTINCT path) FROM chunks "
               "WHERE body_hash IN ({marks}) GROUP BY body_hash")
        return {h: int(n) for h, n in self._rows_in(sql, body_hashes)}

    def _rows_in(self, sql: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """Rows of ``sql``, whose ``IN ({marks})`` takes the keys, for any number of keys: in
        batches, since SQLite limits the parameters of one statement."""
        conn = self._conn()
        for batch in _batched(list(dict.fromkeys(keys)), 500):
            yield from conn.execute(sql.format(marks=",".join("?" * len(batch))), batch)

    def paths_with_tags(self, tags: Sequence[str]) -> set[str]:
        """Notes carrying every one of ``tags`` (a tag matches itself and its nested children)."""
        result: set[str] | None = None
        conn = self._conn()
        for tag in tags:
            rows = conn.execute(
                "SELECT path FROM file_tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\'",
                (tag, _like_escape(tag) + "/%"),
            )
            paths = {r[0] for r in rows}
            result = paths if result is None else result & paths
        return result or set()

    def all_paths(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT path FROM files ORDER BY path")]

    def chunk_counts(self, paths: Iterable[str] | None = None, *, sections: bool = False
                     ) -> dict[str, int]:
        """How many chunks (``sections``: sections, a heading's span each) each note (of
        ``paths``, or all) has."""
        count = "COUNT(DISTINCT section)" if sections else "COUNT(*)"
        sql = f"SELECT path, {count} FROM chunks {{where}} GROUP BY path"
        if paths is None:
            return {r[0]: int(r[1]) for r in self._conn().execute(sql.format(where=""))}
        return {r[0]: int(r[1]) for r in self._rows_in(
            sql.format(where="WHERE path IN ({marks})"), paths)}

    def file_mtimes(self) -> dict[str, float]:
        return {r[0]: r[1] for r in self._conn().execute("SELECT path, mtime FROM files")}

    # ---- writes (the indexer's thread only) -------------------------------------------------

    def apply(self, updates: Sequence[FileUpdate], deletes: Sequence[str] = ()) -> None:
        """Replace the given notes and drop ``deletes`` in one transaction."""
        if not updates and not deletes:
            return
        conn = self._conn()
        with self._transaction(conn):
            for path in list(deletes) + [u.file.path for u in updates]:
                self._delete_file(conn, path)
            now = time.time()
            for u in updates:
                f = u.file
                conn.execute(
                    "INSERT INTO files (path, content_hash, mtime, size, title, aliases, "
                    "chunk_ids, indexed_at, ctime) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (f.path, f.content_hash, f.mtime, f.size, f.title,
                     json.dumps(list(f.aliases)), json.dumps(list(f.chunk_ids)), now, f.ctime),
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO file_tags (path, tag) VALUES (?, ?)",
                    [(f.path, t) for t in f.tags],
                )
                conn.executemany(
                    "INSERT INTO links (path, kind, target, anchor, line) VALUES (?, ?, ?, ?, ?)",
                    [(f.path, *link) for link in u.links],
                )
                for chunk, (kw_title, kw_body) in zip(u.chunks, u.keyword_rows, strict=True):
                    cur = conn.execute(
                        f"INSERT INTO chunks ({self._CHUNK_COLS}) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (chunk.id, chunk.path, chunk.ordinal, chunk.section, chunk.title,
                         chunk.breadcrumb, chunk.start_line, chunk.end_line, chunk.text,
                         chunk.embed_hash, chunk.body_hash),
                    )
                    conn.execute(
                        "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                        (cur.lastrowid, cjk.expand(kw_title), cjk.expand(kw_body)),
                    )
            self._bump(conn)

    def touch(self, path: str, mtime: float, size: int, ctime: float) -> None:
        """Record a new mtime and change stamp of a note whose content hash did not change."""
        conn = self._conn()
        with conn:
            conn.execute("UPDATE files SET mtime = ?, size = ?, ctime = ? WHERE path = ?",
                         (mtime, size, ctime, path))
            # mtimes feed the modified: filter, whose answers are cached per generation.
            self._bump(conn)

    def delete_files(self, paths: Sequence[str]) -> None:
        self.apply((), paths)

    def clear(self) -> None:
        """Forget everything but the vector cache (a rebuild reuses its vectors)."""
        conn = self._conn()
        with self._transaction(conn):
            conn.execute("DELETE FROM chunks_fts")
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM file_tags")
            conn.execute("DELETE FROM links")
            conn.execute("DELETE FROM files")
            conn.execute("DELETE FROM skipped")
            self._bump(conn)

    def collect_vectors(self) -> int:
        """:meth:`gc_vectors`, when a write since the last collection can have left a vector
        unused (the generation moved); returns how many went. The collection reads the whole
        vector table (0.85 s at 400k chunks), and every index run that changed nothing (each
        ``mdsearch index``, each server start) paid it. A vector cached by a cancelled run for
        a note deleted before the next one waits for the next change: it is only a cache."""
        gen = str(self.generation)
        if self.get_meta(GC_META) == gen:
            return 0
        n = self.gc_vectors()
        self.set_meta(GC_META, gen)
        return n

    # ---- files a scan leaves out (so each is reported once per change) ---------------------

    def skipped(self) -> dict[str, tuple[float, int]]:
        """``{path: (mtime, size)}`` of every file skipped when last seen, with the state it
        was skipped in: the same state again is skipped without reading it or warning."""
        rows = self._conn().execute("SELECT path, mtime, size FROM skipped").fetchall()
        return {path: (mtime, size) for path, mtime, size in rows}

    def skip_reasons(self) -> dict[str, str]:
        """``{path: reason}`` of the files left out, for ``status`` (a note a user misses)."""
        rows = self._conn().execute("SELECT path, reason FROM skipped ORDER BY path")
        return dict(rows.fetchall())

    def set_skipped(self, entries: Sequence[tuple[str, float, int, str]],
                    forget: Sequence[str] = ()) -> None:
        """Record ``(path, mtime, size, reason)`` skips and drop the records of ``forget``."""
        if not entries and not forget:
            return
        conn = self._conn()
        with conn:
            conn.executemany("DELETE FROM skipped WHERE path = ?", [(p,) for p in forget])
            conn.executemany(
                "INSERT OR REPLACE INTO skipped (path, mtime, size, reason) VALUES (?, ?, ?, ?)",
                entries,
            )

    @staticmethod
    def _delete_file(conn: sqlite3.Connection, path: str) -> None:
        conn.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)",
            (path,),
        )
        conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        conn.execute("DELETE FROM file_tags WHERE path = ?", (path,))
        conn.execute("DELETE FROM links WHERE path = ?", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))

    @staticmethod
    @contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        else:
            conn.commit()

    # ---- note records ------------------------------------------------------------------------

    _FILE_COLS = "path, content_hash, mtime, size, title, aliases, chunk_ids, indexed_at, ctime"

    def files(self) -> dict[str, FileRecord]:
        """Every note's record: for a caller that needs them all. The writer reads
        :meth:`file_stats` and then :meth:`files_of` the notes that changed (building a record
        of every note cost a save 1.1 s and 65 MB at 400k chunks in 44k notes)."""
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
        :attr:`FileRecord.ctime`): what a scan's diff compares, without building a record (and
        reading the tags) of each note."""
        return {path: (ctime, size) for path, ctime, size in
                self._conn().execute("SELECT path, ctime, size FROM files")}

    def file(self, path: str) -> FileRecord | None:
        return self.files_of([path]).get(path)

    # ---- keywords (FTS5) ------------------------------------------------------------------

    def keyword_search(
        self, match: str, limit: int, paths: set[str] | None = None,
        weights: Sequence[float] = (4.0, 1.0),
    ) -> list[tuple[str, float]]:
        """The ``limit`` best chunks by FTS5's own ``bm25()`` (higher is better), title hits
        weighing ``weights[0]`` x a body hit.

        Unfiltered, ranked and cut inside FTS5 before the join: joining every match to its
        chunk row first (a common word matches half a vault) cost more than the ranking. With
        ``paths``, the ranked rows are streamed and filtered until ``limit`` pass, so a narrow
        filter still gets its best matches, at about the cost of the unfiltered query: an
        ``IN`` over thousands of rowids or paths made SQLite 20-100x slower (measured).
        """
        conn = self._conn()
        w_title, w_body = (float(w) for w in weights)
        try:
            if paths is None:
                rows = conn.execute(
                    "SELECT c.id, f.rank FROM (SELECT rowid, bm25(chunks_fts, ?, ?) AS rank "
                    "FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank, rowid LIMIT ?) f "
                    "JOIN chunks c ON c.rowid = f.rowid ORDER BY f.rank, f.rowid",
                    (w_title, w_body, match, limit),
                ).fetchall()
                return [(cid, -float(rank)) for cid, rank in rows]
            out: list[tuple[str, float]] = []
            for cid, path, rank in conn.execute(
                    "SELECT c.id, c.path, bm25(chunks_fts, ?, ?) AS rank FROM chunks_fts "
                    "JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? "
                    "ORDER BY rank, chunks_fts.rowid", (w_title, w_body, match)):
                if path in paths:
                    out.append((cid, -float(rank)))
                    if len(out) >= limit:
                        break
            return out
        except sqlite3.OperationalError as exc:
            raise ValueError(f"keyword query could not be parsed: {exc}") from exc

    def phrase_exists(self, match: str) -> bool:
        """Whether any chunk holds what the FTS expression asks for (found at its first match)."""
        return self._conn().execute(
            "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (match,)).fetchone() \
            is not None

    def notes_matching(self, match: str, limit: int) -> int:
        """How many notes hold a chunk the FTS expression matches, counted up to ``limit``: a
        common word stops early, a rare one reads its few rows."""
        return int(self._conn().execute(
            "SELECT count(*) FROM (SELECT DISTINCT c.path FROM chunks_fts JOIN chunks c "
            "ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? LIMIT ?)",
            (match, limit)).fetchone()[0])

    def phrase_holders(self, match: str, ids: Iterable[str], scan: int = 2000) -> set[str]:
        """Which of the chunks ``ids`` the FTS expression matches, at a cost bounded by the
        candidates, not the vault: a phrase held by at most ``scan`` chunks, or by at most
        :data:`_READ_PER_SEEK` per candidate, is read whole (its rowids only: about 0.3 us a row
        at 96k chunks); a commoner one is tested chunk by chunk (FTS5 seeks each rowid, 30-70 us
        each). Listing every holder of "file" (39k rows) took 11-13 ms; 150 seeks of "line"
        (7k rows) 10.6 ms where reading its rows took 3."""
        conn = self._conn()
        rowid_of = dict(self._rows_in("SELECT rowid, id FROM chunks WHERE id IN ({marks})", ids))
        if not rowid_of:
            return set()
        rows = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?",
                            (match, scan + 1)).fetchall()
        if len(rows) > scan and conn.execute(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",  # (no row read)
                (match,)).fetchone()[0] <= _READ_PER_SEEK * len(rowid_of):
            rows = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?",
                                (match,)).fetchall()
            scan = len(rows)
        if len(rows) <= scan:
            return {rowid_of[r[0]] for r in rows if r[0] in rowid_of}
        held: set[str] = set()
        for batch in _batched(list(rowid_of), 500):
            sql = ("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN "
                   f"({','.join('?' * len(batch))})")
            held.update(rowid_of[r[0]] for r in conn.execute(sql, (match, *batch)))
        return held

    def phrase_chunk_ids(self, match: str) -> set[str]:
        """Every chunk the FTS expression matches (unranked): the sections holding a phrase."""
        conn = self._conn()
        rows = conn.execute(
            "SELECT c.id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ?",
            (match,),
        )
        return {r[0] for r in rows}

    # ---- the vector cache: vectors keyed by the hash of the embedded text --------------------

    def vectors(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        sql = "SELECT embed_hash, vector FROM vectors WHERE embed_hash IN ({marks})"
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in self._rows_in(sql, hashes)}

    def sample_vectors(self, n: int) -> list[np.ndarray]:
        """Cached vectors of up to ``n`` indexed chunks spread over the table, the most recently
        written among them (the one a crash most likely left out of Chroma's graph)."""
        conn = self._conn()
        top = conn.execute("SELECT max(rowid) FROM chunks").fetchone()[0]
        if not top:
            return []
        rng = random.Random(int(top))
        starts = sorted({int(top), *(rng.randint(1, int(top)) for _ in range(max(0, n - 1)))})
        found: dict[int, np.ndarray] = {}
        for start in starts:
            row = conn.execute(
                "SELECT c.rowid, v.vector FROM chunks c JOIN vectors v "
                "ON v.embed_hash = c.embed_hash WHERE c.rowid >= ? ORDER BY c.rowid LIMIT 1",
                (start,),
            ).fetchone()
            if row is not None:
                found[row[0]] = np.frombuffer(row[1], dtype=np.float32)
        return list(found.values())

    def put_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (embed_hash, vector) VALUES (?, ?)",
                [(h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()],
            )

    def gc_vectors(self) -> int:
        """Drop cached vectors no chunk uses any more; returns how many went."""
        conn = self._conn()
        with conn:
            cur = conn.execute(
                "DELETE FROM vectors WHERE embed_hash NOT IN (SELECT embed_hash FROM chunks)"
            )
        return cur.rowcount
