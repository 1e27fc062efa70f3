"""A small per-user process that keeps the indexes the command line searches loaded.

A whole-process ``mdsearch search`` cannot go below about 0.3 s of CPU (Python, numpy, ONNX
Runtime, the model) plus a walk of every note to find what changed while nothing watched (0.4 s
at 89,000 notes). A process that already holds the index answers through its socket
(:mod:`.resident`) in a tenth of that, and its inotify watch names what changed. The language
and MCP servers do this while a person runs them; this process does it for a person who only
uses the terminal.

One process per user, not per folder: it listens on ``<cache>/background.sock``, where a CLI
that searched another folder asks it to hold that one too (``add``), so every folder shares one
copy of the model. Rules, because a process nobody asked for must cost nobody anything:

* **Said, and switchable**: the CLI starts it (or adds a folder to it) after a search it
  answered itself, says so on stderr every time, and never does with ``MDSEARCH_BACKGROUND=off``
  or ``--no-background`` (see :mod:`mdsearch_ls.cli.background`).
* **It gives way**: it holds each folder's writer lock (it updates the index before it answers,
  as a search in the CLI would), so anything else that needs that lock (``mdsearch index
  --rebuild``, a search with other settings, a language or MCP server opening the folder) asks
  it to leave that folder, and it closes that index before it answers
  (:meth:`ResidentSearch._leave`).
* **It ends**: a folder goes after ``idle_s`` without a request (15 minutes by default), at once
  when another process writes its index already (nothing to add there); the process goes with
  its last folder, or on SIGTERM.
* **It stays small**: its writes leave Chroma to the next writer that opens it (an ``index`` run
  in a process of its own, a language or MCP server), as a CLI search's own update of a few
  notes does (:class:`~mdsearch_ls.engine.index.vector_store.DeferredStore`): Chroma is never
  imported here and its graph never read (200 MB at 96k chunks); searches read the manifest's
  vectors, and the catch-up rewrites the notes written here from the vector cache, without the
  model. A folder's own copy of the vectors is dropped for the mapped snapshot after a minute
  without a write (``REST_AFTER_S``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings, differs, settings_from_flags
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.index.layout import cache_root
from mdsearch_ls.engine.service.folder import IndexedFolder
from mdsearch_ls.engine.service.folders import Folders
from mdsearch_ls.engine.service.resident import close_listening, listen_private, read_line
from mdsearch_ls.engine.service.resident_rules import PROTOCOL_RESIDENT, background_socket_path

log = logging.getLogger(__name__)

IDLE_S = 15 * 60.0
"""How long a folder is held without a request: long enough to cover a working session's
pauses, short enough that a forgotten one does not hold memory for the day."""
LEAVE_WAIT_S = 30.0
"""How long a request to leave waits for the index to close (a writer's batch in progress)."""
MODEL_FIELDS = ("model", "embedder_backend")
"""Settings that pick the model: a folder that needs another one gets a process of its own."""


class Background:
    """The folders this process holds, the socket that takes more, and when to stop."""

    def __init__(self, settings: Settings, *, idle_s: float = IDLE_S,
                 embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.idle_s = idle_s
        self.folders = Folders(settings, embedder=embedder)
        self.stop = threading.Event()
        self._lock = threading.Lock()  # the folders are added and removed on several threads
        self._starting: dict[Path, Future[Any]] = {}
        self._sock: socket.socket | None = None
        self.path = background_socket_path(cache_root())
        self.served = False
        """Whether some folder was held and answered on its socket (the exit code says)."""

    # ---- folders ----------------------------------------------------------------------------

    def add(self, root: Path, settings: Settings) -> str | None:
        """Hold ``root``'s index (open it, bring it up to date, listen on its socket); None,
        or why not (the CLI then starts a process of its own for it)."""
        if differs(settings, self.settings, MODEL_FIELDS):
            return "it uses another model"
        root = Path(root).resolve()
        with self._lock:
            if self.stop.is_set():
                return "it is stopping"
            held = self.folders.get(root)
            if held is not None:
                return None
            folder = self.folders.add(root, settings)
            if folder is None:
                return f"{root} is not a directory"
            # before its socket listens: it answers as a background process from the start
            folder.on_leave = lambda: self._drop(folder)
            folder.defer_vectors = True
            self._starting[root] = self.folders.index(folder, cancel=lambda: folder.closed)
        log.info("%s: held from now on", root)
        return None

    def _drop(self, folder: IndexedFolder) -> bool:
        """Let a folder go: its index closed, its lock and socket released."""
        with self._lock:
            self.served = self.served or folder.resident is not None
            self._starting.pop(folder.root, None)
            self.folders.remove(folder)  # blocks until the writer has stopped and closed
            if not len(self.folders):
                self.stop.set()  # the last one: exit now, not at the next look round
        log.info("%s: let go", folder.root)
        return True

    def _sweep(self) -> None:
        """Drop the folders nobody asked for in ``idle_s``, and those this process cannot
        write (another process does)."""
        now = time.monotonic()
        with self._lock:
            held = list(self.folders)
        for folder in held:
            started = self._starting.get(folder.root)
            if started is not None and not started.done():
                continue
            resident = folder.resident
            if resident is None or folder.ws is None or folder.ws.read_only:
                log.info("%s: another process writes this index (or its socket cannot listen):"
                         " nothing for a background process to do there", folder.root)
                self._drop(folder)
            elif now - resident.last_asked >= self.idle_s:
                log.info("%s: no request for %.0f s", folder.root, now - resident.last_asked)
                self._drop(folder)

    # ---- the process ------------------------------------------------------------------------

    def run(self, root: Path, *, handle_signals: bool = True) -> int:
        """Hold ``root`` (and whatever is added) until the last folder goes or a signal; the
        exit code: 0, or 3 when ``root`` could not be held (another process writes it)."""
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, lambda *_: self.stop.set())
        self.folders.load_model()
        refused = self.add(root, self.settings)
        if refused:
            log.error("cannot hold %s: %s", root, refused)
            return 2
        self._listen()
        try:
            while not self.stop.is_set():
                with self._lock:
                    self._sweep_done_starts()
                self._sweep()
                if not len(self.folders):
                    log.info("no folder left to hold: exiting")
                    break
                self.stop.wait(min(self.idle_s, 5.0 if self._starting else 30.0))
        finally:
            self._close_socket()
            with self._lock:
                self.served = self.served or any(f.resident is not None for f in self.folders)
            self.folders.close(timeout=LEAVE_WAIT_S)
            # a model still loading on its thread (ONNX Runtime's own threads inside) must not
            # meet the interpreter's exit: that aborts the process
            self.folders.wait_model(timeout=LEAVE_WAIT_S)
        return 0 if self.served else 3

    def _sweep_done_starts(self) -> None:
        for root, fut in list(self._starting.items()):
            if fut.done():
                del self._starting[root]

    def _listen(self) -> None:
        """The socket that takes more folders; without it (another live process answers
        there, a path it cannot use) this process holds its first folder alone."""
        sock = listen_private(self.path, cache_root())
        if sock is None:
            return
        self._sock = sock
        threading.Thread(target=self._accept, name="mdsearch-background", daemon=True).start()

    def _accept(self) -> None:
        sock = self._sock
        while sock is not None and not self.stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    answer = self.answer(json.loads(read_line(conn)))
                except (OSError, ValueError) as exc:
                    answer = {"v": PROTOCOL_RESIDENT, "refused": f"bad request: {exc}"}
                except Exception as exc:  # every request gets an answer
                    log.exception("a request to the background process failed")
                    answer = {"v": PROTOCOL_RESIDENT, "refused": f"{type(exc).__name__}: {exc}"}
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps(answer).encode() + b"\n")

    def answer(self, req: Any) -> dict[str, Any]:
        """``{"add": ROOT, "settings": {...}}`` (the CLI's settings, by name), ``{"who":
        true}`` (the folders held) or ``{"stop": true}`` (all of them, and exit)."""
        if not isinstance(req, dict) or req.get("v") != PROTOCOL_RESIDENT:
            return {"v": PROTOCOL_RESIDENT, "refused": "not a request of this version"}
        if req.get("stop"):
            self.stop.set()  # the main loop closes every folder and exits
            return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "stopping": True}
        if req.get("who"):
            with self._lock:
                held = [str(f.root) for f in self.folders]
            return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "folders": held}
        root = req.get("add")
        if not isinstance(root, str) or not Path(root).is_absolute():
            return {"v": PROTOCOL_RESIDENT, "refused": "add needs an absolute folder"}
        given = req.get("settings") or {}
        settings = settings_from_flags({k: v for k, v in given.items() if v is not None})
        refused = self.add(Path(root), settings)
        if refused:
            return {"v": PROTOCOL_RESIDENT, "refused": refused}
        return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "added": True}

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        close_listening(sock, self.path)


def serve_in_background(root: Path, settings: Settings, *, idle_s: float = IDLE_S,
                        embedder: Embedder | None = None) -> int:
    """The process ``mdsearch background ROOT`` runs (see :class:`Background`)."""
    return Background(settings, idle_s=idle_s, embedder=embedder).run(root)
