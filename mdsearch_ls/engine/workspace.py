"""One folder of notes and its index: the facade every front end talks to.

A :class:`Workspace` owns the lock, the manifest, the Chroma collection, the single
:class:`~mdsearch_ls.engine.indexer.Indexer` and a :class:`~mdsearch_ls.engine.search.Searcher`.
Front ends (CLI, language server, MCP) call it and translate its exceptions; none of them touches
the stores directly.

The index is a cache that lives outside the notes by default (the user cache directory, keyed by
the folder's absolute path), so a synced vault never carries it and deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from mdsearch_ls.config import Settings
from mdsearch_ls.engine import chunking, sources
from mdsearch_ls.engine.embedder import Embedder, space_model_name
from mdsearch_ls.engine.indexer import CancelFn, Indexer, IndexReport, ProgressFn, sha1
from mdsearch_ls.engine.manifest import SCHEMA_VERSION, Manifest
from mdsearch_ls.engine.search import Filters, Hit, Searcher, mean_vector
from mdsearch_ls.engine.store import ChromaStore, StoreError

log = logging.getLogger(__name__)

try:  # POSIX advisory locks; Windows falls back to msvcrt below.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


class IndexLockedError(RuntimeError):
    """Another process writes this index. Two writers would hang or corrupt Chroma."""


class IndexReadOnlyError(RuntimeError):
    """A write was asked of a workspace opened read-only (another process is its writer)."""


class IndexOpenError(RuntimeError):
    """The index exists but cannot be used (corrupt, wrong version); it can be rebuilt."""


def cache_root() -> Path:
    """Base folder for indexes: ``$MDSEARCH_CACHE_DIR`` or the platform's user cache dir."""
    env = os.environ.get("MDSEARCH_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mdsearch", appauthor=False))


def default_index_dir(root: Path) -> Path:
    """``<cache>/indexes/<folder name>-<hash of its path>``: readable and collision-free."""
    absolute = root.expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", absolute.name).strip("-") or "root"
    digest = hashlib.sha1(str(absolute).encode()).hexdigest()[:12]
    return cache_root() / "indexes" / f"{slug[:40]}-{digest}"


# Embedding spaces of other settings kept beside the open one (the most recently opened first),
# so switching a setting back and forth re-embeds nothing while a third one frees the oldest.
KEEP_OTHER_SPACES = 1


