"""A folder of notes and its index, held by this process or asked of the process that holds it.

One process at a time holds an index (its writer lock decides): a language server, an MCP
server, the background process, or a command holding it for its own run. Only the holder opens
the index's stores; every other process asks it through the channel. :class:`IndexedFolder`
hides which: a front end calls the same methods either way, and gets the same types back.

When held here:

* one **writer thread** is the only one that writes the index; the first look at the notes,
  saves, changes on disk and rebuilds are queued to it, coalesced per file (the latest state on
  disk wins); reads (search, related, the writing aids) run on any thread;
* its record (``holder.json``: this process's endpoint) sits in the index folder, so others
  find it.

When another process holds it, reads go there (:class:`RemoteIndex`), writes are that process's
own business (it watches the notes), and every :data:`TAKE_OVER_EVERY_S` this folder looks
whether the holder is gone: then it holds the index itself and catches up with the notes. A
background process is asked to let go at once by anything that wants to hold (a language or MCP
server the person started); a command that only asks (the CLI) asks the background process to
hold the folder instead of holding it itself, unless told not to (``via_background`` off).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import IndexLockedError, MdsearchError, RequestError
from mdsearch_ls.engine.index.layout import IndexState, index_dir_of, refuse_broad_root
from mdsearch_ls.engine.index.report import CancelFn, IndexReport, ProgressFn
from mdsearch_ls.engine.notes import files as sources
from mdsearch_ls.engine.search.hits import Related, SearchResult
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.service.channel import ChannelError, Endpoint
from mdsearch_ls.engine.service.reading import read_checked
from mdsearch_ls.engine.service.remote import RemoteAids, RemoteIndex, find_holder, holder_record
from mdsearch_ls.engine.states import FolderState, IndexPhase, Progress

log = logging.getLogger(__name__)

TAKE_OVER_EVERY_S = 10.0
"""How often a folder another process holds looks whether that process is gone."""
RETRY_LOCKED_S = 0.2
"""How soon a folder looks again when the lock is taken but nobody answers yet (a holder
between taking its lock and listening: a few milliseconds)."""
LOCKED_WAIT_S = 10.0
"""How long it keeps looking before it says another process holds the index and won't answer."""
FIRST_LOOK_WAIT_S = 30.0
"""How long a search waits for the first look at the notes under way (a holder that just
took the folder) before it answers from the index as it is, saying so."""

MessageFn = Callable[[str, str], None]
"""(text, level) with level one of "info", "warning", "error"."""


@dataclasses.dataclass
class Hooks:
    """What a folder needs of the process around it (:class:`~.folders.Folders` gives them)."""

    endpoint: Callable[[], Endpoint]
    """This process's endpoint, listening once asked for: written where the index is held."""
    role: str = "server"
    """What this process is when it holds: ``server``, ``background`` or ``command``."""
    via_background: bool = False
    """Ask the background process to hold an index nobody holds (the CLI), instead of holding
    it here."""
    background: Callable[[Path, Settings], RemoteIndex] | None = None
    """Starts (or asks) the background process to hold a folder; its index, asked remotely."""
    on_change: Callable[[], None] = lambda: None
    on_message: MessageFn = lambda text, level: None
    on_held: Callable[[IndexedFolder], None] = lambda folder: None
    """A folder became held here (the process starts watching its notes)."""


