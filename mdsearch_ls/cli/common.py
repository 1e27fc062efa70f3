"""What every part of the CLI shares: the exit codes, the usage error, the messages on stderr,
paths as a person at the prompt opens them, and settings from the flags. A leaf module (the
standard library and ``config`` only), so the others import it without cycles."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from mdsearch_ls.config import Settings, cli_settings, settings_from_flags

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OPEN = 0, 1, 2, 3, 4
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


def _err(message: str) -> None:
    print(f"mdsearch: error: {message}", file=sys.stderr)


def _said(message: str) -> None:
    """A message that is not an error but must be read even with -q (what an interrupt kept)."""
    print(f"mdsearch: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"mdsearch: {message}", file=sys.stderr)


def _shown(path: Path) -> str:
    """A path as a person at this prompt can open it: relative to the current folder when the
    note is under it (as rg and fd print), else absolute."""
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)
