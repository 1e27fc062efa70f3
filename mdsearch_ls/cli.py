"""The ``mdsearch`` command: index, search, related, status and serve, over the same core.

Output for people goes to stdout; logs, warnings and progress go to stderr, so ``--json`` output
can be piped. Exit codes are part of the interface: 0 ok, 1 unexpected error, 2 bad usage (a
missing folder, a bad query or filter), 3 the index is locked by another process, 4 the index or
the model cannot be opened.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from mdsearch_ls import __version__
from mdsearch_ls.config import (
    SettingError,
    SettingInfo,
    Settings,
    cli_settings,
    settings_from_flags,
)
from mdsearch_ls.logs import configure_logging, level_from_flags

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OPEN = 0, 1, 2, 3, 4

log = logging.getLogger("mdsearch")


def _add_setting_flags(p: argparse.ArgumentParser, applies: str) -> None:
    """Flags derived from the settings declared in config.py (one declaration per setting)."""
    for info in cli_settings():
        if info.applies != applies:
            continue
        kwargs: dict[str, Any] = {"dest": info.name, "help": _flag_help(info)}
        choices = getattr(info.check, "choices", None)
        if choices:
            kwargs["choices"] = choices
        if isinstance(info.default, tuple):
            kwargs.update(action="append", metavar="GLOB")
        else:
            kwargs["metavar"] = None if choices else info.name.split("_")[-1].upper()
        p.add_argument(info.flag, **kwargs)


def _flag_help(info: SettingInfo) -> str:
    doc = info.doc.split(";")[0].rstrip(".")
    default = info.default
    if default in (None, ()) or isinstance(default, tuple):
        return doc
    return f"{doc} (default {default})"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors on stderr")
    _add_setting_flags(p, "index")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mdsearch",
        description="Search markdown notes by meaning and by exact words, offline.",
    )
    parser.add_argument("--version", action="version", version=f"mdsearch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="index (or update the index of) a folder of notes")
    p.add_argument("root", metavar="ROOT", help="folder of markdown notes")
    p.add_argument("--rebuild", action="store_true", help="drop the index and build it anew")
    _common(p)

    p = sub.add_parser("search", help="search a folder of notes (updates its index first)")
    p.add_argument("query", nargs="?", metavar="QUERY",
                   help="text, with optional filters: path:dir/ tag:x type:md "
                   'modified:>2025-01-01 "exact phrase"')
    p.add_argument("--root", default=".", metavar="ROOT", help="folder of notes (default: .)")
    p.add_argument("-k", "--limit", type=int, default=5, dest="k", help="hits to show (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object per query")
    p.add_argument("--explain", action="store_true", help="show per-mode ranks of each hit")
    _add_setting_flags(p, "search")
    f = p.add_argument_group("filters (the same as typing them in QUERY; repeat to add more)")
    f.add_argument("--path", action="append", metavar="DIR|GLOB", help="notes under a folder")
    f.add_argument("--tag", action="append", metavar="TAG", help="notes carrying the tag")
    f.add_argument("--type", action="append", metavar="md|markdown")
    f.add_argument("--modified", action="append", metavar="WHEN",
                   help="e.g. '>2025-01-01', '<2025-06', '7d'")
    f.add_argument("--phrase", action="append", metavar="TEXT",
                   help="the section must contain this exact text")
    p.add_argument("--queries", metavar="FILE",
                   help="run every query in FILE (one per line, or JSON Lines with 'query')")
    p.add_argument("--no-update", action="store_true", help="search the index as it is")
    _common(p)

    p = sub.add_parser("related", help="sections of other notes related to a line of a note")
    p.add_argument("file", metavar="FILE", help="a note inside ROOT")
    p.add_argument("--line", type=int, default=0, help="0-based line (default 0)")
    p.add_argument("--root", default=".", metavar="ROOT")
    p.add_argument("-k", "--limit", type=int, default=5, dest="k")
    p.add_argument("--json", action="store_true")
    _common(p)

    p = sub.add_parser("status", help="what is indexed for a folder")
    p.add_argument("--root", default=".", metavar="ROOT")
    p.add_argument("--json", action="store_true")
    _common(p)

    p = sub.add_parser("mcp", help="run the MCP server over stdio (for AI assistants)")
    p.add_argument("--root", action="append", metavar="ROOT",
                   help="folder of notes; repeat for several (default: .)")
    _common(p)
    _add_setting_flags(p, "search")

    p = sub.add_parser("serve", help="run the language server over stdio (for editors)")
    p.add_argument("--stdio", action="store_true", help="accepted for editor compatibility")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-q", "--quiet", action="store_true")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the flags that were given, through the same checks as client settings."""
    return settings_from_flags(
        {info.name: getattr(args, info.name, None) for info in cli_settings()}
    )