def space_name(settings: Settings) -> str:
    """Collection name for one embedding space: changing model or chunking starts a new one
    (and so does the int8 backend, whose vectors differ: ``space_model_name``)."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", space_model_name(settings)).strip("-._")
    chunking_key = f"c{settings.chunk_size}-o{settings.chunk_overlap}"
    return f"{model[:60] or 'model'}-{chunking_key}-v{SCHEMA_VERSION}"


class _Lock:
    """An exclusive, non-blocking lock file; released when the process dies, however it dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:  # pragma: no cover - Windows
                import msvcrt

                msvcrt.locking(self._fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip()
            os.close(self._fd)
            who = f" by process {holder}" if holder else ""
            raise IndexLockedError(
                f"the index in {path.parent} is in use{who} (an editor's mdsearch server or "
                f"another mdsearch command). Close it, wait for it to finish, or pass "
                f"--index-dir to use a separate index."
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            try:
                os.ftruncate(self._fd, 0)
                if fcntl is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = -1


@dataclass
class Related:
    """The section under a cursor and the sections of other notes most like it."""

    section: chunking.Section | None
    hits: list[Hit]


class Workspace:
    """A folder of notes with its open index. Writes: one thread. Reads: any thread."""

    # None when opened read-only: another process is the writer.
    store: ChromaStore | None
    indexer: Indexer | None
    _lock: _Lock | None

    def __init__(
        self,
        root: Path | str,
        settings: Settings,
        embedder: Embedder,
        *,
        index_dir: Path | str | None = None,
        read_only: bool = False,
    ) -> None:
        """``read_only``: search an index another process writes (an editor's server), as it
        is: no lock, no Chroma (not process-safe), no repair or update; vector queries are
        answered exactly from the manifest. Raises FileNotFoundError when there is no index."""
        root = Path(root).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"notes folder not found: {root}")
        if not root.is_dir():
            raise NotADirectoryError(f"not a folder: {root}")
        self.root = root.resolve()
        self.settings = settings
        self.embedder = embedder
        chosen = index_dir or settings.index_dir
        self.index_dir = (
            Path(chosen).expanduser().resolve() if chosen else default_index_dir(self.root)
        )
        self.space = space_name(settings)
        self.read_only = read_only
        self.last_report: IndexReport | None = None
        if read_only:
            self._open_read_only()
            return
        self._lock = _Lock(self.index_dir / "writer.lock")
        try:
            (self.index_dir / "ROOT").write_text(str(self.root) + "\n", encoding="utf-8")
            try:
                self.manifest = Manifest(self.index_dir / f"{self.space}.sqlite3")
            except sqlite3.DatabaseError as exc:
                raise IndexOpenError(
                    f"the manifest in {self.index_dir} cannot be read ({exc}); delete that "
                    f"folder or run 'mdsearch index --rebuild' to rebuild it from the notes"
                ) from exc
            try:
                self.store = ChromaStore(
                    self.index_dir / "chroma", self.space, batch_size=settings.batch_size
                )
            except StoreError as exc:
                raise IndexOpenError(str(exc)) from exc
            self.dropped_spaces = self._prune_spaces()
            self.indexer = Indexer(
                self.root, settings, self.manifest, self.store, embedder,
                index_dir=self.index_dir,
            )
            # The manifest is the truth: repair what a crash between the Chroma write and the
            # manifest write left, before anything reads (``--no-update`` searches, status).
            self.repaired = self.indexer.reconcile()
            self.searcher = Searcher(
                self.manifest, self.store, embedder, per_file=settings.per_file
            )
        except BaseException:
            self._lock.release()
            raise

    def _open_read_only(self) -> None:
        self._lock = None
        self.dropped_spaces: list[str] = []
        self.repaired = None
        try:
            self.manifest = Manifest(self.index_dir / f"{self.space}.sqlite3", read_only=True)
        except sqlite3.DatabaseError as exc:
            raise IndexOpenError(
                f"the manifest in {self.index_dir} cannot be read ({exc})"
            ) from exc
        self.store = None
        self.indexer = None
        self.searcher = Searcher(
            self.manifest, None, self.embedder, per_file=self.settings.per_file
        )

    def _writer(self) -> Indexer:
        if self.indexer is None:
            raise IndexReadOnlyError(
                f"the index in {self.index_dir} is open read-only (another process writes it)"
            )
        return self.indexer

    def _prune_spaces(self) -> list[str]:
        """Delete the manifests and collections of all but the newest other embedding spaces.

        Each model or chunking setting gets its own space, and without this every setting ever
        tried would keep its vectors on disk forever. A space's age is the mtime of its manifest,
        touched on every open; we hold the writer lock, so no other process has any space open.
        """
        own = self.index_dir / f"{self.space}.sqlite3"
        with contextlib.suppress(OSError):
            os.utime(own)
        seen: dict[str, float] = {}
        for f in self.index_dir.glob("*.sqlite3"):
            if f.stem != self.space:
                with contextlib.suppress(OSError):
                    seen[f.stem] = f.stat().st_mtime
        try:
            collections = self.store.other_collections()
        except Exception as exc:  # a listing failure must not stop the index from opening
            log.warning("could not list old index collections in %s: %s", self.index_dir, exc)
            collections = []
        for name in collections:
            seen.setdefault(name, 0.0)  # a collection whose manifest is gone: oldest
        dropped = sorted(seen, key=lambda n: (-seen[n], n))[KEEP_OTHER_SPACES:]
        for name in dropped:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    (self.index_dir / f"{name}.sqlite3{suffix}").unlink()
            if name in collections:
                try:
                    self.store.drop_collection(name)
                except Exception as exc:
                    log.warning("could not drop old index collection %s: %s", name, exc)
        if dropped:
            log.info("dropped the index of older settings: %s", ", ".join(dropped))
        return dropped

    # ---- writes (one thread) ----------------------------------------------------------------

    def index(
        self,
        progress: ProgressFn | None = None,
        cancel: CancelFn | None = None,
        *,
        rebuild: bool = False,
    ) -> IndexReport:
        report = self._writer().index(progress, cancel, rebuild=rebuild)
        self.last_report = report
        return report

    def update(self, paths: Iterable[str | Path]) -> IndexReport:
        return self._writer().update(paths)

    def delete(self, paths: Iterable[str | Path]) -> IndexReport:
        return self._writer().delete(paths)

    def rename(self, pairs: Sequence[tuple[str | Path, str | Path]]) -> IndexReport:
        return self._writer().rename(pairs)

    # ---- reads (any thread) -----------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        mode: str | None = None,
        filters: Filters | None = None,
    ) -> list[Hit]:
        return self.searcher.search(
            query,
            k or self.settings.max_results,
            mode=mode or self.settings.mode,
            filters=filters,
            fusion=self.settings.fusion,
        )

    def related(
        self,
        rel: str,
        line: int,
        *,
        text: str | None = None,
        k: int | None = None,
        min_score: float | None = None,
    ) -> Related:
        """Sections of other notes related to the section at ``line`` of note ``rel``.

        ``text`` is the editor's current buffer when it has one. Vectors come from the cache when
        the section's embedded text is unchanged since indexing, else the section is embedded on
        the fly (and not stored: only the writer stores).
        """
        if text is None:
            path = self.root / rel
            read = sources.read_source(path, rel, max_file_bytes=self.settings.max_file_bytes)
            if read.text is None:
                return Related(None, [])
            text = read.text
        note = chunking.parse_note(
            text,
            fallback_title=PurePosixPath(rel).stem,
            chunk_size=self.settings.chunk_size,
            chunk_overlap=self.settings.chunk_overlap,
        )
        section = chunking.section_at_line(note, line)
        if section is None:
            return Related(None, [])
        index = note.sections.index(section)
        texts = [c.embed_text for c in note.chunks if c.section == index]
        if not texts:
            return Related(section, [])
        hashes = [sha1(t) for t in texts]
        cached = self.manifest.vectors(hashes)
        missing = [t for t, h in zip(texts, hashes, strict=True) if h not in cached]
        vectors = [cached[h] for h in hashes if h in cached]
        if missing:
            vectors.extend(np.asarray(v) for v in self.embedder.embed_documents(missing))
        centroid = mean_vector(vectors)
        if centroid is None:
            return Related(section, [])
        hits = self.searcher.related(
            centroid,
            exclude_path=rel,
            k=k or self.settings.hover_max_results,
            min_score=self.settings.hover_min_score if min_score is None else min_score,
        )
        return Related(section, hits)

    def status(self) -> dict[str, Any]:
        files, chunks = self.manifest.counts()
        last = self.manifest.get_meta("last_update")
        return {
            "root": str(self.root),
            "files": files,
            "chunks": chunks,
            "model": self.embedder.name,
            "index_dir": str(self.index_dir),
            "space": self.space,
            "last_update": _iso(float(last)) if last else None,
            "read_only": self.read_only,
        }

    def relpath(self, path: Path | str) -> str | None:
        return sources.relpath(self.root, Path(path))

    def close(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
            self.manifest.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
