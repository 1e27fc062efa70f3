"""initialize / initialized / shutdown, settings, workspace folders, the first index.

``initialize`` only records what the client offers and answers at once; everything slow (the
model, opening Chroma, the first scan) starts after ``initialized``, in the background, with
progress, so the editor never waits on us.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from lsprotocol import types

from mdsearch_ls.config import Settings, settings_from_client
from mdsearch_ls.engine.embedder import ModelLoadError, create_embedder
from mdsearch_ls.lsp.progress import IndexProgress
from mdsearch_ls.lsp.server import (
    STATE_ERROR,
    STATE_INDEXING,
    STATE_LOADING,
    STATE_READY,
    FolderIndex,
    MdSearchServer,
    uri_to_path,
)

log = logging.getLogger(__name__)

# Settings whose change means a different index: the folders are reopened and rescanned.
_INDEX_FIELDS = ("include", "exclude", "index_dir", "model", "embedder_backend", "chunk_size",
                 "chunk_overlap", "max_file_bytes")

WATCH_GLOB = "**/*.{md,markdown}"


def _client_options(raw: Any) -> Any:
    """Accept both ``{...}`` and ``{"mdsearch": {...}}`` as initializationOptions."""
    if isinstance(raw, dict) and isinstance(raw.get("mdsearch"), dict):
        return raw["mdsearch"]
    return raw


def _warn_settings(ls: MdSearchServer, warnings: list[str]) -> None:
    for w in warnings:
        log.warning("%s", w)
        ls.show_message_threadsafe(f"mdsearch: {w}", types.MessageType.Warning)


def apply_settings(ls: MdSearchServer, options: Any, *, initial: bool = False) -> bool:
    """Merge client options; returns True when the index itself must be rebuilt.

    ``initializationOptions`` (``initial``) are layered over the defaults and kept;
    ``workspace/configuration`` answers are layered over those, so a client that sends only some
    keys through configuration does not lose what it gave at start.
    """
    base = Settings() if initial else ls.init_settings
    new, warnings = settings_from_client(_client_options(options), base)
    if initial:
        ls.init_settings = new
    _warn_settings(ls, warnings)
    old = ls.settings
    ls.settings = new
    changed = any(getattr(old, f) != getattr(new, f) for f in _INDEX_FIELDS)
    if old.model != new.model or old.embedder_backend != new.embedder_backend:
        ls.embedder = create_embedder(new)
        ls.model_state = "not-loaded"
    if not changed:
        for folder in ls.folders.values():
            if folder.ws is not None:
                # Search-only settings apply to open indexes at once.
                folder.ws.settings = new
                folder.ws.searcher.per_file = new.per_file
    return changed


def load_model(ls: MdSearchServer) -> None:
    """Load the shared model once, on its own thread, while the folders scan."""
    if ls.embedder.loaded or ls.model_state == "loading":
        return
    ls.model_state = "loading"
    ls.status_changed(force=True)
    embedder = ls.embedder

    def run() -> None:
        try:
            embedder.load()
            ls.model_state = "loaded"
            log.info("embedding model %s loaded", embedder.name)
        except ModelLoadError as exc:
            ls.model_state = "error"
            for folder in ls.folders.values():
                folder.last_error = str(exc)
            log.error("%s", exc)
            ls.show_message_threadsafe(f"mdsearch: {exc}", types.MessageType.Error)
        ls.status_changed(force=True)

    threading.Thread(target=run, name="mdsearch-model", daemon=True).start()


async def index_folder(ls: MdSearchServer, folder: FolderIndex, *, rebuild: bool = False) -> None:
    """Open the folder's index and bring it up to date, with work-done progress."""
    progress = IndexProgress(ls)
    folder.state = STATE_INDEXING if ls.embedder.loaded else STATE_LOADING
    ls.status_changed(force=True)
    await progress.begin(f"{folder.name}: scanning")

    def job() -> Any:
        folder.open()
        assert folder.ws is not None
        if folder.ws.read_only and not folder.take_over():
            return None  # another process is still the writer
        folder.state = STATE_INDEXING
        return folder.ws.index(
            progress=progress.report,
            cancel=lambda: folder.closed or progress.cancelled(),
            rebuild=rebuild,
        )

    try:
        report = await asyncio.wrap_future(folder.submit(job))
    except Exception as exc:
        folder.state = STATE_ERROR
        folder.last_error = str(exc)
        progress.end(f"{folder.name}: failed: {exc}")
        ls.status_changed(force=True)
        return
    if report is None:
        folder.state = STATE_READY
        folder.last_error = None
        progress.end(f"{folder.name}: read-only, another mdsearch process indexes it")
        ls.status_changed(force=True)
        return
    folder.last_report = report
    for w in report.warnings:
        log.warning("%s: %s", folder.name, w)
    log.info("%s: %s", folder.name, report.summary())
    folder.state = STATE_READY
    folder.last_error = None
    progress.end(f"{folder.name}: {report.summary()}")
    ls.status_changed(force=True)


