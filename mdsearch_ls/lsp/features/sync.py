"""Keeping the index fresh: saves, and the file events a client sends of its own accord.

The process that holds an index watches its notes on disk (the engine's watcher), so a client
is asked to watch nothing. A save is still queued at once: the editor's word is the one signal
that works where the disk's events do not arrive (a network share, a container's bind mount).
Events a client pushes (Obsidian sends its vault's, VS Code its explorer's renames and deletes)
go through the engine's one rule, ``Folders.changed``: the disk decides whether a note is
updated or dropped. Two saves of one file before the writer gets to it cost one update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from mdsearch_ls.engine.api import is_markdown
from mdsearch_ls.lsp.convert import uri_to_path
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

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


def did_save(manager: FolderManager, uri: str) -> None:
    found = manager.rel_for(uri) if is_markdown(uri) else None
    if found is not None:
        folder, rel = found
        folder.queue(rel, "update")


def changed(manager: FolderManager, uris: list[str]) -> None:
    """Files a client says changed: the engine's one rule, the disk deciding."""
    manager.service.changed_all((path, path.exists()) for uri in uris
                                if (path := uri_to_path(uri)) is not None)


def register(server: MdSearchServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def on_open(ls: MdSearchServer, params: types.DidOpenTextDocumentParams) -> None:
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
        changed(ls.manager, [c.uri for c in params.changes])

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, MARKDOWN_FILTER)
    def on_rename(ls: MdSearchServer, params: types.RenameFilesParams) -> None:
        changed(ls.manager, [u for f in params.files for u in (f.old_uri, f.new_uri)])

    @server.feature(types.WORKSPACE_DID_DELETE_FILES, MARKDOWN_FILTER)
    def on_delete(ls: MdSearchServer, params: types.DeleteFilesParams) -> None:
        changed(ls.manager, [f.uri for f in params.files])
