"""Diagnostics: unlinked mentions (hints) and near-duplicate sections (information).

Both are pushed (``textDocument/publishDiagnostics``), since Neovim 0.7 and most clients do not
pull. Mentions are read from the buffer, so they follow typing (debounced); near-duplicates are
read from the index (stored vectors, then the words of the candidates), so they are computed
when a note is opened and again once its save has been indexed, and kept in between. When an
index becomes ready, or any note of a folder is saved, every open note of that folder is looked
at again: a new note's title makes mentions elsewhere, a new link removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mdsearch_ls.engine.api import IndexedFolder
from mdsearch_ls.lsp.convert import Lines, path_to_uri
from mdsearch_ls.lsp.workspace_folders import FolderManager

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)

SOURCE = "mdsearch"
DEBOUNCE_S = 0.3


def mention_diagnostics(folder: IndexedFolder, rel: str, text: str, codec: Any = None
                        ) -> list[types.Diagnostic]:
    """Hints on the first plain-text mention of each note this one does not link with."""
    aids = folder.writing
    if aids is None or not folder.settings.mentions_enabled:
        return []
    lines = Lines(text, codec)
    return [
        types.Diagnostic(
            range=lines.range(m.line, m.start, m.line, m.end),
            message=f"“{m.text}” names the note {m.name} ({m.path}), which this note does not "
                    f"link to",
            severity=types.DiagnosticSeverity.Hint,
            source=SOURCE,
            code="unlinked-mention",
            data={"path": m.path, "replacement": m.replacement},
        )
        for m in aids.unlinked_mentions(rel, text)
    ]


def duplicate_diagnostics(folder: IndexedFolder, rel: str, text: str, codec: Any = None
                          ) -> list[types.Diagnostic]:
    """Information on each section almost identical to a section of another note (as indexed),
    the other places in ``relatedInformation``."""
    aids = folder.writing
    if aids is None or not folder.settings.duplicates_enabled:
        return []
    lines = Lines(text, codec)
    out = []
    for d in aids.near_duplicates(rel):
        if d.start_line >= len(lines.lines):
            continue
        best = d.others[0]
        out.append(types.Diagnostic(
            range=lines.line_range(d.start_line),
            message=f"Almost the same as “{best.title}” in {best.path} "
                    f"({best.score:.0%} of the words)",
            severity=types.DiagnosticSeverity.Information,
            source=SOURCE,
            code="near-duplicate",
            related_information=[
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=path_to_uri(folder.root / o.path),
                        range=types.Range(
                            start=types.Position(line=o.start_line, character=0),
                            end=types.Position(line=o.end_line + 1, character=0))),
                    message=f"{o.breadcrumb.replace(' > ', ' › ')} ({o.score:.0%} the same)",
                )
                for o in d.others
            ],
        ))
    return out


async def diagnostics_for(manager: FolderManager, uri: str, text: str, *,
                          duplicates: list[types.Diagnostic] | None = None,
                          codec: Any = None) -> tuple[list[types.Diagnostic],
                                                      list[types.Diagnostic]]:
    """(everything to publish, the duplicates part): duplicates recomputed unless given."""
    found = manager.rel_for(uri)
    if found is None:
        return [], []
    folder, rel = found
    mentions = await manager.run(mention_diagnostics, folder, rel, text, codec)
    if duplicates is None:
        duplicates = await manager.run(duplicate_diagnostics, folder, rel, text, codec)
    if not folder.settings.duplicates_enabled:
        duplicates = []
    return mentions + duplicates, duplicates


class Publisher:
    """Keeps the open notes' diagnostics current and sends them."""

    def __init__(self, server: MdSearchServer) -> None:
        self.server = server
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._duplicates: dict[str, list[types.Diagnostic]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def on_document(self, server: MdSearchServer, event: str, uri: str) -> None:
        if event == "close":
            self._cancel(uri)
            self._duplicates.pop(uri, None)
            self._publish(uri, [], None)
        elif event == "change":
            self._schedule(uri, DEBOUNCE_S, fresh=False)
        elif event == "open":
            self._schedule(uri, 0.0, fresh=True)
        elif event == "save":
            folder = server.manager.folder_for(uri)
            if folder is not None:
                self._spawn(self._after_save(folder))

    async def _after_save(self, folder: IndexedFolder) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(folder.settled())
        self.on_ready(folder)

    def on_ready(self, folder: IndexedFolder) -> None:
        """Every open note of ``folder`` looked at again (its index is ready, or saved)."""
        for uri in self.server.open_uris():
            if self.server.manager.folder_for(uri) is folder:
                self._schedule(uri, 0.0, fresh=True)


    def _cancel(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _schedule(self, uri: str, delay: float, *, fresh: bool) -> None:
        loop = self.server.loop
        if loop is None:
            return
        self._cancel(uri)
        self._timers[uri] = loop.call_later(
            delay, lambda: self._spawn(self._refresh(uri, fresh=fresh)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self, uri: str, *, fresh: bool) -> None:
        self._timers.pop(uri, None)
        doc = self._document(uri)
        if doc is None:
            return
        text, version = doc
        try:
            found, dups = await diagnostics_for(
                self.server.manager, uri, text,
                duplicates=None if fresh else self._duplicates.get(uri),
                codec=self.server.codec())
        except Exception:
            log.exception("diagnostics failed for %s", uri)
            return
        current = self._document(uri)
        if current is None or current[1] != version:
            return  # edited meanwhile: the next refresh publishes
        self._duplicates[uri] = dups
        self._publish(uri, found, version)

    def _document(self, uri: str) -> tuple[str, int | None] | None:
        doc = self.server.open_document(uri)
        return None if doc is None else (doc.source, doc.version)

    def _publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        try:
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics, version=version))
        except Exception:  # the client may be gone
            log.debug("publishDiagnostics failed", exc_info=True)


def register(server: MdSearchServer) -> None:
    publisher = Publisher(server)
    server.document_hooks.append(publisher.on_document)
    server.manager.ready_hooks.append(publisher.on_ready)


__all__ = ["Publisher", "diagnostics_for", "duplicate_diagnostics", "mention_diagnostics"]
