"""The language server process: the pygls subclass, messages from any thread, stdio plumbing.

Threading model (pygls 2 runs handlers on one asyncio loop):

* each folder has one writer thread (:class:`~mdsearch_ls.engine.api.IndexedFolder`), the only
  writer of its index; saves and watcher events are queued to it and coalesced per file;
* reads (search, hover, symbols) run on the folder manager's reader pool and never wait for a
  writer;
* the model is shared by all folders and loads once, in the background, after ``initialized``;
* anything sent to the client from another thread goes through ``loop.call_soon_threadsafe``.

What the server does lives in :mod:`mdsearch_ls.lsp.workspace_folders` (the service every feature
uses) and :mod:`mdsearch_ls.lsp.features` (one module per LSP surface); this module only connects
them to pygls and to stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer

from mdsearch_ls import __version__
from mdsearch_ls.lsp import protocol
from mdsearch_ls.lsp.params import exception_text, one_line
from mdsearch_ls.lsp.progress import IndexProgress
from mdsearch_ls.lsp.workspace_folders import FolderManager

log = logging.getLogger("mdsearch_ls.lsp")

STATUS_EVERY_S = 0.25
_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning,
           "info": types.MessageType.Info}


class MdSearchServer(LanguageServer):
    """pygls server: holds the folder manager and sends what it reports to the client."""

    def __init__(self) -> None:
        super().__init__(
            "mdsearch", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=protocol.MdSearchProtocol,
        )
        self.manager = FolderManager(
            on_status=self.status_changed,
            on_message=lambda text, level: self.show_message_threadsafe(text, _LEVELS[level]),
            pool=self.thread_pool,
            progress=lambda title: IndexProgress(self, title),
            call_soon=self.call_threadsafe,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._last_status_sent = 0.0
        self._status_timer: asyncio.TimerHandle | None = None
        self._status_extra: dict[str, Any] = {}
        self.initialized = False
        self.progress_support = False
        self.shown_messages: set[str] = set()
        self.initialize_hooks: list[Callable[[MdSearchServer], None]] = []
        """Run at ``initialize``, once settings are known (features register what they serve
        only when the client wants it, e.g. the outline)."""
        self.document_hooks: list[Callable[[MdSearchServer, str, str], None]] = []
        """Called on the loop with ``(server, event, uri)`` for each ``open``, ``change``,
        ``save`` and ``close`` of a document: the sync feature owns those notifications, and a
        feature that follows the buffer (diagnostics) subscribes here instead of importing it."""

    # ---- documents --------------------------------------------------------------------------

    def document_text(self, uri: str) -> str | None:
        """The editor's buffer of a document it has open (unsaved edits included), else None."""
        doc = self.open_document(uri)
        return doc.source if doc is not None else None

    def open_document(self, uri: str) -> Any:
        """The editor's open document (pygls keeps them under the percent-decoded URI, so a
        note named "Garden journal.md" is found however the client encoded its space)."""
        return self.workspace.text_documents.get(unquote(uri))

    def open_uris(self) -> list[str]:
        """The URIs of the open documents, as the client sent them."""
        return [doc.uri for doc in self.workspace.text_documents.values()]

    def document_event(self, event: str, uri: str) -> None:
        for hook in self.document_hooks:
            try:
                hook(self, event, uri)
            except Exception:  # one feature's failure must not stop the others
                log.exception("document %s hook failed for %s", event, uri)

    def codec(self) -> Any:
        """The position encoding agreed at initialize (UTF-16 unless the client offered
        another)."""
        return self.workspace.position_codec

    # ---- messages from any thread -----------------------------------------------------------

    def call_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def show_message_threadsafe(self, message: str, kind: types.MessageType) -> None:
        """window/showMessage, once per distinct message: an error repeated on every save helps
        nobody."""
        if message in self.shown_messages:
            return
        self.shown_messages.add(message)
        self.call_threadsafe(
            self.window_show_message, types.ShowMessageParams(type=kind, message=message)
        )

    def status_changed(self, *, percentage: int | None = None, message: str | None = None,
                       force: bool = False) -> None:
        """Send the custom ``mdsearch/status`` notification, at most every 250 ms.

        A change inside the window is sent at its end (trailing edge), so the last state (say,
        "ready" after a burst of progress) always reaches the client.
        """
        extra: dict[str, Any] = {}
        if percentage is not None:
            extra["percentage"] = percentage
        if message is not None:
            extra["message"] = message

        def send() -> None:
            self._status_timer = None
            self._last_status_sent = time.monotonic()
            payload = {**self.manager.status(), **self._status_extra}
            self._status_extra = {}
            try:
                self.protocol.notify("mdsearch/status", payload)
            except Exception:  # the client may be gone
                log.debug("status notification failed", exc_info=True)

        def schedule() -> None:
            self._status_extra.update(extra)
            wait = STATUS_EVERY_S - (time.monotonic() - self._last_status_sent)
            if force or wait <= 0:
                if self._status_timer is not None:
                    self._status_timer.cancel()
                send()
            elif self._status_timer is None and self.loop is not None:
                self._status_timer = self.loop.call_later(wait, send)

        self.call_threadsafe(schedule)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """What pygls could not answer itself: a body that is not JSON is answered -32700 with
        id null, as JSON-RPC asks; anything else is logged, never a pop-up."""
        if isinstance(error, ValueError | RecursionError):  # JSONDecodeError, UnicodeDecodeError
            log.warning("unreadable message: %s", exception_text(error))
            self.protocol.send_error(None, protocol.PARSE_ERROR,
                                     f"Parse error: {exception_text(error)}")
        elif isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
            log.info("rejected request: %s", one_line(str(error)))
        else:
            log.error("server error (%s): %s", getattr(source, "__name__", source),
                      exception_text(error))

    def watch_parent(self, pid: int) -> None:
        """Exit when the editor that started us dies: no orphan holding hundreds of MB."""

        def alive() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True

        def loop() -> None:
            while True:
                time.sleep(2.0)
                if not alive():
                    log.warning("client process %d is gone; exiting", pid)
                    self.exit_now(0)

        threading.Thread(target=loop, name="mdsearch-parent-watch", daemon=True).start()

    def exit_now(self, code: int) -> None:
        """Release every index (locks, SQLite) quickly, then leave without waiting for threads
        (pygls would wait for its thread pool, i.e. for any request still running)."""
        with contextlib.suppress(Exception):
            self.manager.service.abandon()
        logging.shutdown()
        os._exit(code)


class _ClientLogHandler(logging.Handler):
    """Forwards info-and-above records to the client's log (window/logMessage)."""

    _LEVELS = (
        (logging.ERROR, types.MessageType.Error),
        (logging.WARNING, types.MessageType.Warning),
        (logging.INFO, types.MessageType.Info),
    )

    def __init__(self, server: MdSearchServer) -> None:
        super().__init__(level=logging.INFO)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        if not self.server.initialized:
            return
        try:
            kind = next(
                (t for lvl, t in self._LEVELS if record.levelno >= lvl), types.MessageType.Log
            )
            params = types.LogMessageParams(type=kind, message=self.format(record))
            self.server.call_threadsafe(self.server.window_log_message, params)
        except Exception:  # pragma: no cover - logging must never raise
            pass

