"""What every part of the CLI shares: the exit codes, the usage error, the messages on stderr,
paths as a person at the prompt opens them, and settings from the flags. A leaf module (the
standard library and ``config`` only), so the others import it without cycles."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from mdsearch_ls.config import Settings, cli_settings, settings_from_flags

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OPEN = 0, 1, 2, 3, 4
EXIT_NOTHING = 1
"""A search or ``related`` that found nothing, as grep and rg say it."""
EXIT_SIGINT, EXIT_SIGTERM, EXIT_PIPE = 130, 143, 141
FORMATS = ("text", "json", "jsonl", "vimgrep", "paths")

log = logging.getLogger("mdsearch")


class UsageError(Exception):
    """Something the person at the prompt can fix (exit 2); the message says how."""


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the flags that were given, through the same checks as client settings."""
    return settings_from_flags(
        {info.name: getattr(args, info.name, None) for info in cli_settings()}
    )


def given_index_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The index settings the person named with a flag, by name: the process that holds the
    index must have the same ones to answer for them."""
    given = {}
    for info in cli_settings():
        value = getattr(args, info.name, None)
        if info.applies == "index" and value is not None:
            given[info.name] = list(value) if isinstance(value, tuple | list) else value
    return given


def _err(message: str, stream: TextIO | None = None) -> None:
    print(f"mdsearch: error: {message}", file=stream or sys.stderr)


def _said(message: str) -> None:
    """A message that is not an error but must be read even with -q (what an interrupt kept, a
    process started that nobody asked for by name)."""
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
