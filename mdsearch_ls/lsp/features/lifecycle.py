"""initialize / initialized / shutdown, configuration and workspace folders.

``initialize`` only records what the client offers and answers at once; everything slow (the
model, opening Chroma, the first scan) starts after ``initialized``, in the background, with
progress, so the editor never waits on us. Configuration is asked per workspace folder (its
``scopeUri``), so a setting a client scopes to one folder (VS Code's ``resource`` settings)
applies to that folder only; a change of a search setting applies at once, a change of an index
setting reopens just the folders it concerns.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.lsp.convert import path_to_uri, uri_to_path
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

CONFIG_TIMEOUT_S = 5.0


def folders_from_params(params: types.InitializeParams) -> list[tuple[Path, str | None]]:
    """The folders a client opens us on: its workspace folders, else its root."""
    found: list[tuple[Path, str | None]] = []
    for wf in params.workspace_folders or []:
        path = uri_to_path(wf.uri)
        if path is not None:
            found.append((path, wf.name))
    if not found and (params.root_uri or params.root_path):
        path = uri_to_path(params.root_uri) if params.root_uri else Path(params.root_path or "")
        if path is not None:
            found.append((path, None))
    return found


def on_initialize(manager: FolderManager, params: types.InitializeParams) -> None:
    """Record settings and folders; nothing slow."""
    manager.initialize(params.initialization_options)
    for path, name in folders_from_params(params):
        manager.add(path, name)


async def pull_configuration(ls: MdSearchServer) -> tuple[Any, dict[Path, Any]] | None:
    """``workspace/configuration``: the window's section and each folder's (by scopeUri)."""
    caps = ls.client_capabilities.workspace
    if not (caps and caps.configuration):
        return None
    roots = list(ls.manager.folders)
    items = [types.ConfigurationItem(section="mdsearch")] + [
        types.ConfigurationItem(section="mdsearch", scope_uri=path_to_uri(root)) for root in roots
    ]
    try:
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(types.ConfigurationParams(items=items)),
            timeout=CONFIG_TIMEOUT_S,
        )
    except Exception as exc:
        log.info("workspace/configuration unavailable: %s", exc)
        return None
    if not result:
        return None
    values = list(result) + [None] * (len(items) - len(result))
    window = values[0]
    per_folder = {root: values[i + 1] for i, root in enumerate(roots)
                  if values[i + 1] is not None}
    return window, per_folder


async def apply_configuration(ls: MdSearchServer, window: Any, per_folder: dict[Path, Any]) -> None:
    """Layer configuration over initializationOptions; reopen folders whose index changed."""
    reopen = ls.manager.configure(window, per_folder)
    if ls.initialized:
        ls.manager.load_model()
    for folder in reopen:
        log.info("%s: index settings changed; reopening it", folder.name)
        await ls.manager.reopen(folder)
    ls.status_changed(force=True)


async def register_configuration(ls: MdSearchServer) -> None:
    """Ask the client to tell us when an ``mdsearch`` setting changes: the server says what it
    needs, so a client needs no ``synchronize`` options (VS Code's are deprecated). Files are
    not asked for: the process that holds an index watches its notes itself."""
    caps = ls.client_capabilities.workspace
    config = caps.did_change_configuration if caps else None
    if config is None or not config.dynamic_registration:
        return
    # The section makes a client that pushes settings send ours (VS Code sends nothing for a
    # registration without one); the handler pulls each folder's values anyway.
    registration = types.Registration(id="mdsearch-configuration",
                                      method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                                      register_options={"section": "mdsearch"})
    try:
        await ls.client_register_capability_async(
            types.RegistrationParams(registrations=[registration]))
    except Exception as exc:
        log.info("registration of %s refused: %s", registration.method, exc)


def register(server: MdSearchServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: MdSearchServer, params: types.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        window = params.capabilities.window
        ls.progress_support = bool(window and window.work_done_progress)
        on_initialize(ls.manager, params)
        if params.process_id:
            ls.watch_parent(params.process_id)
        for hook in ls.initialize_hooks:
            hook(ls)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: MdSearchServer, params: types.InitializedParams) -> None:
        ls.initialized = True
        pulled = await pull_configuration(ls)
        if pulled is not None:
            ls.manager.configure(*pulled)
        await register_configuration(ls)
        ls.manager.load_model()
        for folder in list(ls.manager.folders.values()):
            ls.manager.start_soon(folder)
        if not ls.manager.folders:
            log.info("no workspace folder: open a folder of notes to index it")
        ls.status_changed(force=True)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: MdSearchServer, params: types.DidChangeConfigurationParams
    ) -> None:
        pulled = await pull_configuration(ls)
        if pulled is None:
            settings = params.settings
            options = settings.get("mdsearch") if isinstance(settings, dict) else None
            if options is None:
                return
            pulled = (options, {})
        await apply_configuration(ls, *pulled)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(
        ls: MdSearchServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        for removed in params.event.removed or []:
            path = uri_to_path(removed.uri)
            folder = ls.manager.folders.get(path.resolve()) if path else None
            if folder is not None:
                await ls.manager.close(folder)
                log.info("stopped indexing %s", folder.root)
        for added in params.event.added or []:
            path = uri_to_path(added.uri)
            if path is None:
                continue
            known = path.resolve() in ls.manager.folders
            folder = ls.manager.add(path, added.name)
            if folder is not None and not known:
                ls.manager.start_soon(folder)
        ls.status_changed(force=True)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: MdSearchServer, params: Any) -> None:
        for folder in list(ls.manager.folders.values()):
            await ls.manager.close(folder)


__all__ = ["apply_configuration", "folders_from_params", "on_initialize", "register"]
