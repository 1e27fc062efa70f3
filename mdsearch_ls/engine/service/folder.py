"""A folder kept indexed by a long-running front end: one writer thread, a coalescing queue.

The language server and the MCP server both keep folders fresh while answering requests, and the
rules for that are the same for both, so they live here, protocol-free, instead of in a copy per
front end:

* each folder has **one writer thread**, the only one that writes its index; the first index,
  saves, watcher events and rebuilds are queued to it, and changes are coalesced per file (the
  latest state on disk wins);
* reads (search, related) run on any thread and never wait for the writer;
* when another process holds the index (an editor beside the MCP server, a second editor
  window), the folder searches it read-only, and takes over writing (then catches up) as soon as
  that process lets go: at the next change it is asked to index, and on a timer; a background
  process the CLI started (:mod:`.background`) is asked to let go at once.

A front end gives two callbacks: ``on_change`` (state or counts changed: refresh a status bar)
and ``on_message`` (something a person should read, once).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import BroadRootError, IndexLockedError, NotIndexedError
from mdsearch_ls.engine.index.indexer import CancelFn, IndexReport, ProgressFn
from mdsearch_ls.engine.index.layout import refuse_broad_root
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.service.idle import IdleTimer
from mdsearch_ls.engine.service.reading import read_checked
from mdsearch_ls.engine.service.resident import ResidentSearch
from mdsearch_ls.engine.service.resident_rules import ask_to_leave
from mdsearch_ls.engine.states import FolderState, IndexPhase, Progress
from mdsearch_ls.engine.workspace import IndexState, Related, SearchResult, Workspace
from mdsearch_ls.engine.writing.aids import WritingAids

log = logging.getLogger(__name__)

# The folder states, under the names the front ends have always imported.
STATE_STARTING = FolderState.STARTING
STATE_LOADING = FolderState.LOADING_MODEL
STATE_INDEXING = FolderState.INDEXING
STATE_READY = FolderState.READY
STATE_ERROR = FolderState.ERROR

# How often a read-only folder tries to become the writer (the other process may have exited).
TAKE_OVER_EVERY_S = 10.0
# How often a folder whose index another process is building from nothing looks again (it can
# search that index as soon as something is written, and it is usually a few seconds away).
RETRY_LOCKED_S = 5.0
# How long the writer waits without a write before it releases the vector store's memory
# (Workspace.rest); the next save opens it again, in about a second at 96k chunks.
REST_AFTER_S = 60.0


MessageFn = Callable[[str, str], None]
"""(text, level) with level one of "info", "warning", "error"."""


class IndexedFolder:
    """A folder of notes, its index and its writer thread."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        embedder: Embedder,
        *,
        name: str | None = None,
        on_change: Callable[[], None] | None = None,
        on_message: MessageFn | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.name = name or self.root.name
        self.settings = settings
        self.embedder = embedder
        self.ws: Workspace | None = None
        self.state = STATE_STARTING
        self.last_error: str | None = None
        self.last_report: IndexReport | None = None
        self.jobs_done, self.closed = 0, False
        self._on_change = on_change or (lambda: None)
        self._on_message = on_message or (lambda text, level: None)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mdsearch-{self.name[:20]}")
        self._pending: dict[str, str] = {}  # rel -> "update" | "delete"
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self._retired: list[Workspace] = []
        self._timer: threading.Timer | None = None
        self.progress = Progress()
        self.other_builds = False
        """Another process is building this index from nothing: this one searches it as soon as
        it exists, and looks again every :data:`RETRY_LOCKED_S`."""
        self._retry: threading.Timer | None = None
        self._opened = threading.Event()
        self._filter: sources.SourceFilter | None = None
        self._resident: ResidentSearch | None = None
        self.on_leave: Callable[[], bool] | None = None  # a background process's: .background
        self.defer_vectors = False  # its writes leave Chroma to the next writer: .background
        self._idle = IdleTimer(REST_AFTER_S, lambda: self.submit(self._rest))

    # ---- the writer thread ----------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn`` on this folder's writer thread (the only thread that writes its index)."""
        return self._executor.submit(self._guard, fn, *args)

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            log.log(logging.WARNING if isinstance(exc, BroadRootError) else logging.ERROR,
                    "%s: %s failed: %s", self.name, getattr(fn, "__name__", fn), exc,
                    exc_info=not isinstance(exc, BroadRootError))  # a refusal is no bug
            self.last_error = str(exc)
            raise
        finally:  # the writer's idle time counts from its last job
            if fn != self._rest and not self.closed:
                self._idle.touch()

    def _rest(self) -> None:
        if self.ws is not None and not self.closed and not self.ws.read_only and self.ws.rest():
            log.info("%s: idle: the vector store's memory released", self.name)
            self._on_change()

    def _open(self) -> None:
        """Open the index: as its writer, or read-only when another process writes it."""
        if self.ws is not None:
            return
        try:
            refuse_broad_root(self.root, self.settings)
            self.ws = Workspace.open(self.root, self.settings, "read-if-locked", role="server",
                                     embedder=self.embedder, defer_vectors=self.defer_vectors)
        except NotIndexedError:
            # Locked, and nothing indexed yet: the other process is building it. Wait for it.
            raise IndexLockedError(
                f"another mdsearch process is building the index of {self.name}; this one "
                f"searches it as soon as it has written something"
            ) from None
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            self._opened.set()
        self._tell_healed(self.ws)
        self._resident = self._resident or ResidentSearch.open_for(self)  # CLI searches
        if self.ws.read_only and ask_to_leave(self.ws.index_dir):
            # the holder was a background process the CLI started; it has closed the index,
            # so the take-over that follows (start_index) makes this one the writer at once
            log.info("%s: the background mdsearch process gave the index over", self.name)
        elif self.ws.read_only:
            log.info("%s: %s", self.name, self.ws.read_only_reason)
            self._on_message(
                f"mdsearch: another mdsearch process (another editor window?) is indexing "
                f"{self.name}. This one searches that index as it is and takes over indexing "
                f"once that process is gone.",
                "info",
            )
            self._arm_take_over()

    def _tell_healed(self, ws: Workspace) -> None:
        """Opening set damage aside, moved the vectors or started another model's space: say so."""
        for said in (ws.healed, ws.vectors_moved):
            if said:
                self._on_message(f"mdsearch: {said}", "warning")
        if ws.switched:
            self._on_message(f"mdsearch: {ws.switched}", "info")

    def _failed(self, exc: Exception) -> None:
        self.state = STATE_ERROR
        self.last_error = str(exc)
        self._on_message(f"mdsearch cannot open the index for {self.name}: {exc}", "error")
        self._on_change()

    def _take_over(self) -> bool:
        """A read-only folder becomes the writer once the other process has let go of the
        lock, and catches up with the notes (incremental). Writer thread only."""
        if self.ws is None or not self.ws.read_only:
            return self.ws is not None
        try:
            ws = Workspace.open(self.root, self.settings, "write", embedder=self.embedder,
                                role="server", defer_vectors=self.defer_vectors)
        except IndexLockedError:
            return False
        self._tell_healed(ws)
        # Searches may still be reading the old one on other threads: it is closed with the
        # folder, not now.
        self._retired.append(self.ws)
        self.ws = ws
        self._resident = self._resident or ResidentSearch.open_for(self)  # CLI searches
        self.state = STATE_INDEXING
        self._on_change()
        report = ws.index(cancel=lambda: self.closed)
        self.last_report = report
        self.state = STATE_READY
        log.info("%s: now the index writer: %s", self.name, report.summary())
        self._on_change()
        return True

    def _arm_take_over(self) -> None:
        if self.closed or self._timer is not None:
            return

        def fire() -> None:
            self._timer = None
            if self.closed or self.ws is None or not self.ws.read_only:
                return
            fut = self.submit(self._take_over)
            fut.add_done_callback(
                lambda f: None if f.cancelled() or (not f.exception() and f.result())
                else self._arm_take_over()
            )

        self._timer = threading.Timer(TAKE_OVER_EVERY_S, fire)
        self._timer.daemon = True
        self._timer.start()

    # ---- jobs a front end asks for ----------------------------------------------------------

    def start_index(
        self,
        *,
        rebuild: bool = False,
        progress: ProgressFn | None = None,
        cancel: CancelFn | None = None,
    ) -> Future[IndexReport | None]:
        """Open the index if needed and bring it up to date, on the writer thread.

        The future's result is None when another process is the writer (this folder then
        searches read-only and retries on its own).
        """
        self.state = STATE_INDEXING if self.embedder.loaded else STATE_LOADING
        self._on_change()
        self.progress = Progress(started=time.monotonic())

        def tracked(done: int, total: int, chunks: int) -> None:
            self.progress.record(done, total)
            if progress is not None:
                progress(done, total, chunks)

        def job() -> IndexReport | None:
            try:
                self._open()
            except IndexLockedError:
                # Another process is building it from nothing: look again soon, and search it
                # as soon as it holds something. Not an error: nothing is wrong.
                self.other_builds = True
                self.state = STATE_INDEXING
                self.last_error = None
                self._on_change()
                self._arm_retry(rebuild, progress, cancel)
                return None
            self.other_builds = False
            assert self.ws is not None
            if self.ws.read_only and not self._take_over():
                self.state = STATE_READY
                self.last_error = None
                self._on_change()
                return None
            self.state = STATE_INDEXING
            self._on_change()
            report = self.ws.index(
                progress=tracked,
                cancel=lambda: self.closed or bool(cancel and cancel()),
                rebuild=rebuild,
            )
            self.last_report = report
            for w in report.warnings:
                log.warning("%s: %s", self.name, w)
            log.info("%s: %s", self.name, report.summary())
            self.state = STATE_READY
            self.last_error = None
            self._on_change()
            return report

        fut = self.submit(job)

        def failed(f: Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                self.state = STATE_ERROR
                self.last_error = str(f.exception())
                self._on_change()

        fut.add_done_callback(failed)
        return fut

    def _arm_retry(
        self, rebuild: bool, progress: ProgressFn | None, cancel: CancelFn | None
    ) -> None:
        if self.closed:
            return
        if self._retry is not None:
            self._retry.cancel()

        def fire() -> None:
            self._retry = None
            if not self.closed:
                self.start_index(rebuild=rebuild, progress=progress, cancel=cancel)

        self._retry = threading.Timer(RETRY_LOCKED_S, fire)
        self._retry.daemon = True
        self._retry.start()

    def settled(self) -> Future[None]:
        """A future done once every change queued so far is written (or given up on).

        The writer runs its jobs in order and a queued change is drained by a job scheduled when
        it was queued, so a job submitted now finishes after all of them.
        """
        return self.submit(lambda: None)  # a job that does nothing: its place is the point

    def queue(self, rel: str, op: str) -> None:
        """Queue a per-file change ("update" or "delete"); the latest one for a file wins."""
        if op not in ("update", "delete"):
            raise ValueError(f"unknown operation {op!r}")
        with self._pending_lock:
            self._pending[rel] = op
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        self.submit(self._drain)

    def refresh_ignores(self) -> Future[Any]:
        """A .gitignore changed: re-read the ignore rules (on the writer thread)."""

        def job() -> None:
            if self.ws is not None and not self.ws.read_only:
                self.ws.refresh_ignores()

        return self.submit(job)

    @property
    def queue_length(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def _drain(self) -> None:
        while True:
            with self._pending_lock:
                batch, self._pending = self._pending, {}
                if not batch:
                    self._drain_scheduled = False
                    return
            if self.ws is None or self.closed:
                continue
            if self.ws.read_only and not self._take_over():
                # The writing process indexes these when it sees them (its watcher, its next
                # scan): the manifest of every note's hash makes sure nothing is missed.
                log.info("%s: read-only, not indexing %s", self.name, ", ".join(sorted(batch)))
                continue
            updates = [p for p, op in batch.items() if op == "update"]
            deletes = [p for p, op in batch.items() if op == "delete"]
            if deletes:
                report = self.ws.delete(deletes)
                log.info("%s: removed %d notes", self.name, report.files_deleted)
            if updates:
                report = self.ws.update(updates)
                for w in report.warnings:
                    log.warning("%s: %s", self.name, w)
                log.info("%s: updated %s: %s", self.name, ", ".join(updates), report.summary())
            self.jobs_done += 1
            self._on_change()

    # ---- settings ---------------------------------------------------------------------------

    def apply_settings(self, settings: Settings) -> bool:
        """Search settings apply at once; False when an index setting changed (the caller closes
        this folder and starts a new one)."""
        if self.ws is not None and not self.ws.apply_settings(settings):
            return False
        self.settings = settings  # not opened yet: it opens with these
        return True

    # ---- reads (any thread) -----------------------------------------------------------------

    def index_state(self) -> IndexState:
        done, total = self.progress.done, self.progress.total
        if self.ws is None:
            phase = IndexPhase.BUILDING if self.state != STATE_ERROR else IndexPhase.EMPTY
            return IndexState(phase, done, total)
        state = self.ws.index_state()  # (a look over a whole index leaves it ready)
        if self.state in (STATE_INDEXING, STATE_LOADING) and state.state not in (
                IndexPhase.BUILDING, IndexPhase.READY):
            return IndexState(IndexPhase.BUILDING, done, total)
        return state

    def search(self, request: SearchRequest) -> SearchResult:
        if (ws := self.ws) is None:
            return SearchResult([], request.notes, self.index_state())
        return dataclasses.replace(ws.search(request), index=self.index_state())

    def related(self, request: RelatedRequest) -> Related:
        return ws.related(request) if (ws := self.ws) is not None else Related(None, [])

    @property
    def writing(self) -> WritingAids | None:
        """The index's writing aids (link completion, mentions, ...); None until it is open."""
        return ws.writing if (ws := self.ws) is not None else None

    @property
    def resident(self) -> ResidentSearch | None:
        """The socket this folder answers the command line on, if it listens."""
        return self._resident

    def note_path(self, path: str | Path) -> str | None:
        """Root-relative path of a note (absolute or relative), None outside the folder."""
        if self.ws is not None:
            return self.ws.note_path(path)
        p = Path(path)
        return sources.relpath(self.root, p if p.is_absolute() else self.root / p)

    def is_indexed(self, rel: str) -> bool:
        return (ws := self.ws) is not None and ws.is_indexed(rel)

    def wait_open(self, timeout: float | None = None) -> bool:
        """Wait until the first open of the index was tried (True) or ``timeout`` passed: a
        search arriving at start-up must not answer "nothing indexed" about an index on disk
        that takes a second to open."""
        return self._opened.wait(timeout)

    def notes(self) -> list[str]:
        """Root-relative paths of the notes in the index (empty before it is open)."""
        return ws.notes() if (ws := self.ws) is not None else []

    def accepts(self, rel: str) -> bool:
        """Whether the index would take this note (include/exclude globs, ignored folders such
        as .obsidian/, .gitignore, the markdown suffix)."""
        ws = self.ws
        if ws is not None:
            return ws.accepts(rel)
        if self._filter is None:
            self._filter = sources.SourceFilter(self.root, self.settings.include,
                                                self.settings.exclude,
                                                formats=self.settings.include_formats)
        return self._filter.accepts(rel)

    def read_note(self, path: str | Path) -> tuple[str, str]:
        """``(root-relative path, text)`` of one note, read the way the indexer reads it, or
        :class:`RequestError` (field ``path``) naming the rule that refuses it: front ends hand
        notes to people and assistants through this (see :mod:`.reading`)."""
        return read_checked(self.root, self.note_path(path), path, accepts=self.accepts,
                            max_file_bytes=self.settings.max_file_bytes,
                            formats=self.settings.include_formats)

    def status(self) -> dict[str, Any]:
        info = ws.status() if (ws := self.ws) is not None else {}
        return {
            "root": str(self.root), "name": self.name,
            "files": info.get("files", 0), "chunks": info.get("chunks", 0),
            "model": self.embedder.name, "index_dir": info.get("index_dir"),
            "queue": self.queue_length, "state": self.state, "last_error": self.last_error,
            "last_update": info.get("last_update"), "read_only": info.get("read_only", False),
            "index": self.index_state().to_json(),
        }

    # ---- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the writer after its current job, then close the index."""
        self.closed = True
        self._cancel_timers()
        self._stop_listening()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for ws in (*self._retired, self.ws):  # the writer last: it seals the file as left
            if ws is not None:
                ws.close()
        self.ws = None
        self._retired.clear()

    def _stop_listening(self) -> None:
        if (resident := self._resident) is not None:
            self._resident = None
            resident.close()

    def _cancel_timers(self) -> None:
        for timer in (self._idle, self._timer, self._retry):
            if timer is not None:
                timer.cancel()

    def abandon(self) -> None:
        """The process is exiting now: release locks without waiting for the writer."""
        self.closed = True
        self._cancel_timers()
        self._stop_listening()
        for ws in (self.ws, *self._retired):
            if ws is not None:
                ws.abandon()


__all__ = ["STATE_ERROR", "STATE_INDEXING", "STATE_LOADING", "STATE_READY", "STATE_STARTING",
           "IndexedFolder", "Progress"]
