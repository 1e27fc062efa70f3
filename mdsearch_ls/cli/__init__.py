"""The ``mdsearch`` command: index, search, related, status and serve, over the same core.

Results go to stdout, in the form ``--format`` asks for (``text`` for people, ``json``/``jsonl``
for scripts, ``vimgrep`` for editors' quickfix lists and fzf, ``paths`` for ``xargs``); notes,
warnings, progress and logs go to stderr, so any format can be piped. Colour only on a terminal
and never with ``NO_COLOR``. Lines are 1-based wherever a person reads or types them (``path:27``,
``--line 27``); JSON keeps the 0-based ``start_line``/``end_line`` of LSP ranges and adds the
1-based ``line``.

Exit codes are part of the interface: 0 ok, 1 unexpected error, 2 bad usage (no index here, a
missing folder, a bad query or filter, a confirmation not given), 3 the index is locked by
another process (2 also: the Chroma server of ``--chroma-url`` does not answer), 4 the index
or the model cannot be opened, 130/143 interrupted by
SIGINT/SIGTERM (what was committed stays in the index).

The package, one concern a module: ``parser`` (arguments and help), ``commands`` (what each
command does), ``session`` (which index, opened how), ``output`` (what stdout gets),
``progress`` (the progress line and signals), ``common`` (exit codes and messages). Nothing
here imports the engine at module level: ``mdsearch --help`` and the MCP server's
``initialize`` must not wait on it. Nor does this module import ``commands`` (and through it the
printer and the session) before a command runs: ``--help`` needs the parser alone, and a search
the server that holds the index answers counts every millisecond of its own start-up.
"""

from __future__ import annotations

import sys
import time

TYPE_CHECKING = False  # not typing's: its import is ~5 ms before a search's question is sent
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_LOCKED",
    "EXIT_OK",
    "EXIT_OPEN",
    "EXIT_PIPE",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "exit_code",
    "main",
    "run",
    "serve_main",
]


def exit_code(exc: BaseException) -> int:
    """The exit code a failure means, by its type (the message is already for a person)."""
    from mdsearch_ls.cli.common import (
        EXIT_ERROR,
        EXIT_LOCKED,
        EXIT_OPEN,
        EXIT_USAGE,
        UsageError,
    )
    from mdsearch_ls.config import SettingError
    from mdsearch_ls.engine.api import (
        IndexLockedError,
        IndexOpenError,
        ModelLoadError,
        NotIndexedError,
        RequestError,
        VectorServerError,
    )

    if isinstance(exc, IndexLockedError):
        return EXIT_LOCKED
    if isinstance(exc, IndexOpenError | ModelLoadError):
        return EXIT_OPEN
    if isinstance(exc, UsageError | NotIndexedError | RequestError | SettingError
                  | VectorServerError
                  | FileNotFoundError | NotADirectoryError | ValueError):
        return EXIT_USAGE
    return EXIT_ERROR


LEAVE_AT_ONCE = frozenset({"search", "related", "status", "index"})
"""Commands whose process ends without the interpreter's teardown (see :func:`run`)."""


def run() -> None:
    """The ``mdsearch`` command as its process runs it (the console script, ``python -m``):
    :func:`main`, then out. After a search, out without the interpreter's teardown: freeing
    the model's session and every module's objects took 15-35 ms of a 0.35 s search at 8k
    chunks (10-20 ms of `related` and of a no-op `index`), for memory the kernel takes back
    at once anyway. These commands leave nothing else to do by then (the index closed, a
    background process started, log lines written as they came): stdout and stderr are
    flushed here. Where Chroma was imported (an index run, a larger update before a search),
    its own exit handlers run, as after the servers' commands."""
    _private_files()
    code = main()
    if sys.argv[1:2] == [] or sys.argv[1] not in LEAVE_AT_ONCE or "chromadb" in sys.modules:
        raise SystemExit(code)
    import os

    try:
        sys.stdout.flush()
    except BrokenPipeError:  # (`| head`: what main would have said had it met it first)
        code = _reader_gone()
    except (OSError, ValueError):
        raise SystemExit(code) from None
    try:
        sys.stderr.flush()
    finally:
        os._exit(code)


