"""The language server: one :class:`FolderIndex` per workspace folder, over the shared core.

Threading model (pygls 2 runs handlers on one asyncio loop):

* each folder has one worker thread, the only writer of its index; the first index, saves,
  watcher events and rebuilds are queued to it, and saves are coalesced per file;
* reads (search, hover, symbols) run in ``ls.thread_pool`` and never wait for the writer;
* the model is shared by all folders and loads once, in the background, after ``initialized``;
* anything sent to the client from a worker thread goes through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from mdsearch_ls import __version__
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedder import create_embedder
from mdsearch_ls.engine.indexer import IndexReport
from mdsearch_ls.engine.workspace import IndexLockedError, IndexOpenError, Workspace

log = logging.getLogger("mdsearch_ls.lsp")

STATE_LOADING = "loading-model"
STATE_INDEXING = "indexing"
STATE_READY = "ready"
STATE_ERROR = "error"
STATE_STARTING = "starting"


def uri_to_path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path) if path else None


def path_to_uri(path: Path | str) -> str:
    return from_fs_path(str(path)) or Path(path).as_uri()


class FolderIndex:
    """A workspace folder, its index and its writer thread."""

    def __init__(self, server: MdSearchServer, root: Path, name: str) -> None:
        self.server = server
        self.root = root.resolve()
        self.uri = path_to_uri(self.root)
        self.name = name
        self.ws: Workspace | None = None
        self.state = STATE_STARTING
        self.last_error: str | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"mdsearch-{name[:20]}")
        self._pending: dict[str, str] = {}  # rel -> "update" | "delete"
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self.jobs_done = 0
        self.closed = False
        self.last_report: IndexReport | None = None
        self._retired: list[Workspace] = []

    # ---- writer-thread jobs -----------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.executor.submit(self._guard, fn, *args)

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            log.exception("%s: %s failed", self.name, getattr(fn, "__name__", fn))
            self.last_error = str(exc)
            raise

    def open(self) -> None:
        """Open (or create) the index; a locked or corrupt one is reported once, clearly."""
        if self.ws is not None:
            return
        try:
            self.ws = Workspace(self.root, self.server.settings, self.server.embedder)
        except IndexLockedError as exc:
            # Another mdsearch process writes this index (a second editor window on the same
            # vault, a CLI run): search what it has indexed rather than fail.
            try:
                self.ws = Workspace(self.root, self.server.settings, self.server.embedder,
                                    read_only=True)
            except (FileNotFoundError, IndexOpenError, OSError):
                self._open_failed(exc)
                raise exc from None
            log.info("%s: %s; searching it read-only", self.name, exc)
            self.server.show_message_threadsafe(
                f"mdsearch: another mdsearch process (another editor window?) is indexing "
                f"{self.name}. This window searches that index as it is; it indexes saves "
                f"itself once that process is gone.",
                types.MessageType.Info,
            )
        except (IndexOpenError, OSError) as exc:
            self._open_failed(exc)
            raise

    def _open_failed(self, exc: Exception) -> None:
        self.state = STATE_ERROR
        self.last_error = str(exc)
        self.server.show_message_threadsafe(
            f"mdsearch cannot open the index for {self.name}: {exc}", types.MessageType.Error
        )

    def take_over(self) -> bool:
        """A read-only folder becomes the writer once the other process has let go of the
        lock, and catches up with the notes (incremental). Writer thread only."""
        if self.ws is None or not self.ws.read_only:
            return self.ws is not None
        try:
            ws = Workspace(self.root, self.server.settings, self.server.embedder)
        except IndexLockedError:
            return False
        # Searches may still be reading the old one on other threads: it is closed with the
        # folder, not now.
        self._retired.append(self.ws)
        self.ws = ws
        report = ws.index(cancel=lambda: self.closed)
        log.info("%s: now the index writer: %s", self.name, report.summary())
        return True

    def queue(self, rel: str, op: str) -> None:
        """Queue a per-file change; the latest operation for a file wins."""
        with self._pending_lock:
            self._pending[rel] = op
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        self.submit(self._drain)

    @property
    def queue_length(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def _drain(self) -> None:
        while True:
            with self._pending_lock:
                batch, self._pending = self._pending, {}
                if not batch:
                    self._drain_scheduled = False
                    return
            if self.ws is None or self.closed:
                continue
            if self.ws.read_only and not self.take_over():
                # The writing process indexes these when it sees them (its watcher, its next
                # scan): the manifest of every note's hash makes sure nothing is missed.
                log.info("%s: read-only, not indexing %s", self.name, ", ".join(sorted(batch)))
                continue
            updates = [p for p, op in batch.items() if op == "update"]
            deletes = [p for p, op in batch.items() if op == "delete"]
            if deletes:
                report = self.ws.delete(deletes)
                log.info("%s: removed %d notes", self.name, report.files_deleted)
            if updates:
                report = self.ws.update(updates)
                for w in report.warnings:
                    log.warning("%s: %s", self.name, w)
                log.info("%s: updated %s: %s", self.name, ", ".join(updates), report.summary())
            self.jobs_done += 1
            self.server.status_changed()

    def status(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "root": str(self.root),
            "uri": self.uri,
            "name": self.name,
            "files": 0,
            "chunks": 0,
            "model": self.server.embedder.name,
            "index_dir": None,
            "queue": self.queue_length,
            "state": self.state,
            "last_error": self.last_error,
            "last_update": None,
            "read_only": False,
        }
        if self.ws is not None:
            info = self.ws.status()
            base.update(
                files=info["files"], chunks=info["chunks"], index_dir=info["index_dir"],
                last_update=info["last_update"], read_only=info["read_only"],
            )
        return base

    def close(self) -> None:
        self.closed = True
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self.ws is not None:
            self.ws.close()
            self.ws = None
        for ws in self._retired:
            ws.close()
        self._retired.clear()


class MdSearchServer(LanguageServer):
    """pygls server holding the settings, the shared model and the folder indexes."""

    def __init__(self) -> None:
        super().__init__(
            "mdsearch", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full
        )
        self.settings = Settings()
        self.init_settings = Settings()  # defaults + initializationOptions
        self.embedder = create_embedder(self.settings)
        self.folders: dict[Path, FolderIndex] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.model_state = "not-loaded"
        self._last_status_sent = 0.0
        self._status_timer: asyncio.TimerHandle | None = None
        self.initialized = False
        self.progress_support = False
        self.shown_errors: set[str] = set()

    # ---- folders ----------------------------------------------------------------------------

    def folder_for(self, uri_or_path: str | Path) -> FolderIndex | None:
        """The folder holding a document; the innermost when folders nest."""
        if isinstance(uri_or_path, str) and "://" in uri_or_path:
            path = uri_to_path(uri_or_path)
        else:
            path = Path(uri_or_path)
        if path is None:
            return None
        try:
            path = path.resolve()
        except OSError:
            return None
        best: FolderIndex | None = None
        for root, folder in self.folders.items():
            inside = path == root or root in path.parents
            if inside and (best is None or len(root.parts) > len(best.root.parts)):
                best = folder
        return best

    def rel_for(self, uri: str) -> tuple[FolderIndex, str] | None:
        folder = self.folder_for(uri)
        path = uri_to_path(uri)
        if folder is None or path is None:
            return None
        rel = folder.ws.relpath(path) if folder.ws else None
        if rel is None:
            try:
                rel = path.resolve().relative_to(folder.root).as_posix()
            except (OSError, ValueError):
                return None
        return folder, rel

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
        if message in self.shown_errors:
            return
        self.shown_errors.add(message)
        self.call_threadsafe(
            self.window_show_message, types.ShowMessageParams(type=kind, message=message)
        )

    def status_payload(self) -> dict[str, Any]:
        folders = [f.status() for f in self.folders.values()]
        states = {f["state"] for f in folders}
        if STATE_ERROR in states and len(states) == 1:
            state = STATE_ERROR
        elif self.model_state == "loading":
            state = STATE_LOADING
        elif STATE_INDEXING in states or STATE_STARTING in states or STATE_LOADING in states:
            state = STATE_INDEXING
        elif STATE_ERROR in states:
            state = STATE_ERROR
        else:
            state = STATE_READY
        return {"state": state, "model": self.embedder.name, "folders": folders}

    def status_changed(self, *, percentage: int | None = None, message: str | None = None,
                       force: bool = False) -> None:
        """Send the custom ``mdsearch/status`` notification, at most every 250 ms."""

        def send() -> None:
            now = time.monotonic()
            if not force and now - self._last_status_sent < 0.25:
                return
            self._last_status_sent = now
            payload = self.status_payload()
            if percentage is not None:
                payload["percentage"] = percentage
            if message is not None:
                payload["message"] = message
            try:
                self.protocol.notify("mdsearch/status", payload)
            except Exception:  # the client may be gone
                log.debug("status notification failed", exc_info=True)

        self.call_threadsafe(send)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log instead of popping up: a bad request already gets its error response, so it is
        only worth a line in the log; anything else is a real server error."""
        from pygls.exceptions import JsonRpcInvalidParams

        if isinstance(error, JsonRpcInvalidParams):
            log.info("rejected request: %s", error)
        else:
            log.error("server error (%s): %s", getattr(source, "__name__", source), error)


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


