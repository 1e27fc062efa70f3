"""The background process from the command line: started after a search, said every time,
switched off by ``MDSEARCH_BACKGROUND=off`` or ``--no-background``; and ``mdsearch
background``, the process itself (see :mod:`mdsearch_ls.engine.service.background`).

Why it starts after a search and not before: the search that starts it has already paid for
its own start-up, and a person waiting for results must not wait for a process to spawn too.
The next search finds the socket and answers in a tenth of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from mdsearch_ls.cli.common import EXIT_OK, UsageError, _note, _said, _settings, log
from mdsearch_ls.config import Settings, cli_settings, settings_from_flags

ENV = "MDSEARCH_BACKGROUND"
OFF = frozenset({"0", "off", "false", "no"})
LOG_NAME = "background.log"


def wanted(args: argparse.Namespace, settings: Settings) -> bool:
    """Whether this run may start a background process: not switched off, a local index (a
    Chroma server's index has its own process already) and a socket it may listen on."""
    return (os.environ.get(ENV, "").strip().lower() not in OFF
            and not getattr(args, "no_background", False)
            and not getattr(args, "no_resident", False)
            and settings.resident and not settings.chroma_url)


def start_after_search(args: argparse.Namespace, settings: Settings, root: Path) -> None:
    """Start the background process for ``root`` unless one holds the index already (or
    anything else does: then there is a writer to ask, or nothing to add), and say so."""
    if not wanted(args, settings):
        return
    import subprocess

    from mdsearch_ls.engine.api import (
        IDLE_S,
        PROTOCOL_RESIDENT,
        ask_socket,
        background_socket_path,
        cache_root,
        has_index,
        index_dir_of,
        writer_alive,
    )

    if not has_index(root, settings):
        return
    index_dir = index_dir_of(root, settings)
    if writer_alive(index_dir):
        return
    values = {info.name: _json_value(getattr(settings, info.name)) for info in cli_settings()}
    folder = str(Path(root).resolve())
    # the user's background process, when one runs, holds this folder too: one model for all
    added = ask_socket(background_socket_path(cache_root()), cache_root(),
                       {"v": PROTOCOL_RESIDENT, "add": folder, "settings": values})
    if added is not None and added.get("added"):
        _said(f"the background process (pid {added.get('pid')}) keeps this index loaded too, "
              f"so the next searches of {root} answer faster; it lets a folder go after "
              f"{IDLE_S / 60:.0f} idle minutes. `mdsearch background --stop` stops it for this "
              f"folder; {ENV}=off never starts one.")
        return
    if added is not None:
        log.info("the background process did not take %s: %s", folder, added.get("refused"))
    cmd = [sys.executable, "-m", "mdsearch_ls", "background", folder, "-v",
           "--settings-json", json.dumps(values)]
    try:
        with open(index_dir / LOG_NAME, "wb") as out:
            # its own session (no terminal's signals), and "/" as its folder: a daemon must
            # not keep the folder a person ran the search in busy (an unmount, a USB stick)
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, close_fds=True, cwd="/")
    except OSError as exc:  # costs only speed: the next search runs in process again
        log.info("no background process: %s", exc)
        return
    # said even with -q: a process nobody asked for is never started without a word
    _said(f"started a background process (pid {proc.pid}) that keeps this index loaded, so "
          f"the next searches of {root} answer faster; it lets a folder go after "
          f"{IDLE_S / 60:.0f} idle minutes, and exits with the last. `mdsearch background "
          f"--stop` stops it for this folder; {ENV}=off never starts one.")


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def cmd_background(args: argparse.Namespace) -> int:
    """``mdsearch background [ROOT]``: hold ROOT's index and answer the CLI until idle;
    ``--stop``: ask the one holding it to leave."""
    from mdsearch_ls.cli.session import _find_root
    from mdsearch_ls.engine.api import (
        PROTOCOL_RESIDENT,
        ask_socket,
        ask_to_leave,
        background_socket_path,
        cache_root,
        index_dir_of,
        serve_in_background,
    )

    if not args.idle > 0:
        raise UsageError(f"--idle: minutes without a search before it exits, more than 0; got "
                         f"{args.idle}")
    settings = _settings(args)
    if args.settings_json:
        given = json.loads(args.settings_json)
        settings = settings_from_flags({k: v for k, v in given.items() if v is not None},
                                       settings)
    if args.stop and args.all:
        stopped = ask_socket(background_socket_path(cache_root()), cache_root(),
                             {"v": PROTOCOL_RESIDENT, "stop": True})
        _note(args, f"stopped the background process (pid {stopped['pid']})"
              if stopped and stopped.get("stopping") else "no background process runs")
        return EXIT_OK
    if args.root is None:
        root = _find_root(args, settings)
    else:
        root = Path(args.root).expanduser().resolve()
    if args.stop:
        if ask_to_leave(index_dir_of(root, settings)):
            _note(args, f"the background process let the index of {root} go")
        else:
            _note(args, f"no background process holds the index of {root}")
        return EXIT_OK
    return serve_in_background(root, settings, idle_s=args.idle * 60.0)
