"""The folder manager: the one service every language-server feature depends on.

It owns the workspace folders (each an :class:`IndexedFolder`, with its writer thread), their
settings (per folder: ``workspace/configuration`` is asked per folder scope), the shared model
and its loading, and the status the client shows. Features ask it to find the folder of a URI,
to search, to queue a change; they never import each other, and none of them touches the engine
past its seam. It knows nothing of pygls: the server gives it callbacks for what must reach the
client (status, messages, progress), so features can be tested in-process with a fake model.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings, differs, settings_from_client
from mdsearch_ls.engine.api import (
    STATE_ERROR,
    STATE_INDEXING,
    STATE_LOADING,
    STATE_READY,
    STATE_STARTING,
    Embedder,
    Hit,
    IndexedFolder,
    IndexReport,
    SearchRequest,
    WritingAids,
    create_embedder,
    load_in_background,
    merge_rankings,
)
from mdsearch_ls.lsp.convert import path_to_uri, uri_to_path

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str], Any]
"""Makes a work-done progress for a title; the result has ``begin(message)`` (awaitable),
``report(done, total, chunks)`` (any thread), ``cancelled()`` and ``end(message)``."""


class FolderManager:
    """Workspace folders, their settings and indexes, the shared model, the status."""

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        on_status: Callable[[], None] | None = None,
        on_message: Callable[[str, str], None] | None = None,
        pool: Executor | None = None,
    ) -> None:
        self.init_settings = Settings()
        """Defaults + ``initializationOptions``; per-folder configuration layers over these."""
        self.settings = Settings()
        """The window-wide settings (model, server options, and defaults for new folders)."""
        self.folder_options: dict[Path, Any] = {}
        self._fixed_embedder = embedder is not None
        self.embedder: Embedder = embedder or create_embedder(self.settings)
        self._model_settings = self.settings
        self.model_state = "loaded" if getattr(self.embedder, "loaded", True) else "not-loaded"
        self.folders: dict[Path, IndexedFolder] = {}
        self._on_status = on_status or (lambda: None)
        self._on_message = on_message or (lambda text, level: None)
        self.pool: Executor = pool or ThreadPoolExecutor(4, thread_name_prefix="mdsearch-read")
        self._background: set[asyncio.Future[Any]] = set()
        self.ready_hooks: list[Callable[[IndexedFolder], None]] = []
        """Called on the loop when a folder's index has been brought up to date (features that
        need the whole index, like diagnostics, refresh the open documents then)."""

    # ---- settings ---------------------------------------------------------------------------

    def warn(self, warnings: Sequence[str]) -> None:
        for w in warnings:
            log.warning("%s", w)
            self._on_message(f"mdsearch: {w}", "warning")

    def initialize(self, options: Any) -> None:
        """``initializationOptions``: layered over the defaults and kept as every folder's base."""
        self.init_settings, warnings = settings_from_client(_section(options), Settings())
        self.warn(warnings)
        self.settings = self.init_settings
        self._embedder_for(self.settings)

    def settings_for(self, root: Path) -> Settings:
        """A folder's settings: its own configuration over the window's."""
        options = self.folder_options.get(root)
        if options is None:
            return self.settings
        merged, _ = settings_from_client(options, self.settings)
        return merged

    def configure(self, window: Any, per_folder: dict[Path, Any]) -> list[IndexedFolder]:
        """New configuration (window-wide and per folder). Search settings apply at once; the
        folders whose index settings changed are returned, for the caller to reopen."""
        new_window, warnings = settings_from_client(_section(window), self.init_settings)
        self.warn(warnings)
        self.settings = new_window
        for root, options in per_folder.items():
            _, folder_warnings = settings_from_client(_section(options), new_window)
            self.warn([w for w in folder_warnings if w not in warnings])
            self.folder_options[root] = _section(options)
        model_changed = self._embedder_for(new_window)
        reopen: list[IndexedFolder] = []
        for root, folder in list(self.folders.items()):
            wanted = self.settings_for(root)
            if folder.ws is None and folder.state == STATE_STARTING:
                if model_changed:  # never started: just make it anew with the new model
                    folder.close()
                    del self.folders[root]
                    self.add(root, folder.name)
                else:
                    folder.apply_settings(wanted)
            elif model_changed or not folder.apply_settings(wanted):
                reopen.append(folder)
        return reopen

    def _embedder_for(self, settings: Settings) -> bool:
        """A new model when the model settings changed; True when it did."""
        current, self._model_settings = self._model_settings, settings
        if self._fixed_embedder:
            return False
        if not differs(current, settings, ("model", "embedder_backend")):
            return False
        self.embedder = create_embedder(settings)
        self.model_state = "not-loaded"
        return True

    # ---- the model --------------------------------------------------------------------------

    def load_model(self, progress: ProgressFactory | None = None) -> None:
        """Load the shared model once, on its own thread, while the folders scan; with
        ``progress``, a "Loading model" work-done progress runs until it is loaded."""
        if getattr(self.embedder, "loaded", True) or self.model_state == "loading":
            if getattr(self.embedder, "loaded", True):
                self.model_state = "loaded"
            return
        self.model_state = "loading"
        self._on_status()
        embedder = self.embedder
        bar = progress("Loading model") if progress is not None else None
        if bar is not None:
            task = asyncio.ensure_future(bar.begin(embedder.name))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        def done(error: Exception | None) -> None:
            if bar is not None:
                bar.end("loaded" if error is None else f"failed: {error}")
            if embedder is not self.embedder:
                return  # replaced meanwhile by a settings change
            if error is None:
                self.model_state = "loaded"
                log.info("embedding model %s loaded", embedder.name)
            else:
                self.model_state = "error"
                for folder in self.folders.values():
                    folder.last_error = str(error)
                log.error("%s", error)
                self._on_message(f"mdsearch: {error}", "error")
            self._on_status()

        load_in_background(embedder, done)

    # ---- folders ----------------------------------------------------------------------------

    def add(self, root: Path, name: str | None = None) -> IndexedFolder | None:
        root = root.resolve()
        if root in self.folders:
            return self.folders[root]
        if not root.is_dir():
            log.warning("workspace folder %s is not a directory; not indexed", root)
            return None
        folder = IndexedFolder(
            root, self.settings_for(root), self.embedder, name=name or root.name,
            on_change=self._on_status, on_message=self._on_message,
        )
        self.folders[root] = folder
        return folder

    async def start(
        self,
        folder: IndexedFolder,
        *,
        rebuild: bool = False,
        progress: ProgressFactory | None = None,
    ) -> IndexReport | None:
        """Open the folder's index and bring it up to date, with work-done progress."""
        bar = progress("Indexing notes") if progress is not None else None
        if bar is not None:
            await bar.begin(f"{folder.name}: scanning")
        fut = folder.start_index(
            rebuild=rebuild,
            progress=bar.report if bar is not None else None,
            cancel=bar.cancelled if bar is not None else None,
        )
        try:
            report = await asyncio.wrap_future(fut)
        except Exception as exc:
            if bar is not None:
                bar.end(f"{folder.name}: failed: {exc}")
            return None
        if bar is not None:
            bar.end(f"{folder.name}: " + (
                report.summary() if report is not None
                else "read-only, another mdsearch process indexes it"))
        self._on_status()
        for hook in self.ready_hooks:
            try:
                hook(folder)
            except Exception:
                log.exception("ready hook failed for %s", folder.name)
        return report

    def start_soon(self, folder: IndexedFolder, **kwargs: Any) -> asyncio.Future[Any]:
        """:meth:`start` in the background (handlers must answer at once)."""
        task = asyncio.ensure_future(self.start(folder, **kwargs))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def close(self, folder: IndexedFolder) -> None:
        self.folders.pop(folder.root, None)
        await asyncio.get_running_loop().run_in_executor(None, folder.close)

    async def reopen(self, folder: IndexedFolder, **kwargs: Any) -> IndexedFolder | None:
        """Close a folder and open it again with its current settings (an index setting
        changed), then index it in the background."""
        await self.close(folder)
        fresh = self.add(folder.root, folder.name)
        if fresh is not None:
            self.start_soon(fresh, **kwargs)
        return fresh

    def close_all_now(self) -> None:
        """The process is exiting: release every index without waiting."""
        for folder in list(self.folders.values()):
            folder.abandon()

    def folder_for(self, uri_or_path: str | Path) -> IndexedFolder | None:
        """The folder holding a document; the innermost when folders nest."""
        if isinstance(uri_or_path, str) and "://" in uri_or_path:
            path = uri_to_path(uri_or_path)
        else:
            path = Path(uri_or_path)
        if path is None:
            return None
        try:
            path = path.resolve()
        except OSError:
            return None
        best: IndexedFolder | None = None
        for root, folder in self.folders.items():
            inside = path == root or root in path.parents
            if inside and (best is None or len(root.parts) > len(best.root.parts)):
                best = folder
        return best

    def rel_for(self, uri: str) -> tuple[IndexedFolder, str] | None:
        """The folder of a document and the document's path relative to it."""
        folder = self.folder_for(uri)
        path = uri_to_path(uri)
        if folder is None or path is None:
            return None
        rel = folder.note_path(path)
        return None if rel is None else (folder, rel)

    def writing_for(
        self, uri: str, enabled: Callable[[Settings], bool] | None = None,
    ) -> tuple[IndexedFolder, str, WritingAids] | None:
        """A document's folder, its path there and the folder's writing aids; None outside every
        folder, before the index is open, or when ``enabled`` says the asking feature is off
        (a writing feature then answers nothing rather than an error: the editor asked on its
        own, not the user)."""
        found = self.rel_for(uri)
        if found is None:
            return None
        folder, rel = found
        aids = folder.writing
        if aids is None or (enabled is not None and not enabled(folder.settings)):
            return None
        return folder, rel, aids

    def queue(self, uri: str, op: str) -> bool:
        """Queue a change of the note at ``uri``; False when it is outside every folder."""
        found = self.rel_for(uri)
        if found is None:
            return False
        folder, rel = found
        folder.queue(rel, op)
        self._on_status()
        return True

    async def settled(self, folder: IndexedFolder) -> None:
        """Wait until the changes queued to a folder so far are written (its writer runs jobs in
        order, so a no-op job finishes after them)."""
        await asyncio.wrap_future(folder.submit(lambda: None))

    # ---- reads ------------------------------------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Blocking work on a reader thread. Yields once first, so a request the client cancels
        right away is never computed."""
        await asyncio.sleep(0)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def search(
        self, request: SearchRequest, folders: Sequence[IndexedFolder] | None = None
    ) -> list[tuple[IndexedFolder, Hit]]:
        """Search every (or the given) folder; several folders merge as the engine merges them
        (each folder's own order kept), so the MCP server's order is the same."""
        chosen = list(folders) if folders is not None else list(self.folders.values())
        lists = [[(folder, h) for h in folder.search(request).hits] for folder in chosen]
        return merge_rankings(lists, request.k, lambda fh: fh[1].score)

    # ---- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What status bars show: one state for the server, and each folder's details."""
        folders = [{**f.status(), "uri": path_to_uri(f.root)} for f in self.folders.values()]
        states = {f["state"] for f in folders}
        if STATE_ERROR in states and len(states) == 1:
            state = STATE_ERROR
        elif self.model_state == "loading":
            state = STATE_LOADING
        elif states & {STATE_INDEXING, STATE_STARTING, STATE_LOADING}:
            state = STATE_INDEXING
        elif STATE_ERROR in states:
            state = STATE_ERROR
        else:
            state = STATE_READY
        return {"state": state, "model": self.embedder.name, "pid": os.getpid(),
                "folders": folders}


def _section(options: Any) -> Any:
    """Accept both ``{...}`` and ``{"mdsearch": {...}}``."""
    if isinstance(options, dict) and isinstance(options.get("mdsearch"), dict):
        return options["mdsearch"]
    return options


__all__ = ["FolderManager"]