def create_server() -> MdSearchServer:
    """A server with every feature registered (tests create one per process through stdio)."""
    from mdsearch_ls.lsp.features import commands, hover, lifecycle, symbols, sync

    server = MdSearchServer()
    for feature in (lifecycle, sync, symbols, hover, commands):
        feature.register(server)
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logging.getLogger("mdsearch_ls").addHandler(handler)
    return server


def _watch_parent(pid: int, server: MdSearchServer) -> None:
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
                _hard_exit(server, 0)

    threading.Thread(target=loop, name="mdsearch-parent-watch", daemon=True).start()


def _hard_exit(server: MdSearchServer, code: int) -> None:
    """Release every index (locks, SQLite) quickly, then leave without waiting for threads."""
    for folder in list(server.folders.values()):
        folder.closed = True
        try:
            if folder.ws is not None:
                folder.ws.manifest.close()
                if folder.ws._lock is not None:
                    folder.ws._lock.release()
        except Exception:
            pass
    logging.shutdown()
    os._exit(code)


def run_stdio() -> int:
    """Serve over stdio. Stray prints from libraries must never reach the protocol stream, so
    the real stdout is kept for LSP only and fd 1 is pointed at stderr."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="mdsearch-ls: %(levelname)s: %(message)s"
    )
    for noisy in ("pygls", "chromadb", "httpx", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    server = create_server()
    server.start_parent_watch = _watch_parent  # type: ignore[attr-defined]
    try:
        server.start_io(sys.stdin.buffer, proto_out)
    finally:
        _hard_exit(server, 0)
    return 0  # pragma: no cover - _hard_exit does not return
