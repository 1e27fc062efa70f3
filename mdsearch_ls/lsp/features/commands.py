"""workspace/executeCommand: mdsearch.search, mdsearch.related, mdsearch.reindex, mdsearch.status.

Arguments are one JSON object (positional extras are rejected); anything malformed is an
InvalidParams error whose message says what was expected, never a crash. The rules for what a
search or related request may hold live in the engine (``SearchRequest``/``RelatedRequest``), so
these commands accept exactly what the CLI and the MCP tools accept. Results are plain JSON: the
CLI's ``--json`` hit fields plus ``uri`` and ``root``, so clients need no LSP types.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from mdsearch_ls.engine.api import (
    IndexedFolder,
    RelatedRequest,
    RequestError,
    SearchRequest,
    is_document,
)
from mdsearch_ls.lsp.convert import hit_json, uri_to_path
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

SEARCH, RELATED, REINDEX, STATUS = "mdsearch.search", "mdsearch.related", "mdsearch.reindex", \
    "mdsearch.status"
SEARCH_USAGE = ('{"query": string, "limit"?: number, "root"?: string, "mode"?: string, '
                '"filters"?: {"path"|"tag"|"type"|"modified"|"phrase": string | string[]}}')
RELATED_USAGE = ('{"uri": string, "line": number (0-based), "limit"?: number, '
                 '"minScore"?: number}')


def _one_object(name: str, args: tuple[Any, ...], usage: str, *, optional: bool = False) -> dict:
    if not args and optional:
        return {}
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams(f"{name} expects one argument object {usage}")
    return args[0]


def _folders_for(manager: FolderManager, root: Any, name: str) -> list[IndexedFolder]:
    if root is None:
        return list(manager.folders.values())
    if not isinstance(root, str) or not root:
        raise JsonRpcInvalidParams(f"{name}: 'root' must be a folder path or file URI")
    path = uri_to_path(root) if "://" in root else Path(root)
    folder = manager.service.folder_of(path) if path is not None else None
    if folder is None or (path is not None and path.resolve() != folder.root):
        known = ", ".join(str(f.root) for f in manager.folders.values()) or "none"
        raise JsonRpcInvalidParams(f"{name}: {root!r} is not a workspace folder (folders: {known})")
    return [folder]


async def search(manager: FolderManager, args: tuple[Any, ...]) -> list[dict[str, Any]]:
    params = _one_object(SEARCH, args, SEARCH_USAGE)
    folders = _folders_for(manager, params.get("root"), SEARCH)
    unknown = sorted(set(params) - {"query", "limit", "root", "mode", "filters"})
    if unknown:
        raise JsonRpcInvalidParams(f"{SEARCH}: unknown argument {unknown[0]!r}; "
                                   f"expected {SEARCH_USAGE}")
    try:
        request = SearchRequest.build(
            params.get("query"), k=params.get("limit"), mode=params.get("mode"),
            filters=params.get("filters"), default_k=manager.settings.max_results,
        )
    except RequestError as exc:
        raise JsonRpcInvalidParams(f"{SEARCH}: {exc}; expected {SEARCH_USAGE}") from None
    if request.empty:
        return []
    found = await manager.run(manager.service.search, request, folders)
    return [hit_json(folder.root, hit) for folder, hit in found]


async def related(
    manager: FolderManager, args: tuple[Any, ...], documents: Any
) -> list[dict[str, Any]]:
    params = _one_object(RELATED, args, RELATED_USAGE)
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams(f"{RELATED}: 'uri' must be a file URI; expected {RELATED_USAGE}")
    folder_settings = manager.settings
    try:
        request = RelatedRequest.build(
            uri, params.get("line"), text=documents(uri),
            k=params.get("limit", folder_settings.hover_max_results),
            min_score=params.get("minScore", -1.0),
        )
    except RequestError as exc:
        raise JsonRpcInvalidParams(f"{RELATED}: {exc}") from None
    found = manager.rel_for(uri, documents=True)
    if found is None:
        raise JsonRpcInvalidParams(f"{RELATED}: {uri} is not inside a workspace folder")
    folder, rel = found
    if is_document(rel):  # its text is the converted one on disk, never a buffer
        request = dataclasses.replace(request, text=None)
    if request.text is None and not (folder.root / rel).is_file():
        raise JsonRpcInvalidParams(f"{RELATED}: {uri} does not exist")
    result = await manager.run(folder.related, dataclasses.replace(request, path=rel))
    return [hit_json(folder.root, hit) for hit in result.hits]


def reindex(manager: FolderManager, args: tuple[Any, ...]) -> dict[str, Any]:
    params = _one_object(REINDEX, args, '{"root"?: string}', optional=True)
    folders = _folders_for(manager, params.get("root"), REINDEX)
    for folder in folders:
        manager.start_soon(folder, rebuild=True)
    return {"started": True, "folders": [str(f.root) for f in folders]}


def status(manager: FolderManager, args: tuple[Any, ...]) -> dict[str, Any]:
    if args and not (len(args) == 1 and isinstance(args[0], dict | None)):
        raise JsonRpcInvalidParams(f"{STATUS} takes no arguments (or one empty object)")
    return manager.status()


def register(server: MdSearchServer) -> None:
    # pygls resolves a command handler's type hints at run time (to read its arguments), and the
    # server type is imported for annotations only (lsp/app.py is the composition root): ``Any``.
    @server.command(SEARCH)
    async def on_search(ls: Any, *args: Any) -> list[dict[str, Any]]:
        return await search(ls.manager, args)

    @server.command(RELATED)
    async def on_related(ls: Any, *args: Any) -> list[dict[str, Any]]:
        return await related(ls.manager, args, ls.document_text)

    @server.command(REINDEX)
    async def on_reindex(ls: Any, *args: Any) -> dict[str, Any]:
        return reindex(ls.manager, args)

    @server.command(STATUS)
    def on_status(ls: Any, *args: Any) -> dict[str, Any]:
        return status(ls.manager, args)
