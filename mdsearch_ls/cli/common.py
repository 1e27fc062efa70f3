"""What every part of the CLI shares: the exit codes, the usage error, the messages on stderr,
paths as a person at the prompt opens them, and settings from the flags. A leaf module (the
standard library and ``config`` only), so the others import it without cycles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from mdsearch_ls import logs
from mdsearch_ls.config import Settings, cli_settings, settings_from_flags

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OPEN = 0, 1, 2, 3, 4
EXIT_SIGINT, EXIT_SIGTERM, EXIT_PIPE = 130, 143, 141
FORMATS = ("text", "json", "jsonl", "vimgrep", "paths")



class _Log:
    """The CLI's logger (``mdsearch``), with ``logging`` imported for a record that can be shown
    (:func:`mdsearch_ls.logs.configure_later`): a search the server answers says nothing at the
    default level, and never imports it."""

    def debug(self, message: str, *args: object) -> None:
        self._log(logs.DEBUG, message, args)

    def info(self, message: str, *args: object) -> None:
        self._log(logs.INFO, message, args)

    def warning(self, message: str, *args: object) -> None:
        self._log(logs.WARNING, message, args)

    def _log(self, level: int, message: str, args: tuple[object, ...]) -> None:
        if not logs.shown(level):
            return
        logs.configure_now()
        import logging

        logging.getLogger("mdsearch").log(level, message, *args, stacklevel=3)


log = _Log()


class UsageError(Exception):
    """Something the person at the prompt can fix (exit 2); the message says how."""


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the flags that were given, through the same checks as client settings."""
    return settings_from_flags(
        {info.name: getattr(args, info.name, None) for info in cli_settings()}
    )


def _err(message: str, stream: TextIO | None = None) -> None:
    print(f"mdsearch: error: {message}", file=stream or sys.stderr)


def _said(message: str) -> None:
    """A message that is not an error but must be read even with -q (what an interrupt kept)."""
    print(f"mdsearch: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str, stream: TextIO | None = None) -> None:
    if not getattr(args, "quiet", False):
        print(f"mdsearch: {message}", file=stream or sys.stderr)


def _shown(path: Path, cwd: str | None = None) -> str:
    """A path as a person at this prompt can open it: relative to the current folder (``cwd``,
    default this process's) when the note is under it (as rg and fd print), else absolute."""
    try:
        return path.relative_to(Path.cwd() if cwd is None else cwd).as_posix()
    except ValueError:
        return str(path)


def _columns(fallback: int) -> int:
    """The terminal's width (:func:`mdsearch_ls.cli.early.columns`: one rule, there because a
    search sends it to the server before this module is imported)."""
    from mdsearch_ls.cli.early import columns

    return columns(fallback)
