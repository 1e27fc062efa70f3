"""The background process: one per user, holding the indexes the command line searches.

A language or MCP server holds its folders while a person runs it; this process does the same
for a person who only uses the terminal, so a search asks a process that has the model, the
index and a watch of the notes already (see :mod:`.spawn` for how a command starts and finds
it). It holds any number of folders with one copy of the model, answers on the one channel
every holder answers on, and takes three more requests there: ``Hold`` (a folder more, or the
same with other settings), ``Leave`` and ``Stop``. Rules, because a process nobody asked for
must cost nobody anything:

* **Said, and switchable**: the command that starts it (or adds a folder to it) says so on
  stderr every time; ``MDSEARCH_BACKGROUND=off`` means it is never started.
* **It gives way**: a language or MCP server that opens one of its folders asks it to leave,
  and it closes that index before it answers, so the server holds it at once.
* **It ends**: a folder goes after ``idle_s`` without a request (15 minutes by default), at once
  when its index folder is deleted under it; the process goes with its last folder, on
  ``Stop`` or SIGTERM.
* **One per user**: a per-user lock admits one; a second one started at the same moment tells
  its starter where the first listens, and exits.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from mdsearch_ls.config import INDEX_FIELDS, Settings, differs, settings_from_flags
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import IndexLockedError
from mdsearch_ls.engine.index.layout import ProcessLock, cache_root
from mdsearch_ls.engine.service import messages as m
from mdsearch_ls.engine.service.channel import Endpoint
from mdsearch_ls.engine.service.folder import IndexedFolder
from mdsearch_ls.engine.service.folders import Folders
from mdsearch_ls.engine.service.spawn import IDLE_MINUTES, announce, record_path

log = logging.getLogger(__name__)

IDLE_S = IDLE_MINUTES * 60.0
"""How long a folder is held without a request: long enough to cover a working session's
pauses, short enough that a forgotten one does not hold memory for the day."""
SWEEP_S = 30.0
"""How often it looks for folders to let go."""
WINNER_S = 10.0
"""How long a process that lost the race to be the background process waits for the winner's
record (the winner writes it a moment after it took the lock)."""
MODEL_FIELDS = ("model", "embedder_backend")
"""Settings that pick the model: a folder that needs another one is held by its asker."""


class Background:
    """The folders this process holds, the requests that change them, and when to stop."""

    def __init__(self, settings: Settings, *, idle_s: float = IDLE_S,
                 embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.idle_s = idle_s
        self.folders = Folders(settings, embedder=embedder, role="background")
        self.folders.background = self.request
        self.stop = threading.Event()
        self._lock = threading.Lock()  # folders are added and dropped on several threads
        self.served = False
        """Whether some folder was held (the exit code says)."""

    # ---- requests ---------------------------------------------------------------------------

    def request(self, request: Any) -> Any:
        """``Hold``, ``Leave`` or ``Stop`` (see the module docstring)."""
        if isinstance(request, m.Stop):
            self.stop.set()
            return True
        root = Path(request.root)
        if isinstance(request, m.Leave):
            folder = self.folders.get(root)
            if folder is not None:
                self._drop(folder)
            return folder is not None
        settings = settings_from_flags({k: v for k, v in request.settings.items()
                                        if v is not None}, self.settings)
        return self.hold(root, settings)

    def hold(self, root: Path, settings: Settings) -> bool:
        """Hold ``root`` with ``settings`` (True: held anew); an error the asker reads when it
        cannot (another process holds the folder, another model)."""
        if differs(settings, self.settings, MODEL_FIELDS):
            raise m.HolderError(f"the background process uses {self.folders.embedder.name}, "
                                f"not the model asked for")
        with self._lock:
            if self.stop.is_set():
                raise m.HolderError("the background process is stopping")
            folder = self.folders.get(root)
            if folder is not None and differs(folder.settings, settings, INDEX_FIELDS):
                self.folders.remove(folder)  # held with other settings: anew with these
                folder = None
            new = folder is None
            if folder is None:
                folder = self.folders.add(root, settings)
                if folder is None:
                    raise m.HolderError(f"{root} is not a folder")
                self.folders.index(folder, cancel=lambda: folder.closed)
        folder.wait_open()
        if not folder.held:
            held = folder.remote.pid if folder.remote is not None else None
            self._drop(folder)
            raise m.HolderError(f"process {held} holds {root}" if held else
                                f"cannot hold {root}: {folder.last_error}")
        if not new:
            return False
        log.info("%s: held from now on", root)
        self.served = True
        return True

    def _drop(self, folder: IndexedFolder, *, gone: bool = False) -> None:
        """Let a folder go: its index closed (abandoned when its folder was deleted: nothing
        is written back into a path that is gone)."""
        with self._lock:
            if gone:
                folder.abandon()
            self.folders.remove(folder)
            if not len(self.folders):
                self.stop.set()  # the last one: exit now, not at the next look round
        log.info("%s: let go", folder.root)

    def _sweep(self) -> None:
        now = time.monotonic()
        for folder in list(self.folders):
            if not folder.index_dir.is_dir():
                log.info("%s: its index folder %s was deleted", folder.root, folder.index_dir)
                self._drop(folder, gone=True)
            elif folder.remote is not None:
                log.info("%s: another process holds this index now", folder.root)
                self._drop(folder)
            elif now - folder.last_asked >= self.idle_s:
                log.info("%s: no request for %.0f s", folder.root, now - folder.last_asked)
                self._drop(folder)

    # ---- the process ------------------------------------------------------------------------

    def run(self, root: Path, *, handle_signals: bool = True) -> int:
        """Hold ``root`` (and whatever is added) until the last folder goes, ``Stop`` or a
        signal; the exit code: 0, or 3 when nothing could be held."""
        try:
            lock = ProcessLock(cache_root() / "background.lock",
                               "another background process runs")
        except IndexLockedError:
            return self._point_to_winner()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
                if sig is not None:
                    signal.signal(sig, lambda *_: self.stop.set())
        endpoint = self.folders.endpoint()
        endpoint.save(record_path())
        announce(endpoint)
        self.folders.load_model()
        try:
            try:
                self.hold(root, self.settings)
            except m.HolderError as exc:
                log.error("cannot hold %s: %s", root, exc)
            while not self.stop.is_set() and len(self.folders):
                self.stop.wait(min(self.idle_s, SWEEP_S))
                self._sweep()
        finally:
            endpoint.forget(record_path())
            self.folders.close(timeout=60.0)
            # a model still loading on its thread (ONNX Runtime's own threads inside) must not
            # meet the interpreter's exit: that aborts the process
            self.folders.wait_model(timeout=60.0)
            lock.release()
        return 0 if self.served else 3

    def _point_to_winner(self) -> int:
        """Another background process took the lock: tell the starter where it listens."""
        deadline = time.monotonic() + WINNER_S
        while time.monotonic() < deadline:
            endpoint = Endpoint.load(record_path())
            if endpoint is not None:
                announce(endpoint)
                return 0
            time.sleep(0.02)  # (its record is written a moment after its lock)
        log.error("another background process holds the lock but wrote no record")
        return 3


def serve_in_background(root: Path, settings: Settings, *, idle_s: float = IDLE_S,
                        embedder: Embedder | None = None) -> int:
    """The process ``mdsearch background ROOT`` runs (see :class:`Background`)."""
    return Background(settings, idle_s=idle_s, embedder=embedder).run(root)


__all__ = ["IDLE_S", "Background", "serve_in_background"]
