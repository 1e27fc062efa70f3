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
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mdsearch_ls.engine.index.keyword_queries import KeywordQueries
from mdsearch_ls.engine.index.manifest_files import FileReads
from mdsearch_ls.engine.index.manifest_schema import (  # noqa: F401  (re-exported)
    _REQUIRED_TABLES,
    _SCHEMA,
    LINKS_VERSION,
    SCHEMA_VERSION,
    ManifestDamagedError,
    ManifestEmptyError,
    _batched,
    _chunk_record,
    _file_record,
    _like_escape,
    _put_meta,
    drop_seal,
    file_key,
    hold,
    is_damage,
    seal,
    seal_kept,
    truncation,
    unsealed,
)
from mdsearch_ls.engine.index.vector_cache import VectorCache
from mdsearch_ls.engine.locations import ChunkRecord, FileUpdate
from mdsearch_ls.engine.notes import cjk

log = logging.getLogger(__name__)

GC_META = "vectors_collected"
"""Meta: the generation at which unused cached vectors were last dropped."""


class Manifest(FileReads, KeywordQueries, VectorCache):
    """Thread-aware access to the manifest database.

    Each thread gets its own connection (SQLite connections are not shareable), WAL mode lets
    readers run while the single writer commits, and :attr:`generation` rises on every commit so
    caches above can tell when their answers went stale.
    """

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """``read_only``: a reader beside another process's writer (SQLite is process-safe);
        the file must exist and nothing is created or migrated."""
        self.path = path
        self.read_only = read_only
        if read_only and not path.exists():
            raise FileNotFoundError(f"no index at {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._generation = 0
        self._gen_lock = threading.Lock()
        self._counts: tuple[int, tuple[int, int]] | None = None
        self._all: list[sqlite3.Connection] = []
        self._key = file_key(path)
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
        self._sealing = not read_only

    def _check_and_create(self) -> None:
        """Refuse a damaged file before anything reads it; give a new file its tables.

        ``PRAGMA quick_check`` reads every page (about 80 ms for a 34 MB manifest), which is
        what catches a file truncated or overwritten in the middle: SQLite itself only notices
        when a query happens to touch a bad page, perhaps minutes into a run.
        """
        # A reader checks what costs nothing (a file shorter than its header says: cut by a
        # crash or a sync tool); reading every page, 0.3 s at 96k chunks, on every search
        # would make a search cost the size of the index. Damage inside a page is met by the
        # query that reads it, which says so. The writer's open checks every page unless the
        # file is exactly as the last writer's clean close left it (the seal beside it).
        # (the header is read without dropping this process's locks: manifest_schema.hold)
        full = not self.read_only and unsealed(self.path)
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
            # A new (or emptied) file. A reader never creates anything.
            if self.read_only:
                raise ManifestEmptyError(f"manifest {self.path} is empty")
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
        if not self.read_only:
            with conn:
                conn.executescript(_SCHEMA)  # tables added since the file was made
                if conn.execute("SELECT 1 FROM meta WHERE key = 'lineage'").fetchone() is None:
                    _put_meta(conn, "lineage", secrets.token_hex(8))  # see vector_snapshot
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
            hold(self._key, +1)  # before it opens: manifest_schema.hold
            try:
                conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            except BaseException:
                hold(self._key, -1)
                raise
            try:
                if self.read_only:
                    conn.execute("PRAGMA query_only=ON")  # the writer's process owns the file
                else:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                    conn.execute("PRAGMA foreign_keys=OFF")
            except BaseException:  # a file that is not a database fails here
                conn.close()
                hold(self._key, -1)
                raise
            self._local.conn = conn
            self._all.append(conn)
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
        """Close every thread's connection; a writer's clean close seals the file."""
        if self.phrase_scores is not None:
            self.phrase_scores.close()  # its reading thread is done before the connections go
        clean = self._sealing
        for conn in self._all:
            try:
                conn.close()
            except sqlite3.Error:
                clean = False
            hold(self._key, -1)
        self._all.clear()
        self._local = threading.local()
        self._sealing = False
        if clean:
            seal(self.path)

    # ---- meta -------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Bumped on every write; the query cache keys on it. A read-only manifest reads it
        from the file, since the writer is another process."""
        if self.read_only:
            return int(self.get_meta("generation") or 0)
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
        kept = self.phrase_scores  # told which FTS rows went and came (carried, not read again)
        removed: list[int] = []
        inserted: list[int] = []
        with self._transaction(conn):
            before = kept.state(conn) if kept is not None else None
            for path in list(deletes) + [u.file.path for u in updates]:
                self._delete_file(conn, path, removed if kept is not None else None)
            now = time.time()
            for u in updates:
                f = u.file
                conn.execute(
                    "INSERT INTO files (path, content_hash, mtime, size, title, aliases, "
                    "chunk_ids, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (f.path, f.content_hash, f.mtime, f.size, f.title,
                     json.dumps(list(f.aliases)), json.dumps(list(f.chunk_ids)), now),
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
                    inserted.append(int(cur.lastrowid or 0))
            self._bump(conn)
            after = kept.state(conn) if kept is not None else None
        if kept is not None:
            kept.wrote(before, after, removed, inserted)

    def touch(self, path: str, mtime: float, size: int) -> None:
        """Record a new mtime for a note whose content hash did not change."""
        conn = self._conn()
        kept = self.phrase_scores
        with conn:
            before = kept.state(conn) if kept is not None else None
            conn.execute("UPDATE files SET mtime = ?, size = ? WHERE path = ?", (mtime, size, path))
            # mtimes feed the modified: filter, whose answers are cached per generation.
            self._bump(conn)
            after = kept.state(conn) if kept is not None else None
        if kept is not None:
            kept.wrote(before, after, (), ())  # no FTS row changed

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
        try:
            rows = self._conn().execute("SELECT path, mtime, size FROM skipped").fetchall()
        except sqlite3.OperationalError:  # a read-only open of a manifest from before the table
            return {}
        return {path: (mtime, size) for path, mtime, size in rows}

    def skip_reasons(self) -> dict[str, str]:
        """``{path: reason}`` of the files left out, for ``status`` (a note a user misses)."""
        try:
            rows = self._conn().execute("SELECT path, reason FROM skipped ORDER BY path")
            return dict(rows.fetchall())
        except sqlite3.OperationalError:
            return {}

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
    def _delete_file(conn: sqlite3.Connection, path: str, removed: list[int] | None = None
                     ) -> None:
        if removed is not None:
            removed.extend(r[0] for r in conn.execute(
                "SELECT rowid FROM chunks WHERE path = ?", (path,)))
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

