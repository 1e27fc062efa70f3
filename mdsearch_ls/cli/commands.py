"""The commands themselves: ``index``, ``search``, ``related``, ``status``, ``serve`` and ``mcp``,
each a function of the parsed arguments that returns an exit code (``COMMANDS`` maps the names).

Engine imports stay inside the functions, so importing this module costs nothing of the engine
and each command pays only for what it uses."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from mdsearch_ls.cli.common import EXIT_OK, UsageError, _note, _settings, _shown
from mdsearch_ls.cli.output import (
    QueryFailed,
    _check_output_args,
    _hit_json,
    _maybe_open,
    _Printer,
    print_queries,
)
from mdsearch_ls.cli.session import _confirm_first_index, _find_root, _Session
from mdsearch_ls.logs import configure_now

# ---- index --------------------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.root is None:
        root = _find_root(args, settings)
        _note(args, f"updating the index of {root}")
    else:
        root = Path(args.root)
    _confirm_first_index(args, root, settings)
    if not args.rebuild:
        # the server that holds this index, if one does, looks for changes with its watch
        from mdsearch_ls.cli import resident

        code = resident.run_index(args, settings, root)
        if code is not None:
            return code
    session = _Session(args, settings)
    done = None if args.rebuild else session.nothing_to_index(root)
    if done is not None:
        if not args.quiet:
            print(f"indexed {Path(root).resolve()}: {done.summary()} (nothing had changed)")
        return EXIT_OK
    with session.open(root, "write") as ws:
        report, code = session.update(ws, rebuild=args.rebuild)
        if code:
            return code
        if not args.quiet:
            print(f"indexed {ws.root}: {report.summary()}")
    return EXIT_OK


# ---- search -------------------------------------------------------------------------------------


class _Query:
    """One query of a run: as typed, its validated request, or why it cannot run. A plain class:
    a dataclass costs ~0.5 ms to define, in a process a server's answer leaves little else to do."""

    __slots__ = ("error", "request", "text")

    def __init__(self, text: str, request: Any = None, error: str | None = None) -> None:
        self.text = text
        self.request = request
        self.error = error

    def __repr__(self) -> str:
        return f"_Query(text={self.text!r}, request={self.request!r}, error={self.error!r})"


