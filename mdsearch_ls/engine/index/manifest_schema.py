"""The manifest's schema and rows: what a manifest file holds, how damage is told from a busy
or missing file, and how rows become records.

Apart from :mod:`mdsearch_ls.engine.index.manifest` so that the class there is the connection
and transaction logic alone; every name here is re-exported from that module.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mdsearch_ls.engine.locations import ChunkRecord, FileRecord

SCHEMA_VERSION = 1
# The links table came after schema 1: an older index's notes are marked to be read again (size
# -1, no hash), so the next scan rewrites their rows with links, vectors from the cache.
LINKS_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    mtime REAL NOT NULL,
    size INTEGER NOT NULL,
    title TEXT NOT NULL,
    aliases TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    indexed_at REAL NOT NULL,
    ctime REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS file_tags (
    path TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (tag, path)
);
CREATE INDEX IF NOT EXISTS file_tags_path ON file_tags(path);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    section INTEGER NOT NULL,
    title TEXT NOT NULL,
    breadcrumb TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT NOT NULL,
    body_hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_body ON chunks(body_hash);
CREATE INDEX IF NOT EXISTS chunks_embed ON chunks(embed_hash);
CREATE TABLE IF NOT EXISTS vectors (embed_hash TEXT PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS links (
    path TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL, anchor TEXT NOT NULL,
    line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS links_path ON links(path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS skipped (
    path TEXT PRIMARY KEY,
    mtime REAL NOT NULL,
    size INTEGER NOT NULL,
    reason TEXT NOT NULL
);
"""
_RETIRED = """
DROP TRIGGER IF EXISTS vector_journal_add;
DROP TRIGGER IF EXISTS vector_journal_drop;
DROP TRIGGER IF EXISTS vector_journal_move;
DROP TRIGGER IF EXISTS vector_journal_vector;
DROP TABLE IF EXISTS vector_journal;
"""
"""What manifests made before December 2026 kept for processes that read the index beside its
holder (a journal of changed vectors); dropped at the next open, nothing else changes."""

# Tables every manifest of this schema has had from the start: one missing means damage. (Tables
# added later, like ``skipped``, are created by the next write open instead.)
_REQUIRED_TABLES = frozenset({"meta", "files", "file_tags", "chunks", "vectors", "chunks_fts"})


class ManifestDamagedError(sqlite3.DatabaseError):
    """The file is not a manifest this mdsearch can use: damaged, not a database, tables
    missing, or another schema version. The index is a cache, so the writer moves such a file
    aside and rebuilds it from the notes."""


_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_DAMAGE_WORDS = ("malformed", "not a database", "file is encrypted", "no such table",
                 "no such column")


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error means the file itself is damaged (rather than busy, read-only,
    out of space or missing, which moving the file aside would not cure)."""
    if isinstance(exc, ManifestDamagedError):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""  # Python 3.11+
    if name.startswith(_DAMAGE_CODES):
        return True
    text = str(exc).lower()
    return any(w in text for w in _DAMAGE_WORDS)


class ManifestEmptyError(sqlite3.DatabaseError):
    """A reader found a manifest with no tables: nothing was ever indexed into it (or it is
    being created right now)."""


def add_ctime(conn: sqlite3.Connection) -> None:
    """Give a manifest made before ``ctime`` (the change stamp, added after the schema's
    version 1) the column, filled with each note's mtime (a note last changed by writing it has
    both times equal), so its notes are not all read again."""
    if "ctime" not in {r[1] for r in conn.execute("PRAGMA table_info(files)")}:
        with conn:
            conn.execute("ALTER TABLE files ADD COLUMN ctime REAL NOT NULL DEFAULT 0")
            conn.execute("UPDATE files SET ctime = mtime")


def _file_record(row: Sequence[Any], tags: Iterable[str]) -> FileRecord:
    """A ``files`` row (columns as in ``Manifest._FILE_COLS``) and its tags as a record."""
    path, content_hash, mtime, size, title, aliases, chunk_ids, indexed_at, ctime = row
    return FileRecord(
        path=path, content_hash=content_hash, mtime=mtime, size=size, title=title,
        aliases=tuple(json.loads(aliases)), tags=tuple(tags),
        chunk_ids=tuple(json.loads(chunk_ids)), indexed_at=indexed_at, ctime=ctime,
    )


def _chunk_record(row: Sequence[Any]) -> ChunkRecord:
    """A ``chunks`` row (columns as in ``Manifest._CHUNK_COLS``) as a record."""
    cid, path, ordinal, section, title, breadcrumb, start, end, text, embed_hash, body_hash = row
    return ChunkRecord(
        id=cid, path=path, ordinal=ordinal, section=section, title=title,
        breadcrumb=breadcrumb, start_line=start, end_line=end, text=text,
        embed_hash=embed_hash, body_hash=body_hash,
    )


def _put_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _batched(items: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def read_head(path: Path, n: int = 100) -> bytes:
    """The file's first ``n`` bytes (its header: page size, page count, change counter)."""
    with open(path, "rb") as f:
        return f.read(n)


def truncation(path: Path) -> str:
    """``ok``, or how a SQLite file is shorter than its header says it is (the header's page
    count is trusted only when its change counter says it is current, as SQLite does)."""
    try:
        head = read_head(path)
        size = path.stat().st_size
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return "ok"  # not a database at all: the first query says so
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if pages and head[24:28] == head[92:96] and size < page * pages:
        return f"the file is {size} bytes, its header says {page * pages}: cut short"
    return "ok"


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".sealed")


def _file_state(path: Path) -> dict[str, Any] | None:
    """What a clean close leaves a SQLite file as: its size, mtime, header (the change counter
    in it) and write-ahead log size; None when it cannot be read."""
    wal = path.with_name(path.name + "-wal")
    try:
        st = path.stat()
        head = read_head(path)
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "head": head.hex(), "wal": wal_size}


def seal(path: Path) -> None:
    """Record the file as the writer's clean close leaves it (all its connections closed)."""
    state = _file_state(path)
    if state is not None:
        with contextlib.suppress(OSError):  # only costs the next writer's open a full check
            _seal_path(path).write_text(json.dumps(state), encoding="utf-8")


def seal_kept(path: Path) -> bool:
    """Whether the seal is there: no query met damage since a writer's open last trusted or
    checked the file (a writer may hold it open now)."""
    return _seal_path(path).is_file()


def unsealed(path: Path) -> bool:
    """Whether the file may have changed since a writer's clean close: anything but exactly the
    state its seal recorded (no seal, a crash, another program's write, a copy). The seal is
    marked open: this open writes, and only its own clean close records a state again."""
    sealed = _seal_path(path)
    try:
        want = json.loads(sealed.read_text(encoding="utf-8"))
        sealed.write_text(json.dumps({"open": True}), encoding="utf-8")
    except (OSError, ValueError):
        return True  # (a seal that cannot be marked open cannot be trusted next time either)
    return want != _file_state(path)


def drop_seal(path: Path) -> None:
    """Damage was met: the next writer's open checks every page (and so heals it)."""
    with contextlib.suppress(OSError):
        _seal_path(path).unlink()
