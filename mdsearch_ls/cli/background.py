"""The background process from the command line: whether a command may use it, starting it
after a first index, and ``mdsearch background``, the process itself and ``--stop``.

The engine finds or starts the process when a search asks it to hold an index
(:mod:`mdsearch_ls.engine.service.spawn`), and says so on stderr every time; this module only
decides whether it may (``MDSEARCH_BACKGROUND=off``, ``--no-background``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mdsearch_ls.cli.common import EXIT_OK, UsageError, _note, _said, _settings
from mdsearch_ls.config import Settings, settings_from_flags
from mdsearch_ls.engine.api import (
    Folders,
    background_off,
    find_index_root,
    serve_in_background,
    stop_background,
)


def wanted(args: argparse.Namespace) -> bool:
    """Whether this run may ask the background process to hold an index nobody holds."""
    return not background_off() and not getattr(args, "no_background", False)


def start_after_first_index(args: argparse.Namespace, settings: Settings, root: Path) -> None:
    """After a search that indexed ``root`` for the first time (in its own process, with its
    progress line): the background process holds it from now on, and says so."""
    if not wanted(args):
        return
    folders = Folders(settings, role="command", via_background=True, watch=False,
                      on_message=lambda text, level: _said(text.removeprefix("mdsearch: ")))
    folder = folders.add(root, settings)
    try:
        if folder is not None:
            folder.open_now()
    finally:
        folders.close()


def cmd_background(args: argparse.Namespace) -> int:
    """``mdsearch background [ROOT]``: hold ROOT's index and answer for it until idle;
    ``--stop``: ask the background process to let it go (``--all``: every folder, and exit)."""
    if not args.idle > 0:
        raise UsageError(f"--idle: minutes without a search before it exits, more than 0; got "
                         f"{args.idle}")
    settings = _settings(args)
    if args.settings_json:
        given = json.loads(args.settings_json)
        settings = settings_from_flags({k: v for k, v in given.items() if v is not None},
                                       settings)
    if args.stop and args.all:
        pid = stop_background()
        _note(args, f"stopped the background process (pid {pid})" if pid
              else "no background process runs")
        return EXIT_OK
    root = Path(args.root).expanduser().resolve() if args.root else find_index_root(
        Path.cwd(), settings.index_dir)
    if root is None:
        raise UsageError(f"no index for {Path.cwd()} or any parent: give the folder")
    if args.stop:
        pid = stop_background(root)
        _note(args, f"the background process (pid {pid}) let the index of {root} go" if pid
              else f"no background process holds the index of {root}")
        return EXIT_OK
    return serve_in_background(root, settings, idle_s=args.idle * 60.0)
