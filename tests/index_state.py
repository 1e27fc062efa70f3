"""What an index holds, as plain data, so two indexes can be compared: the one a history of
writes, crashes and repairs left, and a clean build of the same notes.

Read straight from the files (the manifest's tables, Chroma's collection), never through the
engine's own reads, so a test cannot pass because both sides share a bug. Columns are discovered
from the tables, so a schema change does not need a change here.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Differ between two builds of the same notes by design: when a row was written.
_VOLATILE = {"rowid", "indexed_at"}


@dataclass(frozen=True)
class IndexSnapshot:
    files: frozenset[tuple[Any, ...]]
    tags: frozenset[tuple[str, str]]
    chunks: frozenset[tuple[Any, ...]]
    fts: frozenset[tuple[str, str, str]]  # (chunk id, title column, body column)
    chroma: frozenset[tuple[str, tuple[tuple[str, Any], ...]]]  # (id, sorted metadata)

    @property
    def chunk_ids(self) -> set[str]:
        return {c[0] for c in self.chunks}

    def diff(self, other: IndexSnapshot) -> str:
        """A short account of what differs, for assertion messages."""
        out = []
        for name in ("files", "tags", "chunks", "fts", "chroma"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: {len(a - b)} only here, {len(b - a)} only there; "
                           f"e.g. {sorted(map(repr, a - b))[:1]} / {sorted(map(repr, b - a))[:1]}")
        return "; ".join(out) or "equal"


def _rows(conn: sqlite3.Connection, table: str) -> frozenset[tuple[Any, ...]]:
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in _VOLATILE]
    return frozenset(conn.execute(f"SELECT {', '.join(cols)} FROM {table}"))


def manifest_state(path: Path) -> tuple[frozenset, frozenset, frozenset, frozenset]:
    """(files, tags, chunks, fts) of a manifest file, read with a connection of our own."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        files = _rows(conn, "files")
        tags = frozenset(conn.execute("SELECT path, tag FROM file_tags"))
        chunks = _rows(conn, "chunks")
        fts = frozenset(conn.execute(
            "SELECT c.id, f.title, f.body FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid"
        ))
        orphans = conn.execute(
            "SELECT COUNT(*) FROM chunks_fts WHERE rowid NOT IN (SELECT rowid FROM chunks)"
        ).fetchone()[0]
        assert orphans == 0, f"{orphans} keyword rows without a chunk"
        return files, tags, chunks, fts
    finally:
        conn.close()


def chroma_state(ws: Any) -> frozenset[tuple[str, tuple[tuple[str, Any], ...]]]:
    got = ws.store._col.get(include=["metadatas"])
    return frozenset(
        (cid, tuple(sorted((meta or {}).items())))
        for cid, meta in zip(got["ids"], got["metadatas"], strict=True)
    )


def snapshot(ws: Any) -> IndexSnapshot:
    """Everything the open writer workspace ``ws`` has indexed."""
    files, tags, chunks, fts = manifest_state(ws.manifest.path)
    return IndexSnapshot(files, tags, chunks, fts, chroma_state(ws))


def assert_consistent(ws: Any) -> None:
    """The three stores agree with each other: every chunk has its keyword row, its cached
    vector and its Chroma entry with that very vector, and nothing else is there."""
    snap = snapshot(ws)
    ids = snap.chunk_ids
    assert {c[0] for c in snap.chroma} == ids, "Chroma and the manifest disagree"
    assert {f[0] for f in snap.fts} == ids, "keyword rows and chunks disagree"
    conn = sqlite3.connect(f"file:{ws.manifest.path}?mode=ro", uri=True)
    try:
        listed = {cid for (raw,) in conn.execute("SELECT chunk_ids FROM files")
                  for cid in json.loads(raw)}
        assert listed == ids, "the files' chunk lists and the chunk rows disagree"
        vectors = dict(conn.execute(
            "SELECT c.id, v.vector FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash"
        ))
    finally:
        conn.close()
    assert set(vectors) == ids, "a chunk has no cached vector"
    if ids:
        got = ws.store._col.get(ids=sorted(ids), include=["embeddings"])
        for cid, emb in zip(got["ids"], got["embeddings"], strict=True):
            cached = np.frombuffer(vectors[cid], dtype=np.float32)
            assert np.allclose(np.asarray(emb, dtype=np.float32), cached, atol=1e-5), cid


def clean_build(root: Path, index_dir: Path, embedder: Any, settings: Any = None) -> IndexSnapshot:
    """Index ``root`` from nothing into ``index_dir`` and return what it holds."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.workspace import Workspace

    with Workspace.open(root, settings or Settings(), embedder=embedder,
                        index_dir=index_dir) as ws:
        ws.index()
        return snapshot(ws)