def _err(message: str) -> None:
    print(f"mdsearch: error: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"mdsearch: {message}", file=sys.stderr)


class _Progress:
    """A tqdm bar on a terminal; nothing when stderr is a pipe (logs stay clean)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None

    def __call__(self, done: int, total: int, chunks: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="file", desc="indexing", file=sys.stderr,
                             leave=False, dynamic_ncols=True)
        self._bar.total = total
        self._bar.n = done
        self._bar.set_postfix_str(f"{chunks} chunks", refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _open(args: argparse.Namespace, root: str, settings: Settings, mode: str) -> Any:
    """The workspace of ``root``, opened as the command needs it (see ``OpenMode``)."""
    from mdsearch_ls.engine.api import Workspace, create_embedder

    ws = Workspace.open(root, settings, mode,  # type: ignore[arg-type]
                        embedder=create_embedder(settings))
    if ws.read_only_reason:
        _note(args, ws.read_only_reason)
    return ws


def _index_report(ws: Any, args: argparse.Namespace, *, rebuild: bool = False) -> Any:
    bar = _Progress(not args.quiet)
    try:
        report = ws.index(progress=bar, rebuild=rebuild)
    finally:
        bar.close()
    if not args.quiet:
        for warning in report.warnings:
            print(f"mdsearch: warning: {warning}", file=sys.stderr)
    return report


def _read_queries(path: str) -> Iterator[str]:
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
                    raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
                if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
                    raise ValueError(f"{path}:{n}: a JSON line needs a string 'query' field")
                yield obj["query"]
            else:
                yield line


def _score_text(hit: Any) -> str:
    if hit.score is None:
        rank = (hit.explain or {}).get("keyword_rank")
        return f"BM25 rank {rank}" if rank is not None else "keyword match"
    return f"similarity {hit.score:.2f}"


def _print_hits(query: str, hits: Sequence[Any], explain: bool) -> None:
    if not hits:
        print(f"no results for {query!r}")
        return
    for i, h in enumerate(hits, start=1):
        # path:line first, the form terminals and editors open on a click. The number is the
        # cosine similarity, labelled: in hybrid mode the order also weighs keywords and names,
        # so a bare number that is not sorted would look like a bug.
        print(f"{i:2}. {h.path}:{h.start_line + 1}  "
              f"(lines {h.start_line + 1}-{h.end_line + 1}, {_score_text(h)})")
        print(f"    {h.breadcrumb}")
        if h.snippet:
            print(f"    {h.snippet}")
        if explain:
            e = h.explain
            print(f"    [semantic #{e.get('semantic_rank')}, keyword #{e.get('keyword_rank')}, "
                  f"title match {e.get('title_match')}, {e.get('fusion') or 'fused'} "
                  f"{e.get('fused')}]")


def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with _open(args, args.root, settings, "write") as ws:
        report = _index_report(ws, args, rebuild=args.rebuild)
        if not args.quiet:
            print(f"indexed {ws.root}: {report.summary()}")
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from mdsearch_ls.engine.api import RequestError, SearchRequest

    if not args.query and not args.queries and not args.phrase:
        _err("give a QUERY, --queries FILE or --phrase TEXT")
        return EXIT_USAGE
    settings = _settings(args)
    filters = {"path": args.path, "tag": args.tag, "type": args.type,
               "modified": args.modified, "phrase": args.phrase}
    filters = {k: v for k, v in filters.items() if v}

    def build(query: str) -> SearchRequest:
        return SearchRequest.build(query, k=args.k, mode=args.mode, filters=filters or None)

    # Parse before touching the index: a mistyped filter is reported at once.
    first = build(args.query or "") if not args.queries else None
    mode = "read" if args.no_update else "read-if-locked"
    with _open(args, args.root, settings, mode) as ws:
        if not args.no_update and not ws.read_only:
            _index_report(ws, args)
        queries = _read_queries(args.queries) if args.queries else [args.query or ""]
        status = EXIT_OK
        for query in queries:
            try:
                request = first if first is not None else build(query)
                result = ws.search(request)
            except RequestError as exc:
                if args.json and args.queries:
                    print(json.dumps({"query": query, "error": str(exc), "results": []}))
                    status = EXIT_USAGE
                    continue
                _err(str(exc))
                return EXIT_USAGE
            hits = result.hits
            if args.json:
                print(json.dumps(
                    {"query": query,
                     "results": [h.to_json(explain=args.explain) for h in hits]},
                    ensure_ascii=False,
                ))
            else:
                if args.queries:
                    print(f"# {query}")
                _print_hits(query, hits, args.explain)
            sys.stdout.flush()
    return status


def cmd_related(args: argparse.Namespace) -> int:
    from mdsearch_ls.engine.api import RelatedRequest

    settings = _settings(args)
    request = RelatedRequest.build(args.file, args.line, k=args.k, min_score=-1.0)
    with _open(args, args.root, settings, "read-if-locked") as ws:
        if not ws.read_only:
            _index_report(ws, args)
        target = Path(args.file)
        rel = ws.note_path(target if target.is_absolute() else Path.cwd() / target)
        if rel is None or not (ws.root / rel).is_file():
            rel = args.file if (ws.root / args.file).is_file() else None
        if rel is None:
            _err(f"{args.file} is not a note inside {ws.root}")
            return EXIT_USAGE
        result = ws.related(dataclasses.replace(request, path=rel))
        if args.json:
            print(json.dumps({"path": rel, "line": args.line,
                              "section": result.section.title if result.section else None,
                              "results": [h.to_json() for h in result.hits]}, ensure_ascii=False))
        else:
            if result.section:
                print(f"related to {rel} > {' > '.join(result.section.breadcrumb)}")
            _print_hits(rel, result.hits, False)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with _open(args, args.root, settings, "read") as ws:
        info = ws.status()
        if args.json:
            print(json.dumps(info))
        else:
            for key in ("root", "files", "chunks", "model", "index_dir", "last_update"):
                print(f"{key:12} {info[key]}")
            print(f"{'state':12} {info['index']['state']}")
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from mdsearch_ls.mcp import main as mcp_main

    return mcp_main(args.root or ["."], _settings(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from mdsearch_ls.lsp.server import run_stdio

    return run_stdio()


COMMANDS = {
    "index": cmd_index,
    "search": cmd_search,
    "related": cmd_related,
    "status": cmd_status,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
}


def exit_code(exc: BaseException) -> int:
    """The exit code a failure means, by its type (the message is already for a person)."""
    from mdsearch_ls.engine.api import (
        IndexLockedError,
        IndexOpenError,
        ModelLoadError,
        NotIndexedError,
        RequestError,
    )

    if isinstance(exc, IndexLockedError):
        return EXIT_LOCKED
    if isinstance(exc, IndexOpenError | ModelLoadError):
        return EXIT_OPEN
    if isinstance(exc, NotIndexedError | RequestError | SettingError | FileNotFoundError
                  | NotADirectoryError | ValueError):
        return EXIT_USAGE
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mdsearch``; returns the exit code instead of raising."""
    args = build_parser().parse_args(argv)
    configure_logging(level_from_flags(args.verbose, args.quiet),
                      prog="mdsearch-mcp" if args.command == "mcp" else "mdsearch")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.command == "mcp":  # before the engine import below: initialize must not wait on it
        try:
            return cmd_mcp(args)
        except SettingError as exc:
            _err(str(exc))
            return EXIT_USAGE
    from mdsearch_ls.engine.api import MdsearchError, ModelLoadError

    started = time.perf_counter()
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        _err("interrupted; the index stays consistent and the next run continues")
        return 130
    except (MdsearchError, ModelLoadError, SettingError, OSError, ValueError) as exc:
        _err(str(exc))
        return exit_code(exc)
    finally:
        log.debug("%s took %.2fs", args.command, time.perf_counter() - started)


def serve_main() -> int:
    """Entry point of ``mdsearch-ls``: the language server, whatever the arguments."""
    from mdsearch_ls.lsp.server import run_stdio

    return run_stdio()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
