"""Keeping the index fresh: saves, opens, file-watcher events, renames and deletes.

Every event goes through the engine's one rule (``Folders.changed``: the disk decides whether a
note is updated or dropped, a new folder queues its notes, a changed ``.gitignore`` rescans) and
becomes a per-file entry in its folder's queue; the folder's single writer drains it.
Saves that arrive while the first index runs wait in the queue, and two saves of one file before
the writer gets to it cost one update: the latest state of the file on disk wins.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from mdsearch_ls.engine.api import FolderState, is_markdown
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
        types.FileOperationFilter(  # documents (include_formats); the engine drops the rest
            scheme="file",
            pattern=types.FileOperationPattern(glob="**/*.{pdf,docx,html,htm,ipynb,org}"),
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
    if folder.state == FolderState.READY and not folder.is_indexed(rel):
        folder.queue(rel, "update")


def did_save(manager: FolderManager, uri: str) -> None:
    if is_markdown(uri):
        manager.queue(uri, "update")


def watched_files(manager: FolderManager, changes: list[types.FileEvent]) -> None:
    """The client's watcher saw files change: the engine's one rule, the disk deciding."""
    events = [(path, path.exists()) for change in changes
              if (path := uri_to_path(change.uri)) is not None]
    manager.service.changed_all(events)


def renamed(manager: FolderManager, files: list[types.FileRename]) -> None:
    for f in files:
        manager.changed(f.old_uri)
        manager.changed(f.new_uri)


def deleted(manager: FolderManager, files: list[types.FileDelete]) -> None:
    for f in files:
        manager.changed(f.uri)


def register(server: MdSearchServer) -> None:
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
        watched_files(ls.manager, params.changes)

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, MARKDOWN_FILTER)
    def on_rename(ls: MdSearchServer, params: types.RenameFilesParams) -> None:
        renamed(ls.manager, params.files)

    @server.feature(types.WORKSPACE_DID_DELETE_FILES, MARKDOWN_FILTER)
    def on_delete(ls: MdSearchServer, params: types.DeleteFilesParams) -> None:
        deleted(ls.manager, params.files)