class IndexedFolder:
    """A folder of notes and its index; see the module docstring."""

    def __init__(self, root: Path, settings: Settings, embedder: Embedder, hooks: Hooks, *,
                 name: str | None = None, given: dict[str, Any] | None = None) -> None:
        """``given``: the index settings its front end named itself (a CLI flag), by name: a
        holder with other ones refuses to answer for them (see ``holder``)."""
        self.root = Path(root).resolve()
        self.given = dict(given or {})
        self.last_asked = time.monotonic()
        """When a client of the channel last asked about this folder (a background process
        lets it go after a while without)."""
        self.name = name or self.root.name
        self.settings = settings
        self.embedder = embedder
        self.hooks = hooks
        self.ws: Any = None
        """The workspace, when this process holds the index (``engine.workspace.Workspace``)."""
        self.remote: RemoteIndex | None = None
        """The holder, when another process holds the index."""
        self.state = FolderState.STARTING
        self.last_error: str | None = None
        self.last_report: IndexReport | None = None
        self.jobs_done, self.closed = 0, False
        self.progress = Progress()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mdsearch-{self.name[:20]}")
        self._pending: dict[str, str] = {}  # rel -> "update" | "delete"
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self._timer: threading.Timer | None = None
        self._opened = threading.Event()
        self._looked = threading.Event()
        self._filter: sources.SourceFilter | None = None
        self._endpoint: Endpoint | None = None
        self._writer = 0
        """The writer thread's ident (set by its first job)."""

    @property
    def index_dir(self) -> Path:
        return index_dir_of(self.root, self.settings)

    @property
    def held(self) -> bool:
        """Whether this process holds the index."""
        return self.ws is not None

    @property
    def opened(self) -> bool:
        """Whether the index is held here, or its holder found (reads can be answered)."""
        return self.ws is not None or self.remote is not None

    # ---- the writer thread ------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn`` on this folder's writer thread (the only thread that writes its index)."""
        return self._executor.submit(self._guard, fn, *args)

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._writer = threading.get_ident()
        try:
            return fn(*args)
        except Exception as exc:
            said = isinstance(exc, MdsearchError | ChannelError)  # a sentence for a person
            if self.hooks.role != "command" or not said:  # (a command says it itself)
                log.log(logging.WARNING if said else logging.ERROR, "%s: %s failed: %s",
                        self.name, getattr(fn, "__name__", fn), exc, exc_info=not said)
            self.last_error = str(exc)
            raise

    # ---- holding, or asking the holder --------------------------------------------------------

    def _open(self) -> None:
        """Hold the index, or find the process that holds it. Writer thread only."""
        if self.ws is not None or self.remote is not None or self.closed:
            return
        try:
            if self.hooks.role != "command":  # (a command asked its person for --yes first)
                refuse_broad_root(self.root, self.settings)
            deadline = time.monotonic() + LOCKED_WAIT_S
            while self.ws is None and self.remote is None:
                if self._ask_holder() or self._hold():
                    break
                if time.monotonic() > deadline:
                    raise IndexLockedError(
                        f"another mdsearch process holds the index of {self.name} in "
                        f"{self.index_dir} and does not answer; if none runs, remove "
                        f"{holder_record(self.index_dir)}")
                time.sleep(RETRY_LOCKED_S)  # a holder between its lock and its endpoint
        except Exception as exc:
            self.state = FolderState.ERROR
            self.last_error = str(exc)
            self.hooks.on_message(f"mdsearch cannot open the index for {self.name}: {exc}",
                                  "error")
            self.hooks.on_change()
            raise
        finally:
            self._opened.set()

    def _ask_holder(self) -> bool:
        """Use the process that holds the index, if one answers (True); a background process
        is asked to let go instead when this is a server a person started, which holds what it
        serves. A command asks whoever holds it."""
        holder = find_holder(self.root, self.index_dir)
        if holder is not None and holder.role == "background" and self.hooks.role == "server":
            log.info("%s: the background mdsearch process gives the index over", self.name)
            with contextlib.suppress(ChannelError):  # it let its last folder go and exited
                holder.leave()
            holder.index.close()
            return False
        if holder is None and self.hooks.via_background and self.hooks.background is not None:
            remote = self.hooks.background(self.root, self.settings)
            if remote is not None:
                self._use(remote)
                return True
            self.hooks.via_background = False  # it could not be had: hold the index here
            return False
        if holder is None:
            return False
        self._use(holder.index)
        log.info("%s: the index is held by process %d (%s): asking it", self.name,
                 holder.index.pid, holder.role)
        if self.hooks.role != "command":
            self.hooks.on_message(
                f"mdsearch: another mdsearch process (pid {holder.index.pid}, "
                f"{'an editor' if holder.role == 'server' else holder.role}) holds the index of "
                f"{self.name}. This one asks it, and holds the index itself once that process "
                f"is gone.", "info")
            self._arm_take_over()
        return True

    def _use(self, remote: RemoteIndex) -> None:
        self.remote = remote
        self.state = FolderState.READY
        self.last_error = None
        self._looked.set()
        self.hooks.on_change()

    def _hold(self) -> bool:
        """Take the writer lock and open the index here (False: another process has the lock
        and is not answering yet)."""
        from mdsearch_ls.engine.workspace import Workspace  # (see below)

        # Imported here, the one such import: a process that asks a holder (a CLI search, the
        # second editor window) never needs the stores, the indexer or Chroma (~70 ms, 25 MB).
        try:
            ws = Workspace.open(self.root, self.settings, embedder=self.embedder)
        except IndexLockedError:
            return False
        endpoint = self.hooks.endpoint()
        endpoint.save(holder_record(ws.index_dir))
        self._endpoint = endpoint
        self.ws = ws
        for said, level in ((ws.healed, "warning"), (ws.vectors_moved, "warning"),
                            (ws.switched, "info")):
            if said:
                self.hooks.on_message(f"mdsearch: {said}", level)
        self.hooks.on_held(self)
        return True

    def _take_over(self) -> None:
        """The holder is gone: hold the index here and catch up with the notes. Writer thread
        only."""
        remote, self.remote = self.remote, None
        if remote is not None:
            remote.close()
        self._looked.clear()
        self._open()
        if self.ws is not None:
            log.info("%s: the process that held the index is gone: holding it here", self.name)
            self._first_look()

    def _hold_if_free(self) -> None:
        """Take the index over when its holder no longer answers. Writer thread only."""
        try:
            if self.remote is not None:
                self.remote.hello()
        except ChannelError:
            self._take_over()

    def _arm_take_over(self) -> None:
        if self.closed or self._timer is not None:
            return

        def fire() -> None:
            self._timer = None
            if self.closed or self.remote is None:
                return
            try:
                self.remote.hello()
            except ChannelError:
                self.submit(self._take_over)
                return
            except Exception:
                pass
            self._arm_take_over()

        self._timer = threading.Timer(TAKE_OVER_EVERY_S, fire)
        self._timer.daemon = True
        self._timer.start()

    def _either(self, remote: Callable[[RemoteIndex], Any], here: Callable[[], Any]) -> Any:
        """``remote`` asked of the holder, or ``here`` when this process holds the index. A
        holder that is gone is looked for again first (the index may be held here now)."""
        holder = self.remote
        if holder is not None:
            try:
                return remote(holder)
            except ChannelError as exc:
                log.info("%s: %s: looking again for who holds the index", self.name, exc)
                if self.remote is holder and threading.get_ident() == self._writer:
                    self._take_over()
                elif self.remote is holder:
                    self.submit(self._take_over).result(timeout=LOCKED_WAIT_S + 60)
            if self.remote is not None:
                return remote(self.remote)
        return here()

    # ---- jobs a front end asks for --------------------------------------------------------

    def start_index(self, *, rebuild: bool = False, progress: ProgressFn | None = None,
                    cancel: CancelFn | None = None) -> Future[IndexReport | None]:
        """Hold the index (or find its holder) and bring it up to date, on the writer thread.
        The future's result is the run's report; None when another process holds the index
        and a look was not asked of it."""
        self.state = FolderState.INDEXING if self.embedder.loaded else FolderState.LOADING_MODEL
        self.hooks.on_change()
        self.progress = Progress(started=time.monotonic())

        def job() -> IndexReport | None:
            self._open()
            if self.remote is not None and not rebuild:
                return None
            return self._either(lambda r: r.index(rebuild=True, progress=progress),
                                lambda: self._first_look(rebuild=rebuild, progress=progress,
                                                         cancel=cancel))

        return self.submit(job)

    def _first_look(self, *, rebuild: bool = False, progress: ProgressFn | None = None,
                    cancel: CancelFn | None = None) -> IndexReport:
        """Bring a held index up to date with the notes. Writer thread only."""

        def tracked(done: int, total: int, chunks: int) -> None:
            self.progress.record(done, total)
            if progress is not None:
                progress(done, total, chunks)

        self.state = FolderState.INDEXING
        self.hooks.on_change()
        try:
            report = self.ws.index(progress=tracked, rebuild=rebuild,
                                   cancel=lambda: self.closed or bool(cancel and cancel()))
        except Exception as exc:
            self.state = FolderState.ERROR
            self.last_error = str(exc)
            self.hooks.on_change()
            raise
        finally:
            self._looked.set()
        self.last_report = report
        for w in report.warnings:  # (a command prints its report's warnings itself)
            log.log(logging.INFO if self.hooks.role == "command" else logging.WARNING,
                    "%s: %s", self.name, w)
        log.info("%s: %s", self.name, report.summary())
        self.state = FolderState.READY
        self.last_error = None
        self.hooks.on_change()
        return report

    def index_now(self, *, rebuild: bool = False, progress: ProgressFn | None = None,
                  cancel: CancelFn | None = None) -> IndexReport:
        """Bring the index up to date (or rebuild it) and wait: here when held, else by the
        holder, whose progress comes back through ``progress``."""
        self.submit(self._open).result()
        return self._either(
            lambda r: r.index(rebuild=rebuild, given=self.given, progress=progress),
            lambda: self.submit(lambda: self._first_look(rebuild=rebuild, progress=progress,
                                                         cancel=cancel)).result())

    def open_now(self) -> None:
        """Hold the index or find its holder, and wait for that (not for a look at the notes)."""
        self.submit(self._open).result()

    def settled(self) -> Future[None]:
        """A future done once every change queued so far is written (or given up on): the
        writer runs its jobs in order, so a job submitted now finishes after all of them."""
        return self.submit(lambda: None)

    def queue(self, rel: str, op: str) -> None:
        """Queue a per-file change ("update" or "delete"); the latest one for a file wins. A
        folder another process holds leaves it to that process, which watches the notes."""
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
        self._filter = None
        return self.submit(lambda: self.ws.refresh_ignores() if self.ws is not None else None)

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
            if self.remote is not None and not self.closed:
                self._hold_if_free()  # a save here: the holder may have gone meanwhile
            if self.ws is None or self.closed:
                continue  # its holder watches the notes and indexes the change itself
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
            self.hooks.on_change()

    # ---- settings ---------------------------------------------------------------------------

    def apply_settings(self, settings: Settings) -> bool:
        """Search settings apply at once; False when an index setting changed (the caller closes
        this folder and starts a new one)."""
        if self.ws is not None and not self.ws.apply_settings(settings):
            return False
        self.settings = settings
        return True

    # ---- reads (any thread) -------------------------------------------------------------------

    def wait_looked(self, timeout: float = FIRST_LOOK_WAIT_S) -> bool:
        """Wait until the first look at the notes is done (True) or ``timeout`` passed."""
        return self._looked.wait(timeout)

    def index_state(self) -> IndexState:
        return self._either(self._remote_index_state, self._index_state_here)

    @staticmethod
    def _remote_index_state(remote: RemoteIndex) -> IndexState:
        index = remote.status()["index"]
        return IndexState(index["state"], index["files_done"], index["files_total"])

    def _index_state_here(self) -> IndexState:
        if self.ws is None:
            phase = IndexPhase.BUILDING if self.state != FolderState.ERROR else IndexPhase.EMPTY
            return IndexState(phase, self.progress.done, self.progress.total)
        state = self.ws.index_state()
        if self.state in (FolderState.INDEXING, FolderState.LOADING_MODEL) and state.state not in (
                IndexPhase.BUILDING, IndexPhase.READY):
            return IndexState(IndexPhase.BUILDING, self.progress.done, self.progress.total)
        return state

    def search(self, request: SearchRequest) -> SearchResult:
        return self._either(lambda r: r.search(request, self.given),
                            lambda: self._search_here(request))

    def _search_here(self, request: SearchRequest) -> SearchResult:
        if (ws := self.ws) is None:
            return SearchResult([], request.notes, self.index_state())
        return dataclasses.replace(ws.search(request), index=self.index_state())

    def related(self, request: RelatedRequest) -> Related:
        return self._either(lambda r: r.related(request), lambda: ws.related(request)
                            if (ws := self.ws) is not None else Related(None, []))

    @property
    def writing(self) -> Any:
        """The index's writing aids (link completion, mentions, ...): ``WritingAids``, or the
        same methods asked of the holder; None until the index is open."""
        if self.remote is not None:
            return RemoteAids(self.remote)
        return ws.writing if (ws := self.ws) is not None else None

    def note_path(self, path: str | Path) -> str | None:
        """Root-relative path of a note (absolute or relative), None outside the folder."""
        p = Path(path)
        return sources.relpath(self.root, p if p.is_absolute() else self.root / p)

    def is_indexed(self, rel: str) -> bool:
        return self._either(lambda r: bool(r.notes([rel])),
                            lambda: (ws := self.ws) is not None and ws.is_indexed(rel))

    def wait_open(self, timeout: float | None = None) -> bool:
        """Wait until the first open of the index was tried (True) or ``timeout`` passed: a
        search arriving at start-up must not answer "nothing indexed" about an index on disk
        that takes a second to open."""
        return self._opened.wait(timeout)

    def notes(self) -> list[str]:
        """Root-relative paths of the notes in the index (empty before it is open)."""
        return self._either(lambda r: r.notes(),
                            lambda: ws.notes() if (ws := self.ws) is not None else [])

    def _rules(self) -> sources.SourceFilter:
        if (ws := self.ws) is not None:
            return ws.rules
        if self._filter is None:
            self._filter = sources.SourceFilter(self.root, self.settings.include,
                                                self.settings.exclude, index_dir=self.index_dir,
                                                formats=self.settings.include_formats)
        return self._filter

    def accepts(self, rel: str) -> bool:
        """Whether the index would take this note (include/exclude globs, ignored folders such
        as .obsidian/, .gitignore, the markdown suffix)."""
        return self._rules().accepts(rel)

    def dir_rejected(self, rel_dir: str) -> bool:
        """Whether no note the index would take can be below this folder (a dot-folder,
        ``node_modules``, an excluded or git-ignored one)."""
        return self._rules().dir_rejected(rel_dir)

    def read_note(self, path: str | Path) -> tuple[str, str]:
        """``(root-relative path, text)`` of one note, read the way the indexer reads it, or
        :class:`RequestError` (field ``path``) naming the rule that refuses it: front ends hand
        notes to people and assistants through this (see :mod:`.reading`)."""
        return read_checked(self.root, self.note_path(path), path, accepts=self.accepts,
                            max_file_bytes=self.settings.max_file_bytes,
                            formats=self.settings.include_formats)

    def status(self) -> dict[str, Any]:
        """The folder's status record; a folder another process holds reports that process's
        record of it, with who holds it."""
        try:
            return self._either(lambda r: {**r.status(), "name": self.name, "read_only": True},
                                self._status_here)
        except (ChannelError, RequestError) as exc:
            self.last_error = str(exc)
            return self._status_here()

    def _status_here(self) -> dict[str, Any]:
        info = ws.status() if (ws := self.ws) is not None else {}
        held = self.ws is not None
        return {
            "root": str(self.root), "name": self.name,
            "files": info.get("files", 0), "chunks": info.get("chunks", 0),
            "model": self.embedder.name, "index_dir": info.get("index_dir"),
            "vectors": info.get("vectors"), "queue": self.queue_length, "state": self.state,
            "last_error": self.last_error,
            "last_update": info.get("last_update"), "read_only": False,
            "held_by": {"pid": os.getpid(), "role": self.hooks.role} if held else None,
            "index": self.index_state().to_json(),
        }

    # ---- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the writer after its current job, then close the index."""
        self.closed = True
        self._cancel_timers()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._release()

    def _release(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            if self._endpoint is not None:
                self._endpoint.forget(holder_record(ws.index_dir))
            ws.close()
        remote, self.remote = self.remote, None
        if remote is not None:
            remote.close()

    def _cancel_timers(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def abandon(self) -> None:
        """Release the lock without waiting for the writer or writing anything back (the
        process is exiting, or the index folder was deleted under it)."""
        self.closed = True
        self._cancel_timers()
        ws, self.ws = self.ws, None
        if ws is not None:
            if self._endpoint is not None:
                self._endpoint.forget(holder_record(ws.index_dir))
            ws.abandon()


__all__ = ["Hooks", "IndexedFolder", "MessageFn"]
