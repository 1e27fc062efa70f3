"""The folders a long-running front end keeps indexed: one service for every server.

The language server (workspace folders) and the MCP server (``--root`` folders) need the same
things from the engine, and each used to write them for itself, so the copies disagreed (two
state vocabularies, two rules for a file event, two retry timers). They are here once:

* **the model**: one embedder shared by every folder (one copy of the weights in memory), loaded
  on its own thread while the folders scan, replaced when the model settings change;
* **the folders**: add, remove and reopen them (an index setting changed), find the folder of a
  path (the deepest root when folders nest);
* **one rule for a change on disk**, :meth:`Folders.changed`: the disk decides, not the event's
  kind (an editor's atomic save is a delete and a create in no useful order);
* **reads across folders**: each folder answers with its own ranking and the lists are merged by
  the engine's ``merge_rankings``, so every front end shows the same order;
* **status and closing**: one overall state from :mod:`mdsearch_ls.engine.states`, and a close
  with a deadline that abandons a writer stuck in a long batch (the next open repairs it).

A front end keeps only what its protocol needs: URIs, scopes and progress for the language
server; path forms, the keyword fallback and tool statuses for the MCP server.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings, differs
from mdsearch_ls.engine.embedding import Embedder, create_embedder
from mdsearch_ls.engine.heap import one_arena
from mdsearch_ls.engine.index.layout import cache_root
from mdsearch_ls.engine.index.report import CancelFn, IndexReport, ProgressFn
from mdsearch_ls.engine.notes.files import is_note_name
from mdsearch_ls.engine.search.hits import Hit
from mdsearch_ls.engine.search.merging import merge_rankings
from mdsearch_ls.engine.search.requests import SearchRequest
from mdsearch_ls.engine.service import holder
from mdsearch_ls.engine.service.channel import Endpoint, Server
from mdsearch_ls.engine.service.folder import Hooks, IndexedFolder, MessageFn
from mdsearch_ls.engine.service.spawn import hold_in_background
from mdsearch_ls.engine.service.watch import Watcher
from mdsearch_ls.engine.states import (
    FolderState,
    IndexPhase,
    ModelState,
    overall_phase,
    overall_state,
)

log = logging.getLogger(__name__)


class Folders:
    """Several :class:`IndexedFolder`, the model they share, and what is asked of them all."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        on_change: Callable[[], None] | None = None,
        on_message: MessageFn | None = None,
        on_rescan: Callable[[IndexedFolder], Any] | None = None,
        role: str = "server",
        via_background: bool = False,
        watch: bool = True,
    ) -> None:
        """``embedder``: a model to use whatever the settings say (tests, benchmarks).
        ``on_change``: a folder's state or counts changed (refresh a status bar).
        ``on_message``: something a person should read, once. ``on_rescan``: a folder must be
        scanned again (its ignore rules changed); by default :meth:`index`, a front end that
        shows progress passes its own. ``role``: what this process is when it holds an index
        (``server``, ``background``, ``command``); ``via_background``: ask the background
        process to hold a folder nobody holds (a CLI command) instead of holding it here;
        ``watch``: learn of changes on disk in the folders held here (``watchfiles``)."""
        one_arena()  # before this process's threads (see there)
        self._fixed_embedder = embedder is not None
        self.embedder: Embedder = embedder or create_embedder(settings)
        self._model_settings = settings
        self.model_state = ModelState.LOADED if self.embedder.loaded else ModelState.NOT_LOADED
        self.model_error: str | None = None
        self._model_ready = threading.Event()
        if self.embedder.loaded:
            self._model_ready.set()
        self._folders: dict[Path, IndexedFolder] = {}
        self._on_change = on_change or (lambda: None)
        self._on_message = on_message or (lambda text, level: None)
        self._on_rescan = on_rescan or (lambda folder: self.index(folder))
        self.changes_seen = 0
        self.last_change: float | None = None
        self.role = role
        self.via_background = via_background
        self.background: Callable[[Any], Any] | None = None
        """The background process's answer to ``Hold``, ``Leave`` and ``Stop`` (set by it;
        None in any other process, which refuses them)."""
        self._server: Server | None = None
        self._server_lock = threading.Lock()
        self.watcher = Watcher(self) if watch else None

    def endpoint(self) -> Endpoint:
        """This process's endpoint, listening from the first call (the first folder held)."""
        with self._server_lock:
            if self._server is None:
                self._server = Server(lambda message, reply: holder.answer(self, message, reply),
                                      cache_root() / "run", self.role)
            return self._server.endpoint

    @property
    def watching(self) -> bool:
        """Whether changes on disk in the folders held here are being watched."""
        return self.watcher is not None and self.watcher.watching

    def _held(self, folder: IndexedFolder) -> None:
        if self.watcher is not None:
            self.watcher.watch(folder.root)

    # ---- the model --------------------------------------------------------------------------

    def use_model(self, settings: Settings) -> bool:
        """A new embedder when the model settings changed (True); the folders must then be
        reopened by the caller, since an index is one embedding space."""
        current, self._model_settings = self._model_settings, settings
        if self._fixed_embedder or not differs(current, settings, ("model", "embedder_backend")):
            return False
        self.embedder = create_embedder(settings)
        self.model_state = ModelState.NOT_LOADED
        self.model_error = None
        self._model_ready = threading.Event()
        return True

    def load_model(self, on_done: Callable[[Exception | None], None] | None = None) -> bool:
        """Load the shared model on a thread of its own (seconds), so a server answers while it
        loads. False when it is loaded or loading already (``on_done`` is then not called)."""
        if self.embedder.loaded:
            self.model_state = ModelState.LOADED
            self._model_ready.set()
            return False
        if self.model_state == ModelState.LOADING:
            return False
        self.model_state = ModelState.LOADING
        self._on_change()
        embedder, ready = self.embedder, self._model_ready

        def run() -> None:
            error: Exception | None = None
            try:
                embedder.load()
            except Exception as exc:
                error = exc
            if embedder is self.embedder:  # not replaced meanwhile by a settings change
                self._model_loaded(error)
            ready.set()
            if on_done is not None:
                on_done(error)

        threading.Thread(target=run, name="mdsearch-model", daemon=True).start()
        return True

    def _model_loaded(self, error: Exception | None) -> None:
        if error is None:
            self.model_state = ModelState.LOADED
            log.info("embedding model %s loaded", self.embedder.name)
        else:
            self.model_state = ModelState.ERROR
            self.model_error = str(error)
            for folder in self._folders.values():
                folder.last_error = str(error)
            log.error("%s", error)
            self._on_message(f"mdsearch: {error}", "error")
        self._on_change()

    def wait_model(self, timeout: float | None) -> bool:
        """Whether the model is loaded, after waiting for it at most ``timeout`` seconds."""
        if self.embedder.loaded:
            return True
        self._model_ready.wait(timeout)
        return self.embedder.loaded

    # ---- the folders ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[IndexedFolder]:
        return iter(list(self._folders.values()))

    def __len__(self) -> int:
        return len(self._folders)

    @property
    def by_root(self) -> dict[Path, IndexedFolder]:
        """The folders by their resolved root (a copy: add and remove go through the service)."""
        return dict(self._folders)

    def get(self, root: Path) -> IndexedFolder | None:
        return self._folders.get(Path(root).resolve())

    def add(self, root: Path, settings: Settings, *, name: str | None = None,
            given: dict[str, Any] | None = None) -> IndexedFolder | None:
        """Keep a folder indexed (not started yet: :meth:`index` starts it). The same root twice
        is one folder; a root that is not a directory is refused (None), with a log line."""
        root = Path(root).resolve()
        if root in self._folders:
            return self._folders[root]
        if not root.is_dir():
            log.warning("%s is not a directory; not indexed", root)
            return None
        hooks = Hooks(endpoint=self.endpoint, role=self.role,
                      via_background=self.via_background,
                      background=lambda root, settings: hold_in_background(
                          root, settings, self._on_message),
                      on_change=self._on_change, on_message=self._on_message,
                      on_held=self._held)
        folder = IndexedFolder(root, settings, self.embedder, hooks, name=name or root.name,
                               given=given)
        self._folders[root] = folder
        return folder

    def remove(self, folder: IndexedFolder) -> None:
        """Stop keeping a folder: its writer finishes the job it is in, then its index closes
        (blocks for that long; a front end runs it off its event loop)."""
        if self._folders.get(folder.root) is folder:
            del self._folders[folder.root]
        if self.watcher is not None:
            self.watcher.forget(folder.root)
        folder.close()

    def reopen(self, folder: IndexedFolder, settings: Settings) -> IndexedFolder | None:
        """Close a folder and make it anew with these settings and the current model (an index
        setting or the model changed); not started yet."""
        self.remove(folder)
        return self.add(folder.root, settings, name=folder.name)

    def folder_of(self, path: str | Path) -> IndexedFolder | None:
        """The folder holding an absolute path (itself included), the deepest when they nest."""
        try:
            p = Path(path).expanduser().resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        best: IndexedFolder | None = None
        for root, folder in self._folders.items():
            if (p == root or root in p.parents) and (
                    best is None or len(root.parts) > len(best.root.parts)):
                best = folder
        return best

    def locate(self, path: str | Path) -> tuple[IndexedFolder, str] | None:
        """The folder of an absolute path and the path inside it; None outside every folder."""
        for folder in sorted(self._folders.values(), key=lambda f: -len(f.root.parts)):
            rel = folder.note_path(path)
            if rel:
                return folder, rel
        return None

    # ---- jobs -------------------------------------------------------------------------------

    def index(
        self,
        folder: IndexedFolder,
        *,
        rebuild: bool = False,
        progress: ProgressFn | None = None,
        cancel: CancelFn | None = None,
    ) -> Future[IndexReport | None]:
        """Open a folder's index and bring it up to date on its writer thread (see
        :meth:`IndexedFolder.start_index`: None when another process writes it)."""
        return folder.start_index(rebuild=rebuild, progress=progress, cancel=cancel)

    def changed(self, path: Path, exists: bool) -> int:
        """A file or folder changed on disk: queue what the index must do. The one rule every
        front end follows. How many notes were queued (a folder that went away, or a
        ``.gitignore``, counts one); 0: nothing of any folder's index is concerned.

        Whether a note is updated or deleted is decided by ``exists`` (the disk now), not by the
        kind of event, because an editor's atomic save arrives as a delete and a create in no
        useful order. A new folder queues the notes under it; a folder that went away drops the
        notes under it; a changed ``.gitignore`` re-reads the ignore rules and rescans, since it
        can add or drop any note.
        """
        found = self.locate(path)
        if found is None or not found[0].held:  # (its holder watches the notes itself)
            return 0
        folder, rel = found
        queued = 1
        if Path(path).name == ".gitignore":
            folder.refresh_ignores()
            self._on_rescan(folder)
        elif is_markdown(rel, folder.settings.include_formats):
            folder.queue(rel, "update" if exists else "delete")
        elif exists and Path(path).is_dir():
            notes = notes_under(folder, rel)
            for note in notes:
                folder.queue(note, "update")
            queued = len(notes)
            if not notes:
                return 0
        elif not exists and any(n.startswith(rel + "/") for n in folder.notes()):
            folder.queue(rel, "delete")  # the indexer drops every note under it
        else:
            return 0
        self.changes_seen += 1
        self.last_change = time.time()
        self._on_change()
        return queued

    def changed_all(self, events: Iterable[tuple[Path, bool]]) -> int:
        """:meth:`changed` for a batch of events, each ``.gitignore`` rescan done once per
        folder; how many notes were queued."""
        events = list(events)
        gitignores = {e for e in events if Path(e[0]).name == ".gitignore"}
        done = sum(self.changed(p, exists) for p, exists in events if (p, exists) not in gitignores)
        rescanned: set[Path] = set()
        for path, exists in gitignores:
            folder = self.folder_of(path)
            if folder is not None and folder.root not in rescanned:
                rescanned.add(folder.root)
                done += self.changed(path, exists)
        return done

    def settled(self, folders: Sequence[IndexedFolder] | None = None,
                timeout: float | None = None) -> bool:
        """Wait until the changes queued so far (to these folders, or all) are written; False
        when ``timeout`` passed first (a first index can take minutes)."""
        chosen = list(folders) if folders is not None else list(self._folders.values())
        waits = [f.settled() for f in chosen]
        deadline = None if timeout is None else time.monotonic() + timeout
        for fut in waits:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                fut.result(left)
            except TimeoutError:
                return False
            except Exception:
                continue  # the folder failed; its state says so
        return True

    # ---- reads (any thread) -----------------------------------------------------------------

    def search(
        self,
        request: SearchRequest,
        folders: Sequence[IndexedFolder] | None = None,
        *,
        per_folder: Callable[[IndexedFolder], SearchRequest | None] | None = None,
    ) -> list[tuple[IndexedFolder, Hit]]:
        """Search every (or the given) folder; the lists merge as the engine merges them (each
        folder's order kept, the most similar head first). ``per_folder`` adapts the request to
        a folder (a path filter meant for one of them), None leaving that folder out."""
        chosen = list(folders) if folders is not None else list(self._folders.values())
        lists: list[list[tuple[IndexedFolder, Hit]]] = []
        for folder in chosen:
            own = per_folder(folder) if per_folder is not None else request
            if own is not None:
                lists.append([(folder, h) for h in folder.search(own).hits])
        return merge_rankings(lists, request.k, lambda fh: fh[1].score)

    def wait_open(self, timeout: float) -> None:
        """Wait (at most ``timeout`` in all) until every folder tried its first open, so a
        request that arrives as the process starts does not answer "nothing indexed"."""
        deadline = time.monotonic() + timeout
        for folder in list(self._folders.values()):
            folder.wait_open(max(0.0, deadline - time.monotonic()))

    def status(self) -> dict[str, Any]:
        """One state for the process and each folder's status record."""
        folders = [f.status() for f in self._folders.values()]
        return {
            "state": overall_state([f["state"] for f in folders], self.model_state),
            "model": self.embedder.name,
            "model_state": self.model_state,
            "pid": os.getpid(),
            "folders": folders,
        }

    def index_state(self) -> dict[str, Any]:
        """One ``{"state", "files_done", "files_total"}`` over every folder's index, plus
        ``eta_seconds`` while building when there is a rate."""
        phases: list[str] = []
        done = total = 0
        etas: list[float] = []
        for folder in self._folders.values():
            st = folder.index_state()
            if folder.state == FolderState.ERROR:
                phases.append(IndexPhase.ERROR)
                continue
            phases.append(st.state)
            done += st.files_done
            total += st.files_total
            eta = folder.progress.eta()
            if st.state == IndexPhase.BUILDING and eta is not None:
                etas.append(eta)
        out: dict[str, Any] = {"state": overall_phase(phases), "files_done": done,
                               "files_total": total}
        if etas:
            out["eta_seconds"] = round(max(etas), 1)
        return out

    # ---- closing ----------------------------------------------------------------------------

    def close(self, timeout: float = 3.0) -> bool:
        """Stop answering and watching, and close every folder, in parallel; False when a
        writer did not stop within ``timeout`` (every index is then abandoned: locks released,
        the next open repairs a half-write)."""
        if self.watcher is not None:
            self.watcher.stop()
        with self._server_lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()
        folders = list(self._folders.values())
        self._folders.clear()
        threads = [threading.Thread(target=f.close, daemon=True, name=f"close-{f.name[:20]}")
                   for f in folders]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            for f in folders:
                f.abandon()
            return False
        return True

    def abandon(self) -> None:
        """The process is exiting now: release every index without waiting for writers."""
        if self._server is not None:
            self._server.close()
        for folder in list(self._folders.values()):
            folder.abandon()


def is_markdown(rel: str, formats: Sequence[str] = ()) -> bool:
    """Whether a file name is a note the index takes (by its suffix), or a document of a format
    ``formats`` (the folder's ``include_formats``) names."""
    return is_note_name(rel, formats)


def notes_under(folder: IndexedFolder, rel: str) -> list[str]:
    """Notes the index would take under a folder of a root (symlinks out are not followed)."""
    base = folder.root / rel
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            note = Path(dirpath, name).relative_to(folder.root).as_posix()
            if is_markdown(note, folder.settings.include_formats) and folder.accepts(note):
                out.append(note)
    return out


__all__ = ["Folders", "notes_under"]
