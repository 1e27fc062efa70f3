"""Keeping the index fresh: saves, opens, file-watcher events, renames and deletes.

Every event becomes a per-file entry in its folder's queue; the folder's single writer drains it.
Saves that arrive while the first index runs wait in the queue, and two saves of one file before
the writer gets to it cost one update: the latest state of the file on disk wins.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from mdsearch_ls.engine.api import STATE_READY, is_markdown
from mdsearch_ls.lsp.convert import uri_to_path
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

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


def did_open(manager: FolderManager, uri: str) -> None:
    """A note the index does not know yet (created outside the watcher's sight) is indexed
    when opened; a known one is refreshed on save."""
    if not is_markdown(uri):
        return
    found = manager.rel_for(uri)
    if found is None:
        return
    folder, rel = found
    if folder.state == STATE_READY and not folder.is_indexed(rel):
        folder.queue(rel, "update")


def did_save(manager: FolderManager, uri: str) -> None:
    if is_markdown(uri):
        manager.queue(uri, "update")


def rescan(manager: FolderManager, uri: str, progress: object = None) -> None:
    """A folder appeared, or a .gitignore changed: re-read the ignore rules, then a full
    (incremental) scan settles it."""
    folder = manager.folder_for(uri)
    if folder is None:
        return
    folder.refresh_ignores()
    manager.start_soon(folder, progress=progress)


def watched_files(
    manager: FolderManager, changes: list[types.FileEvent], progress: object = None
) -> None:
    for change in changes:
        uri = change.uri
        if uri.endswith("/.gitignore"):
            rescan(manager, uri, progress)
            continue
        path = uri_to_path(uri)
        if change.type == types.FileChangeType.Deleted:
            # Also a deleted folder: the indexer drops every note under it.
            manager.queue(uri, "delete")
        elif is_markdown(uri):
            manager.queue(uri, "update")
        elif path is not None and path.is_dir():
            rescan(manager, uri, progress)


def renamed(
    manager: FolderManager, files: list[types.FileRename], progress: object = None
) -> None:
    for f in files:
        manager.queue(f.old_uri, "delete")
        new_path = uri_to_path(f.new_uri)
        if new_path is not None and new_path.is_dir():
            rescan(manager, f.new_uri, progress)
        elif is_markdown(f.new_uri):
            manager.queue(f.new_uri, "update")


def deleted(manager: FolderManager, files: list[types.FileDelete]) -> None:
    for f in files:
        manager.queue(f.uri, "delete")


def register(server: MdSearchServer) -> None:
    def progress(ls: MdSearchServer) -> object:
        from mdsearch_ls.lsp.progress import IndexProgress

        return lambda title: IndexProgress(ls, title)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def on_open(ls: MdSearchServer, params: types.DidOpenTextDocumentParams) -> None:
        did_open(ls.manager, params.text_document.uri)
        ls.document_event("open", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(ls: MdSearchServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.document_event("change", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def on_save(ls: MdSearchServer, params: types.DidSaveTextDocumentParams) -> None:
        did_save(ls.manager, params.text_document.uri)
        ls.document_event("save", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def on_close(ls: MdSearchServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.document_event("close", params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def on_watched(ls: MdSearchServer, params: types.DidChangeWatchedFilesParams) -> None:
        watched_files(ls.manager, params.changes, progress(ls))

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, MARKDOWN_FILTER)
    def on_rename(ls: MdSearchServer, params: types.RenameFilesParams) -> None:
        renamed(ls.manager, params.files, progress(ls))

    @server.feature(types.WORKSPACE_DID_DELETE_FILES, MARKDOWN_FILTER)
    def on_delete(ls: MdSearchServer, params: types.DeleteFilesParams) -> None:
        deleted(ls.manager, params.files)
