"""The ``mdsearch`` command: index, search, related, status, serve, mcp and background, over the
same core.

Results go to stdout, in the form ``--format`` asks for (``text`` for people, ``json``/``jsonl``
for scripts, ``vimgrep`` for editors' quickfix lists and fzf, ``paths`` for ``xargs``); notes,
warnings, progress and logs go to stderr, so any format can be piped. Colour only on a terminal
and never with ``NO_COLOR``. Lines are 1-based wherever a person reads or types them (``path:27``,
``--line 27``); JSON keeps the 0-based ``start_line``/``end_line`` of LSP ranges and adds the
1-based ``line``.

Exit codes are part of the interface: 0 ok, 1 unexpected error, 2 bad usage (no index here, a
missing folder, a bad query or filter, a confirmation not given), 3 the index is locked by
another process (2 also: the Chroma server of ``--chroma-url`` does not answer), 4 the index
or the model cannot be opened, 130/143 interrupted by SIGINT/SIGTERM (what was committed stays
in the index).

The package, one concern a module: ``parser`` (arguments and help), ``commands`` (what each
command does), ``background`` (the background process's command and rules), ``output`` (what
stdout gets), ``progress`` (the progress line and signals), ``remote`` (``--server``), ``common``
(exit codes and messages), ``install`` (``mdsearch install EXTRA``), ``mcp_config``
(an MCP client's entry, for ``mcp --print-config``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Sequence

from mdsearch_ls.cli.commands import COMMANDS
from mdsearch_ls.cli.common import (
    EXIT_ERROR,
    EXIT_LOCKED,
    EXIT_OPEN,
    EXIT_PIPE,
    EXIT_SIGINT,
    EXIT_USAGE,
    UsageError,
    _err,
    log,
)
from mdsearch_ls.cli.parser import build_parser
from mdsearch_ls.config import SettingError
from mdsearch_ls.engine.api import (
    HolderError,
    IndexLockedError,
    IndexOpenError,
    MdsearchError,
    ModelLoadError,
    NotIndexedError,
    RequestError,
    VectorServerError,
)
from mdsearch_ls.logs import configure_logging, level_from_flags

__all__ = ["COMMANDS", "build_parser", "exit_code", "main", "run"]


def exit_code(exc: BaseException) -> int:
    """The exit code a failure means, by its type (the message is already for a person)."""
    if isinstance(exc, IndexLockedError):
        return EXIT_LOCKED
    if isinstance(exc, IndexOpenError | ModelLoadError | HolderError):
        return EXIT_OPEN
    if isinstance(exc, UsageError | NotIndexedError | RequestError | SettingError
                  | VectorServerError | FileNotFoundError | NotADirectoryError | ValueError):
        return EXIT_USAGE
    return EXIT_ERROR


def run() -> None:
    """The ``mdsearch`` command as its process runs it (the console script, ``python -m``)."""
    _private_files()
    raise SystemExit(main())


def _private_files() -> None:
    """Group and other bits off every file this process creates: the only files mdsearch
    writes are its indexes (and their logs and sockets), as private as the notes, and Chroma and
    SQLite create theirs by themselves, when they please (``engine/index/layout.py``,
    ``PRIVATE_FILE``). Not on Windows, where modes are ACLs."""
    if os.name != "nt":
        os.umask(os.umask(0o077) | 0o077)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mdsearch``; returns the exit code instead of raising."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    configure_logging(level_from_flags(args.verbose, args.quiet),
                      prog="mdsearch-mcp" if args.command == "mcp" else "mdsearch")
    started = time.perf_counter()
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        _err("interrupted; the index stays consistent and the next run continues")
        return EXIT_SIGINT
    except BrokenPipeError:
        return _reader_gone()
    except (UsageError, MdsearchError, SettingError, OSError, ValueError) as exc:
        _err(str(exc))
        return exit_code(exc)
    finally:
        log.debug("%s took %.2fs", args.command, time.perf_counter() - started)


def _reader_gone() -> int:
    """``mdsearch search … | head -3``: the reader has what it wanted and left. Quiet, as
    ``grep`` is: no message and no traceback, exit 141 (128 + SIGPIPE), and stdout pointed at
    the null device so the interpreter's final flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_PIPE