def _read_queries(path: str) -> Iterator[tuple[str, str | None]]:
    """``(query, error)`` per non-empty line: a line that cannot be read is an error of its own,
    never the end of the batch."""
    stream: TextIO = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    with stream:
        for n, line in enumerate(stream, start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield line, f"{path}:{n}: not valid JSON ({exc.msg})"
                    continue
                if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
                    yield line, f"{path}:{n}: a JSON line needs a string 'query' field"
                    continue
                yield obj["query"], None
            else:
                yield line, None


def _index_state_note(index: Any) -> str | None:
    """What a search's answer must say about an index that is not whole, or None."""
    if index.state == "building":
        return (f"note: the index is still being built ({index.files_done} of "
                f"{index.files_total} notes so far): results may be missing")
    if index.state == "interrupted":
        return (f"note: the last index run stopped early ({index.files_done} of "
                f"{index.files_total} notes); run `mdsearch index` to finish it")
    if index.state == "empty":
        return "note: the index holds no notes yet"
    return None


def search_queries(args: argparse.Namespace) -> tuple[list[_Query], dict[str, Any]]:
    """The queries of a search run, each parsed (or why not), and its filter flags: checked
    before any index is touched, here and where a server prints a search for the CLI."""
    from mdsearch_ls.engine.api import RequestError, SearchRequest

    if not args.query and not args.queries and not args.phrase:
        raise UsageError("give a QUERY, --queries FILE or --phrase TEXT "
                         "(`mdsearch search --help` has examples)")
    _check_output_args(args)
    filters = {"path": args.path, "tag": args.tag, "type": args.type,
               "modified": args.modified, "phrase": args.phrase}
    filters = {k: v for k, v in filters.items() if v}

    def build(query: str) -> Any:
        return SearchRequest.build(query, k=args.k, mode=args.mode, filters=filters or None,
                                   min_score=args.min_score)

    # Every query is parsed before the index is touched: a mistyped filter is reported at once,
    # and in a batch each bad line gets its own answer while the others run.
    raw = _read_queries(args.queries) if args.queries else [(args.query or "", None)]
    queries: list[_Query] = []
    for text, problem in raw:
        q = _Query(text, error=problem)
        if problem is None:
            try:
                q.request = build(text)
            except RequestError as exc:
                if not args.queries:
                    raise
                q.error = str(exc)
        queries.append(q)
    return queries, filters


def _search_ahead(args: argparse.Namespace, session: _Session, ws: Any, queries: list[_Query],
                  walking: Callable[[], bool]) -> None:
    """What a search needs whatever the look finds, done while the look walks the notes on
    the second core: the model (for the query, or for the notes an update reads) and the
    snippets' parser if they are printed. And, if the walk still runs then, the first query
    searched on the index as it is: the searcher keeps that answer and hands it out again if
    the look finds nothing changed; after an edit it is thrown away, so it is not started
    once the walk is over (a small vault's walk ends first, and wasted nothing)."""
    if (args.mode or session.settings.mode) != "keyword":
        session.embedder.load()
    if args.format != "paths":
        from mdsearch_ls.engine.api import snippet  # noqa: F401  (imports the markdown parser)
    first = next((q for q in queries if q.request is not None), None)
    if first is not None and walking():
        ws.search(first.request)


def cmd_search(args: argparse.Namespace) -> int:
    queries, filters = search_queries(args)
    settings = _settings(args)
    if args.server:
        from mdsearch_ls.cli import remote

        configure_now()
        return remote.run(args, queries)
    root = _find_root(args, settings)
    if not args.no_resident:
        # the server that holds this index, if one does, answers as this process would
        from mdsearch_ls.cli import resident

        code = resident.run(args, settings, root, queries, filters, _index_state_note)
        if code is not None:
            return code
    configure_now()  # searching here: the engine's modules log by themselves
    first = args.root is not None and not args.no_update
    if first:
        _confirm_first_index(args, root, settings)
    session = _Session(args, settings)
    session.warm = lambda ws, walking: _search_ahead(args, session, ws, queries, walking)
    mode_open = "read" if args.no_update else "read-if-locked"
    from mdsearch_ls.engine.api import RequestError, has_index

    fresh = first and not has_index(root, settings)
    with session.open(root, mode_open) as ws:
        if not args.no_update and not ws.read_only:
            report, code = session.update(ws, first=fresh)
            if code:
                return code
            if report.files_indexed or report.files_deleted:
                _note(args, f"updated the index: {report.summary()}")
        printer = _Printer(args, ws, args.mode or settings.mode)

        def search(q: _Query) -> Any:
            try:
                result = ws.search(q.request)
            except RequestError as exc:
                if not args.queries:
                    raise  # alone, the engine's own error (exit 2, its message)
                raise QueryFailed(str(exc)) from None
            session.progress.clear()
            return result

        status, hits = print_queries(args, printer, queries, search, _index_state_note)
        if status == EXIT_OK and args.open is not None:
            return _maybe_open(args, ws, hits)
    if status == EXIT_OK and not args.no_update:
        # after the results: a person waiting for them must not wait for a spawn too
        from mdsearch_ls.cli import background

        background.start_after_search(args, session.settings, root)
    return status


# ---- related ------------------------------------------------------------------------------------


def cmd_related(args: argparse.Namespace) -> int:
    from mdsearch_ls.engine.api import RelatedRequest, has_index

    _check_output_args(args)
    if args.line < 1:
        raise UsageError(f"--line: lines are 1-based (the first line is 1), got {args.line}")
    settings = _settings(args)
    target = Path(args.file).expanduser()
    start = (target if target.is_absolute() else Path.cwd() / target).parent
    root = _find_root(args, settings, start if start.is_dir() else None)
    min_score = -1.0 if args.min_score is None else args.min_score
    request = RelatedRequest.build(args.file, args.line - 1, k=args.k, min_score=min_score)
    if args.root is not None:
        _confirm_first_index(args, root, settings)
    fresh = args.root is not None and not has_index(root, settings)
    session = _Session(args, settings)
    with session.open(root, "read-if-locked") as ws:
        if not ws.read_only:
            _report, code = session.update(ws, first=fresh)
            if code:
                return code
        rel = ws.note_path(target if target.is_absolute() else Path.cwd() / target)
        if rel is None or not (ws.root / rel).is_file():
            rel = args.file if (ws.root / args.file).is_file() else None
        if rel is None:
            raise UsageError(f"{args.file} is not a note inside {ws.root}")
        result = ws.related(dataclasses.replace(request, path=rel))
        session.progress.clear()
        printer = _Printer(args, ws, "semantic")
        fmt = printer.format
        section = result.section
        if fmt == "json":
            rendered = printer.rendered(result.hits, (), 200)
            print(json.dumps({
                "path": rel, "file": str(ws.root / rel), "line": args.line,
                "section": section.title if section else None,
                "results": [_hit_json(h, ws, r, mode="semantic", explain=False)
                            for h, r in zip(result.hits, rendered, strict=True)],
            }, ensure_ascii=False))
        elif fmt == "text":
            if section:
                print(f"related to {printer.style.path(_shown(ws.root / rel))}:"
                      f"{printer.style.line(str(section.start_line + 1))} "
                      f"{printer.style.crumb(' > '.join(section.breadcrumb))}")
            printer.text(rel, result.hits, ())
        else:
            printer.query(rel, _Related(result.hits), (), batch=False, key="related_to")
        return _maybe_open(args, ws, result.hits)


class _Related:
    """``related``'s hits as the printer reads a search's result."""

    __slots__ = ("hits", "notes")

    def __init__(self, hits: list[Any], notes: tuple[str, ...] = ()) -> None:
        self.hits = hits
        self.notes = notes


# ---- status and serve ---------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    from mdsearch_ls.cli import resident

    settings = _settings(args)
    root = _find_root(args, settings)
    # the process that holds the index, if one does, answers (the same fields) from memory
    info = None if args.no_resident else resident.run_status(args, settings, root)
    if info is None:
        with _Session(args, settings).open(root, "read") as ws:
            info = ws.status()
            info["served_by"] = resident.served_by(ws.index_dir)
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    for key in ("root", "files", "chunks", "model", "index_dir", "vectors", "last_update"):
        print(f"{key:12} {info[key]}")
    index = info["index"]
    state = index["state"]
    if state in ("building", "interrupted"):
        state += f" ({index['files_done']} of {index['files_total']} notes)"
    print(f"{'state':12} {state}")
    served = info["served_by"]
    print(f"{'served by':12} " + (
        "nothing: each search runs in its own process" if served is None
        else f"{'a background process' if served['background'] else 'a server'} "
        f"(pid {served['pid']}), through {served['socket']}"))
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from mdsearch_ls.mcp import main as mcp_main

    settings = _settings(args)
    if args.yes:
        settings = dataclasses.replace(settings, allow_any_root=True)
    return mcp_main(args.root or ["."], settings, http=args.http,
                    token_file=args.token_file, allow_hosts=args.allow_host or [])


def cmd_background(args: argparse.Namespace) -> int:
    from mdsearch_ls.cli.background import cmd_background as run

    return run(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from mdsearch_ls.lsp.app import run_stdio

    return run_stdio()


def cmd_install(args: argparse.Namespace) -> int:
    # imported here: its shutil and subprocess (zlib, threading) would be a cost of every search
    # (tests/unit/test_resident_client.py lists what a search must not import)
    from mdsearch_ls.cli.install import cmd_install as install

    return install(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "index": cmd_index,
    "search": cmd_search,
    "related": cmd_related,
    "status": cmd_status,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
    "background": cmd_background,
    "install": cmd_install,
}
