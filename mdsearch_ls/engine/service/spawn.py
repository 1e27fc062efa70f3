"""Finding the user's background process, or starting it, for a command that only asks.

A command line search pays for Python, numpy, ONNX Runtime, the model and a walk of every note
before it ranks anything; a process that already holds the index answers in a tenth of that. So
when nothing holds an index, the CLI does not hold it itself: it asks the background process
(one per user, :mod:`.background`) to hold it, starting that process first if none runs, and
asks it. Said on stderr every time, and never with ``MDSEARCH_BACKGROUND=off`` (the CLI then
holds the index for its own run).

Starting it: ``mdsearch background`` is started detached (its own session on POSIX, a detached
process on Windows) with a pipe on its stdout; it writes one line there, its endpoint, once it
listens (or the endpoint of the one that won, when several searches started one at the same
moment: the per-user lock admits one), and the command connects there. No polling, no sleep.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings, cli_settings
from mdsearch_ls.engine.errors import MdsearchError
from mdsearch_ls.engine.index.layout import cache_root, index_dir_of
from mdsearch_ls.engine.service import messages as m
from mdsearch_ls.engine.service.channel import ChannelError, Endpoint
from mdsearch_ls.engine.service.remote import RemoteIndex

log = logging.getLogger(__name__)

ENV = "MDSEARCH_BACKGROUND"
OFF = frozenset({"0", "off", "false", "no"})
RECORD = "background.json"
"""The background process's :class:`Endpoint`, in the cache folder."""
LOG_NAME = "background.log"
READY_S = 30.0
"""How long a command waits for a background process it started to listen (a cold start of
Python and the engine on a slow disk takes a few seconds)."""
HOLD_S = 120.0
"""How long it waits for that process to hold a folder (opening a large index)."""
IDLE_MINUTES = 15
"""How long the background process keeps a folder nobody asks about (``mdsearch background
--idle``), said in its messages."""


def background_off() -> bool:
    """Whether the person turned the background process off (``MDSEARCH_BACKGROUND=off``)."""
    return os.environ.get(ENV, "").strip().lower() in OFF


def record_path() -> Path:
    return cache_root() / RECORD


def settings_values(settings: Settings) -> dict[str, Any]:
    """The settings a command line can set, by name, as JSON values."""
    return {info.name: _plain(getattr(settings, info.name)) for info in cli_settings()}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def running() -> RemoteIndex | None:
    """The user's background process, when one answers (asked with no folder of its own)."""
    endpoint = Endpoint.load(record_path())
    if endpoint is None:
        return None
    index = RemoteIndex(Path("/"), endpoint)
    try:
        index.hello()
    except (ChannelError, MdsearchError, m.MessageError):
        index.close()
        return None
    return index


def stop_background(root: Path | None = None) -> int | None:
    """Ask the background process to let ``root`` go (None: every folder, and exit); its pid
    when it did, None when none runs or it did not hold ``root``."""
    bg = running()
    if bg is None:
        return None
    try:
        request = m.Stop() if root is None else m.Leave(str(Path(root).resolve()))
        done = bg.ask(request, bool, timeout=120.0)
    except ChannelError as exc:
        raise m.HolderError(f"the background process (pid {bg.pid}) did not answer: {exc}; "
                          f"it stops with SIGTERM too") from None
    finally:
        bg.close()
    return bg.pid if done else None


def hold_in_background(root: Path, settings: Settings, say: Callable[[str, str], None]
                       ) -> RemoteIndex | None:
    """The index of ``root`` as the background process holds it, the process started first
    if none runs; None when it cannot be had (it failed to start, or another process holds the
    folder by now: the caller looks again, or holds the index itself). ``say``: a sentence
    for the person, and its level."""
    bg = running()
    started = None
    if bg is None:
        try:
            endpoint, started = _start(root, settings)
        except (OSError, ValueError, ChannelError, TimeoutError) as exc:
            log.warning("no background process: %s", exc)
            return None
        bg = RemoteIndex(root, endpoint)
    index = RemoteIndex(Path(root).resolve(), bg.endpoint)
    bg.close()
    try:
        new = index.ask(m.Hold(str(index.root), settings_values(settings)), bool, timeout=HOLD_S)
    except (ChannelError, MdsearchError) as exc:
        log.info("the background process did not hold %s: %s", root, exc)
        index.close()
        return None
    if started is not None and started == index.pid:
        say(f"mdsearch: started a background process (pid {index.pid}) that keeps this index "
            f"loaded, so the next searches of {root} answer faster; it lets a folder go after "
            f"{IDLE_MINUTES} idle minutes, and exits with the last. `mdsearch background "
            f"--stop` stops it for this folder; {ENV}=off never starts one.", "notice")
    elif new:
        say(f"mdsearch: the background process (pid {index.pid}) keeps this index loaded too, "
            f"so the next searches of {root} answer faster; it lets a folder go after "
            f"{IDLE_MINUTES} idle minutes. `mdsearch background --stop` stops it for this "
            f"folder; {ENV}=off never starts one.", "notice")
    return index


def _start(root: Path, settings: Settings) -> tuple[Endpoint, int]:
    """Start ``mdsearch background`` and read its endpoint: ``(endpoint, pid started)``."""
    cmd = [sys.executable, "-m", "mdsearch_ls", "background", str(root), "-v",
           "--settings-json", json.dumps(settings_values(settings))]
    index_dir = index_dir_of(root, settings)
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / LOG_NAME, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=out, cwd=cache_root(), **_detached())
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    reader.join(READY_S)
    proc.stdout.close()  # type: ignore[union-attr]
    if not line or not line[0].strip():
        raise TimeoutError(f"the background process (pid {proc.pid}) did not start; its log is "
                           f"{index_dir / LOG_NAME}")
    raw = json.loads(line[0])
    endpoint = Endpoint(**raw)
    return endpoint, proc.pid


def _detached() -> dict[str, Any]:
    """How a process outlives the command that starts it, without its terminal's signals."""
    if sys.platform == "win32":
        flags = (subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
                 | subprocess.CREATE_NO_WINDOW)  # type: ignore[attr-defined]
        return {"creationflags": flags, "close_fds": True}
    return {"start_new_session": True, "close_fds": True}


def announce(endpoint: Endpoint) -> None:
    """The background process's ready line: its endpoint, on the stdout its starter reads,
    which is then closed (nothing else is written there)."""
    out = sys.stdout
    try:
        out.write(json.dumps(dataclasses.asdict(endpoint)) + "\n")
        out.flush()
    except (OSError, ValueError):  # its starter gave up on it meanwhile
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


__all__ = ["ENV", "LOG_NAME", "OFF", "announce", "background_off", "hold_in_background",
           "record_path", "running", "settings_values", "stop_background"]
