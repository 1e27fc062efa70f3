"""The folder manager: the one service every language-server feature depends on.

The engine's :class:`Folders` keeps the workspace folders indexed (each an :class:`IndexedFolder`
with its writer thread), owns the shared model and its loading, and turns file events into index
jobs by one rule. This adds what only the language server has: settings per folder scope
(``workspace/configuration`` is asked per folder), URIs, work-done progress, and the status the
client shows. Features ask it to find the folder of a URI and to search; they never import each
other, and none of them touches the engine past its seam. It knows nothing of pygls: the server
gives it callbacks for what must reach the client (status, messages, progress, the event loop),
so features can be tested in-process with a fake model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings, settings_from_client
from mdsearch_ls.engine.api import (
    Embedder,
    Folders,
    FolderState,
    IndexedFolder,
    IndexReport,
    WritingAids,
    is_document,
)
from mdsearch_ls.lsp.convert import path_to_uri, uri_to_path

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str], Any]
"""Makes a work-done progress for a title; the result has ``begin(message)`` (awaitable),
``report(done, total, chunks)`` (any thread), ``cancelled()`` and ``end(message)``."""


class FolderManager:
    """The language server's view of the engine's :class:`Folders`: per-folder configuration
    scopes, URIs, work-done progress and the hooks features register."""

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        on_status: Callable[[], None] | None = None,
        on_message: Callable[[str, str], None] | None = None,
        pool: Executor | None = None,
        progress: ProgressFactory | None = None,
        call_soon: Callable[..., None] | None = None,
    ) -> None:
        """``progress``: how indexing shows progress in the client. ``call_soon``: run a
        function on the event loop, from any thread (the engine's watcher asks for rescans from
        its own)."""
        self.init_settings = Settings()
        """Defaults + ``initializationOptions``; per-folder configuration layers over these."""
        self.settings = Settings()
        """The window-wide settings (model, server options, and defaults for new folders)."""
        self.folder_options: dict[Path, Any] = {}
        self._on_status = on_status or (lambda: None)
        self._on_message = on_message or (lambda text, level: None)
        self.progress = progress
        self._call_soon = call_soon or (lambda fn, *args: fn(*args))
        self.service = Folders(self.settings, embedder=embedder, on_change=self._on_status,
                               on_message=self._on_message,
                               on_rescan=lambda folder: self._call_soon(self.start_soon, folder))
        self.pool: Executor = pool or ThreadPoolExecutor(4, thread_name_prefix="mdsearch-read")
        self._background: set[asyncio.Future[Any]] = set()
        self.ready_hooks: list[Callable[[IndexedFolder], None]] = []
        """Called on the loop when a folder's index has been brought up to date (features that
        need the whole index, like diagnostics, refresh the open documents then)."""

    @property
    def folders(self) -> dict[Path, IndexedFolder]:
        return self.service.by_root

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
        self.service.use_model(self.settings)

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
        model_changed = self.service.use_model(new_window)
        reopen: list[IndexedFolder] = []
        for root, folder in self.folders.items():
            wanted = self.settings_for(root)
            if folder.state == FolderState.STARTING:  # never started: made anew, at no cost
                self.service.reopen(folder, wanted)
            elif model_changed or not folder.apply_settings(wanted):
                reopen.append(folder)
        return reopen

    # ---- the model --------------------------------------------------------------------------

    def load_model(self) -> None:
        """Load the shared model once, on its own thread, while the folders scan, with a
        "Loading model" work-done progress until it is loaded."""
        bar = self.progress("Loading model") if self.progress is not None else None

        def done(error: Exception | None) -> None:
            if bar is not None:
                bar.end("loaded" if error is None else f"failed: {error}")

        if self.service.load_model(done) and bar is not None:  # (False: loaded or loading)
            self._spawn(bar.begin(self.service.embedder.name))

    # ---- folders ----------------------------------------------------------------------------

    def add(self, root: Path, name: str | None = None) -> IndexedFolder | None:
        root = root.resolve()
        return self.service.add(root, self.settings_for(root), name=name or root.name)

    async def start(self, folder: IndexedFolder, *, rebuild: bool = False) -> IndexReport | None:
        """Open the folder's index and bring it up to date, with work-done progress."""
        bar = self.progress("Indexing notes") if self.progress is not None else None
        if bar is not None:
            await bar.begin(f"{folder.name}: scanning")
        try:
            report = await asyncio.wrap_future(self.service.index(
                folder,
                rebuild=rebuild,
                progress=bar.report if bar is not None else None,
                cancel=bar.cancelled if bar is not None else None,
            ))
        except Exception as exc:  # (the folder says why: its state, and a message once)
            if bar is not None:
                bar.end(f"{folder.name}: failed: {exc}")
            return None
        if bar is not None:
            bar.end(f"{folder.name}: " + (
                report.summary() if report is not None
                else "another mdsearch process indexes it"))
        self._on_status()
        for hook in self.ready_hooks:
            try:
                hook(folder)
            except Exception:
                log.exception("ready hook failed for %s", folder.name)
        return report

    def start_soon(self, folder: IndexedFolder, *, rebuild: bool = False) -> None:
        """:meth:`start` in the background (handlers must answer at once)."""
        self._spawn(self.start(folder, rebuild=rebuild))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self, folder: IndexedFolder) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.service.remove, folder)

    async def reopen(self, folder: IndexedFolder) -> IndexedFolder | None:
        """Close a folder and open it again with its current settings (an index setting
        changed), then index it in the background."""
        await self.close(folder)
        fresh = self.add(folder.root, folder.name)
        if fresh is not None:
            self.start_soon(fresh)
        return fresh

    def folder_for(self, uri: str) -> IndexedFolder | None:
        """The folder holding a document; the innermost when folders nest."""
        path = uri_to_path(uri)
        return None if path is None else self.service.folder_of(path)

    def rel_for(
        self, uri: str, *, documents: bool = False
    ) -> tuple[IndexedFolder, str] | None:
        """The folder of a document and the document's path relative to it. None for a file
        read through a converter (a PDF, a notebook: ``include_formats``) unless ``documents``:
        the editor's buffer of such a file is not its indexed text, so hover, completion,
        lenses and diagnostics offer nothing there (its hits are still listed by search)."""
        path = uri_to_path(uri)
        found = self.service.locate(path) if path is not None else None
        if found is None or (not documents and is_document(found[1])):
            return None
        return found

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

    # ---- reads ------------------------------------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Blocking work on a reader thread. Yields once first, so a request the client cancels
        right away is never computed."""
        await asyncio.sleep(0)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # ---- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What status bars show: one state for the server, and each folder's details."""
        status = self.service.status()
        for f in status["folders"]:
            f["uri"] = path_to_uri(Path(f["root"]))
        return status


def _section(options: Any) -> Any:
    """Accept both ``{...}`` and ``{"mdsearch": {...}}``."""
    if isinstance(options, dict) and isinstance(options.get("mdsearch"), dict):
        return options["mdsearch"]
    return options


__all__ = ["FolderManager"]
