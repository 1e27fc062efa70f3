"""Keeping the index fresh: saves, opens, file-watcher events, renames and deletes.

Every event becomes a per-file entry in the folder's queue; the folder's single writer drains it.
Saves that arrive while the first index runs simply wait in the queue, and two saves of one file
before the writer gets to it cost one update: the latest state of the file on disk wins.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from mdsearch_ls.engine.api import MARKDOWN_SUFFIXES
from mdsearch_ls.lsp.server import MdSearchServer, uri_to_path

log = logging.getLogger(__name__)

MARKDOWN_FILTER = types.FileOperationRegistrationOptions(
    filters=[
        types.FileOperationFilter(
            scheme="file", pattern=types.FileOperationPattern(glob="**/*.{md,markdown}")
        ),
        types.FileOperationFilter(
            scheme="file",
            pattern=types.FileOperationPattern(
                glob="**/*", matches=types.FileOperationPatternKind.Folder
            ),
        ),
    ]
)


def _is_markdown(uri: str) -> bool:
    return uri.lower().endswith(MARKDOWN_SUFFIXES)


def queue_uri(ls: MdSearchServer, uri: str, op: str) -> bool:
    """Queue ``op`` for the note at ``uri``; False when it is outside every folder."""
    found = ls.rel_for(uri)
    if found is None:
        return False
    folder, rel = found
    folder.queue(rel, op)
    ls.status_changed()
    return True


def rescan(ls: MdSearchServer, uri: str) -> None:
    """A folder appeared, or a .gitignore changed: a full (incremental) scan settles it."""
    from mdsearch_ls.lsp.features.lifecycle import start_folder

    folder = ls.folder_for(uri)
    if folder is None:
        return
    if folder.ws is not None and not folder.ws.read_only:
        folder.submit(folder.ws.refresh_ignores)
    start_folder(ls, folder)


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MdSearchServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        if not _is_markdown(uri):
            return
        found = ls.rel_for(uri)
        if found is None:
            return
        folder, rel = found
        ws = folder.ws
        # Only notes the index does not know yet; a known one is refreshed on save.
        if ws is not None and not ws.is_indexed(rel) and folder.state == "ready":
            folder.queue(rel, "update")

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: MdSearchServer, params: types.DidSaveTextDocumentParams) -> None:
        if _is_markdown(params.text_document.uri):
            queue_uri(ls, params.text_document.uri, "update")

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MdSearchServer, params: types.DidCloseTextDocumentParams) -> None:
        return None

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: MdSearchServer, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            uri = change.uri
            if uri.endswith("/.gitignore"):
                rescan(ls, uri)
                continue
            path = uri_to_path(uri)
            if change.type == types.FileChangeType.Deleted:
                # Also a deleted folder: the indexer drops every note under it.
                queue_uri(ls, uri, "delete")
            elif _is_markdown(uri):
                queue_uri(ls, uri, "update")
            elif path is not None and path.is_dir():
                rescan(ls, uri)

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, MARKDOWN_FILTER)
    def did_rename(ls: MdSearchServer, params: types.RenameFilesParams) -> None:
        for f in params.files:
            queue_uri(ls, f.old_uri, "delete")
            new_path = uri_to_path(f.new_uri)
            if new_path is not None and new_path.is_dir():
                rescan(ls, f.new_uri)
            elif _is_markdown(f.new_uri):
                queue_uri(ls, f.new_uri, "update")

    @server.feature(types.WORKSPACE_DID_DELETE_FILES, MARKDOWN_FILTER)
    def did_delete(ls: MdSearchServer, params: types.DeleteFilesParams) -> None:
        for f in params.files:
            queue_uri(ls, f.uri, "delete")