def add_folder(ls: MdSearchServer, root: Path, name: str | None = None) -> FolderIndex | None:
    root = root.resolve()
    if root in ls.folders:
        return ls.folders[root]
    if not root.is_dir():
        log.warning("workspace folder %s is not a directory; not indexed", root)
        return None
    folder = FolderIndex(ls, root, name or root.name)
    ls.folders[root] = folder
    return folder


def start_folder(ls: MdSearchServer, folder: FolderIndex, *, rebuild: bool = False) -> None:
    task = asyncio.ensure_future(index_folder(ls, folder, rebuild=rebuild))
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Future[Any]] = set()


async def close_folder(ls: MdSearchServer, folder: FolderIndex) -> None:
    ls.folders.pop(folder.root, None)
    await asyncio.get_running_loop().run_in_executor(None, folder.close)


async def pull_configuration(ls: MdSearchServer) -> Any | None:
    caps = ls.client_capabilities.workspace
    if not (caps and caps.configuration):
        return None
    try:
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="mdsearch")])
            ),
            timeout=5,
        )
    except Exception as exc:
        log.info("workspace/configuration unavailable: %s", exc)
        return None
    return result[0] if result else None


async def register_watchers(ls: MdSearchServer) -> None:
    caps = ls.client_capabilities.workspace
    watched = caps.did_change_watched_files if caps else None
    dyn = watched is not None and watched.dynamic_registration
    if not dyn:
        log.info("client cannot watch files for us; changes outside the editor need a save")
        return
    try:
        await ls.client_register_capability_async(
            types.RegistrationParams(
                registrations=[
                    types.Registration(
                        id="mdsearch-watch-markdown",
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=types.DidChangeWatchedFilesRegistrationOptions(
                            watchers=[
                                types.FileSystemWatcher(glob_pattern=WATCH_GLOB),
                                types.FileSystemWatcher(glob_pattern="**/.gitignore"),
                            ]
                        ),
                    )
                ]
            )
        )
    except Exception as exc:
        log.info("file watcher registration refused: %s", exc)


def register(server: MdSearchServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls: MdSearchServer, params: types.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        window = params.capabilities.window
        ls.progress_support = bool(window and window.work_done_progress)
        apply_settings(ls, params.initialization_options, initial=True)
        if params.process_id:
            starter = getattr(ls, "start_parent_watch", None)
            if starter is not None:
                starter(params.process_id, ls)
        folders = params.workspace_folders or []
        if folders:
            for wf in folders:
                path = uri_to_path(wf.uri)
                if path is not None:
                    add_folder(ls, path, wf.name)
        elif params.root_uri or params.root_path:
            path = uri_to_path(params.root_uri) if params.root_uri else Path(params.root_path or "")
            if path is not None:
                add_folder(ls, path)
        if ls.settings.document_symbols:
            from mdsearch_ls.lsp.features import symbols

            symbols.register_document_symbols(ls)

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: MdSearchServer, params: types.InitializedParams) -> None:
        ls.initialized = True
        options = await pull_configuration(ls)
        if options is not None:
            apply_settings(ls, options)
        await register_watchers(ls)
        load_model(ls)
        for folder in list(ls.folders.values()):
            start_folder(ls, folder)
        if not ls.folders:
            log.info("no workspace folder: open a folder of notes to index it")
        ls.status_changed(force=True)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(
        ls: MdSearchServer, params: types.DidChangeConfigurationParams
    ) -> None:
        options = await pull_configuration(ls)
        if options is None:
            settings = params.settings
            options = settings.get("mdsearch") if isinstance(settings, dict) else None
        if options is None:
            return
        if apply_settings(ls, options):
            log.info("index settings changed: reopening every folder")
            for folder in list(ls.folders.values()):
                await close_folder(ls, folder)
                fresh = add_folder(ls, folder.root, folder.name)
                if fresh is not None:
                    start_folder(ls, fresh)
            load_model(ls)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(
        ls: MdSearchServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        for removed in params.event.removed or []:
            path = uri_to_path(removed.uri)
            folder = ls.folders.get(path.resolve()) if path else None
            if folder is not None:
                await close_folder(ls, folder)
                log.info("stopped indexing %s", folder.root)
        for added in params.event.added or []:
            path = uri_to_path(added.uri)
            if path is None:
                continue
            folder = add_folder(ls, path, added.name)
            if folder is not None and folder.ws is None and folder.state != STATE_INDEXING:
                start_folder(ls, folder)
        ls.status_changed(force=True)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: MdSearchServer, params: Any) -> None:
        for folder in list(ls.folders.values()):
            await close_folder(ls, folder)


__all__ = ["apply_settings", "index_folder", "register", "start_folder"]
