"""One folder of notes and its index: the facade every front end talks to.

A :class:`Workspace` owns the lock, the manifest, the Chroma collection, the single ``Indexer``
and a ``Searcher``. Front ends (CLI, language server, MCP) call it and translate its exceptions;
none of them touches the stores directly.

The index is a cache that lives outside the notes by default (the user cache directory, keyed by
the folder's absolute path), so a synced vault never carries it and deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.config import INDEX_FIELDS, Settings, differs
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import (
    IndexLockedError,
    IndexReadOnlyError,
    NotIndexedError,
    RequestError,
)
from mdsearch_ls.engine.index.healing import WriterOpen
from mdsearch_ls.engine.index.layout import (
    OPEN_MODES,
    IndexLock,
    IndexState,
    LockRole,
    OpenMode,
    index_dir_of,
    recorded_model,
    refuse_foreign,
    space_name,
    writer_alive,
)
from mdsearch_ls.engine.index.manifest import (
    Manifest,
    ManifestEmptyError,
    is_damage,
)
from mdsearch_ls.engine.index.vector_store import ChromaStore, DeferredStore
from mdsearch_ls.engine.locations import ChunkRecord
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.search.hits import SearchResult
from mdsearch_ls.engine.search.keyword import STOPWORDS
from mdsearch_ls.engine.search.related import Related, related_sections
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.search.searcher import Hit, Searcher

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.indexer import CancelFn, Indexer, IndexReport, ProgressFn
    from mdsearch_ls.engine.writing.aids import WritingAids

log = logging.getLogger(__name__)


# How often a running index records its progress in the manifest (for readers in other
# processes); cheap: one tiny SQLite write.
_STATE_EVERY_S = 1.0


class Workspace(WriterOpen):
    """A folder of notes with its open index. Writes: one thread. Reads: any thread.

    Front ends get one with :meth:`open` and use only its public methods: nothing outside
    ``engine/`` touches the indexer, manifest, store or searcher, so the rules that keep an index
    consistent (one writer, the manifest as the truth, repair on open) live in one place.
    """

    # None when opened read-only: another process is (or may become) the writer.
    store: ChromaStore | DeferredStore | None
    indexer: Indexer | None
    _lock: IndexLock | None

    @classmethod
    def open(
        cls,
        root: Path | str,
        settings: Settings,
        mode: OpenMode = "write",
        *,
        embedder: Embedder,
        index_dir: Path | str | None = None,
        role: LockRole = "command",
        defer_vectors: bool = False,
    ) -> Workspace:
        """Open the index of ``root``; ``role``: what holds it as its writer (``LockRole``).

        Raises FileNotFoundError / NotADirectoryError for a bad root, :class:`IndexLockedError`
        when ``write`` finds another writer, :class:`NotIndexedError` when a read finds no index,
        :class:`IndexOpenError` when the index cannot be used. ``defer_vectors``: see
        :class:`DeferredStore`."""
        if mode not in OPEN_MODES:
            raise ValueError(f"open mode must be one of {', '.join(OPEN_MODES)}, got {mode!r}")
        if mode == "read":
            return cls(root, settings, embedder, index_dir=index_dir, read_only=True)
        try:
            ws = cls(root, settings, embedder, index_dir=index_dir, role=role,
                     defer_vectors=defer_vectors)
        except IndexLockedError as locked:
            if mode == "write":
                raise
            ws = cls(root, settings, embedder, index_dir=index_dir, read_only=True)
            ws.read_only_reason = (f"the index in {ws.index_dir} is in use by another mdsearch "
                                   f"process{locked.holder_text}: reading it as it is, without "
                                   "updating it")
        if role == "server":  # it searches many times: see engine/index/phrase_scores.py
            ws.manifest.keep_phrase_scores(warm=STOPWORDS)  # (words a query leaves out)
        return ws

    def __init__(
        self,
        root: Path | str,
        settings: Settings,
        embedder: Embedder,
        *,
        index_dir: Path | str | None = None,
        read_only: bool = False,
        role: LockRole = "command",
        defer_vectors: bool = False,
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
        self.read_only = read_only
        self.switched: str | None = None
        """Why this open started a new embedding space beside an index of other settings (another
        model, other chunking: every note embedded again), once, for a person; else None."""
        self.healed: str | None = None
        """What was damaged and what opening did about it, once, for a person to read (CLI
        stderr, an editor's ``window/showMessage``); None when the index opened sound."""
        self.vectors_moved: str | None = None
        """The vectors were last kept elsewhere, so this open filled its store from the cache."""
        self.repaired: int | None = None
        self.store = self.indexer = None
        self._damaged_dir: Path | None = None
        self._stale_vectors = False
        self.read_only_reason: str | None = None
        self.last_report: IndexReport | None = None
        self._filter: sources.SourceFilter | None = None
        self._state_written = 0.0
        self._indexing = False
        self._defer_vectors, self._role = defer_vectors, role
        if read_only:
            self._open_read_only()
            return
        self._check_vector_server()  # before anything is written
        self._lock = IndexLock(self.index_dir / "writer.lock", role=role)
        try:
            (self.index_dir / "ROOT").write_text(str(self.root) + "\n", encoding="utf-8")
            self._open_healing()
            self.switched = self._note_switch()
            self.dropped_spaces = self._prune_spaces()
            self.searcher = Searcher(self.manifest, self._searchable_store(), embedder,
                                     per_file=settings.per_file)
        except BaseException:
            self._close_stores()
            self._lock.release()
            raise

    def _open_read_only(self) -> None:
        self._lock = None
        self.dropped_spaces: list[str] = []
        self.repaired = None
        path = self._manifest_path
        not_indexed = NotIndexedError(
            f"{self.root} is not indexed yet: run `mdsearch index {self.root}`"
        )
        others = [recorded_model(f) for f in self.index_dir.glob("*.sqlite3")
                  if f.stem != self.space]
        others_models = sorted({m for m in others if m and m != self.embedder.name})
        if others_models:
            not_indexed = NotIndexedError(
                f"{self.root} is indexed with {', '.join(others_models)}, not with "
                f"{self.embedder.name} (each model has an index of its own): run `mdsearch "
                f"index {self.root}` with the same model setting to build it"
            )
        if not path.is_file():
            raise not_indexed
        try:
            self.manifest = Manifest(path, read_only=True)
        except ManifestEmptyError:
            raise not_indexed from None
        except sqlite3.DatabaseError as exc:
            raise self._damage_error(exc) from exc
        self.searcher = Searcher(self.manifest, None, self.embedder,
                                 per_file=self.settings.per_file)

    @property
    def writing(self) -> WritingAids:
        """Help while writing (link completion, related-not-linked, mentions, duplicates).

        Made on first use: a search from the command line never needs it, and its imports
        (the markdown parser, the link syntax) are a sixth of that process's start-up."""
        aids = self._writing
        if aids is None:
            with self._writing_lock:
                if self._writing is None:
                    from mdsearch_ls.engine.writing.aids import WritingAids

                    self._writing = WritingAids(self)
                aids = self._writing
        return aids

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Damage met by a query (after the open's check passed) is an IndexOpenError that says
        what heals it, not a bare SQLite error."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            raise self._damage_error(exc) from exc

    def _writer(self) -> Indexer:
        if self.indexer is None:
            raise IndexReadOnlyError(
                f"the index in {self.index_dir} is open read-only (another process writes it)"
            )
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
        if state == "building" and not (
            self._indexing if not self.read_only else writer_alive(self.index_dir)
        ):
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

    def pending_changes(self) -> int:
        """How many notes an update would read or drop (0: up to date), from stats alone."""
        changed = self.changed_notes()
        return 1 if changed is None else len(changed)

    def up_to_date(self, seen: Callable[[], Any] | None = None) -> bool:
        """Whether an index run would find nothing to do (notes, index and local vector store as
        they were), asked read-only: the CLI's `index` then needs no lock and no Chroma."""
        from mdsearch_ls.engine.index.vector_store import folder_fingerprint, sealed_as
        sealed = sealed_as(self.manifest, folder_fingerprint(self._chroma_dir))
        return (not self.settings.chroma_url and sealed and self.manifest.sealed()
                and self.index_state().state == "ready" and self.changed_notes(seen=seen) == [])

    def changed_notes(self, among: Iterable[str] | None = None, watch: sources.WalkWatch
                      | None = None, seen: Callable[[], Any] | None = None) -> list[str] | None:
        """The notes an update would read or drop (:func:`freshness.changed_notes`: ``among``,
        ``watch``, ``seen``), for :meth:`update` to take alone; None: only :meth:`index` will do."""
        from mdsearch_ls.engine.index.freshness import changed_notes

        with self._reading():
            return changed_notes(self.root, self.settings, self.manifest, self.index_dir,
                                 among=among, watch=watch, seen=seen)

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

    def accepts(self, rel: str) -> bool:
        """Whether this note would be indexed (globs, ignores, markdown suffix)."""
        if self.indexer is not None:
            return self.indexer.filter.accepts(rel)
        if self._filter is None:
            s = self.settings
            self._filter = sources.SourceFilter(self.root, s.include, s.exclude,
                                                index_dir=self.index_dir, formats=s.include_formats)
        return self._filter.accepts(rel)

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
            "read_only": self.read_only,
            "index": self.index_state().to_json(),
            # Reported once when met; listed here for whoever wonders where a note went.
            "skipped": [{"path": p, "reason": r}
                        for p, r in self.manifest.skip_reasons().items()],
        }

    def rest(self) -> bool:
        """Writer thread, idle: leave the vector snapshot of this state and search it mapped
        (the readers' files; the in-memory table is dropped), seal the vector store as a clean
        close does and release its memory (Chroma's graph: 200 MB at 96k chunks). The next
        write opens the store again; True when it was released."""
        if self.indexer is None:
            return False
        self.searcher.leave_snapshot(remap=True)
        store = self.store
        if store is None or store.remote or store.released:
            return False
        self._seal_and_close(release=True)
        from mdsearch_ls.engine.embedding.onnx_backend import release_free_memory

        release_free_memory()  # glibc kept some of the freed graph: 23 MB at 96k (measured)
        return True

    def close(self) -> None:
        try:
            if not self.read_only:  # readers map what the writer leaves (vector_snapshot)
                self.searcher.leave_snapshot()
            if self.store is not None and self.store.released:
                self.store.close()  # sealed when released, and nothing was written since
            elif self.store is not None:
                self._seal_and_close()
            self.manifest.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def abandon(self) -> None:
        """Release the lock and the manifest without waiting for anything: the process is about
        to exit (its client died). Whatever was mid-write is repaired by the next open."""
        with contextlib.suppress(Exception):
            self.manifest.close()
        with contextlib.suppress(Exception):
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
