"""A search printed by the server that holds the index, for the CLI that asked it.

``mdsearch search QUERY`` (the plain form, :mod:`.early`) sends its arguments, folder and
terminal with its question. The server (a language or MCP server, or the background process,
each started through this CLI, which hands the engine :func:`render`) searches, then runs the
CLI's own printer on the answer here, into buffers, for that terminal: the CLI writes what comes
back and exits without importing the rest of itself (argparse, the settings, the query parser and
the printer: 50-70 ms of a process whose search takes the server 35-65 ms).

The arguments are parsed by the CLI's parser and the queries by the CLI's code, exactly as in the
CLI, and the output is :func:`.resident.print_answer`'s. Whatever this cannot print as the CLI
would (a flag that needs the CLI's own process, such as ``--open`` or ``-v``, other settings,
a query the engine refuses) gives None, and the CLI does it all itself from the answer.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def render(spec: dict[str, Any], answer: dict[str, Any], root: Path) -> dict[str, Any] | None:
    """``{"out", "err", "exit"}``: what the CLI described by ``spec`` (``argv``, ``cwd``,
    ``columns``, ``tty``, ``no_color``, ``dumb``) prints for ``answer``; None when only the
    CLI can print it."""
    from mdsearch_ls.cli.commands import _index_state_note, search_queries
    from mdsearch_ls.cli.common import UsageError, _settings
    from mdsearch_ls.cli.output import QueryFailed, Terminal
    from mdsearch_ls.cli.parser import build_parser
    from mdsearch_ls.cli.resident import print_answer
    from mdsearch_ls.cli.session import with_remembered_formats
    from mdsearch_ls.config import SettingError, Settings
    from mdsearch_ls.engine.api import RequestError, ranking_settings

    try:
        args = build_parser().parse_args([str(a) for a in spec["argv"]])
    except SystemExit:  # the CLI says what was wrong, on its own stderr
        return None
    if (args.command != "search" or args.verbose or args.open is not None or args.queries
            or args.server or args.root is not None or args.no_resident):
        return None
    try:
        queries, _ = search_queries(args)
        settings = _settings(args)
    except (UsageError, RequestError, SettingError, OSError):
        return None
    if (ranking_settings(settings) != ranking_settings(Settings())
            or "index_formats" not in answer
            or with_remembered_formats(args, settings, root, answer["index_formats"])
            is not settings
            or len(answer.get("results") or ()) != len([q for q in queries if q.error is None])):
        return None
    term = Terminal(io.StringIO(), io.StringIO(), cwd=str(spec["cwd"]),
                    columns=int(spec["columns"]), tty=bool(spec["tty"]),
                    no_color=bool(spec["no_color"]), dumb=bool(spec["dumb"]))
    try:
        code = print_answer(args, settings, root, queries, answer, _index_state_note, term)
    except (UsageError, QueryFailed):  # a query the engine refused: the CLI says so itself
        return None
    return {"out": term.out.getvalue(), "err": term.err.getvalue(), "exit": code}
