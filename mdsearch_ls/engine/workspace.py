"""One folder of notes and its index: the facade every front end talks to.

A :class:`Workspace` owns the lock, the manifest, the Chroma collection, the single ``Indexer``
and a ``Searcher``. Front ends (CLI, language server, MCP) call it and translate its exceptions;
none of them touches the stores directly.

The index is a cache that lives outside the notes by default (the user cache directory, keyed by
the folder's absolute path), so a synced vault never carries it and deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mdsearch_ls.config import INDEX_FIELDS, Settings, differs
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.heap import release_free_memory
from mdsearch_ls.engine.index.healing import (
    check_vector_server,
    close_stores,
    damage_error,
    open_writer,
)
from mdsearch_ls.engine.index.indexer import Indexer
from mdsearch_ls.engine.index.layout import (
    IndexState,
    index_dir_of,
    index_lock,
    refuse_foreign,
    space_name,
)
from mdsearch_ls.engine.index.manifest_schema import is_damage
from mdsearch_ls.engine.index.report import CancelFn, IndexReport, ProgressFn
from mdsearch_ls.engine.locations import ChunkRecord
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.search.hits import Related, SearchResult
from mdsearch_ls.engine.search.related import related_sections
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.search.searcher import Hit, Searcher
from mdsearch_ls.engine.writing.aids import WritingAids

log = logging.getLogger(__name__)


_STATE_EVERY_S = 1.0
"""How often a running index records its progress in the manifest (what a client asking for
the status reads, and the next open after a crash); one tiny SQLite write."""


class Workspace:
    """A folder of notes with its open index. Writes: one thread. Reads: any thread.

    Front ends get one with :meth:`open` and use only its public methods: nothing outside
    ``engine/`` touches the indexer, manifest, store or searcher, so the rules that keep an index
    consistent (one writer, the manifest as the truth, repair on open) live in one place.
    """

    @classmethod
    def open(
        cls,
        root: Path | str,
        settings: Settings,
        *,
        embedder: Embedder,
        index_dir: Path | str | None = None,
    ) -> Workspace:
        """Hold the index of ``root``: take its writer lock, open (create, repair) its stores.

        Raises FileNotFoundError / NotADirectoryError for a bad root, :class:`IndexLockedError`
        when another process holds it (ask that one instead), :class:`IndexOpenError` when the
        index cannot be used."""
        return cls(root, settings, embedder, index_dir=index_dir)

    def __init__(
        self,
        root: Path | str,
        settings: Settings,
        embedder: Embedder,
        *,
        index_dir: Path | str | None = None,
    ) -> None:
        """Use :meth:`open`; this is its implementation."""
        self._writing: WritingAids | None = None
        self._writing_lock = threading.Lock()
        root = Path(root).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"notes folder not found: {root}")
        if not root.is_dir():
            raise NotADirectoryError(f"not a folder: {root}")
        self.root = root.resolve()
        self.settings = settings
        self.embedder = embedder
        self.index_dir = refuse_foreign(index_dir_of(self.root, settings, index_dir))
        self.space = space_name(settings)
        self.last_report: IndexReport | None = None
        self._state_written = 0.0
        self._indexing = False
        check_vector_server(settings)  # before anything is written
        self._lock = index_lock(self.index_dir)
        try:
            (self.index_dir / "ROOT").write_text(str(self.root) + "\n", encoding="utf-8")
            self._opened = open_writer(self.root, settings, embedder, self.index_dir,
                                       self.space)
        except BaseException:
            self._lock.release()
            raise
        self.manifest = self._opened.manifest
        self.store = self._opened.store
        self.indexer = self._opened.indexer
        self.healed = self._opened.healed
        """What was damaged and what opening did about it, once, for a person to read (CLI
        stderr, an editor's ``window/showMessage``); None when the index opened sound."""
        self.switched = self._opened.switched
        """Why this open started a new embedding space beside an index of other settings
        (another model, other chunking: every note embedded again), once, for a person."""
        self.vectors_moved = self._opened.vectors_moved
        self.repaired = self._opened.repaired
        self.dropped_spaces = self._opened.dropped
        self.searcher = Searcher(self.manifest, self.store, embedder, per_file=settings.per_file)

    @property
    def writing(self) -> WritingAids:
        """Help while writing (link completion, related-not-linked, mentions, duplicates),
        made on first use: its tables are read from the index when first asked for."""
        with self._writing_lock:
            if self._writing is None:
                self._writing = WritingAids(self)
            return self._writing

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Damage met by a query (after the open's check passed) is an IndexOpenError that says
        what heals it, not a bare SQLite error."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            raise damage_error(self.index_dir, self.root, self.manifest, exc) from exc

    def _writer(self) -> Indexer:
        return self.indexer

    # ---- settings -----------------------------------------------------------------------------

    def apply_settings(self, settings: Settings) -> bool:
        """Take new settings at once when only search settings changed; False when an index
        setting changed, and the caller must close this workspace and open a new one."""
        if differs(self.settings, settings, INDEX_FIELDS):
            return False
        self.settings = settings
        self.searcher.per_file = settings.per_file
        return True

    # ---- writes (one thread) ----------------------------------------------------------------

    def index(
        self,
        progress: ProgressFn | None = None,
        cancel: CancelFn | None = None,
        *,
        rebuild: bool = False,
    ) -> IndexReport:
        """Bring the index in line with the notes (only changed notes are read and embedded).

        The run's progress is recorded in the manifest as it goes, so a reader in another
        process can tell a half-built index from a finished one. A run over a whole index (a
        server's first look, ``mdsearch index``) leaves it "ready": each note is its old version
        or its new one, never missing, and a note it did not reach is found by the next look.
        """
        writer = self._writer()
        if not (whole := not rebuild and self.index_state().state == "ready"):
            self._record_state("building", 0, 0)
        self._indexing = True

        def track(done: int, total: int, chunks: int) -> None:
            now = time.monotonic()
            if not whole and (now - self._state_written >= _STATE_EVERY_S or done >= total):
                self._record_state("building", done, total)
            if progress is not None:
                progress(done, total, chunks)

        try:
            report = writer.index(track, cancel, rebuild=rebuild)
        finally:
            self._indexing = False
            # A look at every note peaks well above what stays: at 96k chunks (89k notes) a
            # holder kept ~100 MB of it after three `mdsearch index` runs without this. The
            # collection first (35 ms there) empties the interpreter's free lists, whose
            # scattered objects kept 20 of the look's 1 MB pymalloc arenas (22 MB) alive.
            gc.collect()
            release_free_memory()
        done = report.files_total if whole or not report.cancelled else None
        self._record_state("ready" if done is not None else "interrupted",
                           done if done is not None else 0, report.files_total)
        self.last_report = report
        return report

    def _record_state(self, state: str, done: int, total: int) -> None:
        self._state_written = time.monotonic()
        self.manifest.set_meta("index_state", f"{state} {done} {total}")

    def update(self, paths: Iterable[str | Path]) -> IndexReport:
        return self._writer().update(paths)

    def delete(self, paths: Iterable[str | Path]) -> IndexReport:
        return self._writer().delete(paths)

    def rename(self, pairs: Sequence[tuple[str | Path, str | Path]]) -> IndexReport:
        return self._writer().rename(pairs)

    def refresh_ignores(self) -> None:
        """Re-read ``.gitignore`` files (one changed). Writer thread only, like every write."""
        self._writer().filter.refresh()

    # ---- reads (any thread) -----------------------------------------------------------------

    def index_state(self) -> IndexState:
        """How complete the index is (see :class:`IndexState`)."""
        raw = self.manifest.get_meta("index_state")
        files, _ = self.manifest.counts()
        if not raw:
            # Indexes from before the state was recorded, or never run.
            return IndexState("ready" if files else "empty", files, files)
        state, done, total = [*raw.split(), "0", "0"][:3]
        if state == "building" and not self._indexing:
            state = "interrupted"  # its writer died mid-run; the next write open goes on
        if state == "ready" and not files:
            state = "empty"
        return IndexState(state, int(done), int(total))

    def search(self, request: SearchRequest) -> SearchResult:
        """Run a validated request (see :meth:`SearchRequest.build`)."""
        with self._reading():
            found = self.searcher.search(
                request.query,
                request.k,
                mode=request.mode or self.settings.mode,
                filters=request.filters,
                fusion=self.settings.fusion,
            )
        hits = found.hits
        if request.min_score is not None:
            hits = [h for h in hits if h.score is None or h.score >= request.min_score]
        notes = tuple(dict.fromkeys((*request.notes, *found.notes)))
        return SearchResult(hits, notes, self.index_state())

    def hits(
        self,
        query: str,
        k: int | None = None,
        *,
        mode: str | None = None,
        filters: Any = None,
    ) -> list[Hit]:
        """Just the hits of a query, for scripts, benchmarks and tests: the request is built and
        validated exactly as a front end's would be."""
        request = SearchRequest.build(query, k=k, mode=mode, filters=filters,
                                      default_k=self.settings.max_results)
        return self.search(request).hits

    def related_to(self, path: str, line: int, *, text: str | None = None,
                   k: int | None = None, min_score: float | None = None) -> Related:
        """:meth:`related` for scripts and tests, through the same request validation."""
        return self.related(RelatedRequest.build(path, line, text=text, k=k, min_score=min_score))

    def related(self, request: RelatedRequest) -> Related:
        """Sections of other notes related to the section at ``request.line`` of its note.

        ``request.text`` is the editor's current buffer when it has one. Vectors come from the
        cache when the section's embedded text is unchanged since indexing, else the section is
        embedded on the fly (and not stored: only the writer stores).
        """
        rel = self.note_path(request.path)
        if rel is None:
            raise RequestError(f"{request.path} is not a note inside {self.root}", "path")
        return related_sections(
            request, rel, root=self.root, settings=self.settings, embedder=self.embedder,
            manifest=self.manifest, searcher=self.searcher, reading=self._reading,
        )

    def note_path(self, path: str | Path) -> str | None:
        """The root-relative path of a note given relative to the root or absolute; None when
        it lies outside the root."""
        p = Path(path)
        if not p.is_absolute():
            p = self.root / p
        return sources.relpath(self.root, p)

    def relpath(self, path: Path | str) -> str | None:
        return sources.relpath(self.root, Path(path))

    def chunk_texts(self, chunk_ids: Iterable[str]) -> dict[str, str]:
        """The markdown of indexed chunks by id (a hit's ``chunk_id``), for front ends that
        render their own snippet (see :mod:`mdsearch_ls.engine.search.preview`); unknown ids are
        left out. Any thread; works read-only."""
        return {cid: rec.text for cid, rec in self.manifest.get_chunks(list(chunk_ids)).items()}

    def chunks_of(self, rel: str) -> list[ChunkRecord]:
        """The indexed chunks of one note (root-relative path), in reading order."""
        return self.manifest.chunks_for(rel)

    def is_indexed(self, rel: str) -> bool:
        """Whether the index holds this note (root-relative path)."""
        return self.manifest.file(rel) is not None

    def notes(self) -> list[str]:
        """Root-relative paths of every note in the index."""
        return self.manifest.all_paths()

    @property
    def rules(self) -> sources.SourceFilter:
        """Which files are notes of this index (globs, ignores, markdown suffix): the
        indexer's own rules, so a watch, a read and the scan agree."""
        return self._writer().filter

    def accepts(self, rel: str) -> bool:
        """Whether this note would be indexed (globs, ignores, markdown suffix)."""
        return self.rules.accepts(rel)

    def status(self) -> dict[str, Any]:
        files, chunks = self.manifest.counts()
        last = self.manifest.get_meta("last_update")
        return {
            "root": str(self.root), "files": files, "chunks": chunks,
            "model": self.embedder.name,
            "index_dir": str(self.index_dir),
            "space": self.space,
            "vectors": self.vectors_where(),
            "last_update": _iso(float(last)) if last else None,
            "index": self.index_state().to_json(),
            # Reported once when met; listed here for whoever wonders where a note went.
            "skipped": [{"path": p, "reason": r}
                        for p, r in self.manifest.skip_reasons().items()],
        }

    def vectors_where(self) -> str:
        """Where this index's vectors live, for ``status``: the index folder's Chroma, or the
        server and collection (what a person looks for when managing a shared server)."""
        url = self.settings.chroma_url
        if not url:
            return str(self.index_dir / "chroma")
        return f"{url} (collection {self.store.name})"

    def close(self) -> None:
        """Close the stores cleanly (the next open trusts Chroma after two counts) and let the
        index go."""
        try:
            close_stores(self._opened, clean=True)
        finally:
            self._lock.release()

    def abandon(self) -> None:
        """Release the lock and the manifest without waiting for anything: the process is about
        to exit (its client died). Whatever was mid-write is repaired by the next open."""
        with contextlib.suppress(Exception):
            self.manifest.close()
        with contextlib.suppress(Exception):
            self._lock.release()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
