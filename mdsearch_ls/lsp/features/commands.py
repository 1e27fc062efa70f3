"""workspace/executeCommand: mdsearch.search, mdsearch.related, mdsearch.reindex, mdsearch.status.

Arguments are one JSON object (positional extras are rejected); anything malformed is an
InvalidParams error whose message says what was expected, never a crash. Results are plain JSON:
the CLI's ``--json`` hit fields plus ``uri`` and ``root``, so clients need no LSP types.
"""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mdsearch_ls.config import MODES
from mdsearch_ls.engine.query import QueryError, structured_filters
from mdsearch_ls.engine.search import Hit
from mdsearch_ls.lsp.features.symbols import hit_uri, run_in_pool, search_folders
from mdsearch_ls.lsp.server import FolderIndex, MdSearchServer, uri_to_path

log = logging.getLogger(__name__)

SEARCH, RELATED, REINDEX, STATUS = "mdsearch.search", "mdsearch.related", "mdsearch.reindex", \
    "mdsearch.status"


def _one_object(name: str, args: tuple[Any, ...], usage: str, *, optional: bool = False) -> dict:
    if not args and optional:
        return {}
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams(f"{name} expects one argument object {usage}")
    return args[0]


def _hit_json(folder: FolderIndex, hit: Hit) -> dict[str, Any]:
    out = hit.to_json()
    out["uri"] = hit_uri(folder, hit)
    out["root"] = str(folder.root)
    return out


def _folders_for(ls: MdSearchServer, root: Any, name: str) -> list[FolderIndex]:
    if root is None:
        return list(ls.folders.values())
    if not isinstance(root, str) or not root:
        raise JsonRpcInvalidParams(f"{name}: 'root' must be a folder path or file URI")
    path = uri_to_path(root) if "://" in root else None
    if path is None and "://" not in root:
        from pathlib import Path

        path = Path(root)
    folder = ls.folder_for(path) if path is not None else None
    if folder is None or (path is not None and path.resolve() != folder.root):
        known = ", ".join(str(f.root) for f in ls.folders.values()) or "none"
        raise JsonRpcInvalidParams(f"{name}: {root!r} is not a workspace folder (folders: {known})")
    return [folder]


def _limit(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 500:
        raise JsonRpcInvalidParams(f"{name}: 'limit' must be a whole number from 1 to 500")
    return value


def register(server: MdSearchServer) -> None:
    @server.command(SEARCH)
    async def search(ls: MdSearchServer, *args: Any) -> list[dict[str, Any]]:
        usage = ('{"query": string, "limit"?: number, "root"?: string, "mode"?: string, '
                 '"filters"?: {"path"|"tag"|"type"|"modified"|"phrase": string | string[]}}')
        params = _one_object(SEARCH, args, usage)
        query = params.get("query")
        if not isinstance(query, str):
            raise JsonRpcInvalidParams(f"{SEARCH}: 'query' must be a string; expected {usage}")
        limit = _limit(params.get("limit"), ls.settings.max_results, SEARCH)
        mode = params.get("mode")
        if mode is not None and mode not in MODES:
            raise JsonRpcInvalidParams(f"{SEARCH}: 'mode' must be one of {', '.join(MODES)}")
        folders = _folders_for(ls, params.get("root"), SEARCH)
        raw_filters = params.get("filters")
        if raw_filters is not None and not isinstance(raw_filters, dict):
            raise JsonRpcInvalidParams(f"{SEARCH}: 'filters' must be an object; expected {usage}")
        try:
            filters = structured_filters(**raw_filters) if raw_filters else None
        except QueryError as exc:
            raise JsonRpcInvalidParams(f"{SEARCH}: {exc}") from None
        if not query.strip() and not (filters and filters.phrases):
            return []
        try:
            found = await run_in_pool(
                ls,
                lambda: search_folders(ls, query, limit, mode=mode, folders=folders,
                                       filters=filters),
            )
        except QueryError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        return [_hit_json(folder, hit) for folder, hit in found]

    @server.command(RELATED)
    async def related(ls: MdSearchServer, *args: Any) -> list[dict[str, Any]]:
        usage = '{"uri": string, "line": number (0-based), "limit"?: number}'
        params = _one_object(RELATED, args, usage)
        uri, line = params.get("uri"), params.get("line")
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{RELATED}: 'uri' must be a file URI; expected {usage}")
        if isinstance(line, bool) or not isinstance(line, int) or line < 0:
            raise JsonRpcInvalidParams(f"{RELATED}: 'line' must be a 0-based line number")
        limit = _limit(params.get("limit"), ls.settings.hover_max_results, RELATED)
        found = ls.rel_for(uri)
        if found is None:
            raise JsonRpcInvalidParams(f"{RELATED}: {uri} is not inside a workspace folder")
        folder, rel = found
        ws = folder.ws
        if ws is None:
            return []
        doc = ls.workspace.text_documents.get(uri)
        text = doc.source if doc is not None else None
        if text is None and not (folder.root / rel).is_file():
            raise JsonRpcInvalidParams(f"{RELATED}: {uri} does not exist")
        result = await run_in_pool(
            ls, lambda: ws.related(rel, line, text=text, k=limit, min_score=-1.0)
        )
        return [_hit_json(folder, hit) for hit in result.hits]

    @server.command(REINDEX)
    async def reindex(ls: MdSearchServer, *args: Any) -> dict[str, Any]:
        from mdsearch_ls.lsp.features.lifecycle import start_folder

        params = _one_object(REINDEX, args, '{"root"?: string}', optional=True)
        folders = _folders_for(ls, params.get("root"), REINDEX)
        for folder in folders:
            start_folder(ls, folder, rebuild=True)
        return {"started": True, "folders": [str(f.root) for f in folders]}

    @server.command(STATUS)
    def status(ls: MdSearchServer, *args: Any) -> dict[str, Any]:
        if args and not (len(args) == 1 and isinstance(args[0], dict | None)):
            raise JsonRpcInvalidParams(f"{STATUS} takes no arguments (or one empty object)")
        return ls.status_payload()
