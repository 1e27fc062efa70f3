"""A small per-user process that keeps one folder's index loaded for the command line.

A whole-process ``mdsearch search`` cannot go below about 0.3 s of CPU (Python, numpy, ONNX
Runtime, the model) plus a walk of every note to find what changed while nothing watched (0.4 s
at 89,000 notes). A process that already holds the index answers through its socket
(:mod:`.resident`) in a tenth of that, and its inotify watch names what changed. The language
and MCP servers do this while a person runs them; this process does it for a person who only
uses the terminal.

Rules, because a process nobody asked for must cost nobody anything:

* **Said, and switchable**: the CLI starts it after a search it answered itself, says so on
  stderr every time, and never starts it with ``MDSEARCH_BACKGROUND=off`` or
  ``--no-background`` (see :mod:`mdsearch_ls.cli.background`).
* **It gives way**: it holds the index's writer lock (it updates the index before it answers,
  as a search in the CLI would), so anything else that needs that lock (``mdsearch index
  --rebuild``, a language or MCP server opening the folder) asks it to leave, and it closes the
  index before it answers (:meth:`ResidentSearch._leave`).
* **It ends**: after ``idle_s`` without a request (15 minutes by default), on SIGTERM, or at once
  when another process writes the index already (then it has nothing to add).
* Its memory shrinks after a minute without a write, as a server's writer does
  (``REST_AFTER_S``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.service.folders import Folders

log = logging.getLogger(__name__)

IDLE_S = 15 * 60.0
"""How long the process waits for a request before it exits: long enough to cover a working
session's pauses, short enough that a forgotten one does not hold 200-400 MB for the day."""
LEAVE_WAIT_S = 30.0
"""How long a request to leave waits for the index to close (a writer's batch in progress)."""


def serve_in_background(root: Path, settings: Settings, *, idle_s: float = IDLE_S,
                        embedder: Embedder | None = None) -> int:
    """Hold ``root``'s index and answer on its socket until idle, asked to leave or signalled;
    the exit code (0; 3 when another process writes the index, so this one is not needed)."""
    stop = threading.Event()
    closed = threading.Event()
    folders = Folders(settings, embedder=embedder)
    folders.load_model()
    folder = folders.add(root, settings)
    if folder is None:
        log.error("%s is not a directory", root)
        return 2

    def leave() -> bool:  # on a socket thread: the answer goes once the lock is free
        stop.set()
        return closed.wait(LEAVE_WAIT_S)

    folder.on_leave = leave  # before its socket listens: it answers as a background one
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        report = folders.index(folder, cancel=stop.is_set).result()
        resident = folder.resident
        if stop.is_set():
            return 0
        if report is None or resident is None:
            log.info("%s: another process writes this index (or its socket cannot listen): "
                     "nothing for a background process to do", folder.name)
            return 3
        log.info("%s: ready (%s); exits after %.0f s without a request", folder.name,
                 report.summary(), idle_s)
        while not stop.is_set():
            idle = time.monotonic() - resident.last_asked
            if idle >= idle_s:
                log.info("%s: no request for %.0f s: exiting", folder.name, idle)
                break
            stop.wait(min(idle_s - idle, 60.0))
        return 0
    finally:
        folders.close(timeout=LEAVE_WAIT_S)
        closed.set()