def _private_files() -> None:
    """Group and other bits off every file this process creates: the only files mdsearch
    writes are its indexes (and their logs and sockets), as private as the notes, and Chroma and
    SQLite create theirs by themselves, when they please (``engine/index/layout.py``,
    ``PRIVATE_FILE``). Not on Windows, where modes are ACLs."""
    import os

    if os.name != "nt":
        os.umask(os.umask(0o077) | 0o077)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mdsearch``; returns the exit code instead of raising."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["search"]:
        return _main(argv)
    from mdsearch_ls.cli import early

    try:
        code = early.search(argv)  # the server that holds the index may print it all for us
    except KeyboardInterrupt:  # while it searched: nothing of ours to stop
        from mdsearch_ls.cli.common import EXIT_SIGINT, _err

        _err("interrupted")
        return EXIT_SIGINT
    if code is not None:
        return code
    try:
        return _main(argv)
    finally:
        early.drop()


def _main(argv: list[str]) -> int:
    from mdsearch_ls.cli.common import EXIT_SIGINT, EXIT_USAGE, _err, log
    from mdsearch_ls.cli.parser import build_parser
    from mdsearch_ls.config import SettingError
    from mdsearch_ls.logs import configure_later, configure_logging, level_from_flags

    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    level = level_from_flags(args.verbose, args.quiet)
    if args.command == "search":  # set up before it searches in process (cmd_search)
        configure_later(level)
    else:
        configure_logging(level, prog="mdsearch-mcp" if args.command == "mcp" else "mdsearch")
    from mdsearch_ls.cli.commands import COMMANDS, cmd_mcp

    if args.command in ("serve", "mcp", "background"):
        _print_searches_for_the_cli()

    if args.command == "mcp":  # before any engine import: initialize must not wait on it
        try:
            return cmd_mcp(args)
        except SettingError as exc:
            _err(str(exc))
            return EXIT_USAGE
    started = time.perf_counter()
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        _err("interrupted; the index stays consistent and the next run continues")
        return EXIT_SIGINT
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        if not _said_to_a_person(exc):
            raise
        _err(str(exc))
        return exit_code(exc)
    finally:
        log.debug("%s took %.2fs", args.command, time.perf_counter() - started)


def _said_to_a_person(exc: Exception) -> bool:
    """Whether ``exc`` is a failure whose message is written for a person (printed, with its
    exit code) rather than a bug (a traceback). The engine's types are imported only when a
    command has failed: importing ``ModelLoadError`` brings the embedding package (and logging,
    threading, its backends' modules) into a search that a server answered."""
    from mdsearch_ls.cli.common import UsageError
    from mdsearch_ls.config import SettingError
    from mdsearch_ls.engine.api import MdsearchError, ModelLoadError

    return isinstance(exc, UsageError | MdsearchError | ModelLoadError | SettingError | OSError
                      | ValueError)


def _reader_gone() -> int:
    """``mdsearch search … | head -3``: the reader has what it wanted and left. Quiet, as
    ``grep`` is: no message and no traceback, exit 141 (128 + SIGPIPE), and stdout pointed at
    the null device so the interpreter's final flush cannot fail again."""
    import contextlib
    import os

    from mdsearch_ls.cli.common import EXIT_PIPE

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_PIPE


def __getattr__(name: str) -> Any:
    """The names of ``__all__`` that live in the modules below, loaded when first asked for:
    ``mdsearch search`` sends its question (:mod:`.early`) before it imports them."""
    if name in ("COMMANDS", "cmd_mcp"):
        from mdsearch_ls.cli import commands

        return getattr(commands, name)
    if name == "build_parser":
        from mdsearch_ls.cli.parser import build_parser

        return build_parser
    if name.startswith("EXIT_") or name == "UsageError":
        from mdsearch_ls.cli import common

        return getattr(common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _print_searches_for_the_cli() -> None:
    """A server started here prints a CLI's search for it with this CLI's printer
    (``cli/rendering.py``), imported when the first such search comes."""
    from mdsearch_ls.engine.api import print_searches_with

    def render(spec: dict, answer: dict, root: Any) -> dict | None:
        from mdsearch_ls.cli.rendering import render

        return render(spec, answer, root)

    print_searches_with(render)


def serve_main() -> int:
    """Entry point of ``mdsearch-ls``: the language server, whatever the arguments."""
    from mdsearch_ls.lsp.app import run_stdio

    _private_files()
    _print_searches_for_the_cli()
    return run_stdio()
